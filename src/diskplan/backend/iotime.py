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
import stat
import time
from collections.abc import Callable, Sequence

from diskplan.backend.write.lock import whole_disk
from diskplan.backend.write.steps import ConfirmedByName, half_moved, read_only_reason
from diskplan.model.disk import Disk
from diskplan.model.teach.measure import Offset, Result, Test
from diskplan.model.units import MiB
from diskplan.model.value import value

# What the write tests write: recognisable in a hex dump of the disk afterwards.
PATTERN = b"diskplan measure test data. "
# A scratch file is filled in pieces of this size (never all at once: a large --count asked 16 GB of memory).
FILL_CHUNK = MiB


@value
class Ask(ConfirmedByName):
    """The confirmation of a measurement's writes (backend.write.steps.Asked): the exact byte range, the word."""

    kind: str
    target: str
    first: int
    end: int
    refusals: tuple[str, ...] = ()

    @property
    def prompt(self) -> str:
        return f"Type {self.confirm_word} to write test data to bytes {self.first:,}-{self.end - 1:,} of {self.target}"


def measure_refusals(target: str, disk: Disk, placed: tuple[int, int] | None, need: int) -> list[str]:
    """Why test data may not be written to ``target`` (its free space, ``placed``), before asking who uses it:
    also a device the kernel keeps read-only (said before the confirmation, not as a failed write after it)
    and an unfinished data move, whose partition's entry is hidden so its bytes look free."""
    out = []
    ro = read_only_reason(target)
    if ro:
        out.append(ro)
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


class Scratch:
    """The scratch file, made ready for a measurement: created (``O_EXCL``: a file that appears meanwhile is
    not overwritten) or an empty one opened without following links, filled with ``need`` bytes in 1 MiB
    pieces and synced, so the timed writes allocate nothing. ``close`` removes a file it created and empties
    one it found empty, as it was."""

    def __init__(self, path: str, need: int) -> None:
        self.path, self.created = path, False
        flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
            self.created = True
        except FileExistsError:
            fd = os.open(path, flags)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size:
                os.close(fd)
                raise FileExistsError(errno.EEXIST, f"{path} changed: it is no longer a new or empty file") from None
        try:
            zeros = bytes(min(FILL_CHUNK, need))
            done = 0
            while done < need:
                done += os.write(fd, zeros[: need - done])
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.close()
            raise
        os.close(fd)

    def close(self) -> None:
        try:
            if self.created:
                os.unlink(self.path)
            else:
                os.truncate(self.path, 0)
        except OSError:
            pass


class Interrupted(Exception):
    """Ctrl+C during a measurement: ``written`` says whether any test data had been written by then."""

    def __init__(self, written: bool, rounds_done: int) -> None:
        super().__init__("interrupted")
        self.written, self.rounds_done = written, rounds_done


def hole_bytes(path: str, lo: int, hi: int) -> int:
    """How many bytes of ``path``'s [lo, hi) are holes (never written: a read returns zeros without touching any
    disk), by SEEK_DATA/SEEK_HOLE; 0 when the file cannot say (or is not a regular file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0
        holes, at = 0, lo
        while at < hi:
            try:
                data = os.lseek(fd, at, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after ``at``
                return holes + hi - at
            holes += max(0, min(data, hi) - at)
            if data >= hi:
                break
            at = os.lseek(fd, data, os.SEEK_HOLE)
        return holes
    finally:
        os.close(fd)


def holes_note(backing: str, shift: int, ranges: Sequence[tuple[int, int]]) -> str:
    """The honest line when the bytes read (``ranges``, each [start, end), ``shift`` bytes on in ``backing``:
    an image, or the file a loop device reads) are holes; "" when none (or no file to ask)."""
    if not backing:
        return ""
    holes = sum(hole_bytes(backing, shift + lo, shift + hi) for lo, hi in ranges)
    if not holes:
        return ""
    read = sum(hi - lo for lo, hi in ranges)
    return (f"{holes:,} of the {read:,} B read are holes of {backing} (never written): the kernel returns zeros "
            "for them without reading any disk, so the read numbers there measure memory, not a device.")


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


def pattern_buffer(size: int) -> mmap.mmap:
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
    buf = pattern_buffer(max(t.block for t in tests))
    samples: dict[tuple[int, int], list[float]] = {}
    r = 0
    written = False
    try:
        for r in range(rounds):
            for ti, test in enumerate(tests):
                order = [*range(len(offsets))][r % len(offsets):] + [*range(len(offsets))][: r % len(offsets)]
                for oi in order:
                    written = written or test.write  # from the first pwrite on, something may be on the disk
                    iops = _time_one(fd, test, base + offsets[oi].delta, count, buf)
                    samples.setdefault((ti, oi), []).append(iops)
            if progress:
                progress(r + 1, rounds)
        if write:
            os.fsync(fd)
    except KeyboardInterrupt:
        raise Interrupted(written, r) from None
    finally:
        os.close(fd)
        buf.close()
    return [Result(t, o, tuple(samples[(ti, oi)])) for ti, t in enumerate(tests) for oi, o in enumerate(offsets)]
