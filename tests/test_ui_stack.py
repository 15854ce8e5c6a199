"""The planner shows the stack inside a partition: a PV whose data misses the flash page is flagged on the
partition, the explain panel walks from the partition start down to pe_start with the sums, and the sector map
marks the cell where each layer's data begins (in the problem style when it misses the page)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from rich.style import Style

from diskplan.cli.options import open_target
from diskplan.cli.planner import parser
from diskplan.model.findings.codes import LAYER_NOT_PAGE
from diskplan.model.formats.lvmformat import StripedVg, pv_header_pieces
from diskplan.model.value import replace
from diskplan.ui.app import PlannerApp
from diskplan.ui.glyphs import UNICODE, Glyphs
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.screens import help_sections
from diskplan.ui.sectormap import SectorMap
from diskplan.ui.target import Target

MiB = 1 << 20


def _image(tmp_path: Path) -> Path:
    """GPT, partition 1 at 1 MiB holding a PV whose pe_start is 1 MiB + 1 KiB (pvcreate --dataalignmentoffset 1k)."""
    img = tmp_path / "pv.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    subprocess.run(["parted", "-s", str(img), "mklabel", "gpt", "mkpart", "p", "1MiB", "100%"], check=True,
                   capture_output=True)
    vg = StripedVg("vgteach", 62 * MiB, MiB + 1024, 4 * MiB, 8192)
    with open(img, "r+b") as f:
        for off, data in pv_header_pieces(vg, 0):
            f.seek(MiB + off)
            f.write(data)
    return img


def test_the_explain_panel_walks_down_to_a_misaligned_pe_start(tmp_path: Path) -> None:
    img = _image(tmp_path)
    disk = open_target(str(img), parser().parse_args([str(img), "--ssd"]))
    assert [f.code for f in disk.findings if f.partition == 1] == [LAYER_NOT_PAGE]

    async def drive() -> str:
        app = PlannerApp(start=Target(disk, str(img), path=str(img)))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.pause()
            await pilot.press("e")
            await pilot.pause()
            return app.query_one(ViewsPanel).text("explain")

    text = asyncio.run(drive())
    assert f"[{LAYER_NOT_PAGE}]" in text
    assert "LVM2 physical volume at byte 1,048,576: extent 0 (pe_start) at +1,049,600 B = byte 2,098,176" in text
    assert "2,098,176 mod 4,096 = 1,024" in text and "pvcreate --dataalignment" in text


def _cells_around(smap: SectorMap, lba: int, n: int = 2) -> list[tuple[str, Style | None]]:
    """(glyph, style) of the cells holding ``lba - n`` .. ``lba + n``, as the map renders them."""
    from helpers.pilot import cell_at

    x, y = cell_at(smap, lba)
    drawn = [(ch, seg.style) for seg in smap.render_line(y) for ch in seg.text]
    return drawn[x - n:x + n + 1]


def _map_text(app) -> str:
    from helpers.pilot import screen_text

    smap = app.sector_map
    rows = screen_text(app).splitlines()[1:1 + smap.scrollable_content_region.height]
    return "".join(line[smap.label_width:] for line in rows)


def test_the_map_marks_where_the_pvs_data_begins_and_the_status_line_names_it() -> None:
    """lvm-partition: the PV on partition 1 (LBA 2,048) has pe_start 1 MiB, so extent 0 is at byte
    2,097,152 = LBA 4,096. At one sector per cell that cell, and no neighbour, carries the layer glyph."""
    from helpers.pilot import demo, started, status_text

    async def drive() -> tuple[list[tuple[str, Style | None]], str, str, str, str]:
        app = PlannerApp(start=demo("lvm-partition"))
        async with app.run_test(size=(100, 30)) as pilot:
            smap = await started(app, pilot)
            assert smap.cursor_lba == 2048 and smap.spc > 2048  # the whole disk: LBA 4,096 is in the cursor's cell
            assert "LVM2 physical volume data begins here" in status_text(app)
            await pilot.press("1")
            await pilot.pause()
            assert smap.cursor_lba == 2048 and "begins here" not in status_text(app)  # the cell shrank to 2,048
            await pilot.press("g", *"4096", "enter")
            await pilot.pause()
            assert (smap.spc, smap.cursor_lba) == (1, 4096)
            on = status_text(app)
            cells = _cells_around(smap, 4096)
            await pilot.press("right")
            await pilot.pause()
            off = status_text(app)
            return cells, on, off, _map_text(app), smap.glyphs.layer

    cells, on, off, shown, glyph = asyncio.run(drive())
    assert [ch for ch, _ in cells] == [" ", " ", glyph, " ", " "], cells  # LBAs 4,094-4,098: only 4,096
    assert shown.count(glyph) == 1  # nowhere else on the screen's rows of the map
    assert on.splitlines()[0].count(f"{glyph} layer data") == 1  # the legend explains it
    assert "LBA 4,096" in on and "LVM2 physical volume data begins here (byte 2,097,152)" in on
    assert "LBA 4,097" in off and "begins here" not in off
    _, legend = help_sections(UNICODE)
    assert "data of a layer inside (LVM, LUKS, md) begins here" in dict(legend)[f"'{glyph}'"]


def test_a_misplaced_pe_start_is_marked_with_the_problem_style(tmp_path: Path) -> None:
    """pe_start = 1 MiB + 1 KiB on a partition at 1 MiB: extent 0 at byte 2,098,176 = LBA 4,098, 1 KiB into
    a 4 KiB flash page: the mark there is drawn in the warning style and the status line says why."""
    from diskplan.ui.sectormap import PALETTE
    from helpers.pilot import started, status_text

    img = _image(tmp_path)
    disk = open_target(str(img), parser().parse_args([str(img), "--ssd"]))

    async def drive() -> tuple[list[tuple[str, Style | None]], str, Glyphs]:
        app = PlannerApp(start=Target(disk, str(img), path=str(img)))
        async with app.run_test(size=(100, 30)) as pilot:
            smap = await started(app, pilot)
            await pilot.press("1", "g", *"4098", "enter")
            await pilot.pause()
            text = status_text(app)
            await pilot.press("right", "right")  # the cursor's own style off the cells looked at
            await pilot.pause()
            return _cells_around(smap, 4098, 1), text, smap.glyphs

    cells, text, g = asyncio.run(drive())
    assert [ch for ch, _ in cells] == [g.flagged, g.layer, g.flagged], cells  # a partition with findings
    warning = PALETTE["sectormap--problem-warning"].bgcolor
    assert cells[1][1] is not None and cells[0][1] is not None
    assert cells[1][1].bgcolor == warning and cells[0][1].bgcolor != warning, cells
    assert "LVM2 physical volume data begins here (byte 2,098,176, off the page)" in text


def test_a_moved_or_proposed_partition_carries_no_layer_mark() -> None:
    """The layers were read where the partition lay: a plan that moves it, or a new table, hides the mark."""
    from diskplan.model.extent import State
    from diskplan.model.findings.stackfindings import data_starts
    from diskplan.model.grain import optimal_grain
    from diskplan.model.table import new_table
    from diskplan.model.teach import demos
    from diskplan.ui.cells import MapContent

    disk = demos.find("lvm-partition").planned_disk()
    geom, grain = disk.geometry, optimal_grain(disk.geometry)
    starts = data_starts(disk, grain)
    assert [(d.number, d.lba, d.level) for d in starts] == [(1, 4096, 0)]

    def marked(table) -> list[int]:
        content = MapContent(geom, table, (), grain, starts)
        return [c for c, cell in enumerate(content.row(4096 - 8, 1, 16)) if cell.layer]

    assert marked(disk.table) == [8]
    p = disk.table.by_number(1)
    assert p is not None
    moved = disk.table.with_partitions((replace(p, start=4096, extra=(("moved_from", "2048"),)),))
    assert marked(moved) == []
    fresh = new_table("gpt", geom).with_partitions((replace(p, state=State.PROPOSED),))
    assert marked(fresh) == []
    # A drag step (patched) that puts it back where it was read shows the mark again.
    content = MapContent(geom, moved, (), grain, starts)
    back = content.patched(disk.table, {1: (p, ())})
    assert [c for c, cell in enumerate(back.row(4088, 1, 16)) if cell.layer] == [8]


def test_the_console_and_a_colourless_screen_show_the_mark_in_cp437() -> None:
    """TERM=linux (CP437 fonts) and without colour: the mark is its own glyph, so it needs no colour, and the
    map, its legend and the status line still encode to CP437."""
    from diskplan.ui.glyphs import CONSOLE
    from helpers.pilot import demo, screen_text, started

    async def drive(mono: bool) -> tuple[list[tuple[str, Style | None]], str]:
        app = PlannerApp(start=demo("lvm-partition"), console=True, mono=mono)
        async with app.run_test(size=(80, 25)) as pilot:
            smap = await started(app, pilot)
            await pilot.press("1", "g", *"4096", "enter", "right")
            await pilot.pause()
            lines = screen_text(app).splitlines()
            return _cells_around(smap, 4096, 1), "\n".join(lines[1:smap.scrollable_content_region.height + 3])

    for mono in (False, True):
        cells, text = asyncio.run(drive(mono))
        assert CONSOLE.layer == "»" and "»".encode("cp437") == b"\xaf"
        assert [ch for ch, _ in cells][1] == "»" and "»" not in (cells[0][0], cells[2][0]), (mono, cells)
        assert "» layer data" in text, mono
        assert all(ch.encode("cp437") for ch in text if ch != "\n"), mono


def test_a_row_with_a_layer_mark_drawn_from_equal_cells_matches_drawing_every_cell() -> None:
    """Rows are drawn once per distinct cell (memoised): the marked cell is a cell of its own, at every zoom."""
    from helpers.pilot import demo, started

    async def drive() -> None:
        app = PlannerApp(start=demo("lvm-partition"))
        async with app.run_test(size=(100, 30)) as pilot:
            smap = await started(app, pilot)
            assert smap.content is not None
            for spc in (1, 8, 4096):
                smap.zoom_to(spc)
                smap.move_to(0)
                await pilot.pause()
                row = smap._row_of(4096)
                cursor, marks, sel = smap._row_extras(row)
                drawn = smap._render_row(row, 200, cursor, marks, sel)
                first = row * smap.cols * smap.spc
                cells = smap.content.row(first, smap.spc, smap.cols)
                assert sum(1 for c in cells if c.layer) == 1, spc
                expected = [smap._cell(cell, first + c * spc, first + (c + 1) * spc - 1, c == cursor, marks, sel,
                                       smap.glyphs) for c, cell in enumerate(cells)]
                got = [(ch, seg.style) for seg in list(drawn)[1:] for ch in seg.text][: len(expected)]
                assert got == expected, spc

    asyncio.run(drive())
