"""Findings: each code appears exactly when its arithmetic says so, and the explanation shows that arithmetic."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from diskplan.model.extent import Partition, Role, State
from diskplan.model.findings import codes as C
from diskplan.model.findings import placement as F
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.table import new_table

SECTORS = 1 << 24  # 8 GiB of 512-byte sectors


@st.composite
def geometries(draw: st.DrawFn) -> Geometry:
    logical = draw(st.sampled_from([512, 4096]))
    physical = logical * draw(st.sampled_from([1, 2, 8]))
    offset = logical * draw(st.integers(0, physical // logical - 1))
    return Geometry(sectors=SECTORS, logical=logical, physical=physical, alignment_offset=offset)


def codes_for(geom: Geometry, *parts: Partition, label: str = "gpt") -> dict[int, list[str]]:
    table = new_table(label, geom).with_partitions(parts)
    out: dict[int, list[str]] = {p.number: [] for p in parts}
    for f in F.analyze(geom, table):
        out.setdefault(f.partition or 0, []).append(f.code)
    return out


@given(geometries(), st.integers(40, SECTORS // 2))
def test_start_not_physical_exactly_when_the_bytes_say_so(geom: Geometry, start: int) -> None:
    part = Partition(1, start, start + 4095)
    codes = codes_for(geom, part)[1]
    misaligned = (start * geom.logical - geom.alignment_offset) % geom.physical != 0
    assert (C.START_NOT_PHYSICAL in codes) == misaligned
    if misaligned:
        table = new_table("gpt", geom).with_partitions((part,))
        f = next(f for f in F.analyze(geom, table) if f.code == C.START_NOT_PHYSICAL)
        text = " ".join(f.explanation)
        assert f"{start} × {geom.logical} B = {start * geom.logical} B" in text
        assert f"= {(start * geom.logical - geom.alignment_offset) % geom.physical}." in text


@given(st.integers(34, SECTORS // 2))
def test_a_512_512_disk_is_never_flagged_for_physical_misalignment(start: int) -> None:
    geom = Geometry(sectors=SECTORS)
    codes = codes_for(geom, Partition(1, start, start + 999))[1]
    assert C.START_NOT_PHYSICAL not in codes and C.END_NOT_PHYSICAL not in codes
    assert (C.START_NOT_GRAIN in codes) == (start % 2048 != 0)


@given(geometries(), st.integers(1, 2000), st.integers(1, 5000))
def test_partitions_on_the_optimal_grain_have_no_start_findings(geom: Geometry, k: int, blocks: int) -> None:
    grain = optimal_grain(geom)
    start = grain.align_up(34 + k * grain.sectors)
    end = start + blocks * geom.sectors_per_physical - 1
    assume(end < geom.sectors - 40)
    codes = codes_for(geom, Partition(1, start, end))[1]
    assert codes == []


@given(st.integers(1, 7))
def test_neighbours_meeting_inside_a_block_share_it(shift: int) -> None:
    geom = Geometry(sectors=SECTORS, physical=4096)
    a = Partition(1, 2048, 4096 + shift - 1)
    b = Partition(2, 4096 + shift, 8191)
    codes = codes_for(geom, a, b)
    assert C.SHARED_BLOCK in codes[2]
    assert C.END_NOT_PHYSICAL in codes[1]
    assert C.START_NOT_PHYSICAL in codes[2]


def test_aligned_neighbours_share_nothing() -> None:
    geom = Geometry(sectors=SECTORS, physical=4096)
    codes = codes_for(geom, Partition(1, 2048, 3071), Partition(2, 3072, 8191))
    assert codes == {1: [], 2: [C.START_NOT_GRAIN]}


@given(st.integers(2048, 100000), st.integers(1, 5000), st.integers(0, 6000))
def test_overlap_is_found_whenever_extents_intersect(start: int, size: int, delta: int) -> None:
    geom = Geometry(sectors=SECTORS)
    a = Partition(1, start, start + size - 1)
    b = Partition(2, start + delta, start + delta + size - 1)
    codes = codes_for(geom, a, b)
    assert (C.OVERLAP in codes[2]) == (delta < size)


def test_outside_usable_past_end_and_mbr_limit() -> None:
    geom = Geometry(sectors=SECTORS)
    codes = codes_for(geom, Partition(1, 10, 2047), Partition(2, SECTORS - 100, SECTORS + 10))
    assert C.OUTSIDE_USABLE in codes[1]  # inside the GPT entries
    assert C.PAST_END in codes[2]
    big = Geometry(sectors=5 * 2**30)  # 2.5 TiB
    codes = codes_for(big, Partition(1, 2048, 2**32 + 10), label="msdos")
    assert C.MBR_LIMIT in codes[1]


def test_dos_era_start() -> None:
    geom = Geometry(sectors=SECTORS, physical=4096)
    codes = codes_for(geom, Partition(1, 63, 20000), label="msdos")[1]
    assert C.DOS_ERA in codes[1:] or codes[0] == C.DOS_ERA
    assert C.START_NOT_PHYSICAL in codes


def test_deleted_partitions_are_not_judged() -> None:
    geom = Geometry(sectors=SECTORS, physical=4096)
    gone = Partition(1, 34, 9999, state=State.DELETE)
    assert codes_for(geom, gone) == {1: []}


def test_extended_container_is_not_judged_for_alignment() -> None:
    geom = Geometry(sectors=SECTORS, physical=4096)
    ext = Partition(2, 63, 100000, role=Role.EXTENDED)
    assert codes_for(geom, ext, label="msdos")[2] == []
