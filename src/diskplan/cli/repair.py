"""``diskplan repair TARGET [--yes] [--backup PATH]``: rebuild a damaged GPT copy (or a lost protective
MBR) from the good copy, or move the backup GPT to the end of a grown disk, safely.

Shows what is damaged, every sector the repair writes and the partitions (unchanged), and writes nothing
without ``--yes``. With ``--yes``: checks that nothing uses the disk and that it still needs the same
repair, saves a backup of both ends of the disk (its path is printed), writes exactly the repair's
sectors, syncs, and reads the disk back: both GPT copies valid and equal, the partitions as they were.
On a block device, when run from a terminal, the device name must be typed too (as for ``apply``).

Exit status (model.exitstatus): 0 repaired, nothing to repair, or shown without --yes; 1 refused (in use,
damaged beyond what diskplan repairs, or not confirmed: nothing written); 2 the target could not be read;
3 the write went wrong (the message says what state the disk is in and how to restore it).
"""

from __future__ import annotations

import argparse

from diskplan.backend.read.reader import ReadError, read
from diskplan.backend.write.gptrepair import execute_repair, prepare_repair
from diskplan.backend.write.proposal_text import headline
from diskplan.backend.write.steps import CommitError, Proposal, Verdict, preload
from diskplan.cli.apply import render_outcome
from diskplan.cli.confirm import before_writing, confirm, progress_lines
from diskplan.cli.options import TargetError, add_open_writers, host, open_target
from diskplan.cli.textout import Out, consoles
from diskplan.model import ptypes
from diskplan.model.exitstatus import WRITES
from diskplan.model.findings.codes import NEEDS_REPAIR
from diskplan.model.safetext import columns
from diskplan.model.units import human_bytes

OP_STYLE = {"repair": "yellow"}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "notice": "cyan"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan repair",
        description="Rebuild a damaged GPT copy (primary or backup header and entries) or a lost protective MBR "
        "from the good copy, or move the backup GPT to the end of a grown disk (as sgdisk -e does). Partitions, "
        "GUIDs and names stay exactly as the good copy has them.",
        epilog=WRITES,
    )
    p.add_argument("target", help="block device or image file")
    p.add_argument("--yes", action="store_true", help="write (without it, only show what would be written)")
    add_open_writers(p)
    p.add_argument("--backup", metavar="PATH", help="where to save the backup of both ends of the disk "
                   "(default: ~/.local/state/diskplan/backups/DISK-TIME.dpbackup)")
    return p


def render(p: Proposal, console: Out) -> None:
    console.print(headline(p), style="bold")
    for f in p.current.findings:
        if f.code in NEEDS_REPAIR:
            console.print((f"{f.severity}: ", SEVERITY_STYLE.get(f.severity, "")), f.message)
    if p.repair is not None:
        console.print(("Repair: ", "bold"), p.repair.summary)
        for op in p.operations:
            if op.kind == "repair":
                console.print("  ", (str(op), OP_STYLE["repair"]))
    t = p.current.table
    if t.label is not None:
        kept = f", unchanged: as the {p.repair.good} copy has them" if p.repair is not None else ""
        console.print((f"Partitions{kept}", "bold"), f" (sectors of {p.sector_size} B, end inclusive)")
        rows = [
            (str(q.number), str(q.start), str(q.end), str(q.size), human_bytes(q.size * p.sector_size),
             ptypes.describe(q.type), q.name)
            for q in sorted(t.partitions, key=lambda q: q.number)
        ]
        head, *body = columns(("#", "start", "end", "sectors", "size", "type", "name"), rows, right=5)
        console.print(head, style="bold")
        console.lines(body)
    for note in p.notes:
        console.print(("note: ", "cyan"), note)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()  # the children that read and verify inherit pyparted instead of importing it
    try:
        disk = open_target(args.target)
    except TargetError as exc:
        err.print(f"diskplan repair: {exc}")
        return 2
    h = host(args)
    try:
        proposal = prepare_repair(args.target, h, current=disk)
    except CommitError as exc:
        err.print(f"diskplan repair: {exc}")
        return 2
    render(proposal, console)
    nothing = "" if proposal.repair is not None else (
        f"nothing to repair: {args.target} has no damaged GPT copy and no missing protective MBR")
    code = before_writing(proposal.refusals, nothing, args.yes,
                          "repair (a backup of both ends of the disk is saved first)", console, err)
    if code is not None:
        return code
    outcome = execute_repair(proposal, confirm(proposal, args.yes), h, backup_path=args.backup,
                             progress=progress_lines(err))
    render_outcome(outcome, console, err)
    if outcome.verdict is Verdict.WRITTEN:
        _next_repair(args.target, console)
    return outcome.exit_code


def _next_repair(target: str, console: Out) -> None:
    """A disk can need two repairs (a lost primary GPT and a lost protective MBR): say so."""
    try:
        again = read(target)
    except ReadError:
        return
    if again.repair is not None:
        console.print(("next: ", "bold"), f"{again.repair.summary}; run `diskplan repair {target}` again")
