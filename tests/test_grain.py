"""Grains and alignment: properties that must hold for every grain, offset and LBA."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskplan.model.geometry import Geometry
from diskplan.model.grain import (
    BOGUS_OPTIMAL_IO,
    Grain,
    libfdisk_grain,
    libparted_optimum,
    optimal_grain,
    physical_grain,
)

grains = st.builds(Grain, st.integers(1, 1 << 16), st.integers(0, 1 << 16))
lbas = st.integers(0, 1 << 40)


@given(grains, lbas)
def test_align_up_is_aligned_and_not_below(g: Grain, lba: int) -> None:
    up = g.align_up(lba)
    assert up >= lba
    assert g.is_aligned(up)
    assert up - lba < g.sectors


@given(grains, lbas)
def test_align_down_is_aligned_and_not_above(g: Grain, lba: int) -> None:
    down = g.align_down(lba)
    assert down <= lba
    assert g.is_aligned(down)
    assert lba - down < g.sectors


@given(grains, lbas)
def test_aligning_is_idempotent(g: Grain, lba: int) -> None:
    for f in (g.align_up, g.align_down, g.align_nearest):
        once = f(lba)
        assert f(once) == once


@given(grains, lbas)
def test_nearest_is_one_of_the_neighbours_and_closest(g: Grain, lba: int) -> None:
    n = g.align_nearest(lba)
    assert n in (g.align_down(lba), g.align_up(lba))
    assert abs(n - lba) <= g.sectors // 2 + 1


@given(grains, grains)
def test_combined_grain_satisfies_both_when_offsets_agree(a: Grain, b: Grain) -> None:
    c = a.combine(b)
    assert c.sectors % a.sectors == 0 and c.sectors % b.sectors == 0
    if any(x % b.sectors == b.offset for x in range(a.offset, c.sectors, a.sectors)):
        assert a.is_aligned(c.offset) and b.is_aligned(c.offset)


@given(st.integers(0, 7), lbas)
def test_alignment_offset_shifts_the_boundaries(offset: int, lba: int) -> None:
    # A 512e drive with a 'WinXP jumper' (alignment_offset 3584 B): LBA 63 is on a physical block.
    geom = Geometry(sectors=1 << 30, physical=4096, alignment_offset=offset * 512)
    g = physical_grain(geom)
    assert g.is_aligned(offset)
    assert g.is_aligned(g.align_up(lba))
    assert (g.align_up(lba) * 512 - offset * 512) % 4096 == 0


def test_winxp_jumper_makes_63_aligned() -> None:
    geom = Geometry(sectors=1 << 30, physical=4096, alignment_offset=3584)
    assert physical_grain(geom).is_aligned(63)
    assert not physical_grain(Geometry(sectors=1 << 30, physical=4096)).is_aligned(63)


@pytest.mark.parametrize(
    ("opt", "mn", "expect_fdisk", "expect_parted"),
    [
        (0, 0, 2048, 2048),  # no hints: 1 MiB everywhere
        (0, 512, 2048, 2048),  # a loop device
        (196608, 65536, 2048, 384),  # 3-disk RAID stripe: libfdisk rounds up to 1 MiB, libparted follows it
        (4 << 20, 4096, 8192, 8192),  # 4 MiB optimal I/O: both follow it
        (BOGUS_OPTIMAL_IO, 0, 2048, None),  # libfdisk ignores the bogus USB value
    ],
)
def test_tool_grains(opt: int, mn: int, expect_fdisk: int, expect_parted: int | None) -> None:
    geom = Geometry(sectors=1 << 30, physical=4096 if mn >= 4096 else 512, optimal_io=opt, min_io=mn)
    fdisk = libfdisk_grain(geom).sectors
    assert fdisk == expect_fdisk
    if expect_parted is not None:
        assert libparted_optimum(geom).sectors == expect_parted


def test_optimal_grain_is_the_lcm_of_mib_stripe_and_user_grains() -> None:
    geom = Geometry(sectors=1 << 30, optimal_io=196608)
    assert optimal_grain(geom).sectors == 6144  # lcm(1 MiB, 192 KiB) = 3 MiB
    geom = Geometry(sectors=1 << 30, user_grains=(1536 * 1024,))  # 1.5 MiB erase block
    assert optimal_grain(geom).sectors == 6144


def test_tiny_device_gets_one_physical_sector_from_libfdisk() -> None:
    assert libfdisk_grain(Geometry(sectors=100)).sectors == 1
