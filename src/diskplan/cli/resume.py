"""``diskplan resume TARGET [--yes] [--journal PATH] [--rollback]``: finish a move that was interrupted (a
crash, a power cut, Ctrl+C, an I/O error), from its journal (backend.move.engine says what it does at each point),
or, with ``--rollback`` and until its copy is verified, put it back (backend.move.moveundo; what was copied over
its old place is copied back first, backend.move.reverse).

Exit status (model.exitstatus): 0 finished, nothing to resume, or shown without --yes; 1 refused or not
confirmed (nothing written); 2 the target or the journal could not be read; 3 failed or stopped again.
"""

from __future__ import annotations

import argparse

from diskplan.backend.move.engine import NothingToResume, execute_resume, prepare_resume
from diskplan.backend.move.moveundo import execute_rollback
from diskplan.backend.write.steps import CommitError, preload
from diskplan.cli.dataprogress import ROLLBACK_UNSTOPPABLE
from diskplan.cli.move import run
from diskplan.cli.options import host
from diskplan.cli.textout import consoles
from diskplan.model.exitstatus import WRITES, Exit


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="diskplan resume", description="Finish an interrupted partition move.",
                                epilog=WRITES + " Nothing to resume is 0.")
    p.add_argument("target", help="block device or image file")
    p.add_argument("--yes", action="store_true", help="finish it (without it, only show where it stands)")
    p.add_argument("--journal", metavar="PATH", help="the move journal (default: the newest unfinished one for TARGET)")
    p.add_argument("--rollback", action="store_true",
                   help="put the partition back at its old place (until the copy is verified; what was copied over "
                   "its old place is copied back first)")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()
    try:
        p = prepare_resume(args.target, host(), args.journal, rollback=args.rollback)
    except NothingToResume as exc:
        console.print(f"nothing to do: {exc}", style="green")
        return Exit.OK
    except CommitError as exc:
        err.print(f"diskplan resume: {exc}")
        return Exit.UNREADABLE
    console.print(f"unfinished move recorded in {p.journal}")
    if args.rollback:
        return run(p, args.yes, "roll it back", console, err, execute_rollback, unstoppable=ROLLBACK_UNSTOPPABLE)
    return run(p, args.yes, "finish the move", console, err, execute_resume)
