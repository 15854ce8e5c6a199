"""What a path is, said without opening it: a FIFO opened to read waits for a writer, a tape rewinds, a
character device like /dev/zero never ends. Targets and plans are checked with ``stat`` first."""

from __future__ import annotations

import os
import stat

KINDS = ((stat.S_ISREG, ""), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, for a message: "a FIFO (named pipe)"..., "" for a regular file."""
    return next((what for test, what in KINDS if test(mode)), "not a regular file")


def target_problem(path: str) -> str | None:
    """Why ``path`` cannot be a disk or an image file (one line), or None: checked with stat, not opened."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{path}: no such file or device"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not (stat.S_ISREG(mode) or stat.S_ISBLK(mode)):
        return f"{path} is {file_kind(mode)}, not a disk or an image file"
    if not os.access(path, os.R_OK):
        return f"{path}: permission denied (reading a disk usually needs root)"
    return None
