"""``diskplan realign TARGET [--partition N] [--yes]``: move misaligned partitions, data and all, to the
nearest grain boundary the free space around them allows (size unchanged: the filesystem's bytes move
as they are, so any filesystem can be realigned; shrinking one to make room comes later).

Without --partition, every primary or GPT partition whose start is off the grain (1 MiB, the physical
block and the device's I/O hints: model.grain.optimal_grain), one move after another; the first that
fails stops the rest. Exit status as for ``diskplan move``.
"""

from __future__ import annotations

import argparse

from diskplan.backend.move import execute_move, logical_window, prepare_move
from diskplan.backend.write import CommitError, preload
from diskplan.cli.move import run
from diskplan.cli.options import TargetError, add_overrides, host, open_target
from diskplan.cli.textout import consoles
from diskplan.model.disk import Disk
from diskplan.model.extent import Role
from diskplan.model.grain import optimal_grain
from diskplan.model.move import realign_start


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan realign",
        description="Move misaligned partitions (and their data) to the nearest grain boundary.",
    )
    p.add_argument("target", help="block device or image file")
    p.add_argument("--partition", "-N", type=int, metavar="N",
                   help="only this partition (default: every misaligned one)")
    p.add_argument("--yes", action="store_true", help="move (without it, only show what would move)")
    add_overrides(p)
    return p


def choices(disk: Disk, only: int | None) -> tuple[list[tuple[int, int]], list[str]]:
    """(number, new start) for each partition to realign, and why others are left."""
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
        if p.role is Role.LOGICAL:  # between its neighbours in the EBR chain (model.ebrmove)
            area = logical_window(disk.source, disk, p.number)
            if isinstance(area, str):
                notes.append(f"partition {p.number}: {area}")
                continue
            to = realign_start(p.extent, grain, area, [])
        else:
            to = realign_start(p.extent, grain, disk.table.usable, [q.extent for q in live if q.number != p.number])
        if to is None:
            notes.append(f"partition {p.number}: no aligned start leaves room for it; it would have to shrink first")
            continue
        moves.append((p.number, to))
    return moves, notes


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()
    try:
        disk = open_target(args.target, args)
    except TargetError as exc:
        err.print(f"diskplan realign: {exc}")
        return 2
    if args.partition is not None and disk.table.by_number(args.partition) is None:
        err.print(f"diskplan realign: {args.target} has no partition {args.partition}")
        return 2
    moves, notes = choices(disk, args.partition)
    for note in notes:
        console.print(("note: ", "cyan"), note)
    if not moves:
        if any("shrink" in n or "EBR" in n for n in notes):
            return 1
        console.print("nothing to do: every partition starts on a grain boundary", style="green")
        return 0
    for i, (number, to) in enumerate(moves):
        try:
            if i and args.yes:  # the moves before may have changed the free space around this one
                again, _ = choices(open_target(args.target, args), number)
                if not again:
                    err.print(f"diskplan realign: partition {number} has no room left to realign")
                    return 1
                to = again[0][1]
            p = prepare_move(args.target, number, to, host())
        except (CommitError, TargetError) as exc:
            err.print(f"diskplan realign: {exc}")
            return 2
        code = run(p, args.yes, "realign it (the table is backed up and the move journalled first)", console, err,
                   execute_move)
        if code != 0 and (args.yes or code != 1):
            return code
    return 0 if args.yes else 1
