"""What writing a plan does to a table, worked out before anything is written: the operations (new
label, delete N, create N at start..end, change N, rewrite an EBR, keep N), the table the disk will hold,
what makes a plan unwritable, and how a table read back differs from the plan.

``plan_writes`` builds the one list (a ``Changes``), as blivet's ActionList: the planner's Changes panel
shows its operations, the confirmation lists the same objects, and backend.write.commit executes them
(``prepare`` takes the ``Changes``). ``validate`` is the one validator: the planner, plan files and the
commit refuse the same tables for the same reasons.

libparted's rules are built in here because they decide the outcome: a kept partition (same number,
start, end and role) is never deleted and re-added; msdos logical partitions are renumbered 5, 6, … in
the order of their EBR chain when one is deleted, and new ones are appended, so when that cannot give the
plan's numbers every logical partition is re-added in the plan's order (only EBRs are written: their data
stays where it is).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from operator import attrgetter

from diskplan.model import labels, ptypes
from diskplan.model.disk import content_phrase
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.plan.fsresize import doing
from diskplan.model.plan.move import DataStep, SequenceError, data_layout, data_steps, kept_moves
from diskplan.model.plan.repair import GptRepair
from diskplan.model.table import Table, new_table
from diskplan.model.units import human_bytes
from diskplan.model.value import field, replace, value

DEFAULT_TYPE = {label: labels.default_type(label) for label in labels.WRITTEN_LABELS}  # what libparted gives
# Flags libparted 3.5 can set; every other GPT attribute bit, and every type GUID it cannot express, is
# written into the raw entries right after its commit (backend.raw.gptpatch).
ATTRIBUTE_FLAGS = {"gpt": ("hidden", "legacy_boot"), "msdos": ("boot",)}
LABEL_NAMES = {"gpt": "gpt", "msdos": "msdos", "dos": "msdos", "mbr": "msdos"}
_order = attrgetter("start", "number")


@value
class Operation:
    kind: str  # "label", "delete", "create", "change", "rewrite", "keep", "repair", "move"
    number: int = 0
    start: int = 0
    end: int = 0
    detail: str = ""
    # What the commit writes: the partition deleted (as on disk), created, re-added, changed or kept.
    partition: Partition | None = field(default=None, compare=False, repr=False)
    source: int = 0  # a move or resize: the partition's start on the disk now (start..end: where it will be)
    nbytes: int = 0  # a move: the bytes copied
    source_size: int = 0  # a resize: the partition's sectors on the disk now

    @property
    def moves_data(self) -> bool:
        """A change to a partition that holds data (backend.move.engine, backend.move.resize): not a table commit."""
        return self.kind in ("move", "resize")

    @property
    def source_end(self) -> int:
        return self.source + (self.source_size or self.end - self.start + 1) - 1

    def steps(self) -> tuple[DataStep, ...]:
        """The writes this move or resize is made of on its own (model.plan.move.data_steps: a shrink before the
        move, a grow after it, each whole and safe on its own); ``Changes.steps`` has them in the plan's order."""
        old, new = Extent(self.source, self.source_end), Extent(self.start, self.end)
        return tuple(data_steps({self.number: old}, {self.number: new})) if self.moves_data else ()

    @property
    def pending(self) -> bool:
        """A change to review: everything but a partition kept as it is (a kept one renumbered counts)."""
        return self.kind != "keep" or bool(self.detail)

    def __str__(self) -> str:
        where = f"{self.start}..{self.end}"
        text = {
            "label": f"new {self.detail} label (every old partition is removed)",
            "delete": f"delete {self.number} ({where})",
            "create": f"create {self.number} at {where}",
            "change": f"change {self.number} ({where})",
            "rewrite": f"rewrite the EBR of logical {self.number} at {where} (its data is not touched)",
            "keep": f"keep {self.number} at {where} (untouched)",
            "repair": f"repair: write sector{'s ' + where if self.end > self.start else ' ' + str(self.start)}",
            "move": f"move {self.number} with its data: {self.source}..{self.source + self.end - self.start} -> "
                    f"{where} ({self.nbytes:,} B = {human_bytes(self.nbytes)} copied)",
            "resize": self._resize_text(),
        }[self.kind]
        return f"{text}: {self.detail}" if self.detail and self.kind != "label" else text


    def _resize_text(self) -> str:
        size, old = self.end - self.start + 1, self.source_size
        verb = "grow" if size > old else "shrink"
        p = self.partition
        fs = dict(p.extra).get("content", "") if p is not None else ""
        steps = doing(fs, old, size)
        if self.nbytes:  # a shrink before the move, a grow after it
            moved = f"{self.nbytes:,} B = {human_bytes(self.nbytes)} copied to the new start"
            steps = f"{steps}; then {moved}" if size < old else f"{moved} first; then {steps}"
        return (f"{verb} {self.number} with its data: {self.source}..{self.source_end} -> {self.start}..{self.end} "
                f"({old}s -> {size}s; {steps})")


