"""The plan: the table a user wants, shaped one step at a time on top of the table on disk.

A ``Plan`` is immutable. Every operation returns an ``Outcome``: the new plan (or the same plan, when the
step is refused, with the reason), and for moves and resizes a ``Snap`` saying where the user asked the
partition to go and where snapping put it. ``History`` keeps the plans for undo and redo.

Partitions carry a state: EXISTING (on disk, holds data: moved or resized only when asked, ``data=True`` or
``realign``, which plans a data move or a resize by its filesystem's tool, within the ``Limits`` measured on
the disk: a plan never decides what a filesystem can do), DELETE (on disk, marked
for deletion: its space is free for planning) and PROPOSED (planned). Proposed partitions snap to the grain
of the snapping target; snapping never makes partitions overlap, never enters the table's metadata, never
passes the end of the usable area. Partitions are addressed by number: live ones (EXISTING or PROPOSED)
have unique numbers; a number freed by a deletion can be reused by a proposal, as parted and sfdisk would.

A disk whose GPT is damaged offers a repair (``Disk.repair``, passed as ``Plan.open(..., offer=)``).
``plan.repair()`` makes it a pending change on its own: refused while other changes are pending, and
while it is pending every other step is refused (undo or clear takes it back). It writes the table that
is on the disk, not the plan's; once it is committed the disk is read again and planning starts from the
repaired table, which is then writable. Writing both at once would mix two kinds of write (raw sectors
from the good copy, then a libparted commit) in one confirmation, and a failed second step would leave a
disk repaired but not as planned, or the reverse.

A drag is a series of previews from one plan: ``base.move_to(n, lba)`` per mouse move, shown from
``outcome.plan``/``outcome.snap``, and one ``history.apply(outcome)`` when the button is released. Each
move or resize costs O(log n) Python steps (bisection, one slot replaced in tuples), not a full analysis.
"""

from __future__ import annotations

from enum import Enum
from functools import cached_property
from operator import attrgetter
from typing import NamedTuple

from diskplan.model import labels
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, SnapTarget, optimal_grain
from diskplan.model.labels import LabelError
from diskplan.model.plan.ebrmove import extended_room, plan_logical
from diskplan.model.plan.fsresize import Limits
from diskplan.model.plan.lanes import Lane
from diskplan.model.plan.move import free_around, realign_shrinking, realign_start
from diskplan.model.plan.operations import Changes, Operation, plan_writes, repair_operations, validate
from diskplan.model.plan.repair import GptRepair
from diskplan.model.plan.snap import (
    Gap,
    clamp,
    first_end,
    first_start,
    last_end,
    last_start,
    place,
    place_end,
    place_start,
    snap_end,
    snap_start,
)
from diskplan.model.table import MBR_LIMIT_SECTORS, Table, label_sectors, new_table
from diskplan.model.units import human_bytes
from diskplan.model.value import field, replace, value

_order = attrgetter("start", "number")
TOP, LOGICAL = 0, 1


class Edge(Enum):
    START = "start"
    END = "end"


class Span(NamedTuple):
    """Sectors a step asked for: unlike an Extent, it may run backwards or off the disk (a wild drag)."""

    start: int
    end: int


@value
class Snap:
    """Where a step asked a partition to be, and where snapping put it (both in sectors)."""

    requested: Span
    snapped: Extent
    grain: Grain
    sector_size: int
    notes: tuple[str, ...] = ()  # "stopped against partition 3", "size rounded to whole grains"

    @property
    def start_shift(self) -> int:
        return self.snapped.start - self.requested.start

    @property
    def end_shift(self) -> int:
        return self.snapped.end - self.requested.end

    def _lba(self, lba: int) -> str:
        nbytes = lba * self.sector_size
        return f"{lba}s ({nbytes:,} B = {human_bytes(nbytes)})"

    def describe(self, edge: Edge | None = None) -> str:
        """"start 2050s (1,049,600 B = 1 MiB) -> 2048s (1,048,576 B = 1 MiB)" for ``edge``, or both edges
        and the size when ``edge`` is None (a move, a new partition)."""
        parts = []
        for e in (Edge.START, Edge.END) if edge is None else (edge,):
            req = self.requested.start if e is Edge.START else self.requested.end
            got = self.snapped.start if e is Edge.START else self.snapped.end
            text = f"{e.value} {self._lba(req)}"
            parts.append(text + (f" -> {self._lba(got)}" if got != req else " (on the grain)"))
        if edge is None:
            size = self.snapped.size
            parts.append(f"size {size}s = {size * self.sector_size:,} B ({human_bytes(size * self.sector_size)})")
        return "; ".join(parts + list(self.notes))


@value
class Outcome:
    before: Plan
    plan: Plan  # the plan after the step: ``before`` itself when refused or when nothing changed
    ok: bool  # False: refused, ``message`` says why
    message: str
    snap: Snap | None = None
    number: int | None = None  # the partition the step concerned (a new partition's number)

    @property
    def changed(self) -> bool:
        return self.plan is not self.before


class _Refused(Exception):
    pass


REPAIR_PENDING = ("the GPT repair is pending: commit it first (the disk is then read again and can be planned "
                  "on), or undo it")


def _describe_area(label: str | None, table: Table, geom: Geometry) -> tuple[str, str]:
    if label == "gpt":
        return (f"the GPT header and entries (up to {table.first_usable - 1}s)",
                f"the backup GPT (from {table.last_usable + 1}s)")
    if label == "msdos":
        after = "the end of the disk"
        if geom.sectors > MBR_LIMIT_SECTORS:
            after = f"msdos's 2 TiB limit ({MBR_LIMIT_SECTORS}s)"
        return "the MBR (sector 0)", after
    return "the start of the disk", "the end of the disk"


def _build_lanes(table: Table, geom: Geometry) -> tuple[tuple[Lane, Lane], dict[int, tuple[int, int, int]]]:
    before, after = _describe_area(table.label, table, geom)
    live = table.live
    tops = [p for p in live if p.role is not Role.LOGICAL]
    top = Lane.of(tops, table.first_usable, table.last_usable, 0, before, after)
    ext = next((p for p in top.parts if p.role is Role.EXTENDED), None)
    logicals = [p for p in live if p.role is Role.LOGICAL]
    if ext is not None:
        logical = Lane.of(logicals, ext.start, ext.end, 1, f"the start of extended partition {ext.number}",
                          f"the end of extended partition {ext.number}")
    else:
        logical = Lane.of(logicals, 0, -1, 1, "no extended partition", "no extended partition")
    slot = {id(p): j for j, p in enumerate(table.partitions)}
    where = {p.number: (TOP, i, slot[id(p)]) for i, p in enumerate(top.parts)}
    where.update({p.number: (LOGICAL, i, slot[id(p)]) for i, p in enumerate(logical.parts)})
    return (top, logical), where


