"""``diskplan move TARGET --partition N --to START [--yes]``: move a partition and its data.

Without --yes: shows what would move (sectors, bytes, direction, an estimate) and writes nothing.
With --yes: checks the filesystem, backs up the table, copies with a journal, reads the data back,
rewrites the table entry and checks the filesystem again (backend.move.engine). Ctrl+C stops between chunks;
``diskplan resume TARGET`` finishes an interrupted move. The realign and resume commands share this.

Exit status (model.exitstatus): 0 moved, nothing to do, or shown without --yes; 1 refused or not confirmed
(nothing written); 2 the target could not be read; 3 failed or stopped (the message says where the move
stands and how to finish it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from diskplan.backend.move.engine import MoveOutcome, MoveProposal, execute_move, placement, prepare_move
from diskplan.backend.write.steps import CommitError, Host, preload
from diskplan.cli.confirm import before_writing, confirm
from diskplan.cli.dataprogress import progress_display, render_outcome, stop_on_interrupt
from diskplan.cli.options import TargetError, add_open_writers, host, open_target
from diskplan.cli.textout import Out, consoles
from diskplan.model.disk import Disk
from diskplan.model.exitstatus import WRITES
from diskplan.model.geometry import Geometry
from diskplan.model.sizes import SizeError, parse_lba, parse_size
from diskplan.model.units import human_bytes, human_duration


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan move",
        description="Move a partition and the data it holds to a new start (same size), crash-safe and resumable.",
        epilog=WRITES + " `diskplan resume TARGET` finishes an interrupted move.",
    )
    p.add_argument("target", help="block device or image file")
    p.add_argument("--partition", "-N", type=int, required=True, metavar="N", help="the partition's number")
    p.add_argument("--to", required=True, metavar="START", help="new start: 2048 or 2048s (sectors), 1MiB, ...")
    p.add_argument("--size", metavar="SIZE", help="also resize it (diskplan resize): a shrink before the move, "
                   "a grow after it")
    p.add_argument("--yes", action="store_true", help="move (without it, only show what would move)")
    add_open_writers(p)
    p.add_argument("--backup", metavar="PATH",
                   help="where to save the backup of the table (the journal is named after it)")
    return p


def render_move(p: MoveProposal, console: Out) -> None:
    plan = p.plan
    console.print(f"{p.target}: partition {p.number} ({p.fs})", style="bold")
    if plan.shift and plan.length:  # no partition N: its refusal says so, not "moves 0 sectors from 0..-1"
        end, new_end = plan.start + plan.length - 1, plan.target + plan.length - 1
        console.print(f"  from {plan.start}..{end} to {plan.target}..{new_end} (sectors of {p.sector_size} B, "
                      "end inclusive)")
        console.print(f"  moves {plan.length} sectors = {human_bytes(p.nbytes)} by {abs(plan.shift)} sectors "
                      f"{p.direction}, in {plan.count} chunks of up to {human_bytes(plan.chunk * p.sector_size)}")
        if plan.journals_data:
            console.print("  each chunk overlaps its own source: its old bytes are saved in the journal first")
        if p.estimate:
            console.print(f"  estimate: {human_duration(p.estimate)} (copy and read-back, reading at "
                          f"{human_bytes(int(p.rate))}/s)")
    for note in p.notes:
        console.print(("note: ", "cyan"), note)


def run(p: MoveProposal, yes: bool, hint: str, console: Out, err: Out,
        execute: Callable[..., MoveOutcome], *, unstoppable: str = "", h: Host | None = None) -> int:
    """Show, gate on --yes and the typed confirmation, move, report: the exit status. ``unstoppable``: what
    a Ctrl+C is told when ``execute`` has no chunk boundary to stop at; ``h``: who uses the disk (the
    command's own ``host``)."""
    render_move(p, console)
    code = before_writing(p.refusals, p.nothing, yes, hint, console, err)
    if code is not None:
        return code
    answer = confirm(p, yes)
    with stop_on_interrupt(err, *([unstoppable] if unstoppable else [])) as stop, progress_display(err) as show:
        outcome = execute(p, answer, h or host(), progress=show, stop=stop)
    render_outcome(outcome, console, err)
    return outcome.exit_code


def target_start(text: str, disk_geom: Geometry) -> int:
    """START as typed: a bare number is sectors."""
    text = text.strip()
    return parse_lba(text + "s" if text.isdigit() else text, disk_geom).sectors


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()
    try:
        disk = open_target(args.target)
        to = target_start(args.to, disk.geometry)
        part = disk.table.by_number(args.partition)
        new = parse_size(args.size, disk.geometry).sectors if args.size else 0
        if part is not None and new and new != part.size:
            return move_and_resize(args, disk, to, new, part.size, console, err)
        p = prepare_move(args.target, args.partition, to, host(args), current=disk)
    except (TargetError, CommitError, SizeError) as exc:
        err.print(f"diskplan move: {exc}")
        return 2
    return run(p, args.yes, "move it (the table is backed up and the move journalled first)", console, err,
               lambda q, answer, h, **kw: execute_move(q, answer, h, backup_path=args.backup, **kw), h=host(args))


def move_and_resize(args: argparse.Namespace, disk: Disk, to: int, new: int, old: int, console: Out, err: Out) -> int:
    """``move --size``: two writes, each whole and safe on its own, in the order that always has room:
    shrink then move, or move then grow. Interrupted in between, the same command does what is left (the
    step already done is "nothing to do")."""
    from diskplan.backend.move.resize import execute_resize, prepare_resize
    from diskplan.cli.resize import render

    target, number = args.target, args.partition
    h = host(args)
    if new < old:
        first_rz = prepare_resize(target, number, new, h, current=disk)
        mv = prepare_move(target, number, to, h, current=disk, length=new)
        render(first_rz, console)
        refusals = [*first_rz.refusals, *mv.refusals]
    else:
        mv = prepare_move(target, number, to, h, current=disk)
        refusals = [*mv.refusals, *placement(disk, number, to, new)]
    render_move(mv, console)
    if new > old:
        console.print(f"  then grow it to {new} sectors ({human_bytes(new * mv.sector_size)}) with its filesystem's "
                      "own tool (diskplan resize)")
    code = before_writing(refusals, "", args.yes, "shrink and move it" if new < old else "move and grow it",
                          console, err)
    if code is not None:
        return code
    answer = confirm(mv, args.yes)
    rz_backup = args.backup and args.backup.removesuffix(".dpbackup") + "-resize.dpbackup"  # one backup per write
    with stop_on_interrupt(err) as stop, progress_display(err) as show:
        if new < old:
            outcome = execute_resize(first_rz, answer, h, backup_path=rz_backup, progress=show)
            if outcome.exit_code == 0:
                render_outcome(outcome, console, err)
                mv = prepare_move(target, number, to, h)
                outcome = execute_move(mv, answer, h, backup_path=args.backup, progress=show, stop=stop)
        else:
            outcome = execute_move(mv, answer, h, backup_path=args.backup, progress=show, stop=stop)
            if outcome.exit_code == 0:
                render_outcome(outcome, console, err)
                rz = prepare_resize(target, number, new, h)
                outcome = execute_resize(rz, answer, h, backup_path=rz_backup, progress=show)
    render_outcome(outcome, console, err)
    return outcome.exit_code
