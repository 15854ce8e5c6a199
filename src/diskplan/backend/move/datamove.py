"""The copier: runs a model.plan.move schedule on a device, journalling as it goes, and reads it back.

Per chunk k (the order is what makes a crash at any point resumable, see model.plan.move):

1. read chunk k's source (from the device; for a chunk whose write had begun before a crash, the
   overlapping old bytes come from the journal's slot);
2. a chunk that overwrites part of its own source (small shifts only): hash it, save those old bytes
   to the slot, fsync, append ``R k <digest> <saved digest>`` (with the written records still owed),
   fsync, then write it — it is a group of its own;
3. any other chunk: write it while a thread hashes it; ``R k <digest>`` and ``W k`` wait for the end
   of its group (model.plan.move ``Schedule.groups``);
4. at the end of a group, fdatasync the device; its records are appended and fsynced before the next
   write that could overwrite one of its sources (at once, unless the next chunk's own read record
   carries them).

On resume, chunk k is read again and its digest must equal the recorded one (else the disk changed
under us and the move stops). A failed read or write is tried again a few times (``RETRIES``; a failed
flush never is: ``Device.sync``); a persistent one stops the move with the first sector that fails (found
by halving the failed request), and the journal then says exactly which chunk to redo. A stop request
(Ctrl+C) is honoured between chunks.

Direct I/O: the device is opened with O_DIRECT and read into page-aligned anonymous memory (mmap), so
large chunks go to the disk without the page cache; where O_DIRECT is refused (tmpfs) it falls back to
buffered I/O with fdatasync.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import stat
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from diskplan.backend.faults import fault
from diskplan.backend.raw import look
from diskplan.model.plan.move import BATCH_BYTES, Read, Resume, Schedule, Step, Written

Progress = Callable[[int, int, str], None]  # (bytes done, bytes in all, phase)
RETRIES = 3  # an I/O error is tried again this many times before it stops the move (resumable)
RETRY_PAUSE = 0.2  # seconds before the first retry; each next one waits one more of these
TRANSIENT = {errno.EIO, errno.ETIMEDOUT, errno.EAGAIN, errno.EBUSY}  # worth asking again; others are not


class MoveIOError(Exception):
    """An I/O error at ``sector``: the move stopped in a resumable state."""

    def __init__(self, message: str, sector: int) -> None:
        super().__init__(message)
        self.sector = sector


class SourceChanged(Exception):
    """A chunk read again does not match the digest recorded when it was first read."""


class Stopped(Exception):
    """The move stopped at a chunk boundary on request: chunks ``0..done-1`` are written."""

    def __init__(self, done: int) -> None:
        super().__init__(f"stopped before chunk {done}")
        self.done = done


class Medium(Protocol):
    """Where the sectors live: a device (``Device``) or, in tests, memory."""

    def read(self, lba: int, count: int, buffer: int = 0) -> memoryview:
        """Into buffer 0 or 1 (the read-back reads the next chunk into one while the other is hashed)."""
        ...

    def write(self, lba: int, data: memoryview) -> None: ...

    def sync(self) -> None: ...


class Log(Protocol):
    """The journal as the copier uses it (backend.move.movejournal.Journal)."""

    def append(self, *items: Read | Written | str) -> None: ...

    def save(self, index: int, data: bytes | memoryview) -> None: ...

    def saved(self, index: int, nbytes: int) -> bytes: ...


def _whole(io: Callable[[memoryview, int], int], view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        n = io(view[done:], offset + done)
        if n == 0:
            raise OSError(errno.EIO, "short transfer")
        done += n


def digest(data: bytes | memoryview) -> str:
    """CRC-32 of a chunk (8 hex digits). Not SHA-256: on this project's 2-core test machine SHA-256 ran
    at 590 MiB/s under load, slower than the disk, and the copy waited for it; CRC-32 runs at about
    three times that and, like the checksums of ZFS (fletcher4) and btrfs (crc32c), catches torn,
    misdirected and bit-rotted chunks — what it is here for — to one chance in 2^32 per 8 MiB chunk.
    zlib releases the GIL, so the read-ahead thread hashes while the main thread writes."""
    return f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"


class Device:
    """A disk or image opened for the move: O_DIRECT where the kernel allows it, aligned buffers."""

    def __init__(self, path: str, sector_size: int, buffer_bytes: int, *, write: bool = True) -> None:
        self.path = path
        self.sector_size = sector_size
        flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_CLOEXEC
        if write and stat.S_ISBLK(os.stat(path).st_mode):
            flags |= os.O_EXCL  # the kernel refuses while a partition is mounted or held
        try:
            self.fd = os.open(path, flags | os.O_DIRECT)
            self.direct = True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self.fd = os.open(path, flags)  # tmpfs and a few others refuse O_DIRECT
            self.direct = False
        # two page-aligned buffers, as O_DIRECT needs: the read-back hashes one while it reads into the other
        self.buffers = [mmap.mmap(-1, max(buffer_bytes, mmap.PAGESIZE)) for _ in range(2)]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(self.fd)
        for b in self.buffers:
            # A view of a buffer may outlive the move (in the traceback of the error that ended it): the memory
            # is then freed with the last view, and the error that matters is not masked by a BufferError.
            with contextlib.suppress(BufferError):
                b.close()

    def _buffered(self) -> None:
        """Leave O_DIRECT (an image on a filesystem whose blocks are larger than its sectors refuses
        sector-sized direct I/O with EINVAL)."""
        flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
        fcntl.fcntl(self.fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)
        self.direct = False

    def read(self, lba: int, count: int, buffer: int = 0) -> memoryview:
        view = memoryview(self.buffers[buffer])[: count * self.sector_size]
        self._transfer("reading", lba, view, self._pread)
        return view

    def write(self, lba: int, data: memoryview) -> None:
        look.forget()  # a write: what a look judged of this disk is judged again (backend.raw.look)
        if os.environ.get("DISKPLAN_MOVE_KILL", "").startswith("torn:") and len(data) > self.sector_size:
            half = len(data) // 2 // self.sector_size * self.sector_size  # tests: the first half alone lands
            os.pwrite(self.fd, data[:half], lba * self.sector_size)
            os.fdatasync(self.fd)
            fault("torn")
        self._transfer("writing", lba, data, self._pwrite)
        fault("write")

    def _pread(self, view: memoryview, offset: int) -> int:
        return os.preadv(self.fd, [view], offset)

    def _pwrite(self, view: memoryview, offset: int) -> int:
        return os.pwritev(self.fd, [view], offset)

    def _transfer(self, verb: str, lba: int, view: memoryview, io: Callable[[memoryview, int], int]) -> None:
        """All of ``view`` at ``lba``. An I/O error is tried again (``RETRIES`` times, a pause before each: a
        cable, a controller reset or a busy USB bridge often answers the next time); a persistent one is
        narrowed down to the first sector that fails (the kernel fails the whole request, so the error's
        place within an 8 MiB chunk is only found by asking for less) and raised as MoveIOError there."""
        done = 0
        while done < len(view):
            try:
                n = self._retried(io, view[done:], lba * self.sector_size + done)
            except OSError as exc:
                if exc.errno == errno.EINVAL and self.direct:
                    self._buffered()
                    continue
                at = self._first_failing(io, lba + done // self.sector_size, view[done:])
                raise MoveIOError(f"{verb} sector {at} of {self.path} failed: {exc.strerror} (tried "
                                  f"{RETRIES + 1} times)", at) from exc
            if n == 0:
                at = lba + done // self.sector_size
                raise MoveIOError(f"{self.path} ended at sector {at} while {verb}", at)
            done += n

    @staticmethod
    def _retried(io: Callable[[memoryview, int], int], view: memoryview, offset: int) -> int:
        for attempt in range(RETRIES + 1):
            try:
                return io(view, offset)
            except OSError as exc:
                if exc.errno not in TRANSIENT or attempt == RETRIES:
                    raise
                time.sleep(RETRY_PAUSE * (attempt + 1))
        raise AssertionError("unreachable")

    def _first_failing(self, io: Callable[[memoryview, int], int], lba: int, view: memoryview) -> int:
        """The first sector of ``view`` (at ``lba``) whose transfer fails: halves tried in turn, each once
        (writing the chunk's own bytes again is harmless: the chunk is not recorded as written)."""
        ss = self.sector_size
        lo, hi = 0, len(view) // ss  # the first failing sector is in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                _whole(io, view[lo * ss : mid * ss], (lba + lo) * ss)
                lo = mid
            except OSError:
                hi = mid
        return lba + lo

    def sync(self) -> None:
        """Never tried again: a failed flush may have dropped the data it was flushing (the kernel marks the
        pages clean, a disk may lose its cache), and a second fdatasync then succeeds with nothing left to
        flush. The group stays unrecorded, so resume writes its chunks again."""
        try:
            os.fdatasync(self.fd)
        except OSError as exc:
            raise MoveIOError(f"syncing {self.path} failed: {exc.strerror}", -1) from exc
        fault("synced")


def copy(
    plan: Schedule,
    medium: Medium,
    log: Log,
    at: Resume,
    sector_size: int,
    *,
    stop: Callable[[], bool] = lambda: False,
    progress: Progress | None = None,
    batch_bytes: int = BATCH_BYTES,
) -> None:
    """Copy every chunk from ``at.next`` on, group by group (``Schedule.groups``: the device is synced and
    the group's chunks recorded as written before any write that could destroy one of their sources).
    Raises Stopped, MoveIOError or SourceChanged with the journal consistent: resume carries on from it.

    A clean chunk (one that saves no old bytes) is hashed in a thread while it is written: both release
    the GIL, so the checksum costs no time (it was a fifth of the copy done in turn). Its read record is
    appended with its written record, after the sync: a chunk not recorded as written is redone from
    its intact source anyway. Reading the next chunk in that thread during the write was measured slower
    on a loop device (1 GiB: 1.9-2.15 s against 1.48-1.56 s; the two requests compete for the disk, and
    on a hard disk they would seek against each other). Measured again for issue 23 (scripts/bench_move.py,
    the old and new code interleaved with dd, 6 rounds each): a reader thread one chunk ahead that also
    hashes, copy 0.83x dd against 0.91x in turn, slower in 5 of 6 rounds; 4 MiB chunks as dd's, 0.91x against
    0.89x, the whole move 0.51x against 0.52x (no difference beyond the noise). On that machine the copy
    is bound by the disk's reads (1 GiB read in 1.1 s, written in 0.6 s, fdatasync and the journal's
    appends under 5 ms in all), so only overlapping reads with writes could win, and its virtio disk
    barely overlaps them."""
    total = plan.length * sector_size
    batch = max(1, batch_bytes // max(1, plan.chunk * sector_size))
    carry: list[Read | Written] = []  # records of a synced group, appended before the next write needs them
    if progress:
        progress(min(total, at.next * plan.chunk * sector_size), total, "copying")
    with ThreadPoolExecutor(1, thread_name_prefix="diskplan-hash") as pool:
        for group in plan.groups(at.next, batch):
            done: list[Read | Written] = []
            for k in group:
                if stop():
                    if done:
                        medium.sync()
                    if carry or done:
                        log.append(*carry, *done)
                    raise Stopped(k)
                step = plan.step(k)
                data = medium.read(step.src, step.count)
                pending = at.pending if at.pending is not None and at.pending.index == k else None
                if pending is None and step.saved is None:
                    if carry:
                        log.append(*carry)
                        carry = []
                    fault("read")
                    hashed = pool.submit(digest, data)
                    medium.write(step.dst, data)
                    done += [Read(k, hashed.result()), Written(k)]
                else:
                    _write_recorded(step, data, pending, medium, log, carry, sector_size)
                    carry = []
                    done.append(Written(k))
                if progress:
                    progress(min(total, (k + 1) * plan.chunk * sector_size), total, "copying")
            medium.sync()
            carry += done
    if carry:
        log.append(*carry)


def _write_recorded(
    step: Step, data: memoryview, pending: Read | None, medium: Medium, log: Log, carry: list[Read | Written],
    sector_size: int,
) -> None:
    """Write a chunk whose read record must be durable first: one that saves the old bytes its own write
    overwrites, or the chunk in flight at a crash (checked against what it read then)."""
    k, saved = step.index, step.saved
    if pending is not None and pending.saved and saved is not None:
        lo = (saved.start - step.src) * sector_size
        old = log.saved(k, saved.size * sector_size)
        if digest(old) == pending.saved:
            data[lo : lo + len(old)] = old
        elif digest(data) != pending.digest:  # a damaged slot is no loss while the source is still whole
            raise SourceChanged(f"the journal's saved bytes of chunk {k} fail their checksum, and its source "
                                f"sectors {step.src}..{step.src + step.count - 1} were already partly overwritten")
    now = digest(data)
    if pending is not None:
        if now != pending.digest:
            raise SourceChanged(
                f"sectors {step.src}..{step.src + step.count - 1} no longer hold what was read before the "
                "interruption: something else wrote to the disk"
            )
        if carry:
            log.append(*carry)
    else:
        kept = ""
        if saved is not None:
            lo = (saved.start - step.src) * sector_size
            part = data[lo : lo + saved.size * sector_size]
            log.save(k, part)
            kept = digest(part)
        log.append(*carry, Read(k, now, kept))
    fault("read")
    medium.write(step.dst, data)


def mismatched(
    plan: Schedule, medium: Medium, digests: dict[int, str], sector_size: int, progress: Progress | None = None
) -> list[int]:
    """Read every chunk back at its destination and compare with the digest of its source as first
    read: the chunks that differ (or have no digest; empty: the destination holds exactly the old
    content). The next chunk is read while this one is hashed.

    A separate pass after the copy, not a read-back of each synced group while the next ones copy (a group's
    destination is never written again once synced, so that would be as sound): tried for issue 23, it took
    the whole move from 0.53x dd to 0.51x (6 interleaved rounds) and the copy phase from 0.88x to 0.60x,
    because the read-back's reads and the copy's share the disk's read bandwidth; the pass costs a read
    of every byte either way. A bare loop there (pread, pwrite and a sync per 256 MiB, then pread of every
    byte back; no checksum, no journal) took 2.77 s for 1 GiB against dd's 1.42 s (0.51x, 6 interleaved
    rounds), and reading a synced chunk back during each write 2.74 s: on that disk the read-back alone
    keeps a whole move under the bench's 0.65x."""
    bad = []
    total = plan.length * sector_size
    if progress:
        progress(0, total, "verifying")

    def fetch(k: int) -> memoryview:
        step = plan.step(k)
        return medium.read(step.dst, step.count, k % 2)

    with ThreadPoolExecutor(1, thread_name_prefix="diskplan-verify") as pool:
        ahead = pool.submit(fetch, 0) if plan.count else None
        for step in plan.steps():
            assert ahead is not None
            data = ahead.result()
            ahead = pool.submit(fetch, step.index + 1) if step.index + 1 < plan.count else None
            if digests.get(step.index) != digest(data):
                bad.append(step.index)
            if progress:
                progress(min(total, (step.index + 1) * plan.chunk * sector_size), total, "verifying")
    return bad


def recopy(plan: Schedule, medium: Medium, digests: dict[int, str], bad: list[int], sector_size: int) -> list[str]:
    """Copy the chunks that read back wrong again, from their source where it still gives the digest
    recorded (a move never writes over a source it has not read yet, so re-copying overwrites nothing still
    needed), sync, and read them back: the chunks still wrong, one line each (empty: all mended). Not
    journalled: after a crash the read-back finds them again and this runs again."""
    out = []
    mended = []
    for k in bad:
        step = plan.step(k)
        data = medium.read(step.src, step.count)
        if k in digests and digest(data) == digests[k]:
            medium.write(step.dst, data)
            mended.append(k)
        else:
            out.append(f"sectors {step.dst}..{step.dest.end} differ from the source read before the move, and "
                       f"its sectors {step.src}..{step.source.end} no longer hold it")
    if mended:
        medium.sync()
    for k in mended:
        step = plan.step(k)
        if digest(medium.read(step.dst, step.count)) != digests[k]:
            out.append(f"sectors {step.dst}..{step.dest.end} still differ from the source after a second copy: "
                       "the disk does not keep what is written there")
    return out


def verify(
    plan: Schedule, medium: Medium, digests: dict[int, str], sector_size: int, progress: Progress | None = None
) -> list[str]:
    """``mismatched``, one line per chunk that differs."""
    out = []
    for k in mismatched(plan, medium, digests, sector_size, progress):
        step = plan.step(k)
        out.append(f"chunk {k} has no recorded checksum" if k not in digests else
                   f"sectors {step.dst}..{step.dest.end} differ from the source read before the move")
    return out
