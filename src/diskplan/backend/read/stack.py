"""Read what sits at the start of each partition (and of a table-less disk): read-only, nothing activated.

The bytes go to ``model.stack.walk``; a header that does not hold together is left out of the stack (the
partition is still shown), never a traceback.
"""

from __future__ import annotations

import os
import struct

from diskplan.model.disk import Disk
from diskplan.model.extent import Role
from diskplan.model.stack import Layer, StackError, walk

WHOLE_DISK = 0  # the key of a table-less disk's own stack


def read_stacks(path: str, disk: Disk) -> dict[int, tuple[Layer, ...]]:
    """Partition number (or ``WHOLE_DISK``) -> its layers, for every live data partition of ``disk``."""
    ss = disk.geometry.logical
    spans: list[tuple[int, int, int]] = []
    if disk.table.label is None:
        spans.append((WHOLE_DISK, 0, disk.geometry.size_bytes))
    else:
        spans += [(p.number, p.start * ss, p.size * ss) for p in disk.table.live
                  if p.role is not Role.EXTENDED and p.end <= disk.geometry.last_lba]
    out: dict[int, tuple[Layer, ...]] = {}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return out
    try:
        for number, start, size in spans:

            def read(off: int, n: int, start: int = start, size: int = size) -> bytes:
                n = max(0, min(n, size - off))
                return os.pread(fd, n, start + off) if n and off >= 0 else b""

            try:
                layers = walk(read, size)
            except (StackError, OSError, struct.error):  # a header that does not hold together
                continue
            if layers:
                out[number] = layers
    finally:
        os.close(fd)
    return out

