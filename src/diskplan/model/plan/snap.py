"""Snapping one partition inside the free gap it may use: where starts and ends may land on a grain.

With a grain of ``g`` sectors at offset ``o``, a snapped start is ``o mod g`` and a snapped end is one before
such a boundary (so the next partition can start aligned right after it). One exception: an end may stop at
the last sector of its area (the usable area, or the extended partition) even when that is off the grain,
so the last partition can use the whole disk, as fdisk and sfdisk allow. With the grain of one sector
(snapping off) every sector is a candidate and nothing changes.

Every function returns ``None`` when no snapped position fits: the caller refuses the operation.
"""

from __future__ import annotations

from diskplan.model.extent import Extent
from diskplan.model.grain import Grain
from diskplan.model.value import value


@value
class Gap:
    """Where one partition may lie: ``lo..hi`` inclusive. What bounds it is kept as partition numbers and
    words, and spelled out (``before``/``after``) only when a note or a refusal needs it."""

    lo: int
    hi: int
    area_hi: int  # last sector of the area: an end may stop here even off the grain
    prev: int | None = None  # number of the partition just before, or None: the area's start
    next: int | None = None
    area_before: str = "the start of the usable area"
    area_after: str = "the end of the usable area"
    ebr: bool = False  # logical partitions: the next one's EBR sits just before it

    @property
    def before(self) -> str:
        return self.area_before if self.prev is None else f"partition {self.prev}"

    @property
    def after(self) -> str:
        if self.next is None:
            return self.area_after
        return f"partition {self.next}" + (" and its EBR" if self.ebr else "")

    @property
    def extent(self) -> Extent:
        return Extent(self.lo, self.hi)


def snap_start(grain: Grain, lba: int) -> int:
    return grain.align_nearest(lba)


def snap_end(grain: Grain, lba: int, area_hi: int) -> int:
    """The end candidate nearest ``lba``: one before a boundary, or the area's last sector."""
    aligned = grain.align_nearest(lba + 1) - 1
    return area_hi if abs(area_hi - lba) < abs(aligned - lba) else aligned


def first_start(grain: Grain, gap: Gap) -> int:
    return grain.align_up(gap.lo)


def last_start(grain: Grain, limit: int) -> int:
    return grain.align_down(limit)


def last_end(grain: Grain, gap: Gap) -> int:
    """The last end candidate inside the gap."""
    if gap.hi == gap.area_hi:
        return gap.hi
    return grain.align_down(gap.hi + 1) - 1


def first_end(grain: Grain, at_least: int, area_hi: int) -> int:
    """The first end candidate at or after ``at_least``."""
    aligned = grain.align_up(at_least + 1) - 1
    return min(aligned, area_hi) if area_hi >= at_least else aligned


def clamp(value: int, lo: int, hi: int) -> int:
    return lo if value < lo else hi if value > hi else value


def place(grain: Grain, gap: Gap, start: int, size: int) -> tuple[int, int] | None:
    """A partition of exactly ``size`` sectors near ``start``, kept whole inside ``gap`` (for moves: a
    move never changes the size). The start goes to the nearest boundary, then is pushed back inside the
    gap; the end follows from the size, on the grain only when the size is whole grains."""
    lo, hi = first_start(grain, gap), grain.align_down(gap.hi - size + 1)
    if lo > hi:
        return None
    s = clamp(snap_start(grain, start), lo, hi)
    return s, s + size - 1


def place_start(grain: Grain, gap: Gap, start: int, limit: int) -> int | None:
    """A new start edge near ``start``, at or after the gap's start and at most ``limit``."""
    lo, hi = first_start(grain, gap), last_start(grain, limit)
    if lo > hi:
        return None
    return clamp(snap_start(grain, start), lo, hi)


def place_end(grain: Grain, gap: Gap, end: int, at_least: int) -> int | None:
    """A new end edge near ``end``, at least ``at_least`` and inside the gap."""
    lo, hi = first_end(grain, at_least, gap.area_hi), last_end(grain, gap)
    if lo > hi:
        return None
    return clamp(snap_end(grain, end, gap.area_hi), lo, hi)
