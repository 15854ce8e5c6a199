"""Timing the labs of ``diskplan measure --lab`` (model.teach.lab): parallel sequential direct I/O (the fio job),
synced writes (pg_test_fsync), a metadata pattern (bonnie++'s creates), parallel 1 MiB direct writes (dd).

Like backend.iotime, it writes only inside the byte range it is given, from ``base``; choosing and confirming
that range is the caller's job. Python threads wait for the kernel outside the interpreter lock, so 32 threads
keep 32 operations in flight.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable

from diskplan.backend.iotime import open_direct, pattern_buffer
from diskplan.model.teach.lab import DD_BLOCK, DD_EACH, DD_WRITERS, SSD_DEPTH, SSD_JOBS, SSD_SLICE
from diskplan.model.units import KiB


def _threads(work: list[threading.Thread], stop: threading.Event) -> None:
    """Run ``work`` to its end. A Ctrl+C (raised in this thread only) sets ``stop`` and still waits for every
    thread before it goes on up: the caller then closes the descriptor they share, and a thread writing after
    that wrote to a closed number (a traceback each) or to whatever file reused it."""
    try:
        for t in work:
            t.start()
        for t in work:
            t.join()
    except BaseException:
        stop.set()
        while any(t.is_alive() for t in work):
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl+C: still wait (each stops within one I/O)
                for t in work:
                    if t.is_alive():
                        t.join()
        raise


def parallel_sequential(path: str, start: int, write: bool, seconds: float,
                        threads: int = SSD_JOBS * SSD_DEPTH, block: int = 4 * KiB) -> float:
    """IOPS of ``threads`` threads, each going sequentially through its own ``SSD_SLICE`` bytes from
    ``start`` (wrapping round) with one ``block`` O_DIRECT operation at a time, for ``seconds``."""
    fd = open_direct(path, write)
    counts = [0] * threads
    deadline = time.perf_counter() + seconds
    stop = threading.Event()

    def job(k: int) -> None:
        buf = pattern_buffer(block)
        view = memoryview(buf)
        lo, n = start + k * SSD_SLICE, 0
        try:
            while time.perf_counter() < deadline and not stop.is_set():
                at = lo + (n * block) % SSD_SLICE
                if write:
                    os.pwrite(fd, view, at)
                else:
                    os.preadv(fd, [view], at)
                n += 1
        finally:
            view.release()
            buf.close()
        counts[k] = n

    t0 = time.perf_counter()
    try:
        _threads([threading.Thread(target=job, args=(k,)) for k in range(threads)], stop)
        if write:
            os.fsync(fd)
    finally:
        os.close(fd)
    return sum(counts) / (time.perf_counter() - t0)


def _rate(fd: int, block: int, one: Callable[[int, memoryview], None], seconds: float) -> float:
    """Calls per second of ``one(fd, view)`` (``view``: ``block`` bytes of the pattern, page-aligned) for
    ``seconds``, one at a time; ``fd`` is closed afterwards."""
    buf = pattern_buffer(block)
    view = memoryview(buf)
    done = 0
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            one(fd, view)
            done += 1
    finally:
        view.release()
        buf.close()
        os.close(fd)
    return done / (time.perf_counter() - t0)


def synced(path: str, at: int, kind: str, seconds: float) -> float:
    """pg_test_fsync's lines, in operations per second: ``"4x4k"`` four 4 KiB writes opened O_DIRECT|O_SYNC,
    ``"16k+fdatasync"`` one 16 KiB O_DIRECT write then fdatasync; both rewrite the same bytes each time."""
    sync = os.O_SYNC if kind == "4x4k" else 0
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | getattr(os, "O_DIRECT", 0) | sync)

    def group(fd: int, view: memoryview) -> None:
        for k in range(4):
            os.pwrite(fd, view[4 * KiB * k:4 * KiB * (k + 1)], at + 4 * KiB * k)

    def flushed(fd: int, view: memoryview) -> None:
        os.pwrite(fd, view, at)
        os.fdatasync(fd)

    return _rate(fd, 16 * KiB, group if kind == "4x4k" else flushed, seconds)


def creates(path: str, start: int, size: int, seconds: float, seed: int = 26) -> float:
    """bonnie++-like creates per second: a 4 KiB inode-table write and a 4 KiB directory write at random 4 KiB
    slots of [start, start + size), then fdatasync (the journal commit), one create at a time."""
    rng = random.Random(seed)
    slots = size // (4 * KiB)

    def create(fd: int, view: memoryview) -> None:
        for _ in range(2):
            os.pwrite(fd, view, start + rng.randrange(slots) * 4 * KiB)
        os.fdatasync(fd)

    return _rate(open_direct(path, True), 4 * KiB, create, seconds)


def parallel_dd(path: str, start: int) -> float:
    """Bytes per second of ``DD_WRITERS`` threads each writing ``DD_EACH`` bytes in ``DD_BLOCK`` O_DIRECT
    writes (dd bs=1024k oflag=direct), each in its own stretch from ``start``."""
    fd = open_direct(path, True)
    stop = threading.Event()

    def writer(k: int) -> None:
        buf = pattern_buffer(DD_BLOCK)
        try:
            for n in range(DD_EACH // DD_BLOCK):
                if stop.is_set():
                    break
                os.pwrite(fd, buf, start + k * DD_EACH + n * DD_BLOCK)
        finally:
            buf.close()

    t0 = time.perf_counter()
    try:
        _threads([threading.Thread(target=writer, args=(k,)) for k in range(DD_WRITERS)], stop)
        os.fsync(fd)
    finally:
        os.close(fd)
    return DD_WRITERS * DD_EACH / (time.perf_counter() - t0)