def repair_operations(repair: GptRepair | None, table: Table, sector_size: int) -> tuple[Operation, ...]:
    """A repair as operations: one "repair" per run of sectors it writes (which copy, from which), then
    "keep" for every partition of ``table`` (the one on the disk: a repair changes none of them)."""
    runs = repair.runs(sector_size) if repair is not None else ()
    out = [Operation("repair", 0, e.start, e.end, what) for e, what in runs]
    out += [Operation("keep", p.number, p.start, p.end) for p in sorted(table.partitions, key=lambda p: p.number)]
    return tuple(out)


def type_key(label: str, text: str) -> str:
    """One spelling per type, so "Linux swap", "0657FD6D-…" and "swap" compare equal on GPT, and
    "0x82", "82" and "Linux swap" on msdos."""
    if not text:
        return ""
    t = ptypes.lookup(text)
    if label == "gpt":
        return (t.gpt if t and t.gpt else text).upper()
    if t is not None and t.mbr is not None:
        return f"0x{t.mbr:02x}"
    try:
        return f"0x{int(text, 16):02x}"
    except ValueError:
        return text.lower()


def _flags(label: str, p: Partition) -> set[str]:
    """The attribute flags that count (libparted also lists types as flags: "swap", "esp", ...)."""
    return set(p.flags) & set(labels.attribute_flags(label))


def differences(expected: Table, found: Table) -> list[str]:
    """Every way ``found`` (read back from the disk) differs from ``expected``: sector-exact extents,
    numbers, roles; types where the plan names one; GPT names; attribute flags."""
    out = []
    label = expected.label or ""
    if (found.label or "") != label:  # None and "" both mean no label
        return [f"the disk holds a {found.label or 'no'} label, not {label or 'no label'}"]
    want = {p.number: p for p in expected.live}
    got = {p.number: p for p in found.partitions}
    for n in sorted(set(want) | set(got)):
        w, g = want.get(n), got.get(n)
        if g is None and w is not None:
            out.append(f"partition {n} ({w.start}..{w.end}) is missing")
        elif w is None and g is not None:
            out.append(f"partition {n} ({g.start}..{g.end}) is not in the plan")
        elif w is not None and g is not None:
            if (w.start, w.end) != (g.start, g.end):
                out.append(f"partition {n} is at {g.start}..{g.end}, not {w.start}..{w.end}")
            if w.role is not g.role:
                out.append(f"partition {n} is {g.role.value}, not {w.role.value}")
            if w.type and type_key(label, w.type) != type_key(label, g.type):
                out.append(f"partition {n} has type {ptypes.describe(g.type)}, not {ptypes.describe(w.type)}")
            if label == "gpt" and w.name != g.name:
                out.append(f"partition {n} is named {g.name!r}, not {w.name!r}")
            if _flags(label, w) != _flags(label, g):
                have = ", ".join(sorted(_flags(label, g))) or "none"
                out.append(f"partition {n} has flags {have}, not {', '.join(sorted(_flags(label, w))) or 'none'}")
    return out


