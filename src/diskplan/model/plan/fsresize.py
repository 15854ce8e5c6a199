"""What resizing a partition that holds data may do, by what blkid finds in it, and in which order.
Pure: the tools themselves run in backend.fs.fsresize.

The order is the safe one: a shrink resizes the filesystem first, then the table entry; a grow
rewrites the entry first, then the filesystem. A crash between the two leaves a filesystem smaller
than its partition, which every tool accepts (a shrink is finished by the same command run again, a
grow by the filesystem's own tool).
"""

from __future__ import annotations

from diskplan.model.value import value


@value
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
    "vfat": Resizer("libparted-fs-resize", "libparted-fs-resize0"),  # a library: what fatresize runs (backend.fs.fatfs)
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


@value
class Limits:
    """How far the content of one partition can be resized, as measured on the disk (backend.move.resize.limits):
    the planner stops a shrink at ``minimum`` and refuses what the content's tool cannot do, with ``why``."""

    fs: str  # what blkid saw ("" unknown)
    grow: bool
    shrink: bool
    minimum: int | None = None  # bytes: the smallest the filesystem can shrink to (None: unknown)
    why: str = ""  # why it cannot be resized at all, or cannot shrink

    @property
    def tool(self) -> str:
        r, _ = resizer(self.fs)
        return r.tool if r is not None else ""

    def floor(self, sector_size: int) -> int:
        """The fewest sectors a shrink can reach (1 when nothing is known)."""
        return max(1, -(-(self.minimum or 0) // sector_size))


def limits(fs: str, minimum: int | None, missing: str = "") -> Limits:
    """What resizing content ``fs`` allows, given the smallest size its tool reported (``minimum``, bytes)
    and why its tool cannot run here (``missing``: the tool and its Debian package, or why the tool must not
    be given this filesystem)."""
    r, why = resizer(fs)
    if r is None:
        return Limits(fs, False, False, None, f"it holds {why}")
    if missing:
        return Limits(fs, False, False, None, missing)
    if not r.shrink:
        return Limits(fs, True, False, None, f"{r.why_not}: it can only grow")
    return Limits(fs, True, True, minimum)


def doing(fs: str, old: int, new: int) -> str:
    """What the content's tool does in a resize from ``old`` to ``new`` sectors, in the safe order."""
    tool = resizer(fs)[0]
    what = f"{tool.tool} resizes the {fs} filesystem" if tool is not None else "the content is resized"
    return (f"{what} first, then the table entry is rewritten" if new < old else
            f"the table entry is rewritten first, then {what}")
