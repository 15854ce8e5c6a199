"""backend.fs.fssize: a filesystem's size read from its own superblock, against the filesystem's own tools on
real filesystems made at an offset inside an image (as in a partition), smaller than the space after them."""

from __future__ import annotations

import pathlib
import re

import pytest

from diskplan.backend.fs.fssize import SLACK, filesystem_bytes, unfilled
from helpers.movedisk import View
from helpers.tools import need_tool, run
from helpers.units import MiB

OFFSET = 2048 * 512


def _image(tmp: pathlib.Path, mib: int) -> str:
    img = tmp / "disk.img"
    with open(img, "wb") as f:
        f.truncate(OFFSET + mib * MiB)
    return str(img)


def _made(img: str, fs_mib: int, *mkfs: str) -> None:
    """``mkfs`` over the first ``fs_mib`` MiB after OFFSET (a view as large as the filesystem)."""
    with View(img, OFFSET // 512, fs_mib * MiB // 512, read_only=False) as v:
        run(*mkfs, v)


@pytest.mark.parametrize("options", [("-b", "1024", "-O", "^64bit"), ("-b", "4096", "-O", "64bit")])
def test_ext4_size_is_what_dumpe2fs_says(tmp_path, options) -> None:
    need_tool("mkfs.ext4")
    img = _image(tmp_path, 40)
    _made(img, 20, "mkfs.ext4", "-q", *options)
    with View(img, OFFSET // 512, 40 * MiB // 512) as v:
        head = run("dumpe2fs", "-h", v)
    fields = dict(re.findall(r"^(Block count|Block size):\s+(\d+)", head, re.M))
    count, size = int(fields["Block count"]), int(fields["Block size"])
    assert filesystem_bytes(img, OFFSET, "ext4") == count * size == 20 * MiB
    assert unfilled(img, OFFSET, 40 * MiB, "ext4") == 20 * MiB  # a grow stopped after its entry
    assert unfilled(img, OFFSET, 20 * MiB + SLACK - 512, "ext4") is None  # a last rounding is not "unfilled"


def test_xfs_size_is_what_xfs_db_says(tmp_path) -> None:
    need_tool("mkfs.xfs")
    img = _image(tmp_path, 400)
    _made(img, 320, "mkfs.xfs", "-q", "-f")
    with View(img, OFFSET // 512, 400 * MiB // 512) as v:
        got = run("xfs_db", "-r", "-c", "sb 0", "-c", "p blocksize dblocks", v)
    fields = dict(re.findall(r"^(\w+) = (\d+)", got, re.M))
    assert filesystem_bytes(img, OFFSET, "xfs") == int(fields["blocksize"]) * int(fields["dblocks"]) == 320 * MiB
    assert unfilled(img, OFFSET, 400 * MiB, "xfs") == 320 * MiB


def test_btrfs_size_is_what_its_superblock_dump_says(tmp_path) -> None:
    need_tool("mkfs.btrfs")
    img = _image(tmp_path, 400)
    _made(img, 256, "mkfs.btrfs", "-q", "-f")
    with View(img, OFFSET // 512, 400 * MiB // 512) as v:
        got = run("btrfs", "inspect-internal", "dump-super", v)
    dev = int(dict(re.findall(r"^(dev_item\.total_bytes)\s+(\d+)", got, re.M))["dev_item.total_bytes"])
    assert filesystem_bytes(img, OFFSET, "btrfs") == dev == 256 * MiB


def test_anything_else_is_unknown_never_smaller(tmp_path) -> None:
    img = _image(tmp_path, 8)
    assert filesystem_bytes(img, OFFSET, "ext4") is None  # zeros: no superblock
    assert filesystem_bytes(img, OFFSET, "vfat") is None  # a type whose size is not read
    assert unfilled(img, OFFSET, 8 * MiB, "ext4") is None
    assert filesystem_bytes(str(tmp_path / "gone.img"), OFFSET, "ext4") is None
