"""Every GPT type GUID and attribute bit is written, also those libparted 3.5 cannot set: the raw entries are
patched after its commit in the same safe write. Referees: `sgdisk -i N`, `sfdisk --dump`, `sgdisk -v`. A
plan names a type by GUID or by any name libfdisk knows; export -> apply round-trips every type and bit; a
patch cut short leaves a backup that `restore` brings back."""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Callable

import pytest

from diskplan.backend.raw import kernelparts
from diskplan.backend.write import commit
from diskplan.backend.write.steps import DiskState, Verdict
from diskplan.model.extent import Partition
from diskplan.model.formats.planfile import PlanFileError, load_plan
from diskplan.model.table import Table
from diskplan.model.typenames import GPT_NAMES
from helpers.cli import diskplan
from helpers.images import HOST, file_sha, sgdisk_clean
from helpers.tools import need_tool, run
from helpers.units import MiB

# The Discoverable Partitions Specification's types (root, /usr, verity and signature partitions for every
# architecture, ESP, XBOOTLDR, swap, home, srv, var, tmp, user home) and the other Linux ones: 128, one full GPT.
DPS = ["C12A7328-F81F-11D2-BA4B-00A0C93EC93B", *(g for g, n in GPT_NAMES.items() if n.startswith("Linux "))]
OTHERS = [g for g in GPT_NAMES if g not in DPS]
SPELLINGS: list[Callable[[str], str]] = [
    lambda name: name,  # "Linux root (x86-64)", libfdisk's own
    lambda name: "-".join(re.findall(r"[a-z0-9]+", name.lower())),  # "linux-root-x86-64"
    lambda name: name.upper(),
]


def _sgdisk_info(target: pathlib.Path | str, n: int) -> tuple[str, int]:
    """(type GUID, attribute bits) as `sgdisk -i N` reads partition N."""
    out = run(need_tool("sgdisk"), "-i", str(n), str(target))
    guid = re.search(r"Partition GUID code: (\S+)", out)
    bits = re.search(r"Attribute flags: ([0-9A-Fa-f]+)", out)
    assert guid and bits, out
    return guid[1].upper(), int(bits[1], 16)


def _dump_parts(target: pathlib.Path | str) -> list[str]:
    """`sfdisk --dump`'s partition lines without the device name and the partition's own GUID."""
    lines = run(need_tool("sfdisk"), "--dump", str(target)).splitlines()
    return [re.sub(r", uuid=[0-9A-F-]+", "", line.split(" : ", 1)[1]) for line in lines if " : " in line]


def _blank(tmp_path: pathlib.Path, size: int, name: str = "disk.img") -> pathlib.Path:
    img = tmp_path / name
    with open(img, "wb") as f:
        f.truncate(size)
    return img


