"""``diskplan apply PLAN TARGET [--yes] [--backup PATH]``: write a planned table to a disk, safely.

Shows every operation and the resulting table (sector-exact, with the device's model and size) and writes
nothing without ``--yes``. With ``--yes``: checks that nothing uses the disk, saves a backup of the old
table (its path is printed), writes with one libparted commit, tells the kernel, reads the table back and
compares it with the plan. On a block device, when run from a terminal, the device name must be typed too.
A plan whose ``keeps`` entries put a partition elsewhere or make it another size moves and resizes it with
its data instead, step by step (cli.applymoves, backend.move.planmoves).

Exit status (model.exitstatus): 0 written, nothing to do, or shown without --yes; 1 refused (unsafe, invalid
for this disk, or not confirmed: nothing written); 2 the plan or the target could not be read (nothing
written); 3 the write went wrong (the message says what state the disk is in and how to restore it).
"""

from __future__ import annotations

import argparse
import shlex

from diskplan.backend.read.planread import read_plan_text
from diskplan.backend.write.commit import execute, prepare
from diskplan.backend.write.proposal_text import proposal_lines
from diskplan.backend.write.steps import CommitError, Proposal, Verdict, WriteOutcome, preload
from diskplan.cli.confirm import before_writing, confirm, progress_lines
from diskplan.cli.options import TargetError, add_open_writers, host, open_target
from diskplan.cli.textout import Out, consoles
from diskplan.model.disk import Disk
from diskplan.model.exitstatus import WRITES
from diskplan.model.formats.planfile import PlanFileError, load_plan, placed_on, table_from_spec

STYLE = {"title": "bold", "heading": "bold", "table-head": "bold", "note": "cyan", "flag": "bold yellow",
         "op:label": "bold red", "op:delete": "red", "op:create": "green", "op:change": "yellow",
         "op:rewrite": "cyan", "op:keep": "dim"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan apply",
        description="Write a planned partition table (diskplan JSON plan or sfdisk dump) to a disk or image. "
        "A relative plan (sizes in % or \"rest\", starts left out) is resolved on this disk, and the notes "
        "say what each size became.",
        epilog=WRITES,
    )
    p.add_argument("plan", help="plan file: diskplan JSON or `sfdisk --dump` text ('-' reads stdin)")
    p.add_argument("target", help="block device or image file")
    p.add_argument("--yes", action="store_true", help="write (without it, only show what would be written)")
    add_open_writers(p)
    p.add_argument("--backup", metavar="PATH", help="where to save the backup of the old table "
                   "(default: ~/.local/state/diskplan/backups/DISK-TIME.dpbackup)")
    return p


def render_proposal(p: Proposal, console: Out) -> None:
    """The proposal's lines (backend.write.proposal_text), styled for a terminal."""
    for line in proposal_lines(p):
        console.print(*((text, STYLE.get(role, "")) for text, role in line))


def render_outcome(o: WriteOutcome, console: Out, err: Out) -> None:
    if o.backup_path:
        console.print("backup of the old table: ", (o.backup_path, "bold"))
    style = {Verdict.WRITTEN: "green", Verdict.NOTHING: "green", Verdict.REFUSED: "yellow", Verdict.FAILED: "bold red"}
    (console if o.verdict in (Verdict.WRITTEN, Verdict.NOTHING) else err).print(o.message, style=style[o.verdict])
    for line in o.details:
        err.print(f"  {line}")
    if o.kernel:
        err.print(f"error: {o.kernel}", style="bold red")
    if o.verdict is Verdict.FAILED:
        err.print(f"disk state: {o.state.value}")
    if o.restore_command:
        err.print(f"to put the old table back: {o.restore_command}", style="bold")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    try:
        spec = load_plan(read_plan_text(args.plan))
    except OSError as exc:
        err.print(f"diskplan apply: cannot read the plan {args.plan}: {exc.strerror or exc}")
        return 2
    except PlanFileError as exc:
        err.print(f"diskplan apply: {args.plan}: {exc}")
        return 2
    preload()  # the children that read, preview, write and verify inherit pyparted instead of importing it
    try:
        disk = open_target(args.target)
    except TargetError as exc:
        err.print(f"diskplan apply: {exc}")
        return 2
    try:
        spec = placed_on(spec, disk.geometry, disk.table)  # a relative plan or sfdisk script: sized for this disk
        desired = table_from_spec(spec, disk.geometry, disk.table)
    except PlanFileError as exc:
        err.print(f"diskplan apply: refused: {exc}")
        return 1
    h = host(args)
    if spec.keeps:  # partitions kept with their content: moved and resized first, or refused (cli.applymoves)
        from diskplan.cli.applymoves import run_plan_moves

        code = run_plan_moves(args, spec, disk, desired, h, console, err)
        if code is not None:
            return code
    try:
        proposal = prepare(args.target, desired, h, sector_size=spec.sector_size, current=disk,
                           made_against=spec.made_against)
    except CommitError as exc:
        err.print(f"diskplan apply: {exc}")
        return 2
    render_proposal(proposal, console)
    for note in spec.notes:  # what is not written (an sfdisk dump's uuid=), what a relative size became here
        console.print(("note: ", "cyan"), note)
    nothing = "" if proposal.changes else "nothing to do: the disk already holds the plan"
    if nothing and disk.table.label == "gpt":
        torn = _torn_copy(args.target, disk)
        if torn:  # libparted read the good copy; the table is as planned, but not whole on the disk
            console.print(("note: ", "cyan"), torn)
    code = before_writing(proposal.refusals, nothing, args.yes, "write (a backup of the old table is saved first)",
                          console, err)
    if code is not None:
        return code
    outcome = execute(proposal, confirm(proposal, args.yes), h, backup_path=args.backup, progress=progress_lines(err))
    render_outcome(outcome, console, err)
    return outcome.exit_code


def _torn_copy(target: str, disk: Disk) -> str:
    """What to say when one GPT copy fails its checks and the other can rebuild it (a table write a crash cut
    short: backend.move.moveentry.torn_copy, what resume mends): "" otherwise."""
    from diskplan.backend.move.moveentry import torn_copy

    state = torn_copy(target, disk.geometry.logical, disk.geometry.sectors)
    if state is None:
        return ""
    bad = state.backup if state.primary.ok else state.primary
    return (f"the {bad.which} GPT copy fails its checks ({bad.problem or 'no GPT signature'}): "
            f"`diskplan repair {shlex.quote(target)}` rebuilds it from the other")
