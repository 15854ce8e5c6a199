"""What lies in each cell of the sector map: the disk cut into non-overlapping segments, looked up by bisect.

No Textual here: the widget asks ``MapContent.row`` for one screen row at a time, and the work done is
``O(cells + segments and markers inside that row)``: a 20 TB disk with 128 partitions costs what a
1 GB disk costs. Building the segments is ``O(n log n)`` in the number of partitions and regions,
done once per table; a drag step changes one or two partitions, and ``MapContent.patched`` rebuilds only
the segments between the old and new edges, so it costs the same on 1 partition or 128.
"""

from __future__ import annotations

import copy
import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from enum import IntEnum
from typing import NamedTuple

from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.findings.codes import END_NOT_PHYSICAL, ERROR, NOTICE, PAST_END, SEVERITY_RANK, WARNING
from diskplan.model.findings.placement import Finding
from diskplan.model.findings.stackfindings import DataStart
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, mib_grain, page_grain
from diskplan.model.safetext import safe
from diskplan.model.table import Region, Table
from diskplan.model.value import replace, value


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


# The unused sectors libparted keeps between an EBR and its logical partition: drawn and explained as a gap.
EBR_GAP = "ebr-gap"

# 0 nothing, 1 notice, 2 warning or error: what the "problem" glyph of a cell shows.
PROBLEM_LEVEL = {NOTICE: 1, WARNING: 2, ERROR: 2}

# A gridline is drawn only when its boundaries are at least this many cells apart; closer, every
# cell would carry one and the lines would say nothing.
GRID_MIN_CELLS = 4


@value
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
    layer: int = 0  # a layer's data starts here: 0 none, 1 aligned, 2 off the grain, 3 off the page or stripe