def _apply(tmp_path: pathlib.Path, img: pathlib.Path | str, parts: list[dict[str, object]], name: str = "a",
           sector_size: int = 512) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"label": "gpt", "sector_size": sector_size, "partitions": parts}))
    proc = diskplan("apply", str(path), str(img), "--yes", "--backup", str(tmp_path / f"{name}.dpbackup"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_every_dps_type_is_written_by_name_and_sgdisk_reads_it_back(tmp_path: pathlib.Path) -> None:
    img = _blank(tmp_path, 130 * MiB)
    parts = [{"start": 2048 * (i + 1), "size": 2048, "type": SPELLINGS[i % len(SPELLINGS)](GPT_NAMES[g])}
             for i, g in enumerate(DPS)]
    assert len(parts) == 128
    _apply(tmp_path, img, parts)
    assert [_sgdisk_info(img, n)[0] for n in range(1, 129)] == DPS
    assert sgdisk_clean(img)
    shown = json.loads(diskplan("check", "--json", str(img)).stdout)["partitions"]
    assert [p["type_name"] for p in shown][:3] == ["EFI system", "Linux swap", "Linux filesystem"]
    assert "Linux root (x86-64)" in [p["type_name"] for p in shown]  # known types are shown by name


def test_every_other_type_libfdisk_knows_is_written_by_guid(tmp_path: pathlib.Path) -> None:
    img = _blank(tmp_path, 128 * MiB)
    parts = [{"start": 2048 * (i + 1), "size": 2048, "type": g.lower()} for i, g in enumerate(OTHERS)]
    parts.append({"start": 2048 * (len(OTHERS) + 1), "size": 2048, "type": "01234567-89AB-CDEF-0123-456789ABCDEF"})
    _apply(tmp_path, img, parts)
    types = [re.findall(r"type=([0-9A-F-]+)", line)[0] for line in _dump_parts(img)]
    assert types == [*OTHERS, "01234567-89AB-CDEF-0123-456789ABCDEF"]
    assert sgdisk_clean(img)


BITS = {  # partition -> the flags planned, and the bits sgdisk must read
    1: (["hidden"], 1 << 0),
    2: (["legacy_boot"], 1 << 2),
    3: (["guid:60"], 1 << 60),
    4: (["no_automount"], 1 << 63),
    5: (["no_block_io"], 1 << 1),
    6: ([f"guid:{n}" for n in range(48, 56)], 0xFF << 48),
    7: (["hidden", "legacy_boot", "guid:60", "guid:62", "no_automount"], 1 | 4 | 1 << 60 | 1 << 62 | 1 << 63),
}


def test_attribute_bits_are_set_and_cleared_and_the_reserved_ones_kept(tmp_path: pathlib.Path) -> None:
    img = _blank(tmp_path, 32 * MiB)
    parts: list[dict[str, object]] = [{"number": n, "start": 2048 * n, "size": 2048, "type": "linux-root-x86-64",
                                       "flags": flags} for n, (flags, _) in BITS.items()]
    said = _apply(tmp_path, img, parts)
    assert {n: _sgdisk_info(img, n)[1] for n in BITS} == {n: bits for n, (_, bits) in BITS.items()}
    assert "attribute bits 0x0000000000000000 -> 0x1000000000000000" in said  # partition 3, by the patch
    assert sgdisk_clean(img)
    run("sgdisk", "-A", "3:set:10", str(img))  # a reserved bit no plan names: kept through a change
    parts[2]["flags"] = ["no_automount"]  # 60 off, 63 on
    parts[5]["flags"] = []
    parts[6]["type"] = "Linux /usr (x86-64)"
    said = _apply(tmp_path, img, parts, "b")
    assert "change 3" in said and "keep 1" in said
    assert _sgdisk_info(img, 3)[1] == 1 << 63 | 1 << 10
    assert _sgdisk_info(img, 6)[1] == 0
    assert _sgdisk_info(img, 7) == ("8484680C-9521-48C6-9C11-B0720656F69E", BITS[7][1])
    assert _sgdisk_info(img, 1)[1] == 1  # kept as it was
    assert sgdisk_clean(img)


SCRIPT = """label: gpt
start=2048, size=2048, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="esp", attrs="RequiredPartition"
start=4096, size=4096, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name="root", attrs="GUID:59,60,63"
start=8192, size=2048, type=2C7357ED-EBD2-46D9-AEC1-23D437EC2BF5, name="verity", attrs="GUID:60"
start=10240, size=2048, type=8484680C-9521-48C6-9C11-B0720656F69E, attrs="NoBlockIOProtocol LegacyBIOSBootable"
start=12288, size=2048, type=01234567-89AB-CDEF-0123-456789ABCDEF, attrs="GUID:48,49,50,51,52,53,54,55"
start=14336, size=2048, type=933AC7E1-2EB4-4F13-B844-0E14E2AEF915, attrs="GUID:62"
"""


def test_export_then_apply_round_trips_every_type_and_bit(tmp_path: pathlib.Path) -> None:
    src = _blank(tmp_path, 32 * MiB, "src.img")
    run(need_tool("sfdisk"), "-q", str(src), input=SCRIPT)
    exported = diskplan("export", str(src))
    assert exported.returncode == 0
    doc = json.loads(exported.stdout)
    del doc["made_against"]  # written onto another (blank) disk: it is not that disk's table,
    for part in doc["partitions"]:
        del part["keeps"]  # nor are its partitions the ones kept (their content is not copied)
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    copy = _blank(tmp_path, 32 * MiB, "copy.img")
    proc = diskplan("apply", str(tmp_path / "plan.json"), str(copy), "--yes", "--backup", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _dump_parts(copy) == _dump_parts(src)
    assert [_sgdisk_info(copy, n) for n in range(1, 7)] == [_sgdisk_info(src, n) for n in range(1, 7)]
    again = diskplan("apply", str(tmp_path / "plan.json"), str(copy), "--yes", "--backup", str(tmp_path / "c"))
    assert again.returncode == 0 and "nothing to do" in again.stdout + again.stderr
    script = diskplan("export", str(src), "--format", "sfdisk").stdout  # the sfdisk script carries them too
    (tmp_path / "plan.sfdisk").write_text(script)
    third = _blank(tmp_path, 32 * MiB, "third.img")
    proc = diskplan("apply", str(tmp_path / "plan.sfdisk"), str(third), "--yes", "--backup", str(tmp_path / "d"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _dump_parts(third) == _dump_parts(src)


def test_a_patch_cut_short_leaves_a_backup_that_restore_brings_back(tmp_path: pathlib.Path) -> None:
    img = _blank(tmp_path, 32 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input=SCRIPT)
    before = file_sha(img)
    root = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"
    wanted = Table("gpt", 0, 0, (Partition(1, 2048, 4095, type=root, flags=("no_automount",)),
                                 Partition(2, 4096, 8191, type="C12A7328-F81F-11D2-BA4B-00A0C93EC93B")))
    p = commit.prepare(str(img), wanted, HOST)
    assert not p.refusals, p.refusals

    def fail(stage: str) -> None:
        if stage == "patch":  # libparted has committed; the backup copy is patched, the primary is not
            raise OSError(5, "Input/output error")

    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=fail)
    assert o.verdict is Verdict.FAILED and o.state is DiskState.CHANGED, o
    assert o.restore_command == f"diskplan restore {tmp_path / 'b.dpbackup'} {img} --yes"
    undo = diskplan(*o.restore_command.split()[1:])
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert file_sha(img) == before

    done = commit.execute(commit.prepare(str(img), wanted, HOST), "yes", HOST, backup_path=str(tmp_path / "c"))
    assert done.verdict is Verdict.WRITTEN, done.details
    assert _sgdisk_info(img, 1) == (root, 1 << 63) and _sgdisk_info(img, 2)[0] == wanted.partitions[1].type
    assert "No problems found" in run("sgdisk", "-v", str(img))  # (sfdisk's first-lba 2048 gets a warning)


def test_a_4096_byte_sector_loop_device(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path,
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img, sector_size=4096)
    parts = [{"start": 256, "size": 256, "type": "linux-root-arm-64", "flags": ["guid:60", "no_block_io"]},
             {"start": 512, "size": 512, "type": "Linux /usr verity (ARM-64)", "flags": ["hidden", "guid:48"]}]
    _apply(tmp_path, dev, parts, sector_size=4096)
    assert _sgdisk_info(dev, 1) == ("B921B045-1DF0-41C3-AF44-4C6F280D3FAE", 1 << 60 | 1 << 1)
    assert _sgdisk_info(dev, 2) == ("6E11A4E7-FBCA-4DED-B9E9-E1A512BB664E", 1 << 48 | 1)
    assert sgdisk_clean(dev)
    assert kernelparts.kernel_list(dev) == {1: (256 * 8, 256 * 8), 2: (512 * 8, 512 * 8)}
    blkid = run(need_tool("blkid"), "-p", "-o", "value", "-s", "PART_ENTRY_TYPE", f"{dev}p1")  # what udev sees
    assert blkid.strip().upper() == "B921B045-1DF0-41C3-AF44-4C6F280D3FAE"


@pytest.mark.parametrize("bad", ["linux root x86-65", "not-a-type"])
def test_an_unknown_type_name_is_refused_with_the_reason(tmp_path: pathlib.Path, bad: str) -> None:
    img = _blank(tmp_path, 16 * MiB)
    (tmp_path / "p.json").write_text(json.dumps({"label": "gpt", "partitions": [{"start": 2048, "size": 2048,
                                                                                  "type": bad}]}))
    proc = diskplan("apply", str(tmp_path / "p.json"), str(img), "--yes")
    assert proc.returncode != 0 and "not a GPT partition type" in proc.stdout + proc.stderr


def _loaded(attributes: object, label: str = "gpt") -> tuple[str, ...]:
    doc = {"label": label, "partitions": [{"start": 2048, "size": 2048, "flags": ["hidden"], "attributes": attributes}]}
    return load_plan(json.dumps(doc)).partitions[0].flags


def test_a_plan_file_takes_attribute_bits_as_check_prints_them_or_as_sfdisk_writes_them() -> None:
    want = ("guid:60", "hidden", "no_automount")
    assert _loaded("0x9000000000000000") == _loaded(0x9000000000000000) == _loaded("GUID:60,63") == want
    assert _loaded("RequiredPartition NoBlockIOProtocol GUID:48") == ("guid:48", "hidden", "no_block_io")
    with pytest.raises(PlanFileError, match="set bit 5, which no plan sets"):
        _loaded("0x20")
    with pytest.raises(PlanFileError, match="attributes are GPT's"):
        _loaded("0x1", "msdos")
    with pytest.raises(PlanFileError, match="unsupported GPT attribute bit 'Bootable'"):
        _loaded("Bootable")
