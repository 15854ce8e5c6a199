"""``diskplan measure TARGET``: time small direct-I/O writes and reads at an aligned offset and at misaligned
ones, as the fio and pg_test_fsync experiments did, on your own disk.

Writes only into the table's free space (never a partition, never the table's metadata) or into a scratch
file (``--scratch FILE``); shows the exact byte range; writes nothing without ``--yes`` (and, at a terminal,
a block device's name typed); holds the disk's write lock and refuses a disk in use. ``--read-only`` times
reads only, anywhere.

A scratch file must be new or empty (a file with data is refused, never overwritten) and no loop device may
read it. Ctrl+C says whether test data had been written by then, and where.

Exit status (model.exitstatus): 0 measured, or shown without --yes; 1 refused or not confirmed (nothing
written); 2 the target could not be read, bad options, (--read-only) a read failed, or Ctrl+C before the
first write; 3 the I/O failed, or Ctrl+C came, while test data was being written.
"""

from __future__ import annotations

import argparse
import os
import stat

from diskplan.backend.iotime import (
    Ask,
    DirectIOUnsupported,
    Interrupted,
    Scratch,
    holes_note,
    measure,
    measure_refusals,
)
from diskplan.backend.write.lock import LockBusy, take
from diskplan.backend.write.steps import half_moved
from diskplan.cli.confirm import before_writing, confirm
from diskplan.cli.options import TargetError, open_target
from diskplan.cli.textout import Out, consoles
from diskplan.discovery.devicekind import DeviceKind, device_kind
from diskplan.discovery.inuse import culprits, loops_backed_by
from diskplan.model.disk import Disk
from diskplan.model.exitstatus import WRITES, Exit, stopped
from diskplan.model.teach.lab import LABS
from diskplan.model.teach.lab import find as find_lab
from diskplan.model.teach.measure import (
    READ_TESTS,
    WRITE_TESTS,
    Result,
    Test,
    byte_range,
    free_range,
    offsets,
    ranges_read,
    report,
    span,
)
from diskplan.model.units import MiB, plural