def _rank(item: Item) -> int:
    """Which item a cell shows when several share it: problems first, then partitions, metadata, free."""
    rank = int(item.kind) * 4
    if item.severity is not None:
        rank += 3 - SEVERITY_RANK[item.severity]
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

    def __init__(self, geometry: Geometry, table: Table, findings: list[Finding] | tuple[Finding, ...], grain: Grain,
                 data_starts: tuple[DataStart, ...] = ()):
        """``data_starts``: where the layers inside the partitions read from the disk put their data
        (``stackfindings.data_starts``); marked while their partition lies where it was read."""
        self.geometry = geometry
        self.table = table
        self.grain = grain
        self.sectors = geometry.sectors
        self.items: list[Item] = []
        self._by_part: dict[int, tuple[Finding, ...]] = {}
        self._other_findings: tuple[Finding, ...] = ()
        self._flat: tuple[Finding, ...] | None = tuple(findings)
        self._live: dict[int, int] = {}  # live partition number -> item index
        self._build_items(findings)
        self._nonfree = len(self.items)  # items past this index are free runs made by the segment sweep
        self._index_by_start()
        self._build_segments()
        self._build_markers()
        self.grids = self._grids()
        self.data_starts = data_starts
        self._stack_numbers = frozenset(d.number for d in data_starts)
        self._place_data_starts()

    def _index_by_start(self) -> None:
        """The fixed items by start, with the largest end so far: which items meet a window, by bisection.
        Items a patch moved (``_moved``) are checked one by one instead."""
        order = sorted(range(self._nonfree), key=lambda i: self.items[i].extent.start)
        self._order = order
        self._order_starts = [self.items[i].extent.start for i in order]
        top, self._order_max_end = -1, []
        for i in order:
            top = max(top, self.items[i].extent.end)
            self._order_max_end.append(top)
        self._moved: frozenset[int] = frozenset()

    def _meeting(self, lo: int, hi: int) -> list[int]:
        """Fixed and moved items whose extent meets [lo, hi]."""
        items, moved = self.items, self._moved
        out = [i for i in moved if items[i].extent.start <= hi and items[i].extent.end >= lo]
        j = bisect_right(self._order_starts, hi) - 1
        max_end, order = self._order_max_end, self._order
        while j >= 0 and max_end[j] >= lo:
            i = order[j]
            if i not in moved and items[i].extent.end >= lo:
                out.append(i)
            j -= 1
        return out

    @property
    def findings(self) -> tuple[Finding, ...]:
        if self._flat is None:
            parts = [f for n in sorted(self._by_part) for f in self._by_part[n]]
            self._flat = (*self._other_findings, *parts)
        return self._flat

    # --- building -------------------------------------------------------------------------------

    def _build_items(self, findings: list[Finding] | tuple[Finding, ...]) -> None:
        by_part: dict[int, list[Finding]] = {}
        other = []
        for f in findings:
            if f.partition is not None:
                by_part.setdefault(f.partition, []).append(f)
            else:
                other.append(f)
        self._by_part = {n: tuple(fs) for n, fs in by_part.items()}
        self._other_findings = tuple(other)
        slot = 0
        for p in self.table.partitions:
            # Findings are about live partitions: a deleted one sharing a number with a proposal has none.
            mine = self._by_part.get(p.number, ()) if p.state is not State.DELETE else ()
            if p.state is not State.DELETE:
                self._live[p.number] = len(self.items)
            self.items.append(_partition_item(p, slot, mine))
            slot = (slot + 1) % self.SLOTS
        for r in self.table.metadata:
            if r.kind == "ebr" and r.extent.size > 1:  # libparted reports an EBR with the gap after it
                ebr, gap = Extent(r.extent.start, r.extent.start), Extent(r.extent.start + 1, r.extent.end)
                self.items.append(Item(Kind.METADATA, ebr, r.label or "EBR", None, replace(r, extent=ebr)))
                self.items.append(Item(Kind.METADATA, gap, "gap after the EBR", None, Region(EBR_GAP, gap)))
                continue
            self.items.append(Item(Kind.METADATA, r.extent, r.label or r.kind, None, r))

    def _build_segments(self) -> None:
        """Cut [0, sectors) into runs, each shown as its highest-ranked covering item (or free)."""
        self._ranks = [_rank(it) for it in self.items]
        self._starts, self._owners = self._sweep(range(len(self.items)), 0, self.sectors - 1)
        self._ends = [*(s - 1 for s in self._starts[1:]), self.sectors - 1] if self._starts else []

    def _sweep(self, candidates: range | list[int], lo_lba: int, hi_lba: int) -> tuple[list[int], list[int]]:
        """The runs of [lo_lba, hi_lba] and their owners, from the items ``candidates`` (free runs become
        new items)."""
        events: list[tuple[int, int, int]] = []  # (lba, +1 start / -1 end, item index)
        items = self.items
        for i in candidates:
            ext = items[i].extent
            lo, hi = max(lo_lba, ext.start), min(hi_lba, ext.end)
            if lo <= hi:
                events.append((lo, 1, i))
                events.append((hi + 1, -1, i))
        events.sort()
        ranks = self._ranks
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
                owner = len(items)
                items.append(Item(Kind.FREE, Extent(lo, hi), "free"))
                ranks.append(0)
            if owners and owners[-1] == owner:
                return
            starts.append(lo)
            owners.append(owner)

        pos, k = lo_lba, 0
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
        emit(pos, hi_lba)
        return starts, owners

    def _build_markers(self) -> None:
        self._marks_of: dict[int, dict[int, int]] = {}  # partition number -> {lba: level}
        for n in self._by_part:
            self._marks_of[n] = self._part_marks(n)
        self._merge_markers()

    def _part_marks(self, number: int) -> dict[int, int]:
        marks: dict[int, int] = {}
        index = self._live.get(number)
        if index is None:
            return marks
        p = self.items[index].partition
        assert p is not None
        for f in self._by_part.get(number, ()):
            lba = _marker_lba(f, p, self.sectors - 1)
            marks[lba] = max(marks.get(lba, 0), PROBLEM_LEVEL.get(f.severity, 1))
        return marks

    def _merge_markers(self) -> None:
        marks: dict[int, int] = {}
        for mine in self._marks_of.values():
            for lba, level in mine.items():
                marks[lba] = max(marks.get(lba, 0), level)
        self._marker_lbas = sorted(marks)
        self._marker_levels = [marks[m] for m in self._marker_lbas]

    def _update_markers(self, lbas: set[int]) -> None:
        """Recompute the merged markers at ``lbas`` only (after some partitions' marks changed)."""
        m_lbas, m_levels = self._marker_lbas.copy(), self._marker_levels.copy()
        for lba in sorted(lbas):
            level = max((mine.get(lba, 0) for mine in self._marks_of.values()), default=0)
            k = bisect_left(m_lbas, lba)
            present = k < len(m_lbas) and m_lbas[k] == lba
            if level and present:
                m_levels[k] = level
            elif level:
                m_lbas.insert(k, lba)
                m_levels.insert(k, level)
            elif present:
                del m_lbas[k], m_levels[k]
        self._marker_lbas, self._marker_levels = m_lbas, m_levels

    def _place_data_starts(self) -> None:
        """The data starts shown: those of partitions on the disk where they were read (not proposed, not
        moved; a partition marked for deletion still holds its data). A moved one's layers are not read yet."""
        as_read: set[tuple[int, int]] = set()
        if self.data_starts:
            as_read = {(it.partition.number, it.partition.start) for it in self.items[: self._nonfree]
                       if it.partition is not None and it.partition.state is not State.PROPOSED
                       and it.partition.moved_from is None}
            if self.table.label is None:
                as_read.add((0, 0))
        at: dict[int, list[DataStart]] = {}
        for d in self.data_starts:
            if (d.number, d.part_start) in as_read and 0 <= d.lba < self.sectors:
                at.setdefault(d.lba, []).append(d)
        self._layer_lbas = tuple(sorted(at))  # a tuple: layer_lbas hands it out without a copy
        self._layer_levels = [1 + max(d.level for d in at[lba]) for lba in self._layer_lbas]
        self._layers_at = {lba: tuple(ds) for lba, ds in at.items()}

    def _grids(self) -> tuple[tuple[Grid, int, int], ...]:
        geom = self.geometry
        out: list[tuple[Grid, int, int]] = []
        phys = page_grain(geom)  # the physical block, or on flash the assumed 4 KiB page
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

    def live_index(self, number: int | None) -> int | None:
        """The item index of live partition ``number``."""
        return None if number is None else self._live.get(number)

    def data_starts_in(self, lo: int, hi: int) -> tuple[DataStart, ...]:
        """The layer data starts shown in LBAs [lo, hi] (the status line names them)."""
        lbas = self._layer_lbas
        k0, k1 = bisect_left(lbas, lo), bisect_right(lbas, hi)
        return tuple(d for lba in lbas[k0:k1] for d in self._layers_at[lba])

    @property
    def layer_lbas(self) -> tuple[int, ...]:
        return self._layer_lbas

    def item_of(self, number: int) -> Item | None:
        """The live partition ``number`` (else a partition marked for deletion with that number)."""
        index = self._live.get(number)
        if index is not None:
            return self.items[index]
        return next((it for it in self.items[: self._nonfree] if it.number == number), None)

    # --- a drag step -----------------------------------------------------------------------------

    def patched(self, table: Table, changed: Mapping[int, tuple[Partition, tuple[Finding, ...]]]) -> MapContent:
        """This content with live partitions ``changed`` (number -> (partition, its findings)) moved,
        resized or re-judged, and ``table`` as the table. Only the segments between the old and the new
        edges are rebuilt: a drag step costs the same on 1 partition or 128. Partitions keep their
        numbers and their colour slots; nothing may appear or disappear (that is a new MapContent)."""
        new = copy.copy(self)
        new.table = table
        new.items = items = self.items.copy()
        new._ranks = ranks = self._ranks.copy()
        new._by_part = dict(self._by_part)
        new._marks_of = dict(self._marks_of)
        new._flat = None
        lo, hi = self.sectors, -1
        touched: set[int] = set()
        for number, (p, found) in changed.items():
            index = self._live[number]
            old = items[index]
            items[index] = item = _partition_item(p, old.slot, found)
            ranks[index] = _rank(item)
            if item.extent != old.extent:
                new._moved = new._moved | {index}
            for ext in (old.extent, item.extent):
                lo, hi = min(lo, ext.start), max(hi, ext.end)
            if found:
                new._by_part[number] = found
            else:
                new._by_part.pop(number, None)
            touched.update(self._marks_of.get(number, ()))
            new._marks_of[number] = mine = new._part_marks(number)
            touched.update(mine)
        if touched:
            new._update_markers(touched)
        if self._stack_numbers.intersection(changed):  # a partition holding layers moved (or came back)
            new._place_data_starts()
        lo, hi = max(0, lo), min(self.sectors - 1, hi)
        if lo > hi or not self._starts:
            return new
        starts, owners = self._starts, self._owners
        i0, i1 = self.segment_index(lo), self.segment_index(hi)
        # Free runs are rebuilt whole, so they stay maximal (the explanation of free space names its extent).
        if i0 > 0 and self.items[owners[i0 - 1]].kind is Kind.FREE:
            i0 -= 1
        if i1 + 1 < len(starts) and self.items[owners[i1 + 1]].kind is Kind.FREE:
            i1 += 1
        w_lo, w_hi = starts[i0], self._ends[i1]
        seg_starts, seg_owners = new._sweep(new._meeting(w_lo, w_hi), w_lo, w_hi)
        if i0 > 0 and seg_owners and owners[i0 - 1] == seg_owners[0]:  # the run before goes on into the window
            seg_starts, seg_owners = seg_starts[1:], seg_owners[1:]
        if i1 + 1 < len(starts) and seg_owners and owners[i1 + 1] == seg_owners[-1]:
            i1 += 1  # the run after the window merges into its last run
            w_hi = self._ends[i1]
        new._starts = new_starts = [*starts[:i0], *seg_starts, *starts[i1 + 1 :]]
        new._owners = [*owners[:i0], *seg_owners, *owners[i1 + 1 :]]
        k0, k1 = max(i0 - 1, 0), i0 + len(seg_starts)  # the runs whose ends may have moved
        last = len(new_starts) - 1
        mid = [new_starts[j + 1] - 1 if j < last else self.sectors - 1 for j in range(k0, k1)]
        new._ends = [*self._ends[:k0], *mid, *self._ends[i1 + 1 :]]
        return new

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
        fixed = self.items[: self._nonfree]
        if partitions_only:  # an extended partition too: it is a partition of the table
            return [it for it in fixed if it.partition is not None]
        free = [self.items[o] for o in set(self._owners) if o >= self._nonfree]  # a patch leaves old free runs
        return [it for it in (*fixed, *free) if it.extent.start < self.sectors]

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
        # Layer data starts are few: found by bisection per row, so a cell costs nothing more.
        lbas = self._layer_lbas
        k = bisect_left(lbas, first_lba) if lbas else 0
        while k < len(lbas) and lbas[k] < first_lba + cols * spc:
            c = (lbas[k] - first_lba) // spc
            cells[c] = cells[c]._replace(layer=max(cells[c].layer, self._layer_levels[k]))
            k += 1
        return cells


def _partition_item(p: Partition, slot: int, findings: tuple[Finding, ...]) -> Item:
    severity = min((f.severity for f in findings), key=SEVERITY_RANK.__getitem__, default=None)
    if p.role is Role.EXTENDED:
        return Item(Kind.CONTAINER, p.extent, f"extended partition {p.number}", p, None, slot, severity, findings)
    return Item(Kind.PARTITION, p.extent, _part_label(p), p, None, slot, severity, findings)


def _part_label(p: Partition) -> str:
    name = f" {safe(p.name)}" if p.name else ""  # the label is shown: the map, the status line, explain
    state = {State.PROPOSED: " (proposed)", State.DELETE: " (to delete)"}.get(p.state, "")
    if p.resized_from is not None:
        way = "grows" if p.size > p.resized_from else "shrinks"
        state = f" ({way} from {p.resized_from}s" + (f", its data moves here from {p.moved_from}s)"
                                                   if p.moved_from is not None else ")")
    elif p.moved_from is not None:
        state = f" (its data moves here from {p.moved_from}s)"
    role = " (logical)" if p.role is Role.LOGICAL else ""
    return f"partition {p.number}{name}{role}{state}"
