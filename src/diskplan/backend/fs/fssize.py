"""How many bytes a filesystem spans, read from its own superblock: whether it fills its partition.

A grow writes the partition's entry first, then runs the filesystem's tool; a crash or power cut between the two
leaves the entry grown and the filesystem its old size. ``diskplan resize`` with the size the entry already has,
and ``apply``'s rest plan, find that here and finish the grow (backend.move.resize). Only the filesystems whose
tools diskplan grows and whose size sits at a fixed place are read (one small read each, no loop device: over an
LVM or md member that would make LVM or mdadm find the volume a second time); anything else is None, "unknown",
never "smaller".
"""

from __future__ import annotations

import os

from diskplan.backend.raw.sectorio import DiskIOError, reading

# A grown filesystem may leave the partition's last few blocks unused (ext4 drops a last block group too small
# to hold its metadata, XFS a last allocation group under 64 blocks): "does not fill it" means at least this
# much is left over, never a rounding.
SLACK = 1 << 20

EXT_MAGIC = 0xEF53
EXT_64BIT = 0x80  # s_feature_incompat: the block count has a high half


def _ext(sb: bytes) -> int | None:
    """ext2/3/4: the superblock at byte 1024 of the filesystem."""
    if len(sb) < 0x154 or int.from_bytes(sb[0x38:0x3A], "little") != EXT_MAGIC:
        return None
    blocks = int.from_bytes(sb[0x04:0x08], "little")
    if int.from_bytes(sb[0x60:0x64], "little") & EXT_64BIT:
        blocks |= int.from_bytes(sb[0x150:0x154], "little") << 32
    return blocks * (1024 << int.from_bytes(sb[0x18:0x1C], "little"))


def _xfs(sb: bytes) -> int | None:
    """XFS: big-endian block size and data block count at the start of the filesystem."""
    if len(sb) < 16 or sb[:4] != b"XFSB":
        return None
    return int.from_bytes(sb[4:8], "big") * int.from_bytes(sb[8:16], "big")


def _btrfs(sb: bytes) -> int | None:
    """btrfs: the superblock at 64 KiB; this device's own size in its dev_item (a filesystem over several
    devices has the sum at 0x70)."""
    if len(sb) < 0xD9 or sb[0x40:0x48] != b"_BHRfS_M":
        return None
    return int.from_bytes(sb[0xD1:0xD9], "little")


READERS = {  # fs (blkid's TYPE): (where its superblock starts, bytes read, its parser)
    "ext2": (1024, 1024, _ext),
    "ext3": (1024, 1024, _ext),
    "ext4": (1024, 1024, _ext),
    "xfs": (0, 512, _xfs),
    "btrfs": (0x10000, 4096, _btrfs),
}


def filesystem_bytes(target: str, offset: int, fs: str) -> int | None:
    """The bytes the ``fs`` filesystem at byte ``offset`` of ``target`` spans; None when diskplan does not read
    that type's size, or its superblock is not there."""
    known = READERS.get(fs)
    if known is None:
        return None
    at, length, parse = known
    try:
        with reading(target) as fd:
            return parse(os.pread(fd, length, offset + at))
    except (OSError, DiskIOError):
        return None


def unfilled(target: str, offset: int, size: int, fs: str = "") -> int | None:
    """The filesystem's size in bytes when it leaves at least SLACK of its ``size``-byte partition unused (a
    grow stopped after its entry was written), else None. ``fs`` "": whichever of READERS finds its superblock
    (each checks its magic), so no blkid runs."""
    for kind in (fs,) if fs else ("ext4", "xfs", "btrfs"):
        spans = filesystem_bytes(target, offset, kind)
        if spans is not None:
            return spans if 0 < spans <= size - SLACK else None
    return None