# Bounds: --count 4096 is 64 MiB per offset of 16 KiB operations (a 65 MiB range); --rounds 100 is a long run.
MAX_COUNT = 4096
MAX_ROUNDS = 100
MAX_SECONDS = 60.0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan measure",
        description="Time 4 KiB direct writes (like fio) and 16 KiB writes with a flush (like pg_test_fsync) "
        "at an aligned offset and at misaligned ones, and the same reads.",
        epilog=WRITES,
    )
    p.add_argument("target", nargs="?", help="block device or image file (its free space is written)")
    p.add_argument("--scratch", metavar="FILE", help="write into this file instead: a new file (created, "
                   "removed afterwards) or an empty one (emptied again afterwards); a file with data is refused")
    p.add_argument("--read-only", action="store_true", help="time reads only, anywhere; nothing is written")
    p.add_argument("--yes", action="store_true", help="write (without it, only show where it would write)")
    p.add_argument("--rounds", type=int, default=5, help=f"interleaved rounds (default 5, at most {MAX_ROUNDS})")
    p.add_argument("--count", type=int, default=64,
                   help=f"operations per offset and round (default 64, at most {MAX_COUNT})")
    p.add_argument("--lab", choices=[lab.name for lab in LABS],
                   help="run one experiment's own pattern instead, its number printed beside yours: ssd (fio 8 "
                   "jobs x iodepth 4), fsync (pg_test_fsync), metadata (bonnie++ creates), scheduler (each I/O "
                   "scheduler; switching needs root), stripe (six parallel 1 MiB direct writes)")
    p.add_argument("--seconds", type=float, default=2.0,
                   help=f"how long each timed part of a lab runs (default 2, at most {MAX_SECONDS:g})")
    p.add_argument("--fio-job", metavar="FILE", help="--lab ssd: also write the experiment's fio job file for "
                   "these bytes to FILE (a new file), to verify the numbers with fio")
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
    if not (1 <= args.rounds <= MAX_ROUNDS and 1 <= args.count <= MAX_COUNT):
        err.print(f"diskplan measure: --rounds must be 1..{MAX_ROUNDS} and --count 1..{MAX_COUNT}")
        return 2
    if args.lab and (args.read_only or not 0 < args.seconds <= MAX_SECONDS):
        err.print("diskplan measure: a --lab writes (no --read-only), for --seconds above 0 and at most "
                  f"{MAX_SECONDS:g}")
        return 2
    if args.fio_job and (args.lab != "ssd" or os.path.lexists(args.fio_job)):
        err.print("diskplan measure: --fio-job FILE goes with --lab ssd and names a new file")
        return 2
    path = args.scratch or args.target
    if args.scratch:
        logical = 512
        need = find_lab(args.lab).span if args.lab else span(logical, args.count)
        placed: tuple[int, int] | None = (0, need)
        kind = "file"
        refusals = scratch_refusals(path)
        if refusals:
            for r in refusals:
                err.print(f"diskplan measure: refused: {r}. Nothing was written.", style="yellow")
            return 1
    else:
        try:
            disk = open_target(path)
        except TargetError as exc:
            err.print(f"diskplan measure: {exc}")
            return 2
        logical = disk.geometry.logical
        need = find_lab(args.lab).span if args.lab else span(logical, args.count)
        kind = "block" if disk.kind == "block" else "file"
        if args.read_only:
            placed = _read_place(path, disk, need, err)
            if placed is None:
                return 2
            refusals = []
        else:
            placed = free_range(disk, need)
            refusals = measure_refusals(path, disk, placed, need)
    dev = device_kind(path)
    console.print(f"{path}: {dev.what}")
    if dev.partition_start is not None and placed:
        console.print(f"{path} is a partition: its byte 0 is byte {dev.partition_start:,} of the disk; offsets are "
                      f"judged on the disk, so the aligned one is partition byte {placed[0]:,} = disk byte "
                      f"{dev.partition_start + placed[0]:,} (a multiple of 1 MiB)")
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
        return _run(console, err, path, base, args, READ_TESTS, logical, dev)
    if os.path.exists(path):
        refusals += culprits(path)
    code = before_writing(refusals, "", args.yes, "write test data into that range and measure", console, err)
    if code is not None:
        return code
    ask = Ask(kind, path, base, end)
    if not ask.accepts(confirm(ask, args.yes)):
        err.print("refused: not confirmed. Nothing was written.", style="yellow")
        return 1
    scratch: Scratch | None = None
    if args.scratch:
        again = scratch_refusals(path)  # asked again: the confirmation may have waited a long time
        if again:
            for r in again:
                err.print(f"diskplan measure: refused: {r}. Nothing was written.", style="yellow")
            return 1
        try:
            scratch = Scratch(path, need)
        except OSError as exc:
            err.print(f"diskplan measure: refused: {exc.strerror or exc}. Nothing was written.", style="yellow")
            return 1
    try:
        with take(path):
            again = culprits(path) + ([] if args.scratch else half_moved(path, disk.geometry.size_bytes))
            if again:
                for r in again:
                    err.print(f"refused: {r}", style="yellow")
                err.print("Nothing was written.")
                return 1
            if args.lab:
                return _run_lab(console, err, path, (base, end), args, dev)
            return _run(console, err, path, base, args, (*WRITE_TESTS, *READ_TESTS), logical, dev)
    except LockBusy as exc:
        err.print(f"refused: {exc}. Nothing was written.", style="yellow")
        return 1
    finally:
        if scratch is not None:
            scratch.close()


