"""``diskplan measure TARGET``: time small direct-I/O writes and reads at an aligned offset and at misaligned
ones, as the fio and pg_test_fsync experiments did, on your own disk.

Writes only into the table's free space (never a partition, never the table's metadata) or into a scratch
file (``--scratch FILE``); shows the exact byte range; writes nothing without ``--yes`` (and, at a terminal,
a block device's name typed); holds the disk's write lock and refuses a disk in use. ``--read-only`` times
reads only, anywhere.

Exit status (model.exitstatus): 0 measured, or shown without --yes; 1 refused or not confirmed (nothing
written); 2 the target could not be read, or (--read-only) a read failed; 3 the I/O failed while test data was
being written.
"""

from __future__ import annotations

import argparse
import os
import stat

from diskplan.backend.iotime import Ask, DirectIOUnsupported, measure, measure_refusals
from diskplan.backend.lock import LockBusy, take
from diskplan.backend.write import half_moved
from diskplan.cli.confirm import before_writing, confirm
from diskplan.cli.options import TargetError, open_target
from diskplan.cli.textout import Out, consoles
from diskplan.discovery.devicekind import device_kind
from diskplan.discovery.inuse import culprits
from diskplan.model.exitstatus import WRITES, Exit
from diskplan.model.measure import (
    READ_TESTS,
    WRITE_TESTS,
    Result,
    Test,
    byte_range,
    free_range,
    offsets,
    report,
    span,
)
from diskplan.model.units import MiB


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan measure",
        description="Time 4 KiB direct writes (like fio) and 16 KiB writes with a flush (like pg_test_fsync) "
        "at an aligned offset and at misaligned ones, and the same reads.",
        epilog=WRITES,
    )
    p.add_argument("target", nargs="?", help="block device or image file (its free space is written)")
    p.add_argument("--scratch", metavar="FILE", help="write into this file instead (created if missing, "
                   "removed afterwards if it was)")
    p.add_argument("--read-only", action="store_true", help="time reads only, anywhere; nothing is written")
    p.add_argument("--yes", action="store_true", help="write (without it, only show where it would write)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--count", type=int, default=64, help="operations per offset and round (default 64)")
    return p


def _report(console: Out, results: list[Result], filename: str, base: int, count: int) -> None:
    for row in report(results, filename, base, count):
        console.print(row.line, style="bold" if row.heading else "")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    if bool(args.target) == bool(args.scratch):
        err.print("diskplan measure: give a TARGET or --scratch FILE (one of them)")
        return 2
    if args.rounds < 1 or args.count < 1:
        err.print("diskplan measure: --rounds and --count must be at least 1")
        return 2
    path = args.scratch or args.target
    created = False
    if args.scratch:
        logical = 512
        need = span(logical, args.count)
        placed: tuple[int, int] | None = (0, need)
        kind = "file"
        if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
            err.print(f"diskplan measure: refused: {path} is not a regular file")
            return 1
        refusals: list[str] = []
    else:
        try:
            disk = open_target(path)
        except TargetError as exc:
            err.print(f"diskplan measure: {exc}")
            return 2
        logical = disk.geometry.logical
        need = span(logical, args.count)
        kind = "block" if disk.kind == "block" else "file"
        if args.read_only:
            placed = free_range(disk, need) or (MiB, MiB + need)
            if placed[1] > disk.geometry.size_bytes:
                err.print(f"diskplan measure: {path} is smaller than the {need // MiB} MiB a measurement reads")
                return 2
            refusals = []
        else:
            placed = free_range(disk, need)
            refusals = measure_refusals(path, disk, placed, need)
    dev = device_kind(path)
    console.print(f"{path}: {dev.what}")
    console.print(f"device: {dev.facts()}")
    if not dev.hardware:
        console.print("These numbers say nothing about a disk's hardware: measure the disk itself for that.",
                      style="yellow")
    assert placed is not None or refusals
    base, end = placed if placed else (0, 0)
    verb = "reads" if args.read_only else "writes test data to, then reads"
    if placed:
        console.print(f"range: {verb} {byte_range(path, base, end, logical)}"
                      + ("" if args.read_only or args.scratch else ": free space, no partition, no table metadata"))
    if args.read_only:
        return _run(console, err, path, base, args, READ_TESTS, logical)
    if os.path.exists(path):
        refusals += culprits(path)
    code = before_writing(refusals, "", args.yes, "write test data into that range and measure", console, err)
    if code is not None:
        return code
    ask = Ask(kind, path, base, end)
    if not ask.accepts(confirm(ask, args.yes)):
        err.print("refused: not confirmed. Nothing was written.", style="yellow")
        return 1
    if args.scratch and not os.path.exists(path):
        with open(path, "wb") as f:  # real blocks, so the timed writes allocate nothing
            f.write(bytes(need))
            f.flush()
            os.fsync(f.fileno())
        created = True
    try:
        with take(path):
            again = culprits(path) + ([] if args.scratch else half_moved(path, disk.geometry.size_bytes))
            if again:
                for r in again:
                    err.print(f"refused: {r}", style="yellow")
                err.print("Nothing was written.")
                return 1
            return _run(console, err, path, base, args, (*WRITE_TESTS, *READ_TESTS), logical)
    except LockBusy as exc:
        err.print(f"refused: {exc}. Nothing was written.", style="yellow")
        return 1
    finally:
        if created:
            os.unlink(path)


def _run(console: Out, err: Out, path: str, base: int, args: argparse.Namespace, tests: tuple[Test, ...],
         logical: int) -> int:
    def progress(done: int, total: int) -> None:
        err.print(f"[round {done}/{total}]", style="dim")

    try:
        results = measure(path, base, tests, offsets(logical), args.rounds, args.count, progress)
    except DirectIOUnsupported as exc:
        err.print(f"diskplan measure: {exc.strerror}: a measurement through the page cache would time memory")
        return 2
    except OSError as exc:
        err.print(f"diskplan measure: I/O failed on {path}: {exc.strerror or exc}")
        return Exit.UNREADABLE if args.read_only else Exit.FAILED
    console.print(f"{args.rounds} rounds x {args.count} operations per offset, interleaved; O_DIRECT, one at a time",
                  style="dim")
    _report(console, results, path, base, args.count)
    return 0
