"""Watch device nodes for what systemd-udevd watches: a close after an open for writing (inotify
IN_CLOSE_WRITE), on which udevd probes the disk again and LVM may auto-activate what it finds."""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

IN_CLOSE_WRITE = 0x8
IN_NONBLOCK = os.O_NONBLOCK


@contextmanager
def closed_after_writing(paths: Sequence[str]) -> Iterator[list[str]]:
    """Yields a list that, when the block ends, holds each path closed after an open for writing."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(IN_NONBLOCK)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    watches = {}
    try:
        for path in paths:
            wd = libc.inotify_add_watch(fd, path.encode(), IN_CLOSE_WRITE)
            assert wd >= 0, f"{path}: {os.strerror(ctypes.get_errno())}"
            watches[wd] = path
        seen: list[str] = []
        yield seen
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            data = b""
        while data:
            wd, _mask, _cookie, length = struct.unpack_from("iIII", data)
            seen.append(watches[wd])
            data = data[16 + length:]
    finally:
        os.close(fd)
