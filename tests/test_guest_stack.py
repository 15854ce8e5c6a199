"""md RAID1 and RAID5 arrays and an LVM physical volume in a guest with udevd (issue 24): their members are
refused as held, `check` of an array gives its I/O hints (defect 5: the chunk and the full stripe, in the
JSON and the text) and a virtio disk its serial, a dry run makes udevd probe nothing (defect 2: no
"change" event, which is what re-activated a deactivated logical volume), and the physical volume of a
deactivated volume group is resized with no loop device LVM could activate it on (`pvs` the referee)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.guest import Case, Disk, Run, boot_guest, full_only

pytestmark = pytest.mark.guest

MiB = 1 << 20

BUILD = r"""
modprobe -a raid1 raid456 dm-mod
for d in $DISK_r1a $DISK_r1b $DISK_pv; do printf 'label: gpt\nstart=2048, size=40960\n' | sfdisk -q $d; done
udevadm settle -t 30
mdadm --create /dev/md1 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 ${DISK_r1a}1 ${DISK_r1b}1
mdadm --create /dev/md5 --run --quiet --metadata=1.2 --level=5 --chunk=64 --raid-devices=3 \
  $DISK_r5a $DISK_r5b $DISK_r5c
pvcreate -q ${DISK_pv}1
vgcreate -q vg0 ${DISK_pv}1
lvcreate -q -y -L 8M -n lv0 vg0
udevadm settle -t 60
printf 'label: gpt\nstart=4096, size=8192\n' > /tmp/plan.sfdisk
"""

REFUSED = r"""
for d in $DISK_r1a $DISK_r5a $DISK_pv; do
  echo "== $d"; diskplan apply /tmp/plan.sfdisk $d --yes 2>&1 || echo "rc=$?"
done
"""

# a dry run with udevd watching: udevd turns a close after writing into a "change" event and probes again
DRY_RUN = r"""
vgchange -q -an vg0
udevadm settle -t 30
udevadm monitor --udev --subsystem-match=block > /tmp/events 2>&1 &
mon=$!
sleep 1
diskplan resize $DISK_pv --partition 1 --size 30MiB >/dev/null 2>&1 || true
diskplan check $DISK_pv >/dev/null 2>&1 || true
udevadm settle -t 30
sleep 1
kill $mon
echo "changes=$(grep -c ' change ' /tmp/events || true)"
echo "active=$(lvs --noheadings -o lv_active vg0/lv0 | tr -d ' ')"
"""

# a shrink's dry run, then a grow, of the PV of the deactivated vg0; udevd and LVM's rules watching: a loop
# device showing the PV (the grow's pvresize ran on one, a shrink's minimum was read through one) is scanned
# by 69-lvm.rules and vg0 auto-activated on it
PV_RESIZE = r"""
udevadm monitor --udev --subsystem-match=block > /tmp/events 2>&1 &
mon=$!
sleep 1
rc=0; diskplan resize $DISK_pv --partition 1 --size 16MiB > /tmp/dry 2>&1 || rc=$?
cat /tmp/dry; echo "dry=$rc $(grep -c '1. resize the LVM2_member' /tmp/dry)"
udevadm settle -t 30
echo "active_after_dry=$(lvs --noheadings -o lv_active vg0/lv0 | tr -d ' ')"
rc=0; diskplan resize $DISK_pv --partition 1 --size 30MiB --yes || rc=$?
echo "rc=$rc"
udevadm settle -t 30
sleep 1
kill $mon
echo "loop_events=$(grep -c '/block/loop' /tmp/events || true)"
echo "active=$(lvs --noheadings -o lv_active vg0/lv0 | tr -d ' ')"
echo "pvs=$(pvs --noheadings --units b --nosuffix -o pv_name,dev_size,pv_pe_count -S vg_name=vg0 | xargs)"
echo "dm=$(dmsetup ls --target linear | grep -c vg0 || true)"
echo "loops=$(losetup -a | wc -l)"
echo "kernel=$(cat /sys/class/block/${DISK_pv#/dev/}1/size)"
"""


@pytest.fixture(scope="module")
def run() -> Run:
    full_only()  # ~4.5 minutes under TCG (an md RAID5 resync, LVM): the default run has the host's inotify test
    disks = [Disk(n, 32 * MiB) for n in ("r1a", "r1b", "r5a", "r5b", "r5c")] + [Disk("pv", 32 * MiB)]
    return boot_guest(disks, [
        Case("build", BUILD),
        Case("check", "diskplan check --json /dev/md1 /dev/md5 $DISK_r1a || true"),
        Case("text", "diskplan check /dev/md5 || true"),
        Case("refused", REFUSED),
        Case("dry", DRY_RUN),
        Case("pvresize", PV_RESIZE),
    ], udevd=True)


def checked(run: Run) -> list[dict[str, Any]]:
    run["build"].check()
    doc = json.loads(run["check"].check().out)
    assert not doc["errors"], doc["errors"]
    disks: list[dict[str, Any]] = doc["disks"]
    return disks


def test_an_arrays_io_hints_are_in_the_json(run):
    raid1, raid5, _member = checked(run)
    assert (raid5["minimum_io_size"], raid5["optimal_io_size"]) == (64 << 10, 128 << 10)  # chunk, 2 data disks
    assert raid1["optimal_io_size"] == 0  # a mirror has no stripe


def test_a_virtio_disk_shows_its_serial(run):
    member = checked(run)[2]
    assert member["serial"] == "r1a"


def test_the_text_mentions_the_io_hints(run):
    out = run["text"].check().out
    assert "I/O hints: minimum 65536 B, optimal 131072 B" in out, out


def test_members_of_md_and_lvm_are_refused_as_held(run):
    out = run["refused"].check().out
    parts = dict(chunk.split("\n", 1) for chunk in out.split("== ")[1:])
    devices = run.devices
    for serial, holder in (("r1a", "md1"), ("r5a", "md5"), ("pv", "dm-0")):
        said = parts[devices[serial]]
        assert "rc=1" in said and "refused" in said and holder in said, said


def test_a_dry_run_makes_udevd_probe_nothing(run):
    got = dict(line.split("=", 1) for line in run["dry"].check().out.splitlines() if "=" in line)
    assert got["changes"] == "0", run["dry"].out
    assert got["active"] == ""  # the deactivated volume stays so (lvs says "active" for an active one)


def test_a_pv_is_resized_with_no_loop_device_lvm_could_activate_it_on(run):
    got = dict(line.split("=", 1) for line in run["pvresize"].check().out.splitlines() if "=" in line)
    said = run["pvresize"].out + run["pvresize"].err
    assert got["rc"] == "0", said
    assert got["dry"] == "0 1", said  # a shrink's preview, not refused: the PV first
    assert got["active_after_dry"] == "", said  # the shrink's dry run measured nothing through a loop device
    assert got["loop_events"] == "0", said  # no loop device appeared to udev, dry run or write
    assert got["active"] == "" and got["dm"] == "0", said  # vg0 stayed deactivated, on no device at all
    pv = run.devices["pv"] + "1"
    # pvs, the referee: the PV on its partition, the device 30 MiB, (30 - 1) MiB of 4 MiB extents (it had 4)
    assert got["pvs"] == f"{pv} {30 << 20} 7", said
    assert got["kernel"] == str(30 << 11), said  # the kernel's partition at its new size
    assert got["loops"] == "0", said
