"""Copying a disk's layout onto another disk as a user types it: `diskplan export A --layout-only > plan.json;
diskplan apply plan.json B --yes` (and `--relative` for a B of another size or sector size), checked by sfdisk
and parted on images and loop devices. The plain export still ties the plan to A (keeps, made_against)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

import pytest

from helpers.cli import diskplan
from helpers.images import parted_parts, sfdisk_header, sfdisk_parts
from helpers.tools import need_tool, run
from helpers.units import MiB

GPT = """label: gpt
start=2048, size=512MiB, type=U, name="EFI"
size=1GiB, type=L, name="root"
type=S, name="swap"
"""
DOS = """label: dos
start=2048, size=256MiB, type=c, bootable
size=700MiB, type=5
size=100MiB, type=83
size=100MiB, type=82
"""


def made(make: Callable[..., pathlib.Path], script: str, size: int, name: str) -> str:
    image = make(size, name)
    run(need_tool("sfdisk"), "--quiet", str(image), input=script)
    return str(image)


def copied(source: str, target: str, tmp: pathlib.Path, *how: str) -> pathlib.Path:
    exported = diskplan("export", source, *how)
    assert exported.returncode == 0, exported.stderr
    plan = tmp / f"plan{'-'.join(how)}.json"
    plan.write_text(exported.stdout)
    applied = diskplan("apply", str(plan), target, "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "backup of the old table" in applied.stdout  # the safety of any write stays
    return plan


def blank(image: str) -> bool:
    """Nothing written: the first MiB (MBR, GPT header and entries) is still zeros."""
    with open(image, "rb") as f:
        return f.read(MiB) == bytes(MiB)


def layout(parts: list[tuple[int, int, int, str, str]]) -> list[tuple[int, int, int, str]]:
    """sfdisk's partitions without names' quoting: number, start, size, type."""
    return [(n, start, size, kind) for n, start, size, kind, _name in parts]


def refused(make: Callable[..., pathlib.Path], tmp: pathlib.Path, b_size: int, *how: str) -> str:
    """A GPT layout exported from A (``how``: export's options) and applied to a blank B of ``b_size``: refused
    (exit 1) with B left blank; what apply said."""
    a = made(make, GPT, 2048 * MiB, "a.img")
    b = str(make(b_size, "b.img"))
    plan = tmp / "plan.json"
    plan.write_text(diskplan("export", a, *how).stdout)
    proc = diskplan("apply", str(plan), b, "--yes")
    assert proc.returncode == 1 and blank(b), proc.stdout + proc.stderr
    return proc.stderr


def test_the_plain_export_is_refused_on_another_disk_and_names_the_way_to_copy(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    assert "diskplan export DISK --layout-only" in refused(sparse_image, tmp_path, 2048 * MiB)


@pytest.mark.parametrize("script", [GPT, DOS], ids=["gpt", "msdos"])
def test_layout_only_copies_every_partition_onto_a_blank_bigger_disk(
    script: str, sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    a = made(sparse_image, script, 2048 * MiB, "a.img")
    b = str(sparse_image(3072 * MiB, "b.img"))
    plan = copied(a, b, tmp_path, "--layout-only")
    doc = json.loads(plan.read_text())
    assert not {"made_against", "sectors", "first_lba", "last_lba"} & doc.keys()
    assert all("keeps" not in p for p in doc["partitions"])
    assert layout(sfdisk_parts(b)) == layout(sfdisk_parts(a))
    assert parted_parts(b) == parted_parts(a)
    assert sfdisk_header(b)["label"] == sfdisk_header(a)["label"]
    boot = [line.count("bootable") for line in run(need_tool("sfdisk"), "--dump", b).splitlines()]
    assert boot == [line.count("bootable") for line in run(need_tool("sfdisk"), "--dump", a).splitlines()]
    if script is GPT:  # B's own usable area, not A's: its backup table is at B's end
        assert int(sfdisk_header(b)["last-lba"]) == 3072 * MiB // 512 - 34


DOS_PRIMARIES = """label: dos
start=2048, size=256MiB, type=c, bootable
size=1GiB, type=83
type=82
"""


@pytest.mark.parametrize(("script", "size"), [(GPT, 1792 * MiB), (GPT, 4096 * MiB), (DOS_PRIMARIES, 3072 * MiB)],
                         ids=["gpt-smaller", "gpt-bigger", "msdos-bigger"])
def test_relative_copies_the_layout_onto_a_disk_of_another_size(
    script: str, size: int, sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    a = made(sparse_image, script, 2048 * MiB, "a.img")
    b = str(sparse_image(size, "b.img"))
    copied(a, b, tmp_path, "--relative")
    got, was = sfdisk_parts(b), sfdisk_parts(a)
    assert [p[:3] for p in got[:2]] == [p[:3] for p in was[:2]]  # fixed sizes, same places
    assert [p[3:] for p in got] == [p[3:] for p in was]  # types and names
    last_end = got[2][1] + got[2][2] - 1
    grain = MiB // 512
    usable_end = int(sfdisk_header(b)["last-lba"]) + 1 if script is GPT else size // 512
    assert last_end == usable_end // grain * grain - 1  # the rest, to B's end
    assert parted_parts(b)[-1][2] == last_end


def test_relative_onto_a_4096_byte_sector_loop_device(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    a = made(sparse_image, GPT, 2048 * MiB, "a.img")
    b = loop_device(sparse_image(3072 * MiB, "b.img"), sector_size=4096)
    copied(a, b, tmp_path, "--relative")
    got = sfdisk_parts(b)
    assert [(start * 4096, size * 4096) for _n, start, size, _t, _name in got[:2]] == [
        (start * 512, size * 512) for _n, start, size, _t, _name in sfdisk_parts(a)[:2]]
    assert [p[4] for p in got] == ["EFI", "root", "swap"]


def test_relative_refuses_msdos_logical_partitions_and_says_what_copies_them(
    sparse_image: Callable[..., pathlib.Path]
) -> None:
    a = made(sparse_image, DOS, 2048 * MiB, "a.img")
    proc = diskplan("export", a, "--relative")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "partition 2 is extended" in proc.stderr and "--layout-only" in proc.stderr


def test_layout_only_onto_a_smaller_disk_is_refused_before_anything_is_written(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    said = refused(sparse_image, tmp_path, 1024 * MiB, "--layout-only")
    assert "too small" in said or "past" in said


def test_layout_only_of_an_sfdisk_dump_drops_its_ids_without_a_note(tmp_path: pathlib.Path) -> None:
    """A dump names the disk's GUID and each partition's (label-id:, uuid=): a copy of the layout has ids of its
    own, so export says nothing of leaving them out (it does for the plain export, which is not a copy)."""
    dump = tmp_path / "a.sfdisk"
    dump.write_text("label: gpt\nlabel-id: 1B2E7C36-9C3F-4D8E-9E0B-5F1A2B3C4D5E\nunit: sectors\nfirst-lba: 2048\n"
                    "last-lba: 204766\nsector-size: 512\n\n"
                    "/dev/sdx1 : start=2048, size=4096, type=L, uuid=11111111-2222-3333-4444-555555555555\n")
    plain = diskplan("export", str(dump))
    assert plain.returncode == 0 and "label-id 1B2E7C36" in plain.stderr and "uuid= of partition 1" in plain.stderr
    for how in ("json", "sfdisk"):
        copy = diskplan("export", str(dump), "--layout-only", "--format", how)
        assert copy.returncode == 0 and copy.stderr == "", copy.stderr
        assert "1B2E7C36" not in copy.stdout and "11111111" not in copy.stdout
