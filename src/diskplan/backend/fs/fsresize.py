"""Filesystems resized by their own tools (model.plan.fsresize says which tool, what it can do, in which
order), always on a private loop device over the partition's exact byte range (backend.fs.fscheck.view):
the tools see the same bytes whatever the kernel's partition list says, and the table is diskplan's
to rewrite (backend.move.moveentry), never a tool's.

- ext2/3/4: ``e2fsck -f -p`` (resize2fs insists on a fresh check), then ``resize2fs``, offline; the
  minimum from ``resize2fs -P`` (in blocks, times the block size ``dumpe2fs -h`` gives).
- XFS: grows only, ``xfs_growfs`` on a temporary mount in a private temporary directory.
- btrfs: ``btrfs filesystem resize`` on such a mount; the minimum from ``btrfs inspect-internal
  min-dev-size`` on a read-only one.
- NTFS: ``ntfsresize``; the minimum from ``ntfsresize --info``.
- FAT: libparted's FAT resizer (backend.fs.fatfs: fatresize's engine without fatresize's table write); the
  minimum from its resize constraint; a size that needs a FAT16/FAT32 conversion is refused.
- swap: ``mkswap`` again with the same UUID and label (a swap area holds nothing to keep).
- LVM physical volume: ``pvresize --setphysicalvolumesize``, restricted to the device it is given
  (``--devices``), nothing activated. On a disk it is given the kernel's own partition node, never a loop
  device (``ON_THE_NODE``): tested in the guest tier (tests/test_guest_lvmresize.py), this machine has no
  device-mapper.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator

from diskplan.backend.fs import fatfs
from diskplan.backend.fs.fscheck import Identity
from diskplan.model.plan.fsresize import MIN_SWAP, resizer

TIMEOUT = 3600.0  # a resize2fs of a large, full filesystem moves many blocks


class ResizeError(Exception):
    """A resize tool failed or is missing: one line for the user."""


def missing(fs: str) -> str:
    """Why ``fs`` cannot be resized on this machine ("" when its tool is here, or it has none)."""
    r, _ = resizer(fs)
    if r is None or shutil.which(r.tool):
        return ""
    if r.tool == fatfs.LIBRARY and fatfs.library():
        return ""
    return f"{r.tool} is needed to resize a {fs} filesystem (Debian package {r.package})"


# Content never shown to the system on a loop device of diskplan's on a disk: its tool gets the kernel's own
# partition node. A loop device showing an LVM physical volume is a new PV to udev, and LVM's rules
# (69-lvm.rules: a loop's "change" once it has a backing file) scan it and auto-activate its volume group on
# the loop, while pvresize writes; for LVM it would also be a second copy of the PV, with the same UUID.
ON_THE_NODE = frozenset({"LVM2_member"})
# What a shrink's minimum (and, for FAT, whether it can be resized at all) is read from, through a view;
# the rest is known without reading the content (FIXED_MINIMUM, or none).
MEASURED = frozenset({"ext2", "ext3", "ext4", "btrfs", "ntfs", "vfat"})
FIXED_MINIMUM = {"swap": MIN_SWAP}


def needs_view(fs: str, shrink: bool) -> bool:
    """Must the content be read through a view to say whether it can be resized (FAT) and, for a shrink,
    how far? Never for the others: no loop device is set up over an LVM member to measure nothing."""
    return fs == "vfat" or (shrink and fs in MEASURED)


def unresizable(loop: str, fs: str) -> str:
    """Why the filesystem on ``loop`` cannot be resized although its tool is here ("" when it can)."""
    return fatfs.unresizable(loop) if fs == "vfat" else ""


def _run(*cmd: str, ok: tuple[int, ...] = (0,), stdin: str | None = None) -> str:
    try:
        # a session of its own: the terminal's Ctrl+C must not kill a resize2fs half-way through a shrink
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, input=stdin, check=False,
                             start_new_session=True)
    except FileNotFoundError as exc:
        raise ResizeError(f"{cmd[0]} is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise ResizeError(f"{cmd[0]} gave no answer within {TIMEOUT:g} s") from exc
    if out.returncode not in ok:
        said = " ".join((out.stderr or out.stdout).split()[-40:])
        raise ResizeError(f"{' '.join(cmd[:2])} failed ({out.returncode}): {said}")
    return out.stdout + out.stderr


@contextlib.contextmanager
def mounted(loop: str, fs: str, *, read_only: bool = False) -> Iterator[str]:
    """``loop`` mounted on a private temporary directory for the time of a tool (XFS and btrfs resize
    only mounted); unmounted and removed afterwards."""
    where = tempfile.mkdtemp(prefix="diskplan-resize-")
    try:
        _run("mount", "-t", fs, "-o", "ro" if read_only else "rw", loop, where)
        try:
            yield where
        finally:
            _run("umount", where)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(where)


def _number(pattern: str, text: str, what: str) -> int:
    m = re.search(pattern, text)
    if m is None:
        raise ResizeError(f"could not read {what} from: {' '.join(text.split()[-20:])}")
    return int(m.group(1))


def _fat(step: Callable[..., int | None], *args: object) -> int | None:
    try:
        return step(*args)
    except fatfs.FatError as exc:
        raise ResizeError(str(exc)) from exc


def minimum(loop: str, fs: str) -> int | None:
    """The smallest size in bytes the filesystem on ``loop`` can shrink to; None when it cannot shrink
    or its tool does not say."""
    if fs in ("ext2", "ext3", "ext4"):
        blocks = _number(r"minimum size of the filesystem:\s*(\d+)", _run("resize2fs", "-P", loop), "resize2fs -P")
        size = _number(r"Block size:\s*(\d+)", _run("dumpe2fs", "-h", loop), "the block size")
        return blocks * size
    if fs == "btrfs":
        with mounted(loop, fs, read_only=True) as where:
            return _number(r"^(\d+) bytes", _run("btrfs", "inspect-internal", "min-dev-size", where), "min-dev-size")
    if fs == "ntfs":
        said = _run("ntfsresize", "--info", "--force", "--no-progress-bar", loop)
        return _number(r"resize at (\d+) bytes", said, "ntfsresize --info")
    if fs in FIXED_MINIMUM:
        return FIXED_MINIMUM[fs]
    if fs == "vfat":
        return _fat(fatfs.minimum, loop)
    return None


def resize(loop: str, ident: Identity, new: int) -> None:
    """Make the content of ``loop`` ``new`` bytes long (a grow: ``loop`` is already that long). Raises
    ResizeError."""
    fs = ident.fs
    if fs in ("ext2", "ext3", "ext4"):
        _run("e2fsck", "-f", "-p", loop, ok=(0, 1))  # 1: fixed something harmless (e.g. the last-check time)
        _run("resize2fs", loop, f"{new // 1024}K")
    elif fs == "xfs":
        with mounted(loop, fs) as where:
            _run("xfs_growfs", where)
    elif fs == "btrfs":
        with mounted(loop, fs) as where:
            # a grow fills the view ("max"), a shrink is relative: this project's kernel (6.18, btrfs-progs 6.2)
            # refused an absolute size with EINVAL where "max" and "-10M" worked on the same filesystem
            said = _run("btrfs", "filesystem", "show", "--raw", where)
            now = _number(r"devid\s+1 size (\d+)", said, "the btrfs device size")
            _run("btrfs", "filesystem", "resize", "max" if new >= now else f"-{now - new}", where)
    elif fs == "ntfs":
        _run("ntfsresize", "--force", "--no-progress-bar", "--size", str(new), loop, stdin="y\n")
    elif fs == "vfat":
        _fat(fatfs.resize, loop, new)
    elif fs == "swap":
        _run("mkswap", *(["-U", ident.uuid] if ident.uuid else []), *(["-L", ident.label] if ident.label else []),
             loop)
    elif fs == "LVM2_member":
        _run("pvresize", "--devices", loop, "--setphysicalvolumesize", f"{new}b", "--yes", loop)
    else:
        raise ResizeError(f"diskplan cannot resize a {fs or 'unknown'} filesystem")
