"""Apply a plan that keeps partitions with their content (a JSON plan's ``keeps``): the moves and resizes
it needs, checked up front for the whole plan, then run one at a time by the data-move engine.

``prepare_plan_moves(target, disk, spec, desired, host)`` writes nothing. It refuses a plan whose
``keeps`` does not name the disk's own partitions (an unknown number, another GPT unique GUID, another
role or label) or that would move data on a table it was not made against (``made_against``; on msdos,
which has no GUIDs, a plan that moves data must carry it). It orders the steps (model.plan.move.data_steps: shrinks,
then moves in an order where each goes into room the ones before left, then grows) and checks every
step against the layout the steps before it leave: the first step of each partition with the engine's
own ``prepare_move``/``prepare_resize`` on that layout (its filesystem, checker and resize tool, the
shrink minimum, its raw entry, the disk in use), a later one with the same placement rules and the
filesystem found by the first. A plan that also changes the table (a partition deleted, created,
renamed) is refused: see ``MIXED``.

``execute_plan_moves`` runs the steps in that order under one confirmation. Each step is prepared again
against the disk as it is then (the steps before changed it) and is a whole write of its own: its own
lock, table backup, journal (a move) and checks before and after (backend.move.engine, backend.move.resize). The
first step that does not finish stops the rest; the ones before it stay done (each is whole), and the
message says which ran. An interrupted move is finished by ``diskplan resume`` as always; ``before(i)`` is
told just before step i writes anything, so the caller can save the rest of the plan first (backend.move.planrest),
and returns its path: step i's move journal records it, for a rollback to make it true again.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable

from diskplan.backend.fs import fscheck, fssize
from diskplan.backend.fs import fsresize as tools
from diskplan.backend.move.datamove import Progress
from diskplan.backend.move.engine import (
    MoveOutcome,
    MoveProposal,
    boot_warnings,
    execute_move,
    measure_rate,
    movable_label,
    placement,
    prepare_move,
)
from diskplan.backend.move.resize import ResizeProposal, execute_resize, prepare_resize
from diskplan.backend.raw.gptattrs import partition_guids
from diskplan.backend.raw.tableid import disk_fingerprint, table_fingerprint
from diskplan.backend.write.steps import (
    CommitError,
    ConfirmedByName,
    Host,
    Verdict,
    half_moved,
    identity,
    stop_before_writing,
)
from diskplan.backend.write.tablewrite import plan_made_against_another
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Role, State
from diskplan.model.formats.planfile import PlanSpec
from diskplan.model.plan.fsresize import refusals as fs_refusals
from diskplan.model.plan.move import DataStep, SequenceError, data_layout, data_steps, kept_moves, schedule
from diskplan.model.plan.operations import plan_writes
from diskplan.model.table import Table
from diskplan.model.units import human_bytes
from diskplan.model.value import replace, value

# Why a plan that moves data and changes the table is refused rather than written in one go: the table
# write (a libparted commit) can only be checked against the disk once the moves are done (libparted
# places the new partitions on the table it reads), so "checked up front" would not hold for it, and a
# refusal of it after the moves would leave half a plan applied.
MIXED = ("this plan moves or resizes partitions with their data and also changes the table ({ops}): apply "
         "it in two steps, each a plan of its own: the table changes with every kept partition where it is "
         "now, and the moves and resizes (in the order the room needs: a deletion that makes room first)")

StepProposal = MoveProposal | ResizeProposal


@value
class PlanMoves(ConfirmedByName):
    """What applying the plan's moves and resizes would do, step by step, and what refuses it."""

    target: str
    kind: str  # "block" or "file"
    steps: tuple[tuple[DataStep, StepProposal | None], ...]  # in the order they run (None: not checked)
    refusals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    rate: float = 0.0  # bytes/s of a short read (0: not measured)
    sector_size: int = 512
    unfilled: tuple[str, ...] = ()  # kept partitions, where they are, whose filesystem is smaller than the entry

    @property
    def prompt(self) -> str:
        n = len({s.number for s, _ in self.steps})
        return f"Type {self.confirm_word} to move and resize {n} partition{'s' * (n != 1)} on {self.target}"

    @property
    def nbytes(self) -> int:
        """Bytes copied by the moves."""
        return sum(s.length for s, _ in self.steps if s.kind == "move") * self.sector_size

    @property
    def estimate(self) -> float:
        """Seconds for the copies: read and write every byte, then read it back (resizes not counted)."""
        return 3 * self.nbytes / self.rate if self.rate else 0.0


