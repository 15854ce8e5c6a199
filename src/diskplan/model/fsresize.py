"""What resizing a partition that holds data may do, by what blkid finds in it, and in which order.
Pure: the tools themselves run in backend.fsresize.

The order is the safe one: a shrink resizes the filesystem first, then the table entry; a grow
rewrites the entry first, then the filesystem. A crash between the two leaves a filesystem smaller
than its partition, which every tool accepts (a shrink is finished by the same command run again, a
grow by the filesystem's own tool).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resizer:
    """How diskplan resizes one kind of content: which tool (and its Debian package), whether it can
    grow and shrink, and whether it works on a (private, temporary) mount."""

    tool: str
    package: str
    grow: bool = True
    shrink: bool = True
    mounted: bool = False
    why_not: str = ""  # why a shrink is refused, when it is


RESIZERS: dict[str, Resizer] = {
    "ext2": Resizer("resize2fs", "e2fsprogs"),
    "ext3": Resizer("resize2fs", "e2fsprogs"),
    "ext4": Resizer("resize2fs", "e2fsprogs"),
    "xfs": Resizer("xfs_growfs", "xfsprogs", shrink=False, mounted=True, why_not="an XFS filesystem cannot shrink"),
    "btrfs": Resizer("btrfs", "btrfs-progs", mounted=True),
    "ntfs": Resizer("ntfsresize", "ntfs-3g"),
    "vfat": Resizer("libparted-fs-resize", "libparted-fs-resize0"),  # a library: what fatresize runs (backend.fatfs)
    "swap": Resizer("mkswap", "util-linux"),
    "LVM2_member": Resizer("pvresize", "lvm2"),
}

REFUSED: dict[str, str] = {
    "crypto_LUKS": "a LUKS container: diskplan cannot resize what is inside it (open it, resize its filesystem and "
    "`cryptsetup resize` it yourself)",
    "": "no filesystem blkid knows: diskplan cannot tell how much of the partition is in use",
}

MIN_SWAP = 40 << 10  # mkswap wants at least 10 pages


def resizer(fs: str) -> tuple[Resizer | None, str]:
    """The resizer for ``fs``, or None and why it cannot be resized."""
    r = RESIZERS.get(fs)
    if r is not None:
        return r, ""
    return None, REFUSED.get(fs, f"a {fs} filesystem: diskplan has no tool to resize it")


def refusals(fs: str, old: int, new: int, minimum: int | None) -> list[str]:
    """Why resizing ``fs`` from ``old`` to ``new`` bytes is refused (``minimum``: what its tool says a
    shrink can reach; None when unknown)."""
    r, why = resizer(fs)
    if r is None:
        return [f"the partition holds {why}"]
    if new < old and not r.shrink:
        return [f"{r.why_not}: it can only grow"]
    if new < old and minimum is not None and new < minimum:
        return [f"{new} bytes is below the smallest size its {fs} filesystem can shrink to ({minimum} bytes)"]
    return []


def steps(old: int, new: int) -> tuple[str, str]:
    """The order: ("filesystem", "entry") to shrink, ("entry", "filesystem") to grow."""
    return ("filesystem", "entry") if new < old else ("entry", "filesystem")