# --- planning ---------------------------------------------------------------------------------------


SAID = 5  # problems of one kind said one by one; the rest are counted


def _some(template: str, items: Sequence[object]) -> list[str]:
    """``template`` filled with each of ``items``, the first ``SAID`` of them, then how many more there are:
    a plan of 200,000 duplicated entries gets a line, not a megabyte."""
    out = [template.format(item) for item in items[:SAID]]
    if len(items) > SAID:
        out.append(f"and {len(items) - SAID} more like it")
    return out


def validate(table: Table, geom: Geometry) -> list[str]:
    """What makes ``table`` unwritable on ``geom`` (empty when it can be written): the one validator,
    for the planner, plan files and the commit. Overlaps, partitions outside the usable area, past the
    disk or the extended partition, numbering, and msdos rules: 4 primary partitions (the extended one
    counts), one extended partition, logical ones inside it with a free sector before each for its EBR,
    numbered 5, 6, … without gaps (libparted numbers them in the order of their EBR chain)."""
    label = table.label
    if label not in labels.WRITTEN_LABELS:
        return [f"diskplan writes gpt and msdos tables, not {label or 'no table'}"]
    out: list[str] = []
    if table.last_usable >= geom.sectors or table.first_usable < 1:
        out.append(f"usable area {table.first_usable}s..{table.last_usable}s does not fit a disk of "
                   f"{geom.sectors} sectors")
    live = sorted(table.live, key=_order)
    numbers = [p.number for p in live]
    out += _some("two partitions are numbered {}", sorted(n for n, k in Counter(numbers).items() if k > 1))
    tops = [p for p in live if p.role is not Role.LOGICAL]
    logicals = [p for p in live if p.role is Role.LOGICAL]
    for p in live:
        if p.end < p.start:
            out.append(f"partition {p.number} ends before it starts")
        elif p.role is not Role.LOGICAL and not (table.first_usable <= p.start and p.end <= table.last_usable):
            past = f" (it ends past the last sector {geom.sectors - 1})" if p.end > geom.sectors - 1 else ""
            out.append(f"partition {p.number} ({p.start}s..{p.end}s) is outside the usable area "
                       f"{table.first_usable}s..{table.last_usable}s of a {label} table{past}")
        elif p.end > geom.sectors - 1:
            out.append(f"partition {p.number} ({p.start}s..{p.end}s) ends past the last sector {geom.sectors - 1}")
    # Sorted by start, a partition overlaps some other one exactly when it starts before the furthest end
    # seen so far: one pass (a plan file may hold 200,000 entries).
    furthest: Partition | None = None
    overlaps = []
    for b in tops:
        if furthest is not None and b.start <= furthest.end:
            overlaps.append(f"{furthest.number} and {b.number}")
        if furthest is None or b.end > furthest.end:
            furthest = b
    out += _some("partitions {} overlap", overlaps)
    if label == "gpt":
        if any(p.role is not Role.PRIMARY for p in live):
            out.append("GPT has no extended or logical partitions")
        if any(not 1 <= n <= table.max_partitions for n in numbers):
            out.append(f"GPT partition numbers go from 1 to {table.max_partitions}")
        return out
    extended = [p for p in tops if p.role is Role.EXTENDED]
    if len(tops) > labels.MSDOS_PRIMARIES or any(not 1 <= p.number <= labels.MSDOS_PRIMARIES for p in tops):
        out.append("msdos has at most 4 primary partitions (an extended one counts), numbered 1 to 4")
    if len(extended) > 1:
        out.append("msdos has at most one extended partition")
    booted = [p.number for p in live if "boot" in p.flags]
    if len(booted) > 1:  # libparted keeps the flag on one partition only: the write would not read back as planned
        out.append(f"msdos marks one partition active (boot), not {len(booted)} "
                   f"(partitions {', '.join(map(str, booted))})")
    if logicals and not extended:
        out.append("logical partitions need an extended partition")
    elif logicals:
        ext = extended[0]
        prev_end = ext.start
        outside = []
        for p in logicals:
            if p.start <= prev_end or p.end > ext.end:
                outside.append(f"{p.number} ({p.start}s..{p.end}s)")
            prev_end = p.end + 1
        out += _some("logical partition {} needs a free sector for its EBR and must lie inside extended "
                     f"partition {ext.number}", outside)
    chain = sorted(p.number for p in logicals)
    if chain != list(range(labels.FIRST_LOGICAL, labels.FIRST_LOGICAL + len(chain))):
        out.append("msdos numbers logical partitions 5, 6, … without gaps (the order of their EBR chain)")
    return out