@value(eq=False)
class Plan:
    """Plans compare equal when they want the same table on the same disk with the same snapping."""

    geometry: Geometry
    base: Table  # the table on disk, as read
    wanted: Table  # the table wanted (read it as ``table``: slot ``patch[0]`` of its partitions is patched)
    target: SnapTarget = SnapTarget.OPTIMAL
    fresh: bool = False  # the table is a new label: nothing of the disk's table survives
    # Derived from the fields above: the grain and the lane index.
    grain: Grain = field(default_factory=lambda: Grain(1))
    lanes: tuple[Lane, ...] = field(default=(), repr=False)  # (top, logical) once built
    # live number -> (lane, rank in the lane, index in table.partitions)
    where: dict[int, tuple[int, int, int]] = field(default_factory=dict, repr=False)
    patch: tuple[int, Partition] | None = field(default=None, repr=False)
    offer: GptRepair | None = field(default=None, repr=False)  # the repair the disk offers (Disk.repair)
    repairing: bool = False  # the offered repair is a pending change
    # The grains (bytes) the CUSTOM target snaps to; None: the ones declared with --grain. A planning
    # choice: the device's geometry, and so its findings, stay as they are.
    custom: tuple[int, ...] | None = None

    @cached_property
    def table(self) -> Table:
        """The table wanted: EXISTING, PROPOSED and DELETE partitions, sorted by start."""
        if self.patch is None:
            return self.wanted
        slots = list(self.wanted.partitions)
        slots[self.patch[0]] = self.patch[1]
        return replace(self.wanted, partitions=tuple(slots))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return (self.geometry, self.base, self.target, self.grain, self.fresh, self.repairing, self.table) == (
            other.geometry, other.base, other.target, other.grain, other.fresh, other.repairing, other.table)

    __hash__ = None  # type: ignore[assignment]  # unhashable (typeshed types __hash__ as a method only)

    # --- building -------------------------------------------------------------------------------------

    @classmethod
    def open(cls, geometry: Geometry, table: Table, target: SnapTarget = SnapTarget.OPTIMAL, *,
             offer: GptRepair | None = None) -> Plan:
        """A plan that changes nothing yet, on the table read from the disk; ``offer``: the repair the
        reader offers for it (``Disk.repair``), which ``repair()`` plans."""
        return cls._make(geometry, table, table, target, False, offer)

    @classmethod
    def _make(cls, geom: Geometry, base: Table, table: Table, target: SnapTarget, fresh: bool,
              offer: GptRepair | None = None, repairing: bool = False, custom: tuple[int, ...] | None = None) -> Plan:
        lanes, where = _build_lanes(table, geom)
        return cls(geom, base, table, target, fresh, target.grain(geom, custom), lanes, where, None, offer, repairing,
                   custom)

    def _rebuilt(self, table: Table, *, fresh: bool | None = None) -> Plan:
        return Plan._make(self.geometry, self.base, table, self.target, self.fresh if fresh is None else fresh,
                          self.offer, self.repairing, self.custom)

    def _slot(self, j: int) -> Partition:
        patch = self.patch
        return patch[1] if patch is not None and patch[0] == j else self.wanted.partitions[j]

    def _replaced(self, old: Partition, new: Partition) -> Plan:
        """The plan with ``old`` replaced by ``new`` of the same number, which keeps its rank among the live
        partitions (moves, resizes, type/name/flag changes). Nothing is searched, sorted or copied: the lanes
        and the table get ``new`` as a patched slot, so a drag step costs the same on 1 partition or 128.
        Only when ``new`` passes the start of a partition marked for deletion is the table re-sorted."""
        lane_no, i, j = self.where[old.number]
        lanes = list(self.lanes)
        lanes[lane_no] = lanes[lane_no].with_part(i, new)
        if new.role is Role.EXTENDED:
            lanes[LOGICAL] = lanes[LOGICAL].with_area(new.start, new.end)
        count = len(self.wanted.partitions)
        start = new.start
        if (j > 0 and self._slot(j - 1).start >= start and _order(self._slot(j - 1)) > _order(new)) or (
                j + 1 < count and start >= self._slot(j + 1).start and _order(new) > _order(self._slot(j + 1))):
            parts = self.table.partitions
            return self._rebuilt(self.table.with_partitions((*parts[:j], new, *parts[j + 1 :])))
        wanted = self.wanted if self.patch is None or self.patch[0] == j else self.table
        return Plan(self.geometry, self.base, wanted, self.target, self.fresh, self.grain, (lanes[0], lanes[1]),
                    self.where, (j, new), self.offer, self.repairing, self.custom)

    # --- queries --------------------------------------------------------------------------------------

    @property
    def label(self) -> str | None:
        return self.wanted.label

    @property
    def live(self) -> tuple[Partition, ...]:
        return self.lanes[TOP].parts + self.lanes[LOGICAL].parts

    @property
    def dirty(self) -> bool:
        return self.fresh or self.repairing or self.table != self.base

    @property
    def pending_repair(self) -> GptRepair | None:
        """The repair to write when this plan is committed (``backend.write.commit.prepare(repair=...)``)."""
        return self.offer if self.repairing else None

    def partition(self, number: int) -> Partition | None:
        """The live (existing or proposed) partition with ``number``."""
        at = self.where.get(number)
        return None if at is None else self.lanes[at[0]].at(at[1])

    def deleted(self, number: int) -> Partition | None:
        return next((p for p in self.table.partitions if p.state is State.DELETE and p.number == number), None)

    def extended(self) -> Partition | None:
        return next((p for p in self.lanes[TOP].parts if p.role is Role.EXTENDED), None)

    def gap_of(self, number: int) -> Gap | None:
        """Where partition ``number`` could be moved or stretched to (a drag's limits)."""
        at = self.where.get(number)
        return None if at is None else self._gap(at[0], at[1])

    def _gap(self, lane_no: int, i: int) -> Gap:
        """Where partition ``i`` of lane ``lane_no`` may lie: between its neighbours, and for a logical
        partition that holds data before the next one's EBR as the chain has it (model.plan.ebrmove: every EBR
        sector is occupied; the lane alone keeps only the sector before each partition free)."""
        lane = self.lanes[lane_no]
        gap = lane.gap_of(i)
        if lane_no != LOGICAL or lane.at(i).state is not State.EXISTING:
            return gap
        if i + 1 < len(lane):
            return replace(gap, hi=min(gap.hi, self._ebr_at(i + 1) - 1))
        room = self._room_after_extended()
        if room <= gap.hi:
            return gap
        ext = self.extended()
        assert ext is not None
        # The last one may pass the extended partition's end: it grows into the free space after it, as
        # `diskplan move` and `resize` grow it (``_fit_extended``).
        return replace(gap, hi=room, area_hi=room, area_after=f"the free space after extended partition {ext.number}")

    def _room_after_extended(self) -> int:
        """The last sector the extended partition may grow to: the free space after it at the top level, as
        `diskplan move` has it (model.plan.ebrmove.extended_room); its end when it is not on the disk."""
        ext = self.extended()
        if ext is None:
            return -1
        base = self.base.by_number(ext.number)
        if ext.state is not State.EXISTING or base is None or base.role is not Role.EXTENDED or base.start != ext.start:
            return ext.end
        return extended_room(self.table, ext.extent)

    def _fit_extended(self) -> tuple[Plan, str]:
        """The plan with its extended partition (on the disk) ending where its logical partitions need: never
        before its end on the disk, after the last logical partition's end (a data move or grow past it grows
        it first, as backend.move.engine does). What changed, said ("" when nothing)."""
        ext = self.extended()
        base = self.base.by_number(ext.number) if ext is not None else None
        if ext is None or base is None or ext.state is not State.EXISTING or base.role is not Role.EXTENDED:
            return self, ""
        end = max(base.end, *(q.end for q in self._logicals()))
        if end == ext.end:
            return self, ""
        said = (f"extended partition {ext.number} grows to end at {end}s, into the free space after it"
                if end > base.end else f"extended partition {ext.number} ends at {end}s again, as on the disk")
        return self._replaced(ext, replace(ext, end=end)), said

    def _ebr_at(self, j: int) -> int:
        """The EBR sector of logical partition ``j`` (lane order) once the plan is written: where the chain
        has it, unless the partition moves left past it (then it goes the same distance before the new
        start, after the partition before it: model.plan.ebrmove.plan_logical). A proposal's is just before it."""
        lane = self.lanes[LOGICAL]
        q = lane.at(j)
        k = q.number - labels.FIRST_LOGICAL
        base = self.base.by_number(q.number) if q.state is State.EXISTING else None
        if base is None or base.role is not Role.LOGICAL or not 0 <= k < len(self.base.ebrs):
            return q.start - 1
        ebr = self.base.ebrs[k]
        if q.start > ebr:
            return ebr
        low = lane.at(j - 1).end + 1 if j else lane.area_lo
        return max(low, q.start - (base.start - ebr))

    def _chain_reason(self, i: int, start: int, length: int) -> str:
        """Why the EBR chain forbids logical partition ``i`` (lane order) at ``start`` with ``length``
        sectors, in `diskplan move`'s words (model.plan.ebrmove.plan_logical), or ""."""
        lane, ext = self.lanes[LOGICAL], self.extended()
        if ext is None or not self.base.ebrs:
            return ""
        q = lane.at(i)
        k = q.number - labels.FIRST_LOGICAL
        base = self.base.by_number(q.number)
        if k != i or base is None or not 0 <= k < len(self.base.ebrs):
            return ""
        # The move is judged from where it starts on the disk, its neighbours where the plan puts them.
        parts = [base.extent if j == i else o.extent for j, o in enumerate(lane.parts)]
        ebrs = [self.base.ebrs[k] if j == i else self._ebr_at(j) for j in range(len(parts))]
        base_ext = self.base.by_number(ext.number)
        grows = base_ext.extent if base_ext is not None and base_ext.role is Role.EXTENDED else ext.extent
        why = plan_logical(k, ebrs, parts, grows, self._room_after_extended(), start, length)
        return why if isinstance(why, str) and "not in disk order" not in why else ""

    def gap_at(self, lba: int) -> tuple[Gap | None, str]:
        """The free space holding ``lba`` (inside the extended partition: the logical lane), or why none."""
        ext = self.extended()
        lane = self.lanes[LOGICAL] if ext is not None and ext.start <= lba <= ext.end else self.lanes[TOP]
        return lane.gap_at(lba)

    def free_regions(self, min_sectors: int = 1) -> list[Gap]:
        """Every gap a new partition could use, top level and inside the extended partition, by start."""
        gaps = self.lanes[TOP].gaps(min_sectors)
        if self.extended() is not None:
            gaps += self.lanes[LOGICAL].gaps(min_sectors)
        return sorted(gaps, key=attrgetter("lo"))

    def on_grain(self, p: Partition, grain: Grain | None = None) -> bool:
        """Whether ``p`` starts on the grain (the snapping one, or ``grain``) and ends one before a boundary
        or at its area's last sector."""
        g = grain or self.grain
        if not g.is_aligned(p.start):
            return False
        area_hi = self.lanes[LOGICAL if p.role is Role.LOGICAL else TOP].area_hi
        return g.is_aligned(p.end + 1) or p.end == area_hi

    def blocked(self) -> str:
        """Why this plan cannot change partitions (a pending repair, no table, a label diskplan does not
        write), or ""."""
        if self.repairing:
            return REPAIR_PENDING
        label = self.wanted.label
        if label is None:
            return "there is no partition table: create a gpt or msdos label first"
        if label not in labels.WRITTEN_LABELS:
            return self.wanted.read_only or f"diskplan does not write {label} tables: create a new label"
        return ""

    # --- helpers --------------------------------------------------------------------------------------

    def _refuse(self, reason: str, number: int | None = None) -> Outcome:
        return Outcome(self, self, False, reason, None, number)

    def _proposed(self, number: int, *, data: bool = False) -> tuple[Partition, int, int]:
        """The live partition ``number`` a move or resize may change; ``data``: an existing one too (its data
        moves with it: a primary, GPT or logical partition (within its EBR chain), never the extended one)."""
        why = self.blocked()
        if why:
            raise _Refused(why)
        at = self.where.get(number)
        if at is None:
            raise _Refused(f"there is no partition {number}" + (" (it is marked for deletion)"
                                                                  if self.deleted(number) else ""))
        p = self.lanes[at[0]].at(at[1])
        if p.state is State.EXISTING and not data:
            raise _Refused(f"partition {number} is on the disk and holds data: m moves it with its data, r resizes "
                           "it with its filesystem, A realigns it; x marks it for deletion to plan in its space")
        if p.state is State.EXISTING and p.role is Role.EXTENDED:
            raise _Refused(f"partition {number} is the extended partition: the logical partitions in it move "
                           "with their data, not it")
        if p.state is State.EXISTING and p.role is Role.LOGICAL and len(self.base.ebrs) != len(self.lanes[LOGICAL]):
            raise _Refused(f"partition {number} is logical and the disk's EBR chain was not read whole (or the plan "
                           "adds or deletes logical partitions): `diskplan move` moves it with its EBR")
        return p, at[0], at[1]

    def why_not_changed(self, number: int, *, data: bool = False) -> str:
        """Why partition ``number`` cannot be moved or resized at all ("" when it can; ``data``: an existing
        one too), before any position is asked for: what begins a resize of a partition that holds data,
        whose edges may be off the grain and whose filesystem is not measured yet."""
        try:
            self._proposed(number, data=data)
        except _Refused as exc:
            return str(exc)
        return ""

    def _logicals(self) -> tuple[Partition, ...]:
        return self.lanes[LOGICAL].parts

    def _step(self) -> int:
        return self.grain.sectors

    def _free_number(self, role: Role) -> int:
        label = self.table.label
        if label == "msdos":
            if role is Role.LOGICAL:
                used = {p.number for p in self._logicals()}
                return next(n for n in range(labels.FIRST_LOGICAL, labels.FIRST_LOGICAL + len(used) + 1)
                            if n not in used)
            tops = self.lanes[TOP].parts
            if len(tops) >= labels.MSDOS_PRIMARIES:
                raise _Refused("an msdos table holds 4 primary partitions (an extended one counts): "
                               "make room in an extended partition for more")
            used = {p.number for p in tops}
            return next(n for n in range(1, labels.MSDOS_PRIMARIES + 1) if n not in used)
        used = set(self.where)
        for n in range(1, self.table.max_partitions + 1):
            if n not in used:
                return n
        raise _Refused(f"this {label} table holds at most {self.table.max_partitions} partitions")

    def _outcome(self, p: Partition, new: Partition, requested: Span, notes: list[str], verb: str,
                 wanted_change: bool) -> Outcome:
        snap = Snap(requested, new.extent, self.grain, self.geometry.logical, tuple(notes))
        if (new.start, new.end) == (p.start, p.end):
            if wanted_change and notes:
                return Outcome(self, self, False, f"partition {p.number} cannot be {verb} further: {notes[-1]}",
                               snap, p.number)
            return Outcome(self, self, True, f"partition {p.number} stays at {p.start}s..{p.end}s", snap, p.number)
        plan = self._replaced(p, new)
        said = ""
        if p.role is Role.LOGICAL and p.state is State.EXISTING:
            plan, said = plan._fit_extended()
        return Outcome(self, plan, True, f"{verb} partition {p.number} to {new.start}s..{new.end}s"
                       + (f" ({said})" if said else ""), snap, p.number)

    # --- proposing ------------------------------------------------------------------------------------

    def propose(
        self,
        start: int,
        size: int,
        *,
        ptype: str = "",
        name: str = "",
        flags: tuple[str, ...] = (),
        role: Role | None = None,
    ) -> Outcome:
        """A new partition of ``size`` sectors in the free space holding ``start``, snapped to the grain.

        On msdos a start inside the extended partition makes a logical partition; ``role=Role.EXTENDED``
        makes the extended one. The size may shrink to stay aligned and inside the free space, but only
        when the request as typed fitted there; otherwise the step is refused."""
        try:
            return self._propose(start, size, ptype, name, flags, role)
        except (_Refused, LabelError) as exc:
            return self._refuse(str(exc))

    def _propose(self, start: int, size: int, ptype: str, name: str, flags: tuple[str, ...],
                 role: Role | None) -> Outcome:
        why = self.blocked()
        if why:
            raise _Refused(why)
        if size < 1:
            raise _Refused("a partition has at least one sector")
        label = self.table.label
        assert label is not None
        ext = self.extended()
        inside = ext is not None and ext.start <= start <= ext.end
        if role is None:
            role = Role.LOGICAL if inside else Role.PRIMARY
        if label != "msdos" and role is not Role.PRIMARY:
            raise _Refused(f"{label} has no {role.value} partitions")
        if role is Role.LOGICAL and not inside:
            raise _Refused("a logical partition goes inside the extended partition" +
                           ("" if ext else ": create an extended partition first"))
        if role is not Role.LOGICAL and inside:
            assert ext is not None
            raise _Refused(f"sector {start} is inside extended partition {ext.number}: only logical "
                           "partitions go there")
        if role is Role.EXTENDED and ext is not None:
            raise _Refused(f"an msdos table has one extended partition, and partition {ext.number} is it")
        code = labels.type_code(label, ptype) if ptype else labels.default_type(label, role)
        if labels.is_extended_type(code) != (role is Role.EXTENDED):
            raise _Refused(f"type {code} is for extended partitions only" if role is not Role.EXTENDED
                           else f"an extended partition needs an extended type, not {code}")
        name = labels.check_name(label, name)
        flags = labels.check_flags(label, flags)
        number = self._free_number(role)
        lane = self.lanes[LOGICAL if role is Role.LOGICAL else TOP]
        gap, reason = lane.gap_at(start)
        if gap is None:
            raise _Refused(reason)
        s, e, notes = self._fit_new(gap, start, size)
        new = Partition(number, s, e, code, name, flags, role, State.PROPOSED)
        plan = self._rebuilt(self.table.with_partitions((*self.table.partitions, new)))
        snap = Snap(Span(start, start + size - 1), new.extent, self.grain, self.geometry.logical, tuple(notes))
        what = "extended partition" if role is Role.EXTENDED else f"{role.value} partition" if label == "msdos" \
            else "partition"
        shown = human_bytes(new.size * self.geometry.logical)
        return Outcome(self, plan, True, f"new {what} {number} at {s}s..{e}s ({shown})", snap, number)

    def _fit_new(self, gap: Gap, start: int, size: int) -> tuple[int, int, list[str]]:
        g = self.grain
        notes: list[str] = []
        lo, hi = first_start(g, gap), last_start(g, gap.hi)
        if lo > hi:
            raise _Refused(f"no {human_bytes(g.sectors * self.geometry.logical)}-aligned start is free between "
                           f"{gap.lo}s and {gap.hi}s")
        s = clamp(snap_start(g, start), lo, hi)
        end_lo, end_hi = first_end(g, s, gap.area_hi), last_end(g, gap)
        if end_lo > end_hi:
            raise _Refused(f"the free space {gap.lo}s..{gap.hi}s has no room for an aligned partition at {s}s")
        e = max(snap_end(g, s + size - 1, gap.area_hi), end_lo)
        if e > end_hi:
            if start + size - 1 > gap.hi:
                free = max(gap.hi - start + 1, 0)
                raise _Refused(f"{size} sectors do not fit: from {start}s the free space ends at {gap.hi}s "
                               f"({free} sectors, {human_bytes(free * self.geometry.logical)}; then {gap.after})")
            notes.append(f"end pulled in to {end_hi}s to stay aligned before {gap.after}")
            e = end_hi
        if s != start:
            notes.append(f"start snapped to the {g.sectors}-sector grain")
        return s, e, notes

    # --- moving and resizing --------------------------------------------------------------------------

    def move(self, number: int, steps: int = 1, *, data: bool = False) -> Outcome:
        """Move a proposed partition by ``steps`` grains (keyboard: 1, or 10 with a modifier)."""
        p = self.partition(number)
        if p is None:
            return self.move_to(number, 0)
        return self.move_to(number, p.start + steps * self._step(), keyboard=True, data=data)

    def move_to(self, number: int, start: int, *, keyboard: bool = False, data: bool = False) -> Outcome:
        """Move a proposed partition so it starts near LBA ``start`` (mouse), keeping its size exactly.
        It stops against its neighbours; it never jumps over one. ``data``: an existing partition may move
        too, which plans a data move (``Changes.move``: its bytes are copied to the new place)."""
        try:
            p, lane_no, i = self._proposed(number, data=data)
        except _Refused as exc:
            return self._refuse(str(exc), number)
        if p.role is Role.EXTENDED and self._logicals():
            return self._refuse(f"extended partition {number} holds logical partitions: move those, or resize "
                                "its edges", number)
        gap = self._gap(lane_no, i)
        placed = place(self.grain, gap, start, p.size)
        if placed is None:
            return self._refuse(f"partition {number} no longer fits between {gap.before} and {gap.after} when "
                                "aligned", number)
        s, e = placed
        notes = []
        free_s = snap_start(self.grain, start)
        if s != free_s:
            chain = self._chain_reason(i, free_s, p.size) if lane_no == LOGICAL and p.state is State.EXISTING else ""
            notes.append(chain or f"stopped against {gap.after if s < free_s else gap.before}")
        if p.size % self.grain.sectors and p.state is State.PROPOSED:
            notes.append(f"size kept: {p.size}s is not a whole number of {self.grain.sectors}-sector grains, "
                         "so the end is off the grain (r resizes, a re-snaps)")
        changed_wanted = start != p.start if keyboard else snap_start(self.grain, start) != p.start
        return self._moved(p, replace(p, start=s, end=e), Span(start, start + p.size - 1), notes, "moved",
                           changed_wanted)

    def _moved(self, p: Partition, new: Partition, requested: Span, notes: list[str], verb: str,
               wanted_change: bool, limits: Limits | None = None) -> Outcome:
        # A proposal (every step of most drags) needs no look-up: by_number scans the disk's whole table.
        base = self.base.by_number(p.number) if p.state is State.EXISTING else None
        if base is None:
            return self._outcome(p, new, requested, notes, verb, wanted_change)
        # The map and the list say where it comes from; the change list what its filesystem's tool does.
        extra: list[tuple[str, str]] = []
        if new.start != base.start:
            extra.append(("moved_from", str(base.start)))
        if new.size != base.size:
            fs = limits.fs if limits else dict(p.extra).get("content", "")  # a later move keeps what was measured
            extra += [("resized_from", str(base.size)), ("content", fs)]
        new = replace(new, extra=tuple(extra))
        out = self._outcome(p, new, requested, notes, verb, wanted_change)
        if not out.changed:
            return out
        if (new.start, new.end) == (base.start, base.end):
            return replace(out, message=f"partition {p.number} back at {new.start}s..{new.end}s: no data moves")
        ss = self.geometry.logical
        said = []
        if new.size != base.size:
            said.append(f"its {dict(new.extra).get('content') or 'content'} "
                        f"{'grows' if new.size > base.size else 'shrinks'} by "
                        f"{human_bytes(abs(new.size - base.size) * ss)} to {human_bytes(new.size * ss)}")
        if new.start != base.start:
            said.append(f"its data ({human_bytes(min(new.size, base.size) * ss)}) moves from {base.start}s")
        # Where a logical partition stops depends on EBRs the map barely shows: the chain's reason is said.
        stopped = f" (it stopped: {notes[-1]})" if notes and p.role is Role.LOGICAL else ""
        return replace(out, message=f"{out.message}: {' and '.join(said)} when written{stopped}")

    def realign(self, number: int, limits: Limits | None = None) -> Outcome:
        """Plan a data move of existing partition ``number`` to the device's grain boundary nearest its start
        that the free space around it allows, size unchanged (model.plan.move.realign_start). When no boundary
        leaves room, or its size is not a whole number of physical blocks, and ``limits`` (what its
        filesystem's tool can do, measured on the disk) allow a shrink: it shrinks first, its start to the
        nearest boundary and its size to whole physical blocks (model.plan.move.realign_shrunk)."""
        try:
            p, _, _ = self._proposed(number, data=True)
        except _Refused as exc:
            return self._refuse(str(exc), number)
        if p.state is not State.EXISTING:
            return self._refuse(f"partition {number} is proposed: a re-snaps proposals (nothing to move)", number)
        grain = optimal_grain(self.geometry)
        ss = self.geometry.logical
        block = self.geometry.sectors_per_physical
        if grain.is_aligned(p.start) and p.size % block == 0:
            return Outcome(self, self, True, f"partition {number} already starts on the device's "
                           f"{human_bytes(grain.sectors * ss)} grain", None, number)
        usable, others = self._realign_room(p)
        to = p.start if grain.is_aligned(p.start) else realign_start(p.extent, grain, usable, others)
        shrinks = limits is not None and limits.shrink
        if to is not None:
            new = replace(p, start=to, end=to + p.size - 1)
            if shrinks and p.size % block and p.size - p.size % block >= self._floor(p, limits):
                new = replace(new, end=new.end - p.size % block)  # a whole number of physical blocks
        else:
            at = realign_shrinking(p.extent, grain, block, free_around(p.extent, usable, others), limits, ss)
            if isinstance(at, str):
                return self._refuse(f"partition {number} cannot be realigned: {at}", number)
            new = replace(p, start=at.start, end=at.end)
        if (new.start, new.end) == (p.start, p.end):  # on the grain, its size off the physical block
            why = limits.why if limits is not None and not limits.shrink else "how far its filesystem can shrink " \
                "is not measured" if limits is None else "its filesystem cannot shrink that far"
            return self._refuse(f"partition {number} starts on the grain, but its size ({p.size}s) is not a whole "
                                f"number of {block}-sector physical blocks ({why})", number)
        out = self._moved(p, new, Span(p.start, p.end), [], "realigned", True, limits)
        return replace(out, snap=Snap(Span(p.start, p.end), new.extent, grain, ss))

    def _floor(self, p: Partition, limits: Limits | None) -> int:
        return limits.floor(self.geometry.logical) if limits is not None else p.size

    def realign_wants_limits(self, number: int) -> bool:
        """Whether realigning existing partition ``number`` depends on how far its filesystem can shrink:
        it has no room to move whole, or its size is not a whole number of physical blocks."""
        p = self.partition(number)
        if p is None or p.state is not State.EXISTING or p.role is Role.EXTENDED or self.blocked():
            return False
        grain = optimal_grain(self.geometry)
        if p.size % self.geometry.sectors_per_physical:
            return True
        if grain.is_aligned(p.start):
            return False
        return realign_start(p.extent, grain, *self._realign_room(p)) is None

    def _realign_room(self, p: Partition) -> tuple[Extent, list[Extent]]:
        """Where existing partition ``p`` may go, and the partitions around it (a logical one: its window in
        the EBR chain, as `diskplan realign` has it, model.plan.ebrmove.window)."""
        lane_no, i, _ = self.where[p.number]
        if lane_no == LOGICAL:  # within the extended partition, as `diskplan realign`: it never grows it
            gap = self._gap(lane_no, i)
            return Extent(gap.lo, min(gap.hi, self.lanes[LOGICAL].area_hi)), []
        t = self.table
        return Extent(t.first_usable, t.last_usable), [q.extent for q in self.lanes[TOP].parts if q.number != p.number]

    def realign_all(self, limits: dict[int, Limits] | None = None) -> Outcome:
        """Realign every existing partition off the device's grain that has room (one step), shrinking those
        whose ``limits`` allow it (as ``realign``); says which cannot move and why. Passes until nothing
        more moves: one realigned may make room for another (its neighbour on the left, once it has moved
        right)."""
        grain = optimal_grain(self.geometry)
        limits = limits or {}
        plan, done = self, []
        pending = [p.number for p in self.live if p.state is State.EXISTING and self.misaligned(p)]
        why: dict[int, str] = {}
        while pending:  # each pass realigns one at least, or stops
            moved = False
            for n in list(pending):
                out = plan.realign(n, limits.get(n))
                if out.ok:
                    plan, moved = out.plan, True
                    done.append(n)
                    pending.remove(n)
                else:
                    why[n] = out.message.split(": ", 1)[-1]
            if not moved:
                break
        left = [f"{n}: {why[n]}" for n in pending]
        done.sort()
        if not done:
            return self._refuse("no partition on the disk can be realigned" + (
                f": partition {'; '.join(left)}" if left else f": every one starts on the device's grain "
                f"({human_bytes(grain.sectors * self.geometry.logical)})"))
        s = "s" if len(done) > 1 else ""
        text = f"realigned partition{s} {', '.join(map(str, done))}: data moves when written"
        return Outcome(self, plan, True, text + (f"; not partition {'; '.join(left)}" if left else ""))

    def misaligned(self, p: Partition) -> bool:
        """Whether ``p`` starts off the device's grain or its size is not whole physical blocks (an extended
        partition holds no data of its own: its size does not count)."""
        odd = p.role is not Role.EXTENDED and bool(p.size % self.geometry.sectors_per_physical)
        return not optimal_grain(self.geometry).is_aligned(p.start) or odd

    def resize(self, number: int, edge: Edge, steps: int = 1, *, data: bool = False,
               limits: Limits | None = None) -> Outcome:
        """Move one edge of a proposed partition by ``steps`` grains (negative: left); ``data``, ``limits``:
        as ``resize_to``."""
        p = self.partition(number)
        if p is None:
            return self.resize_to(number, edge, 0)
        at = p.start if edge is Edge.START else p.end
        return self.resize_to(number, edge, at + steps * self._step(), keyboard=True, data=data, limits=limits)

    def resize_to(self, number: int, edge: Edge, lba: int, *, keyboard: bool = False, data: bool = False,
                  limits: Limits | None = None) -> Outcome:
        """Move one edge of a proposed partition to near LBA ``lba`` (mouse); the other edge stays.

        ``data``: an existing partition may be resized too, within ``limits`` (what its filesystem's tool
        can do, measured on the disk; None: not measured yet, so its size cannot change). A shrink stops at
        the smallest size the filesystem reaches; dragging the start edge moves its data as well."""
        try:
            p, lane_no, i = self._proposed(number, data=data)
        except _Refused as exc:
            return self._refuse(str(exc), number)
        gap = self._gap(lane_no, i)
        g = self.grain
        logicals = self._logicals() if p.role is Role.EXTENDED else ()
        notes = []
        base = self.base.by_number(number) if p.state is State.EXISTING else None
        floor, least = 1, ""  # the fewest sectors, and what sets it (not measured, or no shrink: refused below)
        if base is not None and limits is not None and limits.shrink:
            floor = min(limits.floor(self.geometry.logical), base.size)
            least = f"its {limits.fs} minimum ({human_bytes(floor * self.geometry.logical)}, from {limits.tool})"
        if edge is Edge.START:
            limit = p.end if not logicals else min(p.end, logicals[0].start - 1)
            limit = min(limit, p.end - floor + 1)
            s = place_start(g, gap, lba, limit)
            if s is None:
                return self._refuse(f"no aligned start is left for partition {number}", number)
            free = snap_start(g, lba)
            if s != free:
                bound = gap.before if s > free else (f"logical partition {logicals[0].number}" if logicals and
                                                     limit < p.end - floor + 1 else least or "its own end")
                notes.append(f"stopped at {bound}" if bound == least else f"stopped against {bound}")
            new, requested = replace(p, start=s), Span(lba, p.end)
            wanted = lba != p.start if keyboard else free != p.start
        else:
            at_least = p.start if not logicals else max(p.start, logicals[-1].end)
            at_least = max(at_least, p.start + floor - 1)
            e = place_end(g, gap, lba, at_least)
            if e is None:
                return self._refuse(f"no aligned end is left for partition {number}", number)
            free = snap_end(g, lba, gap.area_hi)
            if e != free:
                bound = gap.after if e < free else (f"logical partition {logicals[-1].number}" if logicals and
                                                    at_least > p.start + floor - 1 else least or
                                                    "its own start (one grain at least)")
                notes.append(f"stopped at {bound}" if bound == least else f"stopped against {bound}")
            new, requested = replace(p, end=e), Span(p.start, lba)
            wanted = lba != p.end if keyboard else free != p.end
        if lane_no == LOGICAL and base is not None and notes and notes[-1] in (
                f"stopped against {gap.before}", f"stopped against {gap.after}"):  # the chain says why, as `resize`
            ask = min(requested.start, requested.end)
            notes[-1] = self._chain_reason(i, ask, max(requested.start, requested.end) - ask + 1) or notes[-1]
        if base is not None and new.size != base.size:
            why = self._resize_refusal(new, base, limits)
            if why:
                return self._refuse(why, number)
            return self._moved(p, new, requested, notes, "resized", wanted, limits)
        if base is not None:
            return self._moved(p, new, requested, notes, "resized", wanted)
        return self._outcome(p, new, requested, notes, "resized", wanted)

    def _resize_refusal(self, new: Partition, base: Partition, limits: Limits | None) -> str:
        """Why existing partition ``base`` cannot take ``new``'s size, or ""."""
        n = base.number
        if limits is None:
            return (f"how far partition {n}'s filesystem can grow or shrink is not measured yet (it is read from "
                    "the disk: a moment)")
        if (new.size > base.size and not limits.grow) or (new.size < base.size and not limits.shrink):
            return f"partition {n} cannot be {'grown' if new.size > base.size else 'shrunk'}: {limits.why}"
        return ""

    # --- deleting -------------------------------------------------------------------------------------

    def delete(self, number: int) -> Outcome:
        """A proposed partition goes away; an existing one is marked for deletion (its space becomes free).
        Deleting an extended partition deletes the logical partitions inside it. Deleting a logical
        partition renumbers the ones after it, as libparted will (msdos numbers them 5, 6, … in the order
        of their EBR chain): logical 6 becomes 5."""
        why = self.blocked()
        p = self.partition(number)
        if why or p is None:
            return self._refuse(why or f"there is no partition {number}", number)
        doomed = [p, *self._logicals()] if p.role is Role.EXTENDED else [p]
        ids = {id(q) for q in doomed}
        later = {id(q) for q in self._logicals() if q.number > number} if p.role is Role.LOGICAL else set()
        parts = []
        for q in self.table.partitions:
            if id(q) in later:
                parts.append(replace(q, number=q.number - 1))
            elif id(q) not in ids:
                parts.append(q)
            elif q.state is State.EXISTING:  # a planned data move is dropped: it is deleted where it is on disk
                parts.append(replace(self._on_disk(q), state=State.DELETE))
        plan = self._rebuilt(self.table.with_partitions(tuple(parts)))
        verb = "marked for deletion" if p.state is State.EXISTING else "removed"
        n = len(doomed) - 1
        extra = f" with {n} logical partition{'s' if n > 1 else ''}" if n else ""
        shifted = f"; logical partitions {number + 1}.. are now {number}.. (the EBR chain's order)" if later else ""
        return Outcome(self, plan, True, f"partition {number}{extra} {verb}{shifted}", None, number)

    def _on_disk(self, p: Partition) -> Partition:
        """An existing partition as it is on the disk (where a planned data move would take it from)."""
        if p.role is not Role.PRIMARY:
            return p
        q = self.base.by_number(p.number)
        return replace(p, start=q.start, end=q.end, extra=()) if q is not None and q.size == p.size else p

    def undelete(self, number: int) -> Outcome:
        """Take back the deletion mark of an existing partition, if its space is still free."""
        p = self.deleted(number)
        if p is None:
            return self._refuse(f"partition {number} is not marked for deletion", number)
        if self.fresh:
            return self._refuse("the new label replaces the whole table: clear the plan to get the disk's "
                                "table back", number)
        if number in self.where and p.role is not Role.LOGICAL:
            return self._refuse(f"number {number} is now used by a proposed partition", number)
        if p.role is Role.LOGICAL:
            if self.extended() is None:
                return self._refuse(f"logical partition {number} needs its extended partition back first", number)
            lane = self.lanes[LOGICAL]
        else:
            if self.table.label == "msdos" and len(self.lanes[TOP].parts) >= labels.MSDOS_PRIMARIES:
                return self._refuse("an msdos table holds 4 primary partitions", number)
            if p.role is Role.EXTENDED and self.extended() is not None:
                return self._refuse("an msdos table has only one extended partition", number)
            lane = self.lanes[TOP]
        if not lane.fits(p.extent):
            other = next((q for q in lane.parts if q.extent.overlaps(p.extent)), None)
            what = f"partition {other.number}" if other else "the EBR of a logical partition"
            return self._refuse(f"the space of partition {number} ({p.start}s..{p.end}s) is used by {what} now",
                                number)
        # A logical partition takes its number back; the ones renumbered when it was deleted move up again.
        after: set[int] = set()
        if p.role is Role.LOGICAL:  # without a gap in the numbers: 5, 6, … as the chain has them
            number = min(number, labels.FIRST_LOGICAL + len(self._logicals()))
            after = {id(q) for q in self._logicals() if q.number >= number}
        parts = tuple(replace(q, state=State.EXISTING, number=number) if q is p else
                      replace(q, number=q.number + 1) if id(q) in after else q for q in self.table.partitions)
        return Outcome(self, self._rebuilt(self.table.with_partitions(parts)), True,
                       f"partition {number} kept", None, number)

    # --- types, names, flags --------------------------------------------------------------------------

    def _edit(self, number: int, **changes: object) -> Outcome:
        why = self.blocked()
        p = self.partition(number)
        if why or p is None:
            return self._refuse(why or f"there is no partition {number}", number)
        new = replace(p, **changes)  # keyword fields named by the three setters below
        if new == p:
            return Outcome(self, self, True, f"partition {number} unchanged", None, number)
        what = ", ".join(f"{k} {v!r}" for k, v in changes.items())
        return Outcome(self, self._replaced(p, new), True, f"partition {number}: {what}", None, number)

    def set_type(self, number: int, ptype: str) -> Outcome:
        p = self.partition(number)
        label = self.table.label
        if p is None or label not in labels.WRITTEN_LABELS:
            return self._edit(number)
        try:
            code = labels.type_code(label, ptype)
        except LabelError as exc:
            return self._refuse(str(exc), number)
        if labels.is_extended_type(code) != (p.role is Role.EXTENDED):
            return self._refuse("a partition cannot become extended, nor an extended one something else: "
                                "delete it and create another", number)
        # Flags libparted reported for the old type (esp, lvm, ...) would contradict the new one.
        return self._edit(number, type=code, flags=labels.plan_flags(label, p.flags))

    def set_name(self, number: int, name: str) -> Outcome:
        try:
            name = labels.check_name(self.table.label or "", name)
        except LabelError as exc:
            return self._refuse(str(exc), number)
        return self._edit(number, name=name)

    def set_flags(self, number: int, flags: tuple[str, ...]) -> Outcome:
        """Set the attribute flags (``labels.attribute_flags(label)`` lists them). On an existing partition,
        flags libparted reports for its type (esp, lvm, ...) are kept as they are."""
        p = self.partition(number)
        label = self.table.label or ""
        try:
            wanted = labels.check_flags(label, flags)
        except LabelError as exc:
            return self._refuse(str(exc), number)
        if p is None:
            return self._edit(number)
        keep = tuple(f for f in p.flags if f not in labels.attribute_flags(label))
        return self._edit(number, flags=tuple(sorted({*keep, *wanted})))

    def toggle_flag(self, number: int, flag: str) -> Outcome:
        p = self.partition(number)
        if p is None:
            return self._edit(number)
        current = set(labels.plan_flags(self.table.label or "", p.flags))
        return self.set_flags(number, tuple(current ^ {flag}))

    # --- whole-plan steps -----------------------------------------------------------------------------

    def new_label(self, label: str) -> Outcome:
        """A fresh gpt or msdos table: every partition on the disk is marked for deletion."""
        if self.repairing:
            return self._refuse(REPAIR_PENDING)
        try:
            label = labels.check_label(label)
        except LabelError as exc:
            return self._refuse(str(exc))
        need = label_sectors(label, self.geometry)
        if self.geometry.sectors < need:
            return self._refuse(f"a {label} label needs at least {need:,} sectors; this disk has "
                                f"{self.geometry.sectors:,}")
        fresh = new_table(label, self.geometry)
        doomed = tuple(replace(p, state=State.DELETE) for p in self.base.partitions)
        plan = self._rebuilt(fresh.with_partitions(doomed), fresh=True)
        n = len(self.base.partitions)
        old = f"the {self.base.label} table and its {n} partition{'s' if n != 1 else ''}" if self.base.label \
            else "nothing (the disk had no table)"
        return Outcome(self, plan, True, f"new {label} label: replaces {old}")

    def clear(self) -> Outcome:
        """Back to the table on disk: every proposal, deletion mark and change dropped."""
        if not self.dirty:
            return Outcome(self, self, True, "nothing to clear")
        n = len(self.changes())
        return Outcome(self, Plan._make(self.geometry, self.base, self.base, self.target, False, self.offer,
                                                  custom=self.custom), True,
                       f"cleared {n} pending changes")

    def set_target(self, target: SnapTarget, grains: tuple[int, ...] | None = None, *, fix: bool = False) -> Outcome:
        """Snap to another target from now on (CUSTOM: ``grains`` in bytes, e.g. a stripe). Partitions do
        not move, unless ``fix``: then every proposal is re-snapped in the same step (or it is refused).
        The device's geometry does not change: findings still judge what the disk is."""
        geom = self.geometry
        custom = self.custom if grains is None else tuple(grains)
        try:
            if any(g <= 0 for g in custom or ()):
                raise ValueError("a grain is a positive number of bytes")
            target.grain(geom, custom)
        except ValueError as exc:
            return self._refuse(str(exc))
        plan = Plan._make(geom, self.base, self.table, target, self.fresh, self.offer, self.repairing, custom)
        g = plan.grain
        message = f"snapping to {target.value}: {g.sectors} sectors ({human_bytes(g.sectors * geom.logical)})" + (
            f", offset {g.offset}s" if g.offset else "")
        if fix:
            fixed = plan.fix_layout()
            if not fixed.ok:
                return self._refuse(fixed.message)
            plan, message = fixed.plan, f"{message}; {fixed.message}"
        if plan == self:
            return Outcome(self, self, True, f"already snapping to {target.value}")
        return Outcome(self, plan, True, message)

    def fix_layout(self) -> Outcome:
        """Re-snap every proposed partition to the grain, left to right, in one step (all or nothing)."""
        plan = self
        moved = []
        for lane_no in (TOP, LOGICAL):
            for p in list(plan.lanes[lane_no].parts):
                if p.state is not State.PROPOSED:
                    continue
                cur = plan.partition(p.number)
                assert cur is not None
                if plan.on_grain(cur):
                    continue
                if cur.role is Role.EXTENDED and plan._logicals():
                    steps = [plan.resize_to(cur.number, Edge.START, cur.start)]
                    if steps[0].ok:
                        q = steps[0].plan.partition(cur.number)
                        assert q is not None
                        steps.append(steps[0].plan.resize_to(cur.number, Edge.END, q.end))
                else:  # the start, then the end nearest the same size (a move would keep the size as it is)
                    steps = [plan.resize_to(cur.number, Edge.START, cur.start)]
                    if steps[0].ok:
                        q = steps[0].plan.partition(cur.number)
                        assert q is not None
                        steps.append(steps[0].plan.resize_to(cur.number, Edge.END, q.start + cur.size - 1))
                for step in steps:
                    if not step.ok:
                        return self._refuse(f"cannot fix the layout: {step.message}", cur.number)
                    plan = step.plan
                if plan.partition(cur.number) != cur:
                    moved.append(cur.number)
        return Outcome(self, plan if moved else self, True, plan._fixed_message(moved))

    def _fixed_message(self, moved: list[int]) -> str:
        """What fix my layout did, and what it did not: proposals still off the device's grain (what the
        findings judge) when the snapping target is another, and existing partitions it never moves."""
        g, ss = self.grain, self.geometry.logical
        target = f"the {self.target.value} grain ({g.sectors:,}s = {human_bytes(g.sectors * ss)})"
        if self.target is SnapTarget.NONE:
            done = "snapping is off: no partition was re-snapped"
        elif moved:
            done = f"re-snapped partition{'s' if len(moved) > 1 else ''} {', '.join(map(str, moved))} to {target}"
        else:
            done = f"every proposed partition is already on {target}"
        device = optimal_grain(self.geometry)
        off = [p.number for p in self.live if p.state is State.PROPOSED and not self.on_grain(p, device)]
        if off and device != g:
            done += (f"; not on the device's {human_bytes(device.sectors * ss)} grain (what the findings judge): "
                     f"partition{'s' if len(off) > 1 else ''} {', '.join(map(str, off))} (snap to optimal and "
                     "fix again to align them)")
        stuck = [p.number for p in self.live if p.state is State.EXISTING and not device.is_aligned(p.start)]
        if stuck:
            done += (f"; partition{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))} on the disk "
                     f"{'are' if len(stuck) > 1 else 'is'} not moved (it holds data): A realigns "
                     f"{'them' if len(stuck) > 1 else 'it'}, moving the data")
        return done

    def adopt(self, table: Table) -> Outcome:
        """Make ``table`` (from a plan file) the wanted table: partitions of the disk that it keeps exactly
        (number, start, end) stay EXISTING, the others are marked DELETE, the rest are PROPOSED. A different
        label or usable area means a new label."""
        if self.repairing:
            return self._refuse(REPAIR_PENDING)
        problems = validate(table, self.geometry)
        if problems:
            return self._refuse("the plan is not valid here: " + "; ".join(problems))
        base = self.base
        fresh = (table.label != base.label or (table.first_usable, table.last_usable)
                 != (base.first_usable, base.last_usable))
        wanted = {(p.number, p.start, p.end, p.role): p for p in table.partitions if p.state is not State.DELETE}
        parts: list[Partition] = []
        attrs = labels.attribute_flags(base.label or "")
        for p in base.partitions:
            keep = None if fresh else wanted.pop((p.number, p.start, p.end, p.role), None)
            if keep is None:
                parts.append(replace(p, state=State.DELETE))
                continue
            flags = {*(f for f in p.flags if f not in attrs), *labels.plan_flags(base.label or "", keep.flags)}
            kept = replace(p, type=keep.type or p.type, name=keep.name,
                           flags=p.flags if flags == set(p.flags) else tuple(sorted(flags)))
            parts.append(p if kept == p else kept)
        parts += [replace(p, state=State.PROPOSED) for p in wanted.values()]
        plan = self._rebuilt(replace(table, partitions=()).with_partitions(tuple(parts)), fresh=fresh)
        return Outcome(self, plan, True, f"plan loaded: {len(plan.changes())} pending changes")

    def repair(self) -> Outcome:
        """Plan the repair the disk offers (rebuild the damaged GPT copy, or the protective MBR, from the
        good copy): a pending change of its own, written before anything else can be planned."""
        offer = self.offer
        if offer is None:
            return self._refuse("this disk has no repair to offer: its table passed diskplan's checks, or no "
                                "good copy is left to repair it from (see its findings)")
        if self.repairing:
            return Outcome(self, self, True, f"the repair is already planned: {offer.summary}")
        if self.dirty:
            n = len(self.changes())
            return self._refuse(f"a repair is written on its own, before any other change: undo or clear the {n} "
                                f"pending change{'s' if n != 1 else ''} first (committing changes to a GPT "
                                "rewrites both copies anyway, when the table can be written)")
        plan = Plan(self.geometry, self.base, self.wanted, self.target, self.fresh, self.grain, self.lanes,
                    self.where, self.patch, offer, True, self.custom)
        return Outcome(self, plan, True, f"repair planned: {offer.summary} (nothing is written until you commit)")

    # --- what will change -----------------------------------------------------------------------------

    @cached_property
    def _writes(self) -> Changes:
        return plan_writes(self.base, self.table, self.geometry, fresh=self.fresh)

    def writes(self) -> Changes:
        """The one list of operations that writes this plan (model.plan.operations.plan_writes), built once per
        plan: the Changes panel shows it, the confirmation lists it and the commit executes it."""
        return self._writes

    def operations(self) -> tuple[Operation, ...]:
        """Every operation a commit of this plan performs, kept partitions included; for a pending
        repair, the sectors it writes."""
        if self.repairing and self.offer is not None:
            return repair_operations(self.offer, self.base, self.geometry.logical)
        return self._writes.operations

    def changes(self) -> tuple[Operation, ...]:
        """The pending changes against the table on disk, in the order they are written: the operations
        a user reviews (all but the partitions kept untouched)."""
        return tuple(op for op in self.operations() if op.pending)

    def problems(self) -> tuple[str, ...]:
        """Why this plan cannot be written as it is (the commit refuses it for the same reasons)."""
        return () if self.repairing else self._writes.problems


