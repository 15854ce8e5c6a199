"""Live partitions of one level, sorted by start, with the free gaps between them found by bisection.

A table has a top lane (primary and extended partitions, in the usable area) and, on msdos, a logical lane
inside the extended partition, where each logical partition needs one free sector before it for its EBR
(libparted and sfdisk both refuse a logical partition that starts right after the previous one).

Lanes never change in place. A move or resize keeps every partition's rank (a partition cannot pass a
neighbour), so the next lane is the same tuple with one slot patched: ``with_part`` costs O(1) while the
same slot is edited again and again (a drag, a held arrow key); the tuple is rebuilt only when another slot
is patched or when the whole list is read.
"""

from __future__ import annotations

from bisect import bisect_right
from functools import cached_property
from itertools import pairwise
from operator import attrgetter

from diskplan.model.extent import Extent, Partition
from diskplan.model.plan.snap import Gap
from diskplan.model.value import field, value

_start = attrgetter("start")


@value(eq=False)
class Lane:
    base: tuple[Partition, ...]  # sorted by start, except that slot patch[0] holds patch[1]
    area_lo: int  # first sector of the area (the extended partition's EBR sector for logicals)
    area_hi: int  # last sector a partition may use
    sep: int  # free sectors needed before each partition (1 for logicals: the EBR)
    area_before: str  # what lies before the area, for reasons
    area_after: str
    overlapping: bool = False  # an existing table with overlapping partitions (gaps then use the max end)
    patch: tuple[int, Partition] | None = field(default=None)

    @classmethod
    def of(cls, parts: list[Partition], area_lo: int, area_hi: int, sep: int, before: str, after: str) -> Lane:
        ordered = tuple(sorted(parts, key=attrgetter("start", "number")))
        overlapping = any(a.end >= b.start for a, b in pairwise(ordered))
        return cls(ordered, area_lo, area_hi, sep, before, after, overlapping)

    @cached_property
    def parts(self) -> tuple[Partition, ...]:
        if self.patch is None:
            return self.base
        slots = list(self.base)
        slots[self.patch[0]] = self.patch[1]
        return tuple(slots)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Lane):
            return NotImplemented
        return (self.parts, self.area_lo, self.area_hi, self.sep, self.overlapping) == (
            other.parts, other.area_lo, other.area_hi, other.sep, other.overlapping)

    __hash__ = None  # type: ignore[assignment]  # unhashable (typeshed types __hash__ as a method only)

    def __len__(self) -> int:
        return len(self.base)

    def at(self, i: int) -> Partition:
        patch = self.patch
        return patch[1] if patch is not None and patch[0] == i else self.base[i]

    def with_part(self, i: int, p: Partition) -> Lane:
        """The lane with slot ``i`` holding ``p`` (which keeps its rank)."""
        base = self.base if self.patch is None or self.patch[0] == i else self.parts
        return Lane(base, self.area_lo, self.area_hi, self.sep, self.area_before, self.area_after,
                    self.overlapping, (i, p))

    def with_area(self, lo: int, hi: int) -> Lane:
        return Lane(self.base, lo, hi, self.sep, self.area_before, self.area_after, self.overlapping, self.patch)

    def _prev_end(self, i: int) -> int | None:
        if i == 0:
            return None
        if self.overlapping:
            return max(p.end for p in self.parts[:i])
        return self.at(i - 1).end

    def _prev_owner(self, i: int) -> Partition:
        if self.overlapping:
            return max(self.parts[:i], key=attrgetter("end"))
        return self.at(i - 1)

    def _bounds(self, i_prev: int, i_next: int) -> Gap:
        """The gap after the first ``i_prev`` partitions and before partition ``i_next``."""
        prev_end = self._prev_end(i_prev)
        if prev_end is None:
            lo, prev = self.area_lo + self.sep, None
        else:
            lo, prev = prev_end + 1 + self.sep, self._prev_owner(i_prev).number
        if i_next < len(self.base):
            nxt = self.at(i_next)
            hi, after = nxt.start - 1 - self.sep, nxt.number
        else:
            hi, after = self.area_hi, None
        return Gap(lo, min(hi, self.area_hi), self.area_hi, prev, after, self.area_before, self.area_after,
                   self.sep > 0)

    def gap_of(self, i: int) -> Gap:
        """Where partition ``i`` may lie without touching its neighbours."""
        return self._bounds(i, i + 1)

    def gap_at(self, lba: int) -> tuple[Gap | None, str]:
        """The free gap holding ``lba``, or None and why there is none."""
        i = bisect_right(self.parts, lba, key=_start)  # partitions starting at or before lba
        prev_end = self._prev_end(i)
        if prev_end is not None and prev_end >= lba:
            return None, f"sector {lba} belongs to partition {self._prev_owner(i).number}"
        gap = self._bounds(i, i)
        if lba < gap.lo - self.sep:  # (the sep sectors just before a gap are the EBR of what goes there)
            return None, f"sector {lba} is before the usable area ({self.area_before})"
        if lba > gap.hi:
            if i == len(self.base):
                return None, f"sector {lba} is past the usable area ({self.area_after})"
            return None, f"sector {lba} is kept free for the EBR of partition {self.at(i).number}"
        return gap, ""

    def gaps(self, min_sectors: int = 1) -> list[Gap]:
        out = []
        for i in range(len(self.base) + 1):
            gap = self._bounds(i, i)
            if gap.hi - gap.lo + 1 >= min_sectors:
                out.append(gap)
        return out

    def fits(self, extent: Extent) -> bool:
        gap, _ = self.gap_at(extent.start)
        return gap is not None and extent.end <= gap.hi
