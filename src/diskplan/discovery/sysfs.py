"""The kernel's small text files (sysfs, procfs): read one, find a block device's sysfs directory."""

from __future__ import annotations

import os
import stat


def read(path: str) -> str | None:
    """The file's text, stripped; None when it cannot be read (absent, a device gone, no permission)."""
    try:
        # names the kernel prints as they are (a loop's backing file, a mount point, a process name) may hold
        # bytes that are not UTF-8: they read as replacement characters, so one odd name cannot hide every disk
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def read_int(path: str) -> int:
    """The file's number; 0 when it cannot be read or holds no number (sysfs's "not said")."""
    try:
        return int(read(path) or 0)
    except ValueError:
        return 0


def sysfs_dir(path: str, sys_root: str = "/sys") -> str | None:
    """The sysfs directory of the block device at ``path``, or None for a regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    d = f"{sys_root}/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    return os.path.realpath(d) if os.path.isdir(d) else None
