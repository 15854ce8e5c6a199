"""What a path is, said without opening it: a FIFO opened to read waits for a writer, a tape rewinds, a
character device like /dev/zero never ends. Targets and plans are checked with ``stat`` first."""

from __future__ import annotations

import os
import stat

from diskplan.model.safetext import safe

KINDS = ((stat.S_ISREG, ""), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, for a message: "a FIFO (named pipe)"..., "" for a regular file."""
    return next((what for test, what in KINDS if test(mode)), "not a regular file")


def not_a_disk(path: str, mode: int) -> str:
    """Why ``path``, a file of ``mode``, cannot be a disk or an image file (one line), "" when it can."""
    if stat.S_ISREG(mode) or stat.S_ISBLK(mode):
        return ""
    return f"{path} is {file_kind(mode)}, not a disk or an image file"


def target_problem(path: str) -> str | None:
    """Why ``path`` cannot be a disk or an image file (one line), or None: checked with stat, not opened."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{path}: no such file or device"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if problem := not_a_disk(path, mode):
        return problem
    if not os.access(path, os.R_OK):
        return f"{path}: permission denied (reading a disk usually needs root)"
    return None


def write_refusals(path: str, sector_size: int) -> tuple[str, ...]:
    """Why a write must not start on a target that could be read, each in one line (none: it may): a path
    the backup cannot record, an image that ends in part of a sector (its size would no longer match the
    sectors that were read, and the write would fail after the backup)."""
    out = []
    if not path.isprintable():
        out.append(f"the path {safe(path)} holds a line break or another control character, which the backup "
                   "cannot record (rename the image, or give a symlink to it)")
    try:
        st = os.stat(path)
    except OSError:
        return tuple(out)
    extra = st.st_size % sector_size if stat.S_ISREG(st.st_mode) else 0
    if extra:
        out.append(f"{safe(path)} holds {st.st_size} bytes: the last {extra} are no whole {sector_size}-byte "
                   f"sector, and diskplan writes only to images of whole sectors (make its size a multiple of "
                   f"{sector_size} first)")
    return tuple(out)


def block_sysdir(path: str, sys_root: str = "/sys") -> str | None:
    """The sysfs directory of the block device at ``path`` (a disk's or a partition's), or None when
    ``path`` is not a block device (an image file) or cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    return os.path.realpath(f"{sys_root}/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
