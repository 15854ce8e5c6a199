"""What lies in each cell of the sector map: the disk cut into non-overlapping segments, looked up by bisect.

No Textual here: the widget asks ``MapContent.row`` for one screen row at a time, and the work done is
``O(cells + segments and markers inside that row)``: a 20 TB disk with 128 partitions costs what a
1 GB disk costs. Building the segments is ``O(n log n)`` in the number of partitions and regions,
done once per table.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.findings import (
    END_NOT_PHYSICAL,
    ERROR,
    NOTICE,
    PAST_END,
    WARNING,
    Finding,
)
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, mib_grain, physical_grain
from diskplan.model.table import Region, Table


class Kind(IntEnum):
    FREE = 0
    CONTAINER = 1  # inside an extended partition, not in a logical one
    METADATA = 2
    PARTITION = 3


class Grid(IntEnum):
    NONE = 0
    PHYSICAL = 1
    MIB = 2
    GRAIN = 3


# 0 nothing, 1 notice, 2 warning or error: what the "problem" glyph of a cell shows.
PROBLEM_LEVEL = {NOTICE: 1, WARNING: 2, ERROR: 2}

# A gridline is drawn only when its boundaries are at least this many cells apart; closer, every
# cell would carry one and the lines would say nothing.
GRID_MIN_CELLS = 4


@dataclass(frozen=True)
class Item:
    """One thing on the map: a partition, a metadata region, or a run of free sectors."""

    kind: Kind
    extent: Extent
    label: str
    partition: Partition | None = None
    region: Region | None = None
    slot: int = 0  # colour slot of a partition
    severity: str | None = None  # worst finding of a partition
    findings: tuple[Finding, ...] = ()

    @property
    def number(self) -> int | None:
        return self.partition.number if self.partition else None

    @property
    def state(self) -> State | None:
        return self.partition.state if self.partition else None


class Cell(NamedTuple):
    item: int  # index into MapContent.items, -1 past the end of the disk
    problem: int  # 0, 1 (notice) or 2 (warning/error): a finding's boundary lies in this cell
    grid: Grid  # the strongest boundary that falls in this cell


def _rank(item: Item) -> int:
    """Which item a cell shows when several share it: problems first, then partitions, metadata, free."""
    rank = int(item.kind) * 4
    if item.severity is not None:
        rank += 3 - {ERROR: 0, WARNING: 1, NOTICE: 2}[item.severity]
    if item.state is State.DELETE:
        rank -= 1
    return rank


def _marker_lba(f: Finding, p: Partition, last_lba: int) -> int:
    if f.code in (END_NOT_PHYSICAL, PAST_END):
        return min(p.end, last_lba)
    return min(p.start, last_lba)


class MapContent:
    """The disk as the map draws it. Immutable once built: a new table means a new MapContent."""

    SLOTS = 8

    def __init__(self, geometry: Geometry, table: Table, findings: list[Finding] | tuple[Finding, ...], grain: Grain):
        self.geometry = geometry
        self.table = table
        self.grain = grain
        self.findings = tuple(findings)
        self.sectors = geometry.sectors
        self.items: list[Item] = []
        self._build_items()
        self._build_segments()
        self._build_markers()
        self.grids = self._grids()

    # --- building -------------------------------------------------------------------------------

    def _build_items(self) -> None:
        by_part: dict[int, list[Finding]] = {}
        for f in self.findings:
            if f.partition is not None:
                by_part.setdefault(f.partition, []).append(f)
        slot = 0
        for p in self.table.partitions:
            mine = tuple(by_part.get(p.number, ()))
            severity = min((f.severity for f in mine), key=lambda s: {ERROR: 0, WARNING: 1, NOTICE: 2}[s], default=None)
            if p.role is Role.EXTENDED:
                self.items.append(
                    Item(Kind.CONTAINER, p.extent, f"extended partition {p.number}", p, None, slot, severity, mine)
                )
            else:
                self.items.append(Item(Kind.PARTITION, p.extent, _part_label(p), p, None, slot, severity, mine))
            slot = (slot + 1) % self.SLOTS
        for r in self.table.metadata:
            self.items.append(Item(Kind.METADATA, r.extent, r.label or r.kind, None, r))

    def _build_segments(self) -> None:
        """Cut [0, sectors) into runs, each shown as its highest-ranked covering item (or free)."""
        events: list[tuple[int, int, int]] = []  # (lba, +1 start / -1 end, item index)
        for i, it in enumerate(self.items):
            lo, hi = max(0, it.extent.start), min(self.sectors - 1, it.extent.end)
            if lo <= hi:
                events.append((lo, 1, i))
                events.append((hi + 1, -1, i))
        events.sort()
        ranks = [_rank(it) for it in self.items]
        active: list[tuple[int, int]] = []  # heap of (-rank, index)
        gone: set[int] = set()
        starts: list[int] = []
        owners: list[int] = []

        def emit(lo: int, hi: int) -> None:
            while active and active[0][1] in gone:
                heapq.heappop(active)
            if lo > hi:
                return
            if active:
                owner = active[0][1]
            else:
                owner = len(self.items)
                self.items.append(Item(Kind.FREE, Extent(lo, hi), "free"))
                ranks.append(0)
            if owners and owners[-1] == owner:
                return
            starts.append(lo)
            owners.append(owner)

        pos, k = 0, 0
        while k < len(events):
            at = events[k][0]
            emit(pos, at - 1)
            while k < len(events) and events[k][0] == at:
                _, kind, idx = events[k]
                if kind > 0:
                    gone.discard(idx)
                    heapq.heappush(active, (-ranks[idx], idx))
                else:
                    gone.add(idx)
                k += 1
            pos = at
        emit(pos, self.sectors - 1)
        self._starts = starts
        self._owners = owners
        self._ends = [*(s - 1 for s in starts[1:]), self.sectors - 1] if starts else []
        self._ranks = ranks

    def _build_markers(self) -> None:
        marks: dict[int, int] = {}
        for f in self.findings:
            if f.partition is None:
                continue
            p = self.table.by_number(f.partition)
            if p is None or p.state is State.DELETE:
                continue
            lba = _marker_lba(f, p, self.sectors - 1)
            marks[lba] = max(marks.get(lba, 0), PROBLEM_LEVEL.get(f.severity, 1))
        self._marker_lbas = sorted(marks)
        self._marker_levels = [marks[m] for m in self._marker_lbas]

    def _grids(self) -> tuple[tuple[Grid, int, int], ...]:
        geom = self.geometry
        out: list[tuple[Grid, int, int]] = []
        phys = physical_grain(geom)
        mib = mib_grain(geom)
        if phys.sectors > 1:
            out.append((Grid.PHYSICAL, phys.sectors, phys.offset))
        out.append((Grid.MIB, mib.sectors, mib.offset))
        if self.grain.sectors not in (mib.sectors, phys.sectors):
            out.append((Grid.GRAIN, self.grain.sectors, self.grain.offset))
        return tuple(out)

    # --- lookups --------------------------------------------------------------------------------

    def segment_index(self, lba: int) -> int:
        return max(0, bisect_right(self._starts, lba) - 1)

    def item_index_at(self, lba: int) -> int:
        if not 0 <= lba < self.sectors or not self._owners:
            return -1
        return self._owners[self.segment_index(lba)]

    def item_at(self, lba: int) -> Item | None:
        i = self.item_index_at(lba)
        return self.items[i] if i >= 0 else None

    def partition_items(self) -> list[Item]:
        return [it for it in self.items if it.partition is not None]

    def item_of(self, number: int) -> Item | None:
        return next((it for it in self.items if it.number == number), None)

    def next_start(self, lba: int, *, partitions_only: bool = True, problems_only: bool = False) -> int | None:
        """The first partition start (or finding marker) after ``lba``."""
        if problems_only:
            k = bisect_right(self._marker_lbas, lba)
            return self._marker_lbas[k] if k < len(self._marker_lbas) else None
        starts = sorted(it.extent.start for it in self._jump_items(partitions_only))
        k = bisect_right(starts, lba)
        return starts[k] if k < len(starts) else None

    def prev_start(self, lba: int, *, partitions_only: bool = True, problems_only: bool = False) -> int | None:
        if problems_only:
            k = bisect_left(self._marker_lbas, lba)
            return self._marker_lbas[k - 1] if k > 0 else None
        starts = sorted(it.extent.start for it in self._jump_items(partitions_only))
        k = bisect_left(starts, lba)
        return starts[k - 1] if k > 0 else None

    def _jump_items(self, partitions_only: bool) -> list[Item]:
        if partitions_only:
            return [it for it in self.items if it.kind is Kind.PARTITION]
        return [it for it in self.items if it.extent.start < self.sectors]

    # --- one screen row -------------------------------------------------------------------------

    def row(self, first_lba: int, spc: int, cols: int) -> list[Cell]:
        """The ``cols`` cells of ``spc`` sectors each starting at ``first_lba``."""
        cells: list[Cell] = []
        last = self.sectors - 1
        starts, ends, owners = self._starts, self._ends, self._owners
        ranks = self._ranks
        nseg = len(starts)
        if not nseg:
            return [Cell(-1, 0, Grid.NONE)] * cols
        i = self.segment_index(first_lba)
        mk = bisect_left(self._marker_lbas, first_lba)
        marker_lbas, marker_levels = self._marker_lbas, self._marker_levels
        grids = [(g, p, o) for g, p, o in self.grids if p >= GRID_MIN_CELLS * spc]
        for c in range(cols):
            lo = first_lba + c * spc
            if lo > last:
                cells.append(Cell(-1, 0, Grid.NONE))
                continue
            hi = min(lo + spc - 1, last)
            while ends[i] < lo:
                i += 1
            best = owners[i]
            j = i
            while j + 1 < nseg and starts[j + 1] <= hi:
                j += 1
                cand = owners[j]
                if ranks[cand] > ranks[best]:
                    best = cand
            problem = 0
            while mk < len(marker_lbas) and marker_lbas[mk] < lo:
                mk += 1
            k = mk
            while k < len(marker_lbas) and marker_lbas[k] <= hi:
                problem = max(problem, marker_levels[k])
                k += 1
            grid = Grid.NONE
            for g, period, offset in grids:
                first = lo + (offset - lo) % period
                if first <= hi and g > grid:
                    grid = g
            cells.append(Cell(best, problem, grid))
        return cells


def _part_label(p: Partition) -> str:
    name = f" {p.name}" if p.name else ""
    state = {State.PROPOSED: " (proposed)", State.DELETE: " (to delete)"}.get(p.state, "")
    role = " (logical)" if p.role is Role.LOGICAL else ""
    return f"partition {p.number}{name}{role}{state}"
