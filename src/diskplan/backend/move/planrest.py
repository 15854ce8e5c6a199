"""The rest of a plan whose moves stopped part-way: a plan file that finishes it with one command.

A plan that moves data names the table it was made against (``made_against``; on msdos it must), and each
step changes that table, so after a step or two the plan itself is refused as stale. Before step i runs,
``apply`` writes the *rest plan*: the same wanted table and ``keeps``, with ``made_against`` the table as it
is before step i when the step is a move, and the move itself saves it again, made against the table it
leaves, right before its journal is marked done (``resave``; also when ``diskplan resume`` finishes it). So a
kill, a power cut or Ctrl+C anywhere in step i leaves a file that matches the table once ``diskplan resume``
has finished (or rolled back) the move, or, when the cut came before the move's journal existed, the table as
it is; the file is right even when nothing could be said after the stop. (The crash-state suite found a cut
before the journal existed left a rest plan made against the table after step i: refused as stale.) A resize
step (no journal) is saved made against the table after it, as before: a cut before its entry write leaves the
disk one step behind, which planmoves accepts for a resize (``_made_against_here``).
When apply itself stops cleanly (a step refused at its turn, a failure that left no move unfinished) it
writes the table as read then. Applying the rest plan does only the steps still to do ("nothing to do" when
all are), and on another disk it is refused as stale like any plan.

Each step's move journal records the rest plan's path (``Header.rest``). ``resume --rollback`` of step i puts
the disk back at the table after step i-1 (a rollback is refused once the copy is verified, before the move
saves the file again, so the file describes that table already): ``after_rollback`` saves it again, made
against the table as it is then, and says so: it still finishes the plan (doing step i again) and is never
stale while the user is told to apply it.

The file goes beside the plan (``plan.json`` -> ``plan.rest.json``), or in the state directory when the plan
was read from standard input or its directory is not writable; an existing file is never overwritten (the
name gets ``-2``, ``-3``...). It is removed again when every step is done, or when none is (then the plan
itself still applies).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from dataclasses import dataclass

from diskplan.backend.raw.tableid import disk_fingerprint
from diskplan.backend.write.backup import state_dir, sync_dir, write_synced
from diskplan.model.formats.planfile import PlanFileError, PlanSpec, load_plan, to_json
from diskplan.model.value import replace

REST_DIR = ("diskplan", "plans")  # under the state directory


def fingerprint_now(target: str, fallback: str) -> str:
    """``made_against`` of the disk as read now (``fallback``, the predicted one, when it cannot be read)."""
    from diskplan.backend.parted.readahead import ReadError
    from diskplan.backend.read.reader import read

    try:
        return disk_fingerprint(read(target)) or fallback
    except (ReadError, OSError):
        return fallback


def _candidates(plan_path: str) -> list[str]:
    """Where the rest plan may go: beside the plan, then the state directory."""
    stem = "plan" if plan_path == "-" else os.path.basename(plan_path)
    stem = stem[: -len(".json")] if stem.endswith(".json") else stem
    dirs = [] if plan_path == "-" else [os.path.dirname(os.path.abspath(plan_path))]
    dirs.append(os.path.join(state_dir(), *REST_DIR))
    return [os.path.join(d, f"{stem}.rest.json") for d in dirs]


def _create(path: str) -> str | None:
    """``path`` or the first free ``-N`` variant of it, created empty (0600) so no one else's file is ever
    overwritten; None when its directory cannot be written."""
    base = path[: -len(".json")]
    for n in range(1, 1000):
        name = path if n == 1 else f"{base}-{n}.json"
        try:
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            return name
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


@dataclass
class RestPlan:
    """The rest plan of one ``apply`` run: created at the first ``save``, rewritten by this run only."""

    plan_path: str  # the plan file as named ("-": standard input)
    spec: PlanSpec  # the plan as applied (placed on the disk)
    path: str = ""  # "" until saved
    problem: str = ""  # why it could not be written, if so

    def save(self, made_against: str) -> bool:
        """Write the rest plan with ``made_against`` (durably: a kill right after finds it whole)."""
        if not self.path:
            own = os.path.join(state_dir(), *REST_DIR)
            for where in _candidates(self.plan_path):
                if os.path.dirname(where) == own:
                    try:
                        os.makedirs(own, mode=0o700, exist_ok=True)
                    except OSError:
                        continue
                made = _create(where)
                if made:
                    self.path = made
                    break
            else:
                self.problem = "the rest of the plan could not be saved (no writable place for it)"
                return False
        spec = replace(self.spec, made_against=made_against, relative=None, script=None, notes=())
        tmp = f"{self.path}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                write_synced(fd, to_json(spec).encode())
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            sync_dir(os.path.dirname(self.path))
        except OSError as exc:
            self.problem = f"the rest of the plan could not be saved in {self.path}: {exc.strerror}"
            return False
        return True

    def discard(self) -> None:
        """Remove it (every step done, or none): the plan itself says all there is."""
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = ""


def after_rollback(path: str, target: str) -> str:
    """Step i's move, a step of the apply that saved the rest plan ``path``, is rolled back: the disk holds the
    table after step i-1 again. The rest plan is saved again, made against that table (the same wanted table
    and ``keeps``: applying it does step i and the steps after it again). What to tell the user ("" when the
    file is gone: nothing is stale then)."""
    q = shlex.quote
    problem = resave(path, target)
    if problem is None:
        return ""
    if problem:
        return problem
    return (f"the rest of the plan in {path} now starts from the table as it is now, without this move: "
            f"`diskplan apply {q(path)} {q(target)}` does this move and the steps after it again (or delete the file "
            "to stop here: the steps before this one stay done)")


def resave(path: str, target: str) -> str | None:
    """The rest plan ``path`` saved again, made against the table on ``target`` as it is now: "" when done, None
    when the file is gone (nothing is stale then), else what went wrong (the file is removed, so nothing stale
    is left to apply). A move that is a step of an apply runs this right before its journal is marked done (and
    its rollback before ``undone``), so a power cut anywhere leaves a rest plan that starts from the table the
    recovery leaves: during step i it is made against the table after step i-1 (a cut before the move's journal
    exists leaves that table), and the move's end makes it the table after step i."""
    export = f"plan again from `diskplan export {shlex.quote(target)}`"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, encoding="utf-8") as f:
            spec = load_plan(f.read())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, PlanFileError) as exc:
        return (f"the rest of the plan in {path} could not be read again ({exc}): {export}")
    now = fingerprint_now(target, "")
    rest = RestPlan(path, spec, path)
    if not now or not rest.save(now):
        rest.discard()
        return f"the rest of the plan in {path} could not be made to start from the table as it is now and is " \
               f"removed: {export}"
    return ""