COPY_LAYOUT = ("to copy a layout to another disk, export it with `diskplan export DISK --layout-only` (or "
               "--relative, for a disk of another size), or delete every \"keeps\" and \"made_against\" from the plan")


def keeps_problems(target: str, disk: Disk, spec: PlanSpec, desired: Table, *, moving: bool) -> list[str]:
    """Why the plan's ``keeps`` do not name this disk's partitions ([] when they do). A kept partition must
    exist; its GUID and role are checked when the plan ``moving`` moves or resizes any partition (a plan
    that moves nothing keeps what is on the disk untouched, whatever its GUIDs, as before)."""
    label = movable_label(disk)
    if spec.label != label:
        return [f"the plan keeps partitions of a {spec.label} table; {target} holds "
                f"{disk.table.label or 'no table'}: a kept partition must be on the disk, in a table of the same label"
                f" ({COPY_LAYOUT})"]
    guids = partition_guids(disk)
    out = []
    for k in spec.keeps:
        p, w = disk.table.by_number(k.number), desired.by_number(k.number)
        if p is None or p.state is not State.EXISTING:
            out.append(f"the plan keeps partition {k.number}, which {target} does not have ({COPY_LAYOUT})")
        elif not moving:
            continue
        elif label == "gpt" and not k.guid:
            out.append(f"the plan keeps partition {k.number} without its GUID: on a GPT disk, keeps names the "
                       f"partition's unique GUID too (partition {k.number} of {target} has "
                       f"{guids.get(k.number, 'none that could be read')})")
        elif label == "gpt" and guids.get(k.number) != k.guid:
            out.append(f"the plan keeps partition {k.number} with the GUID {k.guid}, but partition {k.number} of "
                       f"{target} has {guids.get(k.number, 'none that could be read')}: the plan is for another "
                       "partition or another disk")
        elif w is not None and w.role is not p.role:
            out.append(f"the plan keeps partition {k.number} as {w.role.value}; on {target} it is {p.role.value}")
    return out


def table_after(table: Table, steps: list[DataStep]) -> Table:
    """``table`` with each stepped partition where its last step leaves it, and the extended partition grown
    to the furthest end a logical one reached (backend.move.engine and backend.move.resize grow it, never shrink it)."""
    where = {s.number: s.after for s in steps}
    reach = max((s.after.end for s in steps if (p := table.by_number(s.number)) and p.role is Role.LOGICAL), default=0)
    return replace(table, partitions=tuple(
        replace(p, start=where[p.number].start, end=where[p.number].end) if p.number in where else
        replace(p, end=max(p.end, reach)) if p.role is Role.EXTENDED else p
        for p in table.partitions))


def fingerprints_after(disk: Disk, steps: list[DataStep]) -> list[str]:
    """``made_against`` of the disk once ``k`` steps are done, for k = 0..len(steps) (each step changes only
    its partition's extent: type, name, flags, GUIDs and the disk identifier stay)."""
    return [table_fingerprint(table_after(disk.table, steps[:k]), disk.source, disk.geometry, disk.filesystem)
            for k in range(len(steps) + 1)]


def _unfilled(target: str, disk: Disk, spec: PlanSpec, desired: Table) -> tuple[str, ...]:
    """What to say of each kept partition the plan leaves where it is whose filesystem does not fill it: a grow
    that a crash stopped after its entry was written (the rest plan of an apply has nothing left to do then; the
    entry is as planned), or an image copied into a larger partition. Not done by the plan (it asks for no grow):
    said, with the command that does it."""
    ss, said = disk.geometry.logical, []
    for k in spec.keeps:
        p, want = disk.table.by_number(k.number), desired.by_number(k.number)
        if p is None or want is None or (p.start, p.end) != (want.start, want.end) or p.role is Role.EXTENDED:
            continue
        spans = fssize.unfilled(target, p.start * ss, p.size * ss)
        if spans:
            said.append(f"partition {p.number}: its filesystem spans {human_bytes(spans)} of its "
                        f"{human_bytes(p.size * ss)} (a grow stopped after its entry was written, or an image copied "
                        f"into a larger partition): `diskplan resize {shlex.quote(target)} --partition {p.number} "
                        f"--size {p.size}s` grows it to fill the partition")
    return tuple(said)


