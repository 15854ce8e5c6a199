"""Issue 30: sfdisk scripts written as sfdisk writes them, with real sfdisk as the referee, on loop devices of
512-byte and 4096-byte sectors. For each form, `sfdisk DEV < SCRIPT` on one blank loop device and `diskplan
apply SCRIPT DEV --yes` on an identical one must leave the same `sfdisk --dump` (the device's name aside;
the disk GUID and unique GUIDs aside only when the script names none: both are then random). Covered: GPT
attributes as libfdisk spells them, old dumps without `sector-size:` (read in the device's sectors), old
dumps' empty slots (`start=0, size=0, Id= 0`), `*` on a GPT line, and what libparted makes up that a script
names: first-lba (sfdisk's default on a new GPT too), last-lba, label-id, uuid=."""

from __future__ import annotations

import pathlib
import re
import subprocess
from collections.abc import Callable

import pytest

from helpers.cli import diskplan
from helpers.tools import need_tool, run

MiB = 1 << 20
SIZE = 64 * MiB
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"

FORMS = {
    # 1. attributes: names (and libfdisk's old misspelling), GUID:N, bare numbers 48-63 in C notation,
    # commas and/or blanks between them
    "attrs": 'label: gpt\nsize=4MiB, attrs="RequiredPartition,48"\nsize=4MiB, attrs="GUID:49 RequiredPartiton"\n'
             'size=4MiB, attrs="0x30, LegacyBIOSBootable  NoBlockIOProtocol"\nsize=4MiB, attrs="GUID:60,63"\n',
    # 2. and 3. a dump as sfdisk wrote it before 2.35: device prefixes, no sector-size, empty slots
    "old dos dump": "# partition table of /dev/sdb\nunit: sectors\n\n"
                    "/dev/sdb1 : start=      256, size=     2560, Id=83, bootable\n"
                    "/dev/sdb2 : start=     2816, size=     2560, Id=82\n"
                    "/dev/sdb3 : start=        0, size=        0, Id= 0\n"
                    "/dev/sdb4 : start=        0, size=        0, Id= 0\n",
    "old gpt dump": f"label: gpt\nlabel-id: 8C4CD463-FA68-4061-97E2-C5BFE2305027\ndevice: /dev/sdb\nunit: sectors\n"
                    "first-lba: 34\nlast-lba: 10000\n\n"
                    f"/dev/sdb1 : start=512, size=2048, type={LINUX}, uuid=A1B2C3D4-0000-4000-8000-000000000001, "
                    'name="a"\n'
                    f"/dev/sdb2 : start=2560, size=1024, type={LINUX}, uuid=A1B2C3D4-0000-4000-8000-000000000002\n",
    "gpt without first-lba, a start before sfdisk's": f"label: gpt\nd1 : start=40, size=2048, type={LINUX}\n",
    # 4. bootable on a GPT line: ignored
    "gpt bootable": "label: gpt\n,4MiB,L,*\nsize=4MiB, bootable\n",
    # 5. what libparted makes up: sfdisk's default first-lba on a new GPT, and a dump's own header and ids
    "new gpt": "label: gpt\nsize=4MiB\nsize=4MiB, type=S\n",
    "dos label-id": "label: dos\nlabel-id: 0x1234abcd\n,4MiB,L\n,,S\n",
    "dos label-id without 0x, past 32 bits": "label: dos\nlabel-id: 305441741\nstart=2048, size=8192, type=83\n",
    "ids and usable area": "label: gpt\nlabel-id: 35069D22-0D08-4C4E-BA94-07D94FA202CF\nunit: sectors\n"
                           "first-lba: 300\nlast-lba: 12000\n\n"
                           "d1 : start=512, size=2048, type=L, uuid=4E5E2A1B-6B1C-4D2E-9F00-112233445566, name=\"x\"\n"
                           "d2 : start=4096, size=1024, type=S, uuid=0d5e2a1b-6b1c-4d2e-9f00-aabbccddeeff\n",
}


REFUSED = {"gpt without first-lba, a start before sfdisk's": "already used"}


def _dump(dev: str, keep_ids: bool) -> list[str]:
    """`sfdisk --dump` of ``dev`` without its name (and without the random ids unless the script named them)."""
    out = []
    for line in run("sfdisk", "--dump", dev).splitlines():
        if line.startswith("device:") or (line.startswith("label-id:") and not keep_ids):
            continue
        if not keep_ids:
            line = re.sub(r",? *uuid=[0-9A-F-]+", "", line)
        out.append(re.sub(r"^\S+?(\d+) :", r"part\1 :", line))
    return out


def _blank_pair(loop_device: Callable[..., str], tmp_path: pathlib.Path, ss: int) -> tuple[str, str]:
    devs = []
    for name in ("sfdisk", "diskplan"):
        img = tmp_path / f"{name}.img"
        with open(img, "wb") as f:
            f.truncate(SIZE)
        devs.append(loop_device(img, sector_size=ss))
    return devs[0], devs[1]


def _sfdisk(dev: str, script: str) -> str:
    return run(need_tool("sfdisk"), "--no-reread", "--no-tell-kernel", dev, input=script)


