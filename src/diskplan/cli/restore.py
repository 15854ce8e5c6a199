"""``diskplan restore BACKUP TARGET [--yes]``: put a table backup (saved by ``diskplan apply``) back,
byte for byte, then tell the kernel.

Refuses a target of another size or sector size (the saved sectors would land elsewhere), a disk in use,
and a disk the backup was not taken from (unless ``--force-foreign``). Never writes a saved sector inside a
partition of the table now on the disk. Shows the backed-up table and which sectors would change; writes
nothing without ``--yes``.

Exit status (model.exitstatus): 0 restored, the disk already holds the backup, or shown without --yes;
1 refused or not confirmed; 2 the backup or the target could not be read; 3 the write failed.
"""

from __future__ import annotations

import argparse

from diskplan.backend.write.restore import RestoreProposal, execute_restore, prepare_restore
from diskplan.backend.write.steps import CommitError
from diskplan.cli.apply import render_outcome
from diskplan.cli.confirm import before_writing, confirm, progress_lines
from diskplan.cli.options import add_open_writers, host
from diskplan.cli.textout import Out, consoles
from diskplan.model.exitstatus import WRITES


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan restore",
        description="Put a partition-table backup made by `diskplan apply` back on a disk, byte for byte.",
        epilog=WRITES,
    )
    p.add_argument("backup", help="the .dpbackup file `diskplan apply` printed")
    p.add_argument("target", help="block device or image file")
    p.add_argument("--yes", action="store_true", help="write (without it, only show what would be written)")
    add_open_writers(p)
    p.add_argument("--force-foreign", action="store_true",
                   help="write even though the disk does not look like the one the backup was taken from "
                        "(its table id or its table sectors differ); partitions now on it are still left alone")
    return p


def render(r: RestoreProposal, console: Out) -> None:
    b = r.backup
    model = f" ({b.model})" if b.model else ""
    console.print((r.backup_path, "bold"), f": taken from {b.target}{model} at {b.created or '?'}")
    console.print(f"{b.sectors} sectors × {b.sector_size} B; {b.saved_sectors} sectors saved in "
                  f"{len(b.chunks)} run(s); the old table was {b.label}")
    left = (f"its write left {b.written.table}" if b.written
            else "no record of what its write left (format 1, or an interrupted write)")
    console.print(f"taken over the table {b.table_id}; {left}")
    if b.dump:
        console.print("Old table (sfdisk dump)", style="bold")
        console.lines(b.dump.rstrip("\n").split("\n"))
    if r.changed:
        runs = ", ".join(f"{e.start}..{e.end}" for e in r.changed[:8]) + (" …" if len(r.changed) > 8 else "")
        console.print(f"sectors that now differ on {r.target} and would be put back: {runs}")
    for note in r.notes:
        console.print(("note: ", "cyan"), note)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    h = host(args)
    try:
        proposal = prepare_restore(args.backup, args.target, h, force_foreign=args.force_foreign)
    except CommitError as exc:
        err.print(f"diskplan restore: {exc}")
        return 2
    render(proposal, console)
    nothing = "" if proposal.changed else f"nothing to do: {args.target} already holds the backed-up sectors"
    code = before_writing(proposal.refusals, nothing, args.yes, "put these sectors back", console, err)
    if code is not None:
        return code
    outcome = execute_restore(proposal, confirm(proposal, args.yes), h, progress=progress_lines(err))
    render_outcome(outcome, console, err)
    return outcome.exit_code