def _made_against_here(made_against: str, disk: Disk, wanted: dict[int, Extent]) -> bool:
    """The plan was made against the table on ``disk``, or against the table the plan's first step leaves when
    that step is a resize: a rest plan saved before a resize step is made against the table after it (a resize
    has no journal to save it again), so a cut before the resize's entry write (or a torn one that ``repair``
    put back as it was) leaves the disk one step behind its file. The disk is then on the plan's own path, and
    applying it does that step again (a shrink's filesystem already shrunk: its tool says so and the entry
    follows), which is what the file would do; the crash-state suite found those states refused as stale."""
    if made_against == disk_fingerprint(disk):
        return True
    try:
        steps = data_steps(data_layout(disk.table), wanted)
    except SequenceError:
        return False
    return bool(steps) and steps[0].kind != "move" and fingerprints_after(disk, steps[:1])[1] == made_against


def prepare_plan_moves(target: str, disk: Disk, spec: PlanSpec, desired: Table, host: Host) -> PlanMoves:
    """The plan's moves and resizes and what refuses them (see the module's doc); ``steps`` is empty when
    the plan keeps every partition where and as large as it is. Writes nothing. Raises CommitError when
    the target cannot be read."""
    try:
        kind = "block" if identity(target).kind == "block" else "file"  # what confirms it: as each step's own
    except OSError as exc:
        raise CommitError(f"{target}: {exc.strerror}") from exc
    ss = disk.geometry.logical
    unfinished = half_moved(target, disk.geometry.sectors * ss)  # its entry is hidden: say that, not "no partition"
    if unfinished:
        return PlanMoves(target, kind, (), tuple(unfinished), sector_size=ss)
    wanted = kept_moves(disk.table, desired, (k.number for k in spec.keeps))
    bad = keeps_problems(target, disk, spec, desired, moving=bool(wanted))
    if bad:
        return PlanMoves(target, kind, (), tuple(bad), sector_size=ss)
    if wanted and spec.made_against and not _made_against_here(spec.made_against, disk, wanted):
        return PlanMoves(target, kind, (), (plan_made_against_another(target),), sector_size=ss)
    if wanted and disk.table.label == "msdos" and not spec.made_against:
        return PlanMoves(target, kind, (), ("an msdos partition has no GUID to say which one a plan keeps: a plan "
                                            "that moves or resizes one must carry made_against (export and the "
                                            "planner's Ctrl+S write it)",), sector_size=ss)
    layout = data_layout(disk.table)
    try:
        steps = data_steps(layout, wanted)
    except SequenceError as exc:
        return PlanMoves(target, kind, (), (str(exc),), sector_size=ss)
    if not steps:
        return PlanMoves(target, kind, (), sector_size=ss, unfilled=_unfilled(target, disk, spec, desired))
    rest = plan_writes(table_after(disk.table, steps), desired, disk.geometry, filesystem=disk.filesystem)
    mixed = [str(op) for op in rest.operations if op.pending]
    if mixed:
        shown = "; ".join(mixed[:3]) + (f"; and {len(mixed) - 3} more" if len(mixed) > 3 else "")
        return PlanMoves(target, kind, tuple((s, None) for s in steps), (MIXED.format(ops=shown),), sector_size=ss)
    return _checked(target, disk, kind, steps, host)


def _checked(target: str, disk: Disk, kind: str, steps: list[DataStep], host: Host) -> PlanMoves:
    """Each step checked against the layout the steps before it leave (see the module's doc)."""
    ss = disk.geometry.logical
    checked: list[tuple[DataStep, StepProposal | None]] = []
    refusals: list[str] = []
    said: set[str] = set()
    notes: list[str] = []
    first: dict[int, StepProposal] = {}
    done: list[DataStep] = []
    rate = 0.0
    for i, s in enumerate(steps, 1):
        now = replace(disk, table=table_after(disk.table, done))
        if s.number not in first:
            p: StepProposal = (prepare_move(target, s.number, s.to, host, current=now) if s.kind == "move"
                               else prepare_resize(target, s.number, s.new_length, host, current=now))
            first[s.number] = p
        else:
            p = _later(target, now, s, first[s.number], kind)
        rate = rate or getattr(p, "rate", 0.0)
        refusals += [f"step {i} ({s.kind} partition {s.number}): {r}" for r in p.refusals if r not in said]
        said.update(p.refusals)  # the disk in use: said once, not for every step
        notes += [n for n in p.notes if n not in notes]
        checked.append((s, p))
        done.append(s)
    if not rate and any(s.kind == "move" for s in steps) and not refusals:
        s = next(s for s in steps if s.kind == "move")
        rate = measure_rate(target, s.start, s.length, ss)
    return PlanMoves(target, kind, tuple(checked), tuple(refusals), tuple(notes), rate, ss)


