"""``diskplan resume TARGET [--yes] [--journal PATH] [--rollback]``: finish a move that was interrupted (a
crash, a power cut, Ctrl+C, an I/O error), from its journal (backend.move says what it does at each point),
or, with ``--rollback`` and while no byte of its old place was overwritten, put it back (backend.moveundo).

Exit status: 0 finished, 1 refused or not confirmed (nothing written), 2 failed or stopped again.
"""

from __future__ import annotations

import argparse

from diskplan.backend.move import execute_resume, prepare_resume
from diskplan.backend.moveundo import execute_rollback
from diskplan.backend.write import CommitError, preload
from diskplan.cli.dataprogress import ROLLBACK_UNSTOPPABLE
from diskplan.cli.move import run
from diskplan.cli.options import host
from diskplan.cli.textout import consoles


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="diskplan resume", description="Finish an interrupted partition move.")
    p.add_argument("target", help="block device or image file")
    p.add_argument("--yes", action="store_true", help="finish it (without it, only show where it stands)")
    p.add_argument("--journal", metavar="PATH", help="the move journal (default: the newest unfinished one for TARGET)")
    p.add_argument("--rollback", action="store_true",
                   help="put the partition back at its old place (only while none of its bytes was overwritten)")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    preload()
    try:
        p = prepare_resume(args.target, host(), args.journal, rollback=args.rollback)
    except CommitError as exc:
        err.print(f"diskplan resume: {exc}")
        return 2
    console.print(f"unfinished move recorded in {p.journal}")
    if args.rollback:
        return run(p, args.yes, "roll it back", console, err, execute_rollback, unstoppable=ROLLBACK_UNSTOPPABLE)
    return run(p, args.yes, "finish the move", console, err, execute_resume)