def scratch_refusals(path: str) -> list[str]:
    """Why ``path`` cannot be a scratch file: it must be new, or an empty regular file, and no loop device may
    read it (a disk image attached to a loop device had its GPT overwritten, issue 25)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        return [] if os.path.isdir(parent) else [f"{parent} is not a directory: the scratch file cannot be made"]
    except OSError as exc:
        return [f"{path}: {exc.strerror}"]
    if stat.S_ISLNK(st.st_mode):
        return [f"{path} is a symbolic link: name a new file (measure never writes through a link)"]
    if not stat.S_ISREG(st.st_mode):
        return [f"{path} is not a regular file: --scratch takes a new (or empty) file"]
    out = []
    if st.st_size:
        out.append(f"{path} already holds {st.st_size:,} B: a scratch file must be new or empty "
                   "(measure overwrites what it writes into)")
    out += [f"{path} is the backing file of {n.path}: writing it would write that device's disk"
            for n in loops_backed_by(path)]
    return out


def _read_place(path: str, disk: Disk, need: int, err: Out) -> tuple[int, int] | None:
    """Where a read-only measurement reads: the first free 1 MiB boundary, else 1 MiB in. A partition node's
    byte 0 is not a boundary of the disk (a partition at 63s begins at disk byte 32,256): its reads start at
    the first byte that is one on the disk, or the node is refused when the kernel does not say where it lies."""
    size = disk.geometry.size_bytes
    start = device_kind(path).partition_start
    if start is not None:
        base = -start % MiB
        placed = (base, base + need)
    else:
        placed = free_range(disk, need) or (MiB, MiB + need)
    if placed[1] > size:
        err.print(f"diskplan measure: {path} is smaller than the {need // MiB} MiB a measurement reads"
                  + (" from a 1 MiB boundary of the disk" if start is not None else ""))
        return None
    return placed


def _holes(console: Out, dev: DeviceKind, base: int, logical: int, count: int) -> None:
    """An honest line when the bytes read were holes of a sparse file (zeros from memory, no disk read)."""
    note = holes_note(dev.backing, dev.backing_offset + (dev.partition_start or 0), ranges_read(base, logical, count))
    if note:
        console.print(note, style="yellow")


def _run(console: Out, err: Out, path: str, base: int, args: argparse.Namespace, tests: tuple[Test, ...],
         logical: int, dev: DeviceKind) -> int:
    def progress(done: int, total: int) -> None:
        err.print(f"[round {done}/{total}]", style="dim")

    try:
        results = measure(path, base, tests, offsets(logical), args.rounds, args.count, progress)
    except Interrupted as exc:
        if exc.written:
            err.print(f"diskplan: interrupted in round {exc.rounds_done + 1} of {args.rounds}: test data was written "
                      f"to bytes {base:,}-{base + span(logical, args.count) - 1:,} of {path} (the range shown above, "
                      "nothing outside it).", style="yellow")
            return Exit.FAILED
        err.print("diskplan: interrupted before the first write; nothing was written.", style="yellow")
        return stopped(False)  # 2, as a Ctrl+C reaching any command's top level before a write
    except OSError as exc:
        return _failed(err, path, exc, args.read_only)
    console.print(f"{plural(args.rounds, 'round')} x {plural(args.count, 'operation')} per offset, interleaved; "
                  "O_DIRECT, one at a time", style="dim")
    _report(console, results, path, base, args.count)
    _holes(console, dev, base, logical, args.count)
    return 0


def _run_lab(console: Out, err: Out, path: str, placed: tuple[int, int], args: argparse.Namespace,
             dev: DeviceKind) -> int:
    """One experiment's pattern at the aligned offset and the misaligned one, the experiment's numbers beside."""
    from diskplan.cli.lab import run_lab  # the labs' code is loaded only when one runs

    try:
        return run_lab(console, err, path, placed, find_lab(args.lab), args.seconds, dev, args.fio_job)
    except OSError as exc:
        return _failed(err, path, exc, False)


def _failed(err: Out, path: str, exc: OSError, read_only: bool) -> int:
    """The one line a failed measurement ends with: 2 when nothing could have been written (O_DIRECT refused,
    or a read of --read-only failed), 3 when the I/O failed while test data was being written."""
    if isinstance(exc, DirectIOUnsupported):
        err.print(f"diskplan measure: {exc.strerror}: a measurement through the page cache would time memory")
        return Exit.UNREADABLE
    err.print(f"diskplan measure: I/O failed on {path}: {exc.strerror or exc}")
    return Exit.UNREADABLE if read_only else Exit.FAILED
