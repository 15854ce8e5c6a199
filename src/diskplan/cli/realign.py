"""``diskplan realign TARGET [--partition N] [--yes]``: move misaligned partitions, data and all, to the
nearest grain boundary the free space around them allows (size unchanged: the filesystem's bytes move
as they are, so any filesystem can be realigned). When no boundary leaves room, the filesystem shrinks
first, by the planner's rule (model.plan.move.realign_shrinking: the nearest boundary, whole physical blocks,
never below the minimum its tool reports), then moves: `diskplan move --size`'s two writes.

Without --partition, every primary or GPT partition whose start is off the grain (1 MiB, the physical
block and the device's I/O hints: model.grain.optimal_grain), one move after another; the first that
fails stops the rest. Exit status as for ``diskplan move`` (model.exitstatus); without --yes every move is
shown, and the status is the worst of them (0 when each could be done).
"""

from __future__ import annotations

import argparse

from diskplan.backend.move.engine import execute_move, logical_window, prepare_move
from diskplan.backend.move.resize import content_limits
from diskplan.backend.write.steps import CommitError, preload
from diskplan.cli.move import move_and_resize, run
from diskplan.cli.options import TargetError, add_open_writers, add_overrides, host, open_target
from diskplan.cli.textout import consoles
from diskplan.model.disk import Disk
from diskplan.model.exitstatus import WRITES, Exit
from diskplan.model.extent import Role
from diskplan.model.grain import optimal_grain
from diskplan.model.plan.move import free_around, realign_shrinking, realign_start
from diskplan.model.safetext import safe
from diskplan.model.units import human_bytes


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan realign",
        description="Move misaligned partitions (and their data) to the nearest grain boundary.",
        epilog=WRITES,
    )
    p.add_argument("target", help="block device or image file")
    p.add_argument("--partition", "-N", type=int, metavar="N",
                   help="only this partition (default: every misaligned one)")
    p.add_argument("--yes", action="store_true", help="move (without it, only show what would move)")
    p.add_argument("--backup", metavar="PATH", help="save the table backup here (several partitions: "
                   "PATH-partN.dpbackup each; default: the state directory, as for apply)")
    add_open_writers(p)
    add_overrides(p)
    return p


def choices(disk: Disk, only: int | None) -> tuple[list[tuple[int, int, int]], list[str]]:
    """(number, new start, sectors afterwards) for each partition to realign (fewer sectors: it shrinks
    first), and why others are left."""
    grain = optimal_grain(disk.geometry)
    live = disk.table.live
    moves, notes = [], []
    for p in sorted(live, key=lambda q: q.number):
        if only is not None and p.number != only:
            continue
        if grain.is_aligned(p.start):
            if only is not None:
                notes.append(f"partition {p.number} already starts on a {grain.sectors}-sector boundary")
            continue
        if p.role is Role.EXTENDED:
            notes.append(f"partition {p.number} is the extended partition: not realigned (its logical ones are)")
            continue
        if p.role is Role.LOGICAL:  # between its neighbours in the EBR chain (model.plan.ebrmove)
            area = logical_window(disk.source, disk, p.number)
            if isinstance(area, str):
                notes.append(f"partition {p.number}: {area}")
                continue
            usable, others = area, []
        else:
            usable, others = disk.table.usable, [q.extent for q in live if q.number != p.number]
        to = realign_start(p.extent, grain, usable, others)
        if to is not None:
            moves.append((p.number, to, p.size))
            continue
        ss = disk.geometry.logical
        limits = content_limits(disk.source, p.start, p.size, ss)  # reads only: how far its filesystem shrinks
        at = realign_shrinking(p.extent, grain, disk.geometry.sectors_per_physical,
                               free_around(p.extent, usable, others), limits, ss)
        if isinstance(at, str):
            notes.append(f"partition {p.number} cannot be realigned: {at}")
            continue
        notes.append(f"partition {p.number}: no aligned start leaves room for it as it is: its {limits.fs} shrinks "
                     f"from {human_bytes(p.size * ss)} to {human_bytes(at.size * ss)} first (it can shrink to "
                     f"{human_bytes(limits.floor(ss) * ss)}), then moves to {at.start}")
        moves.append((p.number, at.start, at.size))
    return moves, notes