def _attributes_differ(label: str, old: Partition, new: Partition) -> list[str]:
    out = []
    if new.type and type_key(label, new.type) != type_key(label, old.type):
        out.append(f"type {ptypes.describe(old.type) or '?'} -> {ptypes.describe(new.type)}")
    if label == "gpt" and new.name != old.name:
        out.append(f"name {old.name!r} -> {new.name!r}")
    for flag in labels.attribute_flags(label):
        if (flag in new.flags) != (flag in old.flags):
            out.append(f"{flag} flag " + ("on" if flag in new.flags else "off"))
    return out


@dataclasses.dataclass
class Changes:
    """How a table becomes the planned one. Partitions are model Partitions; ``change`` pairs the one on
    disk with the plan's, and says what differs."""

    label: str
    fresh: bool  # a new label: libparted starts from an empty table
    current: Table = dataclasses.field(default_factory=lambda: Table(None, 0, -1))  # the table on disk it came from
    problems: tuple[str, ...] = ()  # why it cannot be written (validate)
    notes: tuple[str, ...] = ()  # what the user should know (a whole-disk filesystem or another label replaced)
    delete: list[Partition] = dataclasses.field(default_factory=list)
    create: list[Partition] = dataclasses.field(default_factory=list)
    change: list[tuple[Partition, Partition, list[str]]] = dataclasses.field(default_factory=list)
    keep: list[Partition] = dataclasses.field(default_factory=list)
    rewrite: list[Partition] = dataclasses.field(default_factory=list)  # logical ones re-added in place: EBRs only
    # Existing partitions whose data moves or resizes (on disk, planned), in the order of their first step.
    move: list[tuple[Partition, Partition]] = dataclasses.field(default_factory=list)
    # Their writes in the order they run (model.plan.move.data_steps, as ``diskplan apply`` runs the same plan):
    # each goes where no partition is any more once the steps before it are written. Empty when no order
    # exists (``problems`` then says why).
    steps: tuple[DataStep, ...] = ()
    sector_size: int = 512

    @property
    def any(self) -> bool:
        return bool(self.fresh or self.delete or self.create or self.change or self.rewrite or self.move)

    @property
    def table_changes(self) -> bool:
        """Whether anything but data moves is written (a table commit: backend.write.commit)."""
        return bool(self.fresh or self.delete or self.create or self.change or self.rewrite
                    or any(op.kind == "keep" and op.pending for op in self.operations))

    @property
    def protect(self) -> tuple[Extent, ...]:
        """Where data the plan keeps lives (never backed up, never written)."""
        held = [*self.keep, *(old for old, _, _ in self.change), *self.rewrite]
        moved = [e for old, new in self.move for e in (old.extent, new.extent)]
        return tuple(p.extent for p in held if p.role is not Role.EXTENDED) + tuple(moved)

    @cached_property
    def operations(self) -> tuple[Operation, ...]:
        """The list, built once: the same objects are shown, confirmed and executed."""
        out: list[Operation] = []
        rewritten = {(p.start, p.end) for p in self.rewrite}
        if self.fresh:
            out.append(Operation("label", detail=self.label))
        for p in sorted(self.delete, key=lambda p: -p.number):
            if (p.start, p.end) in rewritten:
                continue
            what = p.role.value if p.role is not Role.PRIMARY else ptypes.describe(p.type) or "partition"
            out.append(Operation("delete", p.number, p.start, p.end, what, p))
        for p in sorted(self.create, key=lambda p: p.number):
            what = ptypes.describe(p.type or DEFAULT_TYPE[self.label])
            what = {Role.EXTENDED: "extended", Role.LOGICAL: f"logical, {what}"}.get(p.role, what)
            flags = labels.plan_flags(self.label, p.flags)
            detail = (f"{p.size} sectors, {what}" + (f", {p.name!r}" if p.name else "")
                      + (f", flags {' '.join(flags)}" if flags else ""))
            out.append(Operation("create", p.number, p.start, p.end, detail, p))
        out += [Operation("rewrite", p.number, p.start, p.end, partition=p)
                for p in sorted(self.rewrite, key=lambda p: p.number)]
        out += [Operation("change", new.number, new.start, new.end, ", ".join(why), new) for _, new, why in self.change]
        ss = self.sector_size
        ext = next((p for p in self.current.partitions if p.role is Role.EXTENDED), None)
        ext_end = ext.end if ext is not None else 0
        for old, new in self.move:
            copied = min(old.size, new.size) * ss if new.start != old.start else 0
            grows = ""
            if ext is not None and new.role is Role.LOGICAL and new.end > ext_end:  # backend.move.engine grows it first
                grows, ext_end = f"extended partition {ext.number} grows to end at {new.end} first", new.end
            if new.size == old.size:
                out.append(Operation("move", new.number, new.start, new.end, grows, new, source=old.start,
                                     nbytes=copied))
            else:
                out.append(Operation("resize", new.number, new.start, new.end, grows, new, source=old.start,
                                     nbytes=copied, source_size=old.size))
        for p in sorted(self.keep, key=lambda p: p.number):
            was = dict(p.extra).get("was")
            out.append(Operation("keep", p.number, p.start, p.end, f"was number {was}" if was else "", p))
        return tuple(out)

    def result(self, base: Table) -> Table:
        """The table the disk will hold, as the reader will report it: ``base`` with these partitions
        (kept ones EXISTING as they are, new ones PROPOSED with the type libparted gives by default)."""
        parts = [replace(p, state=State.EXISTING) for p in self.keep]
        parts += [replace(old, start=new.start, end=new.end) for old, new in self.move]
        for old, new, _ in self.change:
            parts.append(replace(old, number=new.number, type=new.type or old.type, name=new.name, flags=new.flags))
        parts += [replace(p, state=State.EXISTING) for p in self.rewrite]
        for p in self.create:
            default = "" if p.role is Role.EXTENDED else DEFAULT_TYPE[self.label]
            parts.append(replace(p, type=p.type or default, state=State.PROPOSED))
        return replace(base, label=self.label, partitions=tuple(sorted(parts, key=lambda p: (p.start, p.number))))


