"""`diskplan check` on disks loop devices cannot be: 512e with RAID hints (and its serial), 4Kn, a 512/512 SSD,
and an alignment offset (a dm-linear table one sector in), in one guest boot (tests/helpers/guest.py), with
the real parted in the guest as the referee."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.guest import Case, Run, boot_guest, e512, n4k, ssd

pytestmark = pytest.mark.guest

TABLES = r"""
# a partition at sector 34 (off every physical block and page) beside one at 1 MiB, on each disk
for d in $DISK_e512 $DISK_ssd $DISK_off; do
  printf 'label: gpt\nfirst-lba: 34\nstart=34, size=2014\nstart=2048, size=20480\n' | sfdisk -q $d
done
printf 'label: gpt\nstart=256, size=2560\n' | sfdisk -q $DISK_n4k
# the alignment offset: a device that begins one 512-byte sector into a 512e disk
modprobe dm-mod
echo "0 $(( $(blockdev --getsz $DISK_off) - 1 )) linear $DISK_off 1" | DM_DISABLE_UDEV=1 dmsetup create off
"""


@pytest.fixture(scope="module")
def run() -> Run:
    disks = [e512("e512", min_io=65536, opt_io=196608), n4k("n4k"), ssd("ssd"), e512("off")]
    return boot_guest(disks, [
        Case("tables", TABLES),
        Case("check", "diskplan check --json $DISK_e512 $DISK_n4k $DISK_ssd /dev/mapper/off || true"),
        Case("parted", "for d in $DISK_e512 $DISK_n4k $DISK_ssd; do parted -s -m $d unit s print; done"),
        Case("offset", "cat /sys/block/dm-0/alignment_offset"),
        Case("text", "diskplan check $DISK_e512 || true"),
    ])


def disk(run: Run, n: int) -> dict[str, Any]:
    doc = json.loads(run["check"].check().out)
    assert not doc["errors"], doc["errors"]
    found: dict[str, Any] = doc["disks"][n]
    return found


def codes(part: dict[str, Any]) -> set[str]:
    return {f["code"] for f in part["findings"]}


def test_512e_with_raid_hints(run):
    run["tables"].check()
    d = disk(run, 0)
    assert (d["logical_sector_size"], d["physical_block_size"], d["alignment_offset"]) == (512, 4096, 0)
    assert d["grain_sectors"] == 6144  # lcm(1 MiB, the 192 KiB optimal I/O) = 3 MiB
    first, second = d["partitions"]
    assert "start-not-physical" in codes(first)
    assert "start-not-physical" not in codes(second)


def test_io_hints_and_serial_in_the_json_and_the_text(run):
    """Issue 24, defect 5: the device's minimum/optimal I/O sizes and a virtio disk's serial are reported."""
    d = disk(run, 0)
    assert (d["minimum_io_size"], d["optimal_io_size"], d["serial"]) == (65536, 196608, "e512")
    out = run["text"].check().out
    assert "I/O hints: minimum 65536 B, optimal 196608 B" in out and "(serial e512)" in out, out


def test_4kn(run):
    d = disk(run, 1)
    assert (d["logical_sector_size"], d["physical_block_size"]) == (4096, 4096)
    assert [(p["start"], p["size"]) for p in d["partitions"]] == [(256, 2560)]


def test_ssd_page_rule_on_512_512(run):
    d = disk(run, 2)
    assert (d["logical_sector_size"], d["physical_block_size"], d["flash"], d["page_size"]) == (512, 512, True, 4096)
    assert "start-not-flash-page" in codes(d["partitions"][0])


def test_alignment_offset_of_a_dm_table_one_sector_in(run):
    assert run["offset"].check().out.strip() == "3584"
    d = disk(run, 3)
    assert d["alignment_offset"] == 3584
    assert d["table"] is None  # the table is one sector before the device begins


def test_starts_and_ends_as_parted_prints_them(run):
    """The real parted in the guest reads the same partitions from the same device nodes."""
    parted: list[list[tuple[int, int]]] = []
    for line in run["parted"].check().out.splitlines():
        if line.startswith("/dev/"):
            parted.append([])
        elif line[:1].isdigit():
            fields = line.split(":")
            parted[-1].append((int(fields[1].rstrip("s")), int(fields[2].rstrip("s"))))
    ours = [[(p["start"], p["end"]) for p in disk(run, n)["partitions"]] for n in range(3)]
    assert ours == parted
