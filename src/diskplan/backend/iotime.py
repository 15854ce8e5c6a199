"""Timing small direct-I/O operations at chosen offsets (``diskplan measure``): the only code that writes
test data. It writes inside the byte range it is given and nowhere else; choosing that range (free space,
a scratch file) and confirming it is the caller's job (cli/measure.py).

Rounds are interleaved: each round runs every offset once, in an order rotated from the last round's,
so a disk that warms up, a cache that fills or a neighbour's burst of I/O weighs on every offset alike.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from collections.abc import Callable, Sequence

from diskplan.backend.lock import whole_disk
from diskplan.backend.write import ConfirmedByName, half_moved
from diskplan.model.disk import Disk
from diskplan.model.measure import Offset, Result, Test
from diskplan.model.units import MiB
from diskplan.model.value import value

# What the write tests write: recognisable in a hex dump of the disk afterwards.
PATTERN = b"diskplan measure test data. "


@value
class Ask(ConfirmedByName):
    """The confirmation of a measurement's writes (backend.write.Asked): the exact byte range, the word."""

    kind: str
    target: str
    first: int
    end: int
    refusals: tuple[str, ...] = ()

    @property
    def prompt(self) -> str:
        return f"Type {self.confirm_word} to write test data to bytes {self.first:,}-{self.end - 1:,} of {self.target}"


def measure_refusals(target: str, disk: Disk, placed: tuple[int, int] | None, need: int) -> list[str]:
    """Why test data may not be written to ``target`` (its free space, ``placed``), before asking who uses it."""
    out = []
    if whole_disk(target) != target:
        out.append(f"{target} is a partition: measure writes only into a disk's free space (give "
                   f"{whole_disk(target)}), or use --scratch FILE or --read-only")
    if disk.table.label is None:
        out.append(f"{target} has no partition table: nothing says which bytes hold nothing "
                   "(use --scratch FILE or --read-only)")
    elif disk.table.read_only:
        out.append(f"{target}: {disk.table.read_only}")
    elif placed is None:
        out.append(f"{target} has no free space of {need // MiB} MiB from a 1 MiB boundary outside its "
                   "partitions and the table's metadata (use --scratch FILE or --read-only)")
    # a half-moved partition's entry is hidden: its range looks free in the table, and is not
    return out + half_moved(target, disk.geometry.size_bytes)


class DirectIOUnsupported(OSError):
    """The file's filesystem refuses O_DIRECT (tmpfs): a measurement through the page cache would time memory."""


def open_direct(path: str, write: bool) -> int:
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_CLOEXEC | getattr(os, "O_DIRECT", 0)
    try:
        return os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise DirectIOUnsupported(errno.EINVAL, f"{path}: its filesystem does not support direct I/O") from exc
        raise


def _buffer(size: int) -> mmap.mmap:
    """Page-aligned memory, as O_DIRECT needs, filled with the pattern."""
    buf = mmap.mmap(-1, size)
    buf.write((PATTERN * (size // len(PATTERN) + 1))[:size])
    return buf


def _time_one(fd: int, test: Test, start: int, count: int, buf: mmap.mmap) -> float:
    """Operations per second for ``count`` operations of ``test.block`` bytes from byte ``start``."""
    view = memoryview(buf)[: test.block]
    t0 = time.perf_counter()
    try:
        for k in range(count):
            at = start + k * test.block
            if test.write:
                os.pwrite(fd, view, at)
                if test.flush:
                    os.fdatasync(fd)
            else:
                os.preadv(fd, [view], at)
    finally:
        view.release()
    elapsed = time.perf_counter() - t0
    return count / elapsed if elapsed > 0 else float("inf")


def measure(
    path: str,
    base: int,
    tests: Sequence[Test],
    offsets: Sequence[Offset],
    rounds: int,
    count: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Result]:
    """Time every test at every offset from ``base``, ``rounds`` times, interleaved."""
    write = any(t.write for t in tests)
    fd = open_direct(path, write)
    buf = _buffer(max(t.block for t in tests))
    samples: dict[tuple[int, int], list[float]] = {}
    try:
        for r in range(rounds):
            for ti, test in enumerate(tests):
                order = [*range(len(offsets))][r % len(offsets):] + [*range(len(offsets))][: r % len(offsets)]
                for oi in order:
                    iops = _time_one(fd, test, base + offsets[oi].delta, count, buf)
                    samples.setdefault((ti, oi), []).append(iops)
            if progress:
                progress(r + 1, rounds)
        if write:
            os.fsync(fd)
    finally:
        os.close(fd)
        buf.close()
    return [Result(t, o, tuple(samples[(ti, oi)])) for ti, t in enumerate(tests) for oi, o in enumerate(offsets)]
