"""A second, real process that holds a disk or an image the way other programs do (no tests here):
a BSD flock (partitioners, `flock`, another diskplan), a POSIX or OFD lock (QEMU), an exclusive open
(mount, md, dm-crypt, or a program claiming the device)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

_HOLD = r"""
import fcntl, os, struct, sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "excl":
    fd = os.open(path, os.O_RDONLY | os.O_EXCL)
else:
    fd = os.open(path, os.O_RDWR)
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    elif kind == "posix":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 100)
    elif kind == "ofd":  # what QEMU takes on an image: a shared lock on a byte from offset 100
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 100, 1, 0))
print("ready", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def holding(kind: str, path: str | os.PathLike[str]) -> Iterator[int]:
    """Another process holds ``path`` (``kind``: flock, posix, ofd or excl) until the block ends: its pid."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, kind, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        ready = proc.stdout.readline().strip()
        assert ready == "ready", proc.stderr.read() if proc.stderr else ""
        yield proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