def _logical_moves(ops: Changes, cur_log: list[Partition], want_log: list[Partition]) -> list[Partition]:
    """Logical partitions the plan moves or resizes with their data (same number and chain, marked by Plan as
    moved or resized by its filesystem's tool): data moves (backend.move.engine rewrites the EBR chain,
    model.plan.ebrmove), never a deletion and a creation. Returns ``want_log`` with those where they are on the
    disk, so the chain is kept as it is."""
    if [p.number for p in cur_log] != [p.number for p in want_log]:
        return want_log
    out = []
    for q, w in zip(cur_log, want_log, strict=True):
        marked = w.moved_from == q.start or w.resized_from == q.size  # set by Plan
        if w.state is State.EXISTING and w.extent != q.extent and marked:
            ops.move.append((q, w))
            w = replace(w, start=q.start, end=q.end)
        out.append(w)
    return out


def _grown_extended(ext: Partition, live: list[Partition], cur: list[Partition]) -> Partition | None:
    """The plan's extended partition when it is ``ext`` (on the disk) grown exactly as far as the data moves
    and resizes of its logical partitions take them past its end (marked by Plan, as ``_logical_moves`` reads
    them): the step that passes the end grows it first (backend.move.engine, backend.move.moveentry), so no table write
    re-creates it. None otherwise (then it is a deletion and a creation, as any other change)."""
    g = next((q for q in live if q.role is Role.EXTENDED and (q.number, q.start) == (ext.number, ext.start)), None)
    if g is None or g.end <= ext.end:
        return None
    on_disk = {q.number: q for q in cur if q.role is Role.LOGICAL}
    past = [q for q in live if q.role is Role.LOGICAL and q.end > ext.end]
    moved = all(q.number in on_disk and (q.moved_from == on_disk[q.number].start or
                                         q.resized_from == on_disk[q.number].size) for q in past)
    return g if past and moved and g.end == max(q.end for q in past) else None