def _apply(dev: str, script: str, tmp_path: pathlib.Path) -> str:
    path = tmp_path / "script"
    path.write_text(script)
    proc = diskplan("apply", str(path), dev, "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("ss", [512, 4096])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_diskplan_writes_what_sfdisk_writes(form: str, ss: int, loop_device: Callable[..., str],
                                            tmp_path: pathlib.Path) -> None:
    script = FORMS[form]
    theirs, ours = _blank_pair(loop_device, tmp_path, ss)
    if form in REFUSED:  # sfdisk refuses it: so does diskplan, and writes nothing
        proc = subprocess.run([need_tool("sfdisk"), "--no-reread", "--no-tell-kernel", theirs], input=script,
                              capture_output=True, text=True)
        assert proc.returncode != 0 and REFUSED[form] in proc.stderr, proc.stderr
        path = tmp_path / "script"
        path.write_text(script)
        proc = diskplan("apply", str(path), ours, "--yes", "--backup", str(tmp_path / "b.dpbackup"))
        assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "sfdisk refuses it" in proc.stderr, proc.stderr
        assert subprocess.run(["sfdisk", "--dump", ours], capture_output=True).returncode != 0  # still blank
        return
    said = _sfdisk(theirs, script)
    out = _apply(ours, script, tmp_path)
    named = "uuid=" in script or "label-id:" in script
    assert _dump(ours, named) == _dump(theirs, named), out
    if "Id= 0" in script:
        assert "Ignoring partition." in said and out.count("ignored, as sfdisk ignores it") == 2
    if "bootable" in script or ",*" in script:
        assert "bootable ignored, as sfdisk ignores it on GPT" in out or "dos" in _dump(ours, False)[0]


@pytest.mark.parametrize("ss", [512, 4096])
def test_a_new_gpt_starts_where_sfdisk_starts_it(ss: int, loop_device: Callable[..., str],
                                                 tmp_path: pathlib.Path) -> None:
    """sfdisk's new GPT has its usable area from the first aligned sector (1 MiB: 2048 or 256), libparted's
    from 34 or 6: the script's table must read back with sfdisk's."""
    _, ours = _blank_pair(loop_device, tmp_path, ss)
    _apply(ours, FORMS["new gpt"], tmp_path)
    assert f"first-lba: {MiB // ss}" in _dump(ours, False)


# bit numbers newer libfdisk reads (util-linux's development tree) where 2.38 warns and sets none, each
# against the spelling every sfdisk reads
NEWER = {
    '"0,1,2"': '"RequiredPartition,NoBlockIOProtocol,LegacyBIOSBootable"',
    '"0x2"': '"LegacyBIOSBootable"',
    '"1 GUID:62"': '"NoBlockIOProtocol GUID:62"',
}


@pytest.mark.parametrize("ss", [512, 4096])
@pytest.mark.parametrize("newer", sorted(NEWER))
def test_bit_numbers_0_to_2_set_what_their_names_set(newer: str, ss: int, loop_device: Callable[..., str],
                                                     tmp_path: pathlib.Path) -> None:
    theirs, ours = _blank_pair(loop_device, tmp_path, ss)
    _sfdisk(theirs, f"label: gpt\nsize=4MiB, attrs={NEWER[newer]}\n")
    _apply(ours, f"label: gpt\nsize=4MiB, attrs={newer}\n", tmp_path)
    assert _dump(ours, False) == _dump(theirs, False)
    assert "attrs=" in _dump(ours, False)[-1]


@pytest.mark.parametrize("bad", ['"3"', '"GUID:2"', '"47"', '"64"', '"Bootable"', '"RequiredPartitionX"'])
def test_an_attribute_sfdisk_does_not_know_is_refused_with_its_words(
        bad: str, sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path) -> None:
    """sfdisk says "unsupported GPT attribute bit" (or cannot parse the string) and then writes the
    partition with no attributes at all; diskplan refuses the line instead (README: what differs)."""
    img = sparse_image(SIZE)
    said = subprocess.run([need_tool("sfdisk"), "--no-reread", "--no-tell-kernel", str(img)], capture_output=True,
                          text=True, input=f"label: gpt\nsize=4MiB, attrs={bad}\n")
    assert "GPT attribute" in said.stderr, said.stderr
    assert "attrs=" not in run("sfdisk", "--dump", str(img))  # sfdisk wrote the partition, without attributes
    path = tmp_path / "script"
    path.write_text(f"label: gpt\nsize=4MiB, attrs={bad}\n")
    clean = sparse_image(SIZE, "clean.img")
    proc = diskplan("apply", str(path), str(clean), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode != 0 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stdout + proc.stderr
    assert "GPT attribute" in proc.stderr and "line 2" in proc.stderr


@pytest.mark.parametrize("ss", [512, 4096])
def test_a_dump_restored_onto_the_same_layout_brings_its_ids(ss: int, loop_device: Callable[..., str],
                                                             tmp_path: pathlib.Path) -> None:
    """Cloning with a dump: disk B has the layout of disk A (each written by sfdisk, so every id differs);
    applying A's dump to B keeps B's partitions (nothing moves) and gives them, and the disk, A's ids."""
    theirs, ours = _blank_pair(loop_device, tmp_path, ss)
    layout = "label: gpt\nsize=4MiB, name=a\nsize=4MiB, type=S\n"
    _sfdisk(theirs, layout)
    _sfdisk(ours, layout)
    assert _dump(ours, True) != _dump(theirs, True)
    out = _apply(ours, run("sfdisk", "--dump", theirs), tmp_path)
    assert "kept" in out and "unique GUID (PARTUUID) of partitions 1, 2 becomes the plan's" in out
    assert _dump(ours, True) == _dump(theirs, True)
