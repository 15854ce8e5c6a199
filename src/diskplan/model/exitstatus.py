"""The exit status of every diskplan command: one scheme, so a script can tell "nothing was written, as
asked" from "refused" from "could not even read it" from "a write went wrong part-way".

A preview is not a refusal: a write command without --yes shows what it would do, writes nothing, and exits
0, as ``sfdisk --no-act`` does (a `set -e` script does not stop on it). "Nothing to do" (the disk already is
as asked, no unfinished move to resume) is 0 too. ``check`` uses 1 for "findings": its answer is no.
Stopped from outside (Ctrl+C, a signal, an internal error) before any write is 2, not 1: nothing was refused,
and a `set -e` script that tells "refused" (or check's findings) from the rest is not misled; after a write
began it is 3, as any write that was stopped. The planner follows the same scheme.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0  # done, nothing to do, or shown only (no --yes)
    REFUSED = 1  # refused (unsafe, invalid for this disk) or not confirmed; check: findings. Nothing written
    UNREADABLE = 2  # bad usage, or the target, plan, backup or journal could not be read. Nothing written
    FAILED = 3  # a write began and failed or was stopped: the message says whether the disk changed and what to do


def stopped(write_began: bool) -> Exit:
    """The status of a command, or the planner, that Ctrl+C, a signal or an internal error ended: 2 while no write
    had begun (nothing written, nothing refused: 1 would read as ``check``'s findings, and ``export`` documents
    only 0 and 2), 3 once one had (the message says how the disk stands)."""
    return Exit.FAILED if write_began else Exit.UNREADABLE


# The whole scheme, for ``diskplan --help`` and the man page's EXIT STATUS (README: "Exit status").
MEANINGS: tuple[tuple[Exit, str], ...] = (
    (Exit.OK, "done, nothing to do (resume: no unfinished move), or only shown: a write command without --yes "
              "is a preview, as sfdisk --no-act; check: no findings"),
    (Exit.REFUSED, "refused (unsafe, invalid for this disk, an unfinished move on it) or not confirmed: nothing "
                   "written; check: findings"),
    (Exit.UNREADABLE, "bad usage, the target, plan, backup or journal could not be read, or stopped (Ctrl+C, a "
                      "signal, an internal error) before any write: nothing written"),
    (Exit.FAILED, "a write began and failed or was stopped: the message says whether the disk changed and "
                  "which command finishes (resume) or undoes (restore) it"),
)
SUMMARY = "Exit status of every command: " + "; ".join(f"{int(c)} {m}" for c, m in MEANINGS) + "."

# One line for every writing command's --help and the man page (README: "Exit status").
WRITES = ("Exit status: 0 done, nothing to do, or only shown (no --yes); 1 refused or not confirmed (nothing "
          "written); 2 bad usage, an input could not be read, or stopped (Ctrl+C) before any write (nothing "
          "written); 3 the write began and failed or was stopped (the message says whether the disk changed and "
          "what finishes or undoes it).")
