"""Grains: the boundaries a partition should start on, and aligning LBAs to them.

A grain is a period in logical sectors plus an offset: ``lba`` is on the grain when
``lba % sectors == offset``. The offset carries the kernel's ``alignment_offset`` (old 512e drives with a
"WinXP jumper" make LBA 63 the aligned one). The way libfdisk and libparted pick a grain is reproduced
here so the planner can say what each of them would do (see shared/design/alignment-rules.md).
"""

from __future__ import annotations

from enum import Enum
from math import lcm

from diskplan.model.geometry import Geometry
from diskplan.model.units import MiB
from diskplan.model.value import value

# libfdisk ignores this optimal_io_size: some USB bridges report it for no reason (0xFFFF * 512).
BOGUS_OPTIMAL_IO = 33553920


@value
class Grain:
    """The alignment unit partitions should start on, in sectors, with its offset."""
    sectors: int
    offset: int = 0

    def __post_init__(self) -> None:
        if self.sectors <= 0:
            raise ValueError("a grain has at least one sector")
        object.__setattr__(self, "offset", self.offset % self.sectors)

    def is_aligned(self, lba: int) -> bool:
        return lba % self.sectors == self.offset

    def align_down(self, lba: int) -> int:
        """The last grain boundary at or before ``lba``."""
        return lba - ((lba - self.offset) % self.sectors)

    def align_up(self, lba: int) -> int:
        """The first grain boundary at or after ``lba``."""
        down = self.align_down(lba)
        return down if down == lba else down + self.sectors

    def align_nearest(self, lba: int) -> int:
        """The closest boundary; a tie goes up (away from what came before)."""
        down = self.align_down(lba)
        up = self.align_up(lba)
        return down if lba - down < up - lba else up

    def combine(self, other: Grain) -> Grain:
        """The coarsest grain that both accept, when their offsets agree (the usual case: both come from
        the same alignment offset); otherwise the finer offset wins, which still honours the coarser."""
        period = lcm(self.sectors, other.sectors)
        for candidate in range(self.offset, period, self.sectors):
            if candidate % other.sectors == other.offset:
                return Grain(period, candidate)
        return Grain(period, self.offset)


def offset_sectors(geom: Geometry) -> int:
    return geom.alignment_offset // geom.logical


def physical_grain(geom: Geometry) -> Grain:
    return Grain(geom.sectors_per_physical, offset_sectors(geom))


def page_grain(geom: Geometry) -> Grain:
    """The write unit starts are judged against: the physical block, or on flash at least a 4 KiB page."""
    return Grain(geom.sectors_per_page, offset_sectors(geom))


def mib_grain(geom: Geometry) -> Grain:
    return Grain(max(1, MiB // geom.logical), offset_sectors(geom))


def bytes_grain(geom: Geometry, nbytes: int) -> Grain:
    if nbytes % geom.logical:
        raise ValueError(f"{nbytes} B is not a whole number of {geom.logical} B sectors")
    return Grain(nbytes // geom.logical, offset_sectors(geom))


def device_io_hint(geom: Geometry) -> int:
    """The I/O size libfdisk trusts: optimal, else minimum; 0 when absent or not sane."""
    io = geom.optimal_io or geom.min_io
    if io == BOGUS_OPTIMAL_IO or io <= 0 or io % geom.physical:
        return 0
    return io


def libfdisk_grain(geom: Geometry) -> Grain:
    """libfdisk's ``topology_get_grain``: max(io, 1 MiB); one physical sector on a tiny device."""
    grain = max(device_io_hint(geom), MiB)
    if geom.sectors <= grain * 4 // geom.logical:
        grain = geom.physical
    return bytes_grain(geom, grain)


def libparted_optimum(geom: Geometry) -> Grain:
    """libparted's ``linux_get_optimum_alignment`` (what ``parted align-check opt`` tests)."""
    opt, mn = geom.optimal_io, geom.min_io
    if (not opt and not mn) or all(MiB % io == 0 for io in (opt, mn) if io):
        return mib_grain(geom)
    if not opt:
        return libparted_minimum(geom)
    return bytes_grain(geom, opt)


def libparted_minimum(geom: Geometry) -> Grain:
    """libparted's minimum alignment (``linux_get_minimum_alignment``, ``ped_device_get_minimum_alignment``):
    the minimum I/O size, or the physical sector when the device reports none."""
    mn = geom.min_io if geom.min_io and geom.min_io % geom.logical == 0 else geom.physical
    return bytes_grain(geom, mn)


def optimal_grain(geom: Geometry) -> Grain:
    """diskplan's default target: 1 MiB, the device's I/O hint, the physical block and every user grain,
    all at once (their least common multiple)."""
    grain = mib_grain(geom).combine(physical_grain(geom))
    hint = device_io_hint(geom)
    if hint:
        grain = grain.combine(bytes_grain(geom, hint))
    for g in geom.user_grains:
        grain = grain.combine(bytes_grain(geom, g))
    return grain


def user_grain(geom: Geometry, grains: tuple[int, ...] | None = None) -> Grain | None:
    """The lcm of the user's grains (``grains`` in bytes, else those declared with --grain) with the
    physical block, or None when there are none."""
    grains = geom.user_grains if grains is None else grains
    if not grains:
        return None
    grain = physical_grain(geom)
    for g in grains:
        grain = grain.combine(bytes_grain(geom, g))
    return grain


class SnapTarget(Enum):
    """What proposed partitions snap to while they are moved or resized."""

    OPTIMAL = "optimal"
    PHYSICAL = "physical"
    CUSTOM = "custom"
    NONE = "none"

    def grain(self, geom: Geometry, custom: tuple[int, ...] | None = None) -> Grain:
        """``custom``: the grains (bytes) CUSTOM snaps to, when not the ones declared with --grain."""
        if self is SnapTarget.OPTIMAL:
            return optimal_grain(geom)
        if self is SnapTarget.PHYSICAL:
            return physical_grain(geom)
        if self is SnapTarget.CUSTOM:
            return user_grain(geom, custom) or physical_grain(geom)
        return Grain(1)
