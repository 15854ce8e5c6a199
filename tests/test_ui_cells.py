"""The map's cell model: every sector belongs to exactly one item, rows agree with point lookups, and
the work per row follows the row, not the disk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.model.extent import Partition, State
from diskplan.model.findings.placement import analyze
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.table import new_table, no_table
from diskplan.ui.cells import Grid, Kind, MapContent
from helpers.costs import calls


def content_for(geom: Geometry, parts: tuple[Partition, ...], label: str | None = "gpt") -> MapContent:
    table = new_table(label, geom).with_partitions(parts) if label else no_table(geom)
    grain = optimal_grain(geom)
    return MapContent(geom, table, analyze(geom, table, grain), grain)


def brute_item(content: MapContent, lba: int):
    """What should lie at ``lba``, by scanning: a partition beats metadata beats free."""
    parts = [p for p in content.table.partitions if p.start <= lba <= p.end]
    if parts:
        return ("part", parts[0].number)
    if any(r.extent.contains(lba) for r in content.table.metadata):
        return ("meta", None)
    return ("free", None)


def kind_of(content: MapContent, lba: int):
    item = content.item_at(lba)
    assert item is not None
    if item.kind is Kind.PARTITION:
        return ("part", item.number)
    if item.kind is Kind.METADATA:
        return ("meta", None)
    return ("free", None)


@st.composite
def layouts(draw):
    sectors = draw(st.integers(200, 5000))
    geom = Geometry(sectors=sectors, physical=draw(st.sampled_from([512, 4096])))
    table = new_table("gpt", geom)
    cuts = sorted(draw(st.sets(st.integers(table.first_usable, table.last_usable), min_size=0, max_size=12)))
    parts = []
    for n, (a, b) in enumerate(zip(cuts[::2], cuts[1::2], strict=False), start=1):
        parts.append(Partition(n, a, b))
    return geom, tuple(parts)


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_every_sector_has_exactly_the_right_item(layout) -> None:
    geom, parts = layout
    content = content_for(geom, parts)
    for lba in range(geom.sectors):
        assert kind_of(content, lba) == brute_item(content, lba), lba
    assert content.item_at(geom.sectors) is None


@settings(max_examples=40, deadline=None)
@given(layouts(), st.sampled_from([1, 2, 3, 8, 64]), st.integers(8, 40))
def test_rows_agree_with_point_lookups(layout, spc: int, cols: int) -> None:
    geom, parts = layout
    content = content_for(geom, parts)
    rows = -(-geom.sectors // (spc * cols))
    for r in range(rows):
        first = r * spc * cols
        cells = content.row(first, spc, cols)
        assert len(cells) == cols
        for c, cell in enumerate(cells):
            lo = first + c * spc
            if lo >= geom.sectors:
                assert cell.item == -1
                continue
            hi = min(lo + spc - 1, geom.sectors - 1)
            covering = {content.item_index_at(x) for x in range(lo, hi + 1)}
            assert cell.item in covering
            # A partition in the cell wins over metadata and free space.
            if any(content.items[i].kind is Kind.PARTITION for i in covering):
                assert content.items[cell.item].kind is Kind.PARTITION


def test_gridlines_and_problem_markers_fall_where_the_arithmetic_says() -> None:
    geom = Geometry(sectors=8192, physical=4096)  # 512e
    content = content_for(geom, (Partition(1, 34, 2047), Partition(2, 2048, 8000)))
    cells = content.row(0, 1, 64)
    assert cells[0].grid is Grid.MIB  # LBA 0 is on every boundary
    assert [c for c in range(1, 64) if cells[c].grid is Grid.PHYSICAL] == [8, 16, 24, 32, 40, 48, 56]
    assert [c for c in range(64) if cells[c].problem] == [34]  # partition 1 starts 1 KiB into block 4
    assert content.row(2048, 1, 8)[0].grid is Grid.MIB
    # Coarse zoom: physical lines closer than 4 cells are not drawn.
    assert all(c.grid is not Grid.PHYSICAL for c in content.row(0, 4, 64))


def test_a_non_mib_grain_gets_its_own_lines() -> None:
    geom = Geometry(sectors=40000, optimal_io=196608)  # 192 KiB stripe: grain lcm(1 MiB, 192 KiB) = 3 MiB
    content = content_for(geom, (Partition(1, 2048, 30000),))
    assert content.grain.sectors == 6144
    cells = content.row(0, 256, 72)  # MiB every 8 cells, grain every 24
    assert [c for c in range(72) if cells[c].grid is Grid.GRAIN] == [0, 24, 48]
    assert [c for c in range(72) if cells[c].grid is Grid.MIB] == [8, 16, 32, 40, 56, 64]


def test_states_and_no_table() -> None:
    geom = Geometry(sectors=4096)
    content = content_for(geom, (), label=None)
    assert {content.items[c.item].kind for c in content.row(0, 64, 64)} == {Kind.FREE}
    table = new_table("gpt", geom).with_partitions(
        (Partition(1, 2048, 3000, state=State.PROPOSED), Partition(2, 100, 1000, state=State.DELETE))
    )
    grain = optimal_grain(geom)
    c2 = MapContent(geom, table, analyze(geom, table, grain), grain)
    assert c2.item_at(2500).state is State.PROPOSED  # type: ignore[union-attr]
    assert c2.item_at(500).state is State.DELETE  # type: ignore[union-attr]


def test_jumps() -> None:
    geom = Geometry(sectors=8192, physical=4096)
    content = content_for(geom, (Partition(1, 34, 2047), Partition(2, 2048, 7999)))
    assert content.next_start(34) == 2048
    assert content.prev_start(2048) == 34
    assert content.prev_start(100) == 34  # from inside a partition: its own start
    assert content.next_start(0, problems_only=True) == 34
    assert content.next_start(34, problems_only=True) is None
    assert content.next_start(34, partitions_only=False) == 2048


def _big(sectors: int, n: int) -> MapContent:
    geom = Geometry(sectors=sectors, physical=4096)
    table = new_table("gpt", geom)
    size = (table.last_usable - 2048) // n
    parts = tuple(Partition(i + 1, 2048 + i * size + i % 3, 2048 + (i + 1) * size - 1) for i in range(n))
    return content_for(geom, parts)


def test_a_row_costs_the_same_on_a_20_tb_disk_with_128_partitions() -> None:
    small = _big(2 * 1024**3 // 512, 1)
    big = _big(20 * 10**12 // 512, 128)
    assert len(big.partition_items()) == 128

    def screen(content: MapContent) -> None:
        for spc in (1, 8, 2048, content.sectors // (64 * 12) + 1):
            middle = content.sectors // 2 // (64 * spc) * 64 * spc
            for r in range(12):
                content.row(middle + r * 64 * spc, spc, 64)

    screen(small)  # warm any lazily built indexes, as a running planner has
    screen(big)
    small_calls, big_calls = calls(lambda: screen(small)), calls(lambda: screen(big))
    # 48 rows of 64 cells: bisecting 128 partitions may add a little per row, never a scan of all of them.
    assert big_calls < small_calls * 1.5, (small_calls, big_calls)