class History:
    """Undo and redo over whole plans: undo gives back exactly the plan before the step."""

    def __init__(self, plan: Plan, limit: int = 10_000) -> None:
        self.present = plan
        self.limit = limit
        self._past: list[tuple[Plan, str]] = []
        self._future: list[tuple[Plan, str]] = []

    def apply(self, outcome: Outcome) -> bool:
        """Record a step taken from the present plan; False when it was refused or changed nothing."""
        if outcome.before is not self.present:
            raise ValueError("this outcome was computed from another plan than the present one")
        if not outcome.ok or not outcome.changed:
            return False
        self._past.append((self.present, outcome.message))
        if len(self._past) > self.limit:
            del self._past[0]
        self._future.clear()
        self.present = outcome.plan
        return True

    @property
    def can_undo(self) -> bool:
        return bool(self._past)

    @property
    def can_redo(self) -> bool:
        return bool(self._future)

    @property
    def undo_message(self) -> str:
        """What undo would take back ("" when nothing)."""
        return self._past[-1][1] if self._past else ""

    @property
    def redo_message(self) -> str:
        return self._future[-1][1] if self._future else ""

    def undo(self) -> str | None:
        """Go back one step; returns what was undone, or None when there was nothing."""
        if not self._past:
            return None
        plan, message = self._past.pop()
        self._future.append((self.present, message))
        self.present = plan
        return message

    def redo(self) -> str | None:
        if not self._future:
            return None
        plan, message = self._future.pop()
        self._past.append((self.present, message))
        self.present = plan
        return message
