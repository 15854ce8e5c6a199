"""A plan's state: the table on disk and the table wanted, the snapping grain, the lanes (top level and inside
the extended partition) indexed by partition number, how a changed partition is patched in, and what a commit
would write (model.plan.operations). No step is taken here: the steps are in the modules beside it."""

from __future__ import annotations

from functools import cached_property
from operator import attrgetter
from typing import Self

from diskplan.model import labels
from diskplan.model.extent import Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, SnapTarget, optimal_grain
from diskplan.model.plan.lanes import Lane
from diskplan.model.plan.operations import Changes, Operation, plan_writes, repair_operations
from diskplan.model.plan.outcome import REPAIR_PENDING
from diskplan.model.plan.repair import GptRepair
from diskplan.model.table import MBR_LIMIT_SECTORS, Table
from diskplan.model.value import field, replace, value

_order = attrgetter("start", "number")
TOP, LOGICAL = 0, 1


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
class PlanState:
    """What a plan holds and what it answers without taking a step: the tables, the snapping grain, the lane
    index, and what a commit would write. Plans compare equal when they want the same table on the same disk with
    the same snapping."""

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
        if not isinstance(other, PlanState):
            return NotImplemented
        return (self.geometry, self.base, self.target, self.grain, self.fresh, self.repairing, self.table) == (
            other.geometry, other.base, other.target, other.grain, other.fresh, other.repairing, other.table)

    __hash__ = None  # type: ignore[assignment]  # unhashable (typeshed types __hash__ as a method only)

    @classmethod
    def open(cls, geometry: Geometry, table: Table, target: SnapTarget = SnapTarget.OPTIMAL, *,
             offer: GptRepair | None = None) -> Self:
        """A plan that changes nothing yet, on the table read from the disk; ``offer``: the repair the
        reader offers for it (``Disk.repair``), which ``repair()`` plans."""
        return cls._make(geometry, table, table, target, False, offer)

    @classmethod
    def _make(cls, geom: Geometry, base: Table, table: Table, target: SnapTarget, fresh: bool,
              offer: GptRepair | None = None, repairing: bool = False, custom: tuple[int, ...] | None = None) -> Self:
        lanes, where = _build_lanes(table, geom)
        return cls(geom, base, table, target, fresh, target.grain(geom, custom), lanes, where, None, offer, repairing,
                   custom)

    def _rebuilt(self, table: Table, *, fresh: bool | None = None) -> Self:
        return type(self)._make(self.geometry, self.base, table, self.target, self.fresh if fresh is None else fresh,
                          self.offer, self.repairing, self.custom)

    def _slot(self, j: int) -> Partition:
        patch = self.patch
        return patch[1] if patch is not None and patch[0] == j else self.wanted.partitions[j]

    def _replaced(self, old: Partition, new: Partition) -> Self:
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
        return type(self)(self.geometry, self.base, wanted, self.target, self.fresh, self.grain, (lanes[0], lanes[1]),
                    self.where, (j, new), self.offer, self.repairing, self.custom)

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

    def _logicals(self) -> tuple[Partition, ...]:
        return self.lanes[LOGICAL].parts

    def _step(self) -> int:
        return self.grain.sectors

    def misaligned(self, p: Partition) -> bool:
        """Whether ``p`` starts off the device's grain or its size is not whole physical blocks (an extended
        partition holds no data of its own: its size does not count)."""
        odd = p.role is not Role.EXTENDED and bool(p.size % self.geometry.sectors_per_physical)
        return not optimal_grain(self.geometry).is_aligned(p.start) or odd

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