def has_errors(target: str, disk: Disk, number: int) -> str:
    """Why a move of partition ``number`` will be refused because its filesystem has errors ("" when it is
    clean, or cannot be checked here: the move says why itself). The write checks again under its lock;
    this is for the dry run, which otherwise proposes a move that the write refuses."""
    from diskplan.backend.fs import fscheck

    p = disk.table.by_number(number)
    if p is None:
        return ""
    ss = disk.geometry.logical
    try:
        fs, clean, said = fscheck.referee(target, p.start * ss, p.size * ss)
    except (fscheck.CheckError, OSError):
        return ""
    if clean:
        return ""
    return (f"partition {number}: its {fs.fs} filesystem has errors ({safe(said)}): realigning it will be refused; "
            "repair it first (its own checker), then realign")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()
    try:
        disk = open_target(args.target, args)
    except TargetError as exc:
        err.print(f"diskplan realign: {exc}")
        return Exit.UNREADABLE
    if args.partition is not None and disk.table.by_number(args.partition) is None:  # as move and resize say it
        err.print(f"refused: {args.target} has no partition {args.partition}", style="yellow")
        err.print("Nothing was written.")
        return Exit.REFUSED
    moves, notes = choices(disk, args.partition)
    for note in notes:
        console.print(("note: ", "cyan"), note)
    if not moves:
        if any("shrink" in n or "EBR" in n or "cannot be realigned" in n for n in notes):
            return Exit.REFUSED
        console.print("nothing to do: every partition starts on a grain boundary", style="green")
        return 0
    worst: int = Exit.OK  # without --yes every move is shown, refused ones too; with it the first failure stops
    unclean = {number: why for number, _, _ in moves if not args.yes and (why := has_errors(args.target, disk, number))}
    for why in unclean.values():
        err.print(f"diskplan realign: {why}")
        worst = Exit.REFUSED
    moves = [m for m in moves if m[0] not in unclean]
    for i, (number, to, size) in enumerate(moves):
        backup = _backup_path(args.backup, number, len(moves))
        try:
            if i and args.yes:  # the moves before may have changed the free space around this one
                disk = open_target(args.target, args)
                again, _ = choices(disk, number)
                if not again:
                    err.print(f"diskplan realign: partition {number} has no room left to realign")
                    return Exit.REFUSED
                _, to, size = again[0]
            old = disk.table.by_number(number)
            if old is not None and size != old.size:  # a shrink, then the move (as `diskplan move --size`)
                code = move_and_resize(argparse.Namespace(target=args.target, partition=number, yes=args.yes,
                                                          backup=backup, allow_open_writers=args.allow_open_writers),
                                       disk, to, size, old.size, console, err)
            else:
                p = prepare_move(args.target, number, to, host(args))
                code = run(p, args.yes, "realign it (the table is backed up and the move journalled first)", console,
                           err, lambda q, answer, h, b=backup, **kw: execute_move(q, answer, h, backup_path=b, **kw),
                           h=host(args))
        except (CommitError, TargetError) as exc:
            err.print(f"diskplan realign: {exc}")
            if i and args.yes:  # moves before it are written: stopped part-way (3), as apply's plan steps say it
                err.print(f"the moves before it are done, each whole; partition {number} was not moved")
                return Exit.FAILED
            return Exit.UNREADABLE  # nothing written
        if code != Exit.OK and args.yes:
            return code
        worst = max(worst, code)
    return worst


def _backup_path(given: str | None, number: int, moves: int) -> str | None:
    """--backup PATH for one move; PATH-partN.dpbackup for each of several (a backup is never overwritten)."""
    if not given or moves == 1:
        return given
    return f"{given.removesuffix('.dpbackup')}-part{number}.dpbackup"