def plan_changes(label: str, current: Table, live: list[Partition], fresh: bool) -> Changes:
    """Compare the table on disk with the partitions the plan holds (``fresh``: under a new label)."""
    ops = Changes(label, fresh, current)
    if fresh:
        ops.delete = list(current.partitions)
        ops.create = list(live)
        return ops
    cur = list(current.partitions)
    want_outer: dict[tuple[int, int, int, Role], Partition] = {
        (p.number, p.start, p.end, p.role): p for p in live if p.role is not Role.LOGICAL}
    moving = {p.number: p for p in live if p.state is State.EXISTING and p.role is Role.PRIMARY}
    for p in (p for p in cur if p.role is not Role.LOGICAL):
        w = want_outer.pop((p.number, p.start, p.end, p.role), None)
        m = moving.get(p.number)
        # A data move keeps the size; a resize says so (``resized_from``, set by Plan for a resize its
        # filesystem's tool does): any other change of an existing partition is a deletion and a creation.
        if w is None and m is not None and p.role is Role.PRIMARY and (m.size == p.size or m.resized_from == p.size):
            want_outer.pop((m.number, m.start, m.end, m.role), None)
            ops.move.append((p, m))
            why = _attributes_differ(label, p, m)
            if why:  # a table change as well: written first, on its own (plan_writes says so)
                ops.change.append((p, replace(m, start=p.start, end=p.end), why))
            continue
        grown = _grown_extended(p, live, cur) if w is None and p.role is Role.EXTENDED else None
        if grown is not None:  # backend.move.engine grows it with the step that passes its end: kept, not re-created
            want_outer.pop((grown.number, grown.start, grown.end, grown.role))
            ops.keep.append(p)
            continue
        if w is None:
            ops.delete.append(p)
            continue
        why = _attributes_differ(label, p, w) if p.role is not Role.EXTENDED else []
        (ops.change.append((p, w, why)) if why else ops.keep.append(p))
    ops.create += list(want_outer.values())
    cur_log = sorted((p for p in cur if p.role is Role.LOGICAL), key=lambda p: p.number)
    want_log = sorted((p for p in live if p.role is Role.LOGICAL), key=lambda p: p.number)
    want_log = _logical_moves(ops, cur_log, want_log)
    # Logical partitions: libparted renumbers the rest when one is deleted and appends new ones, and the
    # EBR chain follows the numbers. Keep them when that yields the plan's numbers, else re-add them all.
    ext_kept = any(p.role is Role.EXTENDED for p in ops.keep)
    by_extent = {(p.start, p.end): p for p in want_log}
    kept = [p for p in cur_log if (p.start, p.end) in by_extent] if ext_kept else []
    new = [p for p in want_log if (p.start, p.end) not in {(k.start, k.end) for k in kept}]
    simulated = {(p.start, p.end): 5 + i for i, p in enumerate(kept)}
    simulated.update({(p.start, p.end): 5 + len(kept) + i for i, p in enumerate(new)})
    if not all(simulated[(p.start, p.end)] == p.number for p in want_log):
        kept = []  # re-add every logical partition in the plan's order (their data stays where it is)
    kept_extents = {(p.start, p.end) for p in kept}
    old = {(p.start, p.end): p for p in cur_log}
    ops.delete += [p for p in cur_log if (p.start, p.end) not in kept_extents]
    for w in want_log:
        where = (w.start, w.end)
        if where in kept_extents:
            q = old[where]
            why = _attributes_differ(label, q, w)
            renumbered = replace(q, number=w.number, extra=(("was", str(q.number)),) if q.number != w.number else ())
            (ops.change.append((q, w, why)) if why else ops.keep.append(renumbered))
        elif where in old:
            q = old[where]  # re-added at the same place: keeps its type and flags unless the plan says
            flags = w.flags or tuple(sorted(_flags(label, q)))
            ops.rewrite.append(replace(w, type=w.type or q.type, flags=flags))
        else:
            ops.create.append(w)
    moved = {q.number for q, _ in ops.move if q.role is Role.LOGICAL}  # a data move, not kept as well
    ops.keep = [k for k in ops.keep if k.role is not Role.LOGICAL or k.number not in moved]
    return ops


