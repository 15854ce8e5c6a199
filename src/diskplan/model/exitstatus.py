"""The exit status of every diskplan command: one scheme, so a script can tell "nothing was written, as
asked" from "refused" from "could not even read it" from "a write went wrong part-way".

A preview is not a refusal: a write command without --yes shows what it would do, writes nothing, and exits
0, as ``sfdisk --no-act`` does (a `set -e` script does not stop on it). "Nothing to do" (the disk already is
as asked, no unfinished move to resume) is 0 too. ``check`` uses 1 for "findings": its answer is no.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0  # done, nothing to do, or shown only (no --yes)
    REFUSED = 1  # refused (unsafe, invalid for this disk) or not confirmed; check: findings. Nothing written
    UNREADABLE = 2  # bad usage, or the target, plan, backup or journal could not be read. Nothing written
    FAILED = 3  # a write began and failed or was stopped: the message says whether the disk changed and what to do


# The whole scheme, for ``diskplan --help`` and the man page's EXIT STATUS (README: "Exit status").
MEANINGS: tuple[tuple[Exit, str], ...] = (
    (Exit.OK, "done, nothing to do (resume: no unfinished move), or only shown: a write command without --yes "
              "is a preview, as sfdisk --no-act; check: no findings"),
    (Exit.REFUSED, "refused (unsafe, invalid for this disk, an unfinished move on it) or not confirmed: nothing "
                   "written; check: findings"),
    (Exit.UNREADABLE, "bad usage, or the target, plan, backup or journal could not be read: nothing written"),
    (Exit.FAILED, "a write began and failed or was stopped: the message says whether the disk changed and "
                  "which command finishes (resume) or undoes (restore) it"),
)
SUMMARY = "Exit status of every command: " + "; ".join(f"{int(c)} {m}" for c, m in MEANINGS) + "."

# One line for every writing command's --help and the man page (README: "Exit status").
WRITES = ("Exit status: 0 done, nothing to do, or only shown (no --yes); 1 refused or not confirmed (nothing "
          "written); 2 bad usage or an input could not be read (nothing written); 3 the write began and failed or "
          "was stopped (the message says whether the disk changed and what finishes or undoes it).")
