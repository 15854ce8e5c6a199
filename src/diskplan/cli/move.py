"""``diskplan move TARGET --partition N --to START [--yes]``: move a partition and its data.

Without --yes: shows what would move (sectors, bytes, direction, an estimate) and writes nothing.
With --yes: checks the filesystem, backs up the table, copies with a journal, reads the data back,
rewrites the table entry and checks the filesystem again (backend.move). Ctrl+C stops between chunks;
``diskplan resume TARGET`` finishes an interrupted move. The realign and resume commands share this.

Exit status: 0 moved (or nothing to do), 1 refused or not confirmed (nothing written), 2 failed or
stopped (the message says where the move stands and how to finish it).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator

from diskplan.backend.datamove import Progress
from diskplan.backend.move import MoveOutcome, MoveProposal, execute_move, prepare_move
from diskplan.backend.write import CommitError, preload
from diskplan.cli.apply import consoles, host
from diskplan.cli.confirm import before_writing, confirm
from diskplan.cli.options import TargetError, open_target
from diskplan.cli.textout import Out
from diskplan.model.sizes import SizeError, parse_lba
from diskplan.model.units import human_bytes


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan move",
        description="Move a partition and the data it holds to a new start (same size), crash-safe and resumable.",
        epilog="Exit status: 0 moved or nothing to do, 1 refused or not confirmed (nothing written), 2 failed or "
        "stopped (`diskplan resume TARGET` finishes an interrupted move).",
    )
    p.add_argument("target", help="block device or image file")
    p.add_argument("--partition", "-N", type=int, required=True, metavar="N", help="the partition's number")
    p.add_argument("--to", required=True, metavar="START", help="new start: 2048 or 2048s (sectors), 1MiB, ...")
    p.add_argument("--yes", action="store_true", help="move (without it, only show what would move)")
    p.add_argument("--backup", metavar="PATH",
                   help="where to save the backup of the table (the journal goes beside it)")
    return p


def render_move(p: MoveProposal, console: Out) -> None:
    plan = p.plan
    console.print(f"{p.target}: partition {p.number} ({p.fs})", style="bold")
    if plan.shift:
        end, new_end = plan.start + plan.length - 1, plan.target + plan.length - 1
        console.print(f"  from {plan.start}..{end} to {plan.target}..{new_end} (sectors of {p.sector_size} B, "
                      "end inclusive)")
        console.print(f"  moves {plan.length} sectors = {human_bytes(p.nbytes)} by {abs(plan.shift)} sectors "
                      f"{p.direction}, in {plan.count} chunks of up to {human_bytes(plan.chunk * p.sector_size)}")
        if plan.journals_data:
            console.print("  each chunk overlaps its own source: its old bytes are saved in the journal first")
        if p.estimate:
            console.print(f"  estimate: {duration(p.estimate)} (copy and read-back, reading at "
                          f"{human_bytes(int(p.rate))}/s)")
    for note in p.notes:
        console.print(("note: ", "cyan"), note)


def duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def render_outcome(o: MoveOutcome, console: Out, err: Out) -> None:
    if o.backup_path:
        console.print("backup of the table: ", (o.backup_path, "bold"))
    if o.journal_path:
        console.print("move journal: ", o.journal_path)
    ok = o.exit_code == 0
    (console if ok else err).print(o.message, style="green" if ok else "bold red" if o.exit_code == 2 else "yellow")
    for line in o.details:
        err.print(f"  {line}")
    if o.resume_command:
        err.print(f"to finish the move: {o.resume_command}", style="bold")


@contextlib.contextmanager
def stop_on_interrupt(err: Out) -> Iterator[Callable[[], bool]]:
    """Ctrl+C asks the move to stop at the next chunk boundary (a second one is ignored: stopping
    mid-chunk would gain nothing, the journal makes either resumable, but the boundary is cleaner)."""
    asked = [False]

    def handler(signum: int, frame: object) -> None:
        if not asked[0]:
            err.print("stopping at the next chunk boundary…", style="yellow")
        asked[0] = True

    try:
        old = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield lambda: asked[0]
        return
    try:
        yield lambda: asked[0]
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def progress_display(err: Out) -> Iterator[Progress]:
    """rich's progress bar on a terminal (bytes, rate, time left); plain lines every few seconds otherwise."""
    if sys.stderr.isatty():
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TaskID,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as Bar

        with Bar(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                 TimeRemainingColumn(), transient=False) as bar:
            tasks: dict[str, TaskID] = {}

            def show(done: int, total: int, phase: str) -> None:
                if total <= 1:  # a step, not bytes
                    if phase not in tasks:
                        bar.console.print(phase, style="dim")
                        tasks[phase] = TaskID(-1)
                    return
                if phase not in tasks:
                    tasks[phase] = bar.add_task(phase, total=total)
                bar.update(tasks[phase], completed=done, total=total)

            yield show
        return
    shown = {"at": 0.0}
    phases: list[str] = []

    def line(done: int, total: int, phase: str) -> None:
        now = time.monotonic()
        if not phases or phase != phases[-1] or now - shown["at"] >= 2.0 or done >= total:
            pct = f" {100 * done // total}%" if total > 1 else ""
            err.print(f"{phase}{pct}" + (f" ({human_bytes(done)} of {human_bytes(total)})" if total > 1 else ""),
                      style="dim")
            shown["at"] = now
            phases.append(phase)

    yield line


def run(p: MoveProposal, yes: bool, hint: str, console: Out, err: Out,
        execute: Callable[..., MoveOutcome]) -> int:
    """Show, gate on --yes and the typed confirmation, move, report: the exit status."""
    render_move(p, console)
    nothing = "" if p.plan.shift else f"nothing to do: partition {p.number} already starts at {p.to}"
    code = before_writing(p.refusals, nothing, yes, hint, console, err)
    if code is not None:
        return code
    answer = confirm(p, yes)
    with stop_on_interrupt(err) as stop, progress_display(err) as show:
        outcome = execute(p, answer, host(), progress=show, stop=stop)
    render_outcome(outcome, console, err)
    return outcome.exit_code


def target_start(text: str, disk_geom: object) -> int:
    """START as typed: a bare number is sectors."""
    text = text.strip()
    return parse_lba(text + "s" if text.isdigit() else text, disk_geom).sectors  # type: ignore[arg-type]


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()
    try:
        disk = open_target(args.target)
        to = target_start(args.to, disk.geometry)
        p = prepare_move(args.target, args.partition, to, host(), current=disk)
    except (TargetError, CommitError, SizeError) as exc:
        err.print(f"diskplan move: {exc}")
        return 2
    return run(p, args.yes, "move it (the table is backed up and the move journalled first)", console, err,
               lambda q, answer, h, **kw: execute_move(q, answer, h, backup_path=args.backup, **kw))