def order_moves(ops: Changes, current: Table, desired: Table) -> list[str]:
    """Set ``ops.steps`` to the order the moves and resizes are written in (as ``diskplan apply`` orders the
    same plan: backend.move.planmoves), against every partition on the disk now (``current``), and order
    ``ops.move`` by each partition's first step; the reason when no order exists (model.plan.move.SequenceError):
    then nothing may be written."""
    try:
        wanted = kept_moves(current, desired, (new.number for _, new in ops.move))
        ops.steps = tuple(data_steps(data_layout(current), wanted))
    except SequenceError as exc:
        return [str(exc)]
    first = {s.number: i for i, s in reversed(list(enumerate(ops.steps)))}
    ops.move.sort(key=lambda m: first[m[1].number])
    return []


def plan_writes(current: Table, desired: Table, geom: Geometry, *, fresh: bool = False,
                filesystem: str | None = None) -> Changes:
    """The one list of operations that makes the disk's ``current`` table ``desired`` (its live
    partitions), with why it cannot be written and what to know. ``fresh``: the plan is a new label even
    when it is the disk's own; a label the disk does not have, or a table diskplan cannot change in
    place that keeps nothing, is always a new label. ``filesystem``: one on the whole disk, replaced."""
    if desired.label is None and current.label is None and not desired.live:
        return Changes("", False, current, sector_size=geom.logical)  # a blank disk left blank: nothing to write
    refusals: list[str] = []
    notes: list[str] = []
    label = LABEL_NAMES.get((desired.label or "").lower(), "")
    if not label:
        refusals.append(f"diskplan writes gpt and msdos tables, not {desired.label or 'no table'}")
        label = "gpt"
    cur_label = current.label
    live = sorted(desired.live, key=lambda p: (p.role is Role.LOGICAL, p.number))
    keeps_any = cur_label == label and any(
        (p.number, p.start, p.end) == (q.number, q.start, q.end) or (p.role is Role.LOGICAL and p.extent == q.extent)
        for p in live
        for q in current.partitions
    )
    fresh = fresh or cur_label != label or (bool(current.read_only) and not keeps_any)
    if current.read_only and not fresh:
        refusals.append(f"the table on the disk cannot be changed in place: {current.read_only}")
    if filesystem and cur_label is None:
        notes.append(f"the disk holds {content_phrase(filesystem)} on the whole disk: the new label replaces it")
    if fresh and cur_label not in (None, label) and current.partitions:
        notes.append(f"the {cur_label} table and all its partitions are replaced by a new {label} label")
    base = new_table(label, geom) if fresh else current
    if not refusals:
        refusals += validate(replace(base, partitions=tuple(live)), geom)
    ops = plan_changes(label, current, live, fresh)
    ops.sector_size = geom.logical
    unordered = order_moves(ops, current, desired) if ops.move else []  # before ``operations`` is built from the order
    if ops.move and ops.table_changes:
        refusals.append("data moves are written on their own: write the table changes first, then move "
                        "(undo the moves, write, then plan them again)")
    refusals += unordered
    ops.problems, ops.notes = tuple(refusals), tuple(notes)
    return ops