def _later(target: str, now: Disk, s: DataStep, first: StepProposal, kind: str) -> StepProposal:
    """A partition's second or third step, checked on the layout ``now`` with what its first step found
    (its bytes are not at this step's start yet, so nothing is read there)."""
    ss = now.geometry.logical
    fs = first.fs
    refusals = placement(now, s.number, s.to, s.new_length)
    entry = replace(first.entry, start=s.start, end=s.start + s.length - 1) if first.entry is not None else None
    if s.kind == "move":
        notes = boot_warnings(target, movable_label(now), fs.fs, s.start, ss)
        return MoveProposal(target, kind, now.geometry.model, now.geometry.sectors, ss, s.number, entry, s.to,
                            schedule(s.start, s.to, s.length, ss), tuple(refusals), tuple(notes), first.identity, fs)
    why = tools.missing(fs.fs) or fscheck.missing_tool(fs.fs)
    refusals += [why] if why else []
    refusals += fs_refusals(fs.fs, s.length * ss, s.new_length * ss, None)
    return ResizeProposal(target, kind, now.geometry.model, now.geometry.sectors, ss, s.number, entry, s.length,
                          s.new_length, tuple(refusals), (), first.identity, fs)


def step_backup(backup_path: str | None, i: int) -> str | None:
    """Where step ``i`` saves its table backup (and a move its journal) when the user named a path: one
    file per step, beside it."""
    if not backup_path:
        return None
    stem, ext = os.path.splitext(backup_path)
    return f"{stem}-step{i}{ext or '.dpbackup'}"


def execute_plan_moves(
    pm: PlanMoves,
    answer: str,
    host: Host,
    *,
    backup_path: str | None = None,
    progress: Callable[[int, DataStep], Progress | None] = lambda i, s: None,
    stop: Callable[[], bool] = lambda: False,
    finished: Callable[[MoveOutcome], None] = lambda o: None,
    before: Callable[[int], str] = lambda i: "",
) -> list[MoveOutcome]:
    """Run the steps in order (see the module's doc): the outcome of each step tried, the last the one
    that stopped the rest (or the last step). ``progress(i, step)``: the progress callback of step i;
    ``finished``: told each step's outcome as soon as it is known."""
    gate = stop_before_writing(pm, answer, MoveOutcome(Verdict.REFUSED, "", pm.target), "")
    if gate is not None:
        finished(gate)
        return [gate]
    outcomes: list[MoveOutcome] = []
    for i, (s, _) in enumerate(pm.steps, 1):
        where = f"step {i} of {len(pm.steps)} ({s.kind} partition {s.number})"
        if i > 1 and stop():
            outcomes.append(MoveOutcome(Verdict.FAILED, f"stopped before {where}: the steps before it are done, each "
                                        "whole", pm.target))
            finished(outcomes[-1])
            break
        try:
            p = (prepare_move(pm.target, s.number, s.to, host) if s.kind == "move"
                 else prepare_resize(pm.target, s.number, s.new_length, host))
        except CommitError as exc:
            outcomes.append(MoveOutcome(Verdict.FAILED, f"{where}: {exc}", pm.target))
            finished(outcomes[-1])
            break
        at = p.plan.start if isinstance(p, MoveProposal) else p.entry.start if p.entry is not None else -1
        size = p.plan.length if isinstance(p, MoveProposal) else p.old
        if (at, size) != (s.start, s.length):
            p = replace(p, refusals=(*p.refusals, f"partition {s.number} is at {at} with {size} sectors, not where "
                                     f"the plan's {where} expects it ({s.start}, {s.length} sectors)"))
        path = step_backup(backup_path, i) if len(pm.steps) > 1 else backup_path
        rest = before(i)
        if isinstance(p, MoveProposal):
            o = execute_move(p, answer, host, backup_path=path, progress=progress(i, s), stop=stop, rest=rest)
        else:
            o = execute_resize(p, answer, host, backup_path=path, progress=progress(i, s))
        if i > 1 and o.verdict is not Verdict.WRITTEN:
            o = replace(o, message=f"{where}: {o.message} (steps 1..{i - 1} are done, each whole)")
        outcomes.append(o)
        finished(o)
        if not o.complete:  # failed, or written but the kernel does not see it: the next step waits
            break
    return outcomes
