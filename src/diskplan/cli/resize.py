"""``diskplan resize TARGET --partition N --size SIZE [--yes]``: grow or shrink a partition and the
filesystem in it, its start unchanged (backend.move.resize).

Without --yes: shows the filesystem, the old and new size, the smallest size a shrink can reach and the
steps in their order, and writes nothing. Exit status (model.exitstatus): 0 resized, nothing to do, or
shown; 1 refused or not confirmed (nothing written); 2 unreadable; 3 failed (the message says what was changed).
"""

from __future__ import annotations

import argparse

from diskplan.backend.move.resize import ResizeProposal, execute_resize, prepare_resize
from diskplan.backend.write.steps import CommitError, preload
from diskplan.cli.confirm import before_writing, confirm
from diskplan.cli.dataprogress import UNSTOPPABLE, progress_display, render_outcome, stop_on_interrupt
from diskplan.cli.options import TargetError, add_open_writers, host, open_target
from diskplan.cli.textout import Out, consoles
from diskplan.model.exitstatus import WRITES
from diskplan.model.sizes import SizeError, parse_size
from diskplan.model.units import human_bytes


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan resize",
        description="Grow or shrink a partition and its filesystem (with the filesystem's own tool), its start "
        "unchanged.",
        epilog=WRITES,
    )
    p.add_argument("target", help="block device or image file")
    p.add_argument("--partition", "-N", type=int, required=True, metavar="N", help="the partition's number")
    p.add_argument("--size", required=True, metavar="SIZE", help="new size with a unit: 20GiB, 40960s, ...")
    p.add_argument("--yes", action="store_true", help="resize (without it, only show what would change)")
    add_open_writers(p)
    p.add_argument("--backup", metavar="PATH", help="where to save the backup of the table")
    return p


def render(p: ResizeProposal, console: Out) -> None:
    ss = p.sector_size
    console.print(f"{p.target}: partition {p.number} ({p.fs})", style="bold")
    if p.entry is not None and p.fills:
        s = p.entry.start
        console.print(f"  its {p.fs.fs} filesystem spans {human_bytes(p.fills)} ({p.fills} B) of the entry's "
                      f"{s}..{s + p.old - 1} ({human_bytes(p.old * ss)}): a grow stopped after its entry was "
                      "written, or an image copied into a larger partition")
        console.print(f"  1. grow the {p.fs.fs} filesystem with its own tool to fill the entry (the entry stays)")
    elif p.entry is not None and p.new != p.old:
        s = p.entry.start
        console.print(f"  from {s}..{s + p.old - 1} ({human_bytes(p.old * ss)}) to {s}..{s + p.new - 1} "
                      f"({human_bytes(p.new * ss)}), sectors of {ss} B, end inclusive")
        if p.minimum is not None:
            console.print(f"  the filesystem can shrink to {human_bytes(p.minimum)} ({p.minimum} B) at least")
        what = {"entry": "rewrite the table entry's end (its PARTUUID stays)",
                "filesystem": f"resize the {p.fs.fs or 'unknown'} filesystem with its own tool"}
        for i, step in enumerate(p.order, 1):
            console.print(f"  {i}. {what[step]}")
    for note in p.notes:
        console.print(("note: ", "cyan"), note)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()
    try:
        disk = open_target(args.target)
        size = parse_size(args.size, disk.geometry).sectors
        p = prepare_resize(args.target, args.partition, size, host(args), current=disk)
    except (TargetError, CommitError, SizeError) as exc:
        err.print(f"diskplan resize: {exc}")
        return 2
    render(p, console)
    code = before_writing(p.refusals, p.nothing, args.yes, "resize it (the table is backed up first)", console, err)
    if code is not None:
        return code
    answer = confirm(p, args.yes)
    with stop_on_interrupt(err, UNSTOPPABLE), progress_display(err) as show:
        outcome = execute_resize(p, answer, host(args), backup_path=args.backup, progress=show)
    render_outcome(outcome, console, err)
    return outcome.exit_code
