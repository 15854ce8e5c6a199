"""Driving the planner with Pilot: navigation, zoom, the status line, the mouse, the panels."""

from __future__ import annotations

import asyncio

import pytest
from rich.style import Style
from textual.message import Message

from diskplan.model.exitstatus import Exit
from diskplan.model.extent import Partition, State
from diskplan.model.teach import demos
from diskplan.model.value import replace
from diskplan.ui.app import PlannerApp
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.partlist import PartitionList
from diskplan.ui.screens import GotoScreen, HelpScreen
from diskplan.ui.sectormap import SectorMap
from diskplan.ui.target import ModelSource, Target
from helpers.costs import calls
from helpers.pilot import demo as target
from helpers.pilot import run, started, status_text, wait_for


def screen_row(smap: SectorMap) -> int:
    return smap.cursor_lba // smap.spc // smap.cols - round(smap.scroll_offset.y)


@run
async def test_opens_on_the_first_finding_with_the_arithmetic_in_the_status_line() -> None:
    app = PlannerApp(start=target("ssd-gpt-34"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        assert smap.cursor_lba == 34
        assert smap.spc == smap.fit_spc  # the whole disk
        text = status_text(app)
        # The SSD reports 512/512 but is not rotational: the status line counts assumed 4 KiB pages.
        for part in ("LBA 34", "17,408 B", "0.017 MiB", "page 4 +1024 B", "#1 UnAlign (warning)"):
            assert part in text


@run
async def test_arrow_keys_move_one_cell_or_one_row() -> None:
    app = PlannerApp(start=target("advanced-format"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        await pilot.press("1")
        assert smap.spc == 1 and smap.cursor_lba == 34
        await pilot.press("right")
        assert smap.cursor_lba == 35
        await pilot.press("down")
        assert smap.cursor_lba == 35 + smap.cols
        await pilot.press("left", "up")
        assert smap.cursor_lba == 34
        assert "LBA 34 " in status_text(app)
        await pilot.press("minus", "minus", "minus")  # 8 sectors per cell: one 4 KiB block
        assert smap.spc == 8
        await pilot.press("right")
        assert smap.cursor_lba == 40  # the next cell starts at the next multiple of 8
        assert "phys block 5 " in status_text(app) or status_text(app).count("phys block 5")
        await pilot.press("end")
        assert smap.cursor_lba == smap.content.sectors - 1  # type: ignore[union-attr]
        await pilot.press("home")
        assert smap.cursor_lba == 0
        await pilot.press("pagedown")
        assert smap.cursor_lba == smap.scrollable_content_region.height * smap.cols * smap.spc


@run
async def test_zoom_keeps_the_cursor_lba_and_its_place_on_screen() -> None:
    app = PlannerApp(start=target("ssd-gpt-34"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        middle = 250_000_000
        smap.move_to(middle)
        await pilot.pause()
        row = screen_row(smap)
        assert row > 2  # somewhere in the middle of the screen
        levels = smap.zoom_levels()
        assert levels[0] == 1 and levels[-1] == smap.fit_spc
        for expected in reversed(levels[:-1]):
            await pilot.press("plus")
            assert smap.spc == expected
            assert smap.cursor_lba == middle
            assert screen_row(smap) == row
        await pilot.press("plus")  # already one sector per cell
        assert smap.spc == 1
        await pilot.press("minus")
        assert smap.spc == 2 and smap.cursor_lba == middle and screen_row(smap) == row
        await pilot.press("0")
        assert smap.spc == smap.fit_spc and smap.cursor_lba == middle
        title = str(app.query_one("#titlebar").render())
        assert f"1 cell = {smap.spc:,} sectors" in title


@run
async def test_jumps_between_partitions_boundaries_and_findings() -> None:
    app = PlannerApp(start=target("advanced-format"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        assert smap.cursor_lba == 34
        await pilot.press("right_square_bracket")
        assert smap.cursor_lba == 2048
        assert "#2 at-1MiB" in status_text(app)
        await pilot.press("left_square_bracket")
        assert smap.cursor_lba == 34
        await pilot.press("home", "full_stop")
        assert smap.cursor_lba == 1  # the GPT header after the protective MBR
        await pilot.press("home", "f")
        assert smap.cursor_lba == 34


@run
async def test_go_to_accepts_lbas_sizes_and_partitions() -> None:
    app = PlannerApp(start=target("modern"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        for typed, lba in (("1MiB", 2048), ("#3", 34605056)):  # the parser itself: tests/test_ui_explain.py
            await pilot.press("g")
            assert isinstance(app.screen, GotoScreen)
            await pilot.press(*typed, "enter")
            await pilot.pause()
            assert smap.cursor_lba == lba, typed
        await pilot.press("g", *"#9", "enter")
        await pilot.pause()
        assert isinstance(app.screen, GotoScreen)
        assert "no partition 9" in str(app.screen.query_one("#goto-error").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, GotoScreen)


@run
async def test_mouse_click_and_drag_post_messages_with_the_lba() -> None:
    seen: list[Message] = []
    app = PlannerApp(start=target("advanced-format"))
    async with app.run_test(size=(80, 25), message_hook=seen.append) as pilot:
        smap = await started(app, pilot)
        await pilot.press("1")
        smap.move_to(0)
        await pilot.pause()
        x0 = smap.label_width
        assert await pilot.click(SectorMap, offset=(x0 + 5, 1))
        await pilot.pause()
        assert smap.cursor_lba == smap.cols + 5
        clicked = [m for m in seen if isinstance(m, SectorMap.CellClicked)]
        assert clicked and clicked[-1].lba == smap.cols + 5
        seen.clear()
        await pilot.mouse_down(SectorMap, offset=(x0 + 2, 0))
        await pilot.hover(SectorMap, offset=(x0 + 9, 0))
        await pilot.mouse_up(SectorMap, offset=(x0 + 9, 0))
        await pilot.pause()
        unique = list({id(m): m for m in seen}.values())  # the hook sees a message at every level it bubbles
        downs = [m.lba for m in unique if isinstance(m, SectorMap.MapMouseDown)]
        moves = [m.lba for m in unique if isinstance(m, SectorMap.MapMouseMove)]
        ups = [m.lba for m in unique if isinstance(m, SectorMap.MapMouseUp)]
        assert downs == [2] and moves[-1] == 9 and ups == [9]
        assert not [m for m in seen if isinstance(m, SectorMap.CellClicked)]  # a drag is not a click
        assert smap.hit_at(x0 - 1, 0) is None  # the LBA labels are not cells


@run
async def test_moving_the_cursor_repaints_only_its_rows() -> None:
    app = PlannerApp(start=target("ssd-gpt-34"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        await pilot.press("1")
        await pilot.pause()
        rendered: list[int] = []
        original = smap._render_row

        def spy(row: int, *args):
            rendered.append(row)
            return original(row, *args)

        smap._render_row = spy  # type: ignore[method-assign, assignment]  # a spy in the method's place
        await pilot.press("right")
        await pilot.pause()
        assert rendered == [0]  # the cursor's row, nothing else
        rendered.clear()
        await pilot.press("down")
        await pilot.pause()
        assert sorted(set(rendered)) == [0, 1]


@run
async def test_partition_list_and_map_follow_each_other() -> None:
    app = PlannerApp(start=target("modern"))
    async with app.run_test(size=(100, 30)) as pilot:
        smap = await started(app, pilot)
        plist = app.query_one(PartitionList)
        assert plist.row_count == 4
        plist.focus()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert smap.cursor_lba == 34605056 and smap.has_focus
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert plist.cursor_row == 3  # the list follows the map


@run
async def test_views_help_and_facts() -> None:
    app = PlannerApp(start=target("stripe"))
    async with app.run_test(size=(80, 25)) as pilot:
        await started(app, pilot)
        await pilot.press("i")
        facts = app.query_one(ViewsPanel).text("facts")
        assert "196,608 B" in facts and "6,144s = 3 MiB" in facts and "Demo stripe" in facts
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@run
async def test_empty_disk_explains_what_a_new_table_would_take() -> None:
    app = PlannerApp(start=target("empty"))
    async with app.run_test(size=(80, 25)) as pilot:
        await started(app, pilot)
        text = app.query_one(ViewsPanel).text("explain")
        assert "No partition table" in text and "LBA 2,048" in text


@run
async def test_set_table_shows_a_plan_without_moving_the_view() -> None:
    app = PlannerApp(start=target("empty"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        await pilot.press("plus", "plus")
        smap.move_to(4096)
        spc, scroll = smap.spc, smap.scroll_offset.y
        geom = smap.geometry
        assert geom is not None
        from diskplan.model.table import new_table

        plan = new_table("gpt", geom).with_partitions((Partition(1, 2048, 1_050_623, state=State.PROPOSED),))
        smap.set_table(plan)
        await pilot.pause()
        assert (smap.spc, smap.scroll_offset.y, smap.cursor_lba) == (spc, scroll, 4096)
        item = smap.cursor_item
        assert item is not None and item.state is State.PROPOSED and item.number == 1
        assert app.query_one(PartitionList).row_count == 1  # the list follows the map's table
        row_y = smap.cursor_lba // smap.spc // smap.cols - round(smap.scroll_offset.y)
        cursor_col = smap.cursor_lba // smap.spc % smap.cols

        def cell_styles() -> list[Style | None]:
            """One style per cell (equal neighbouring cells come as one segment), after the LBA label."""
            chars = [seg.style for seg in smap.render_line(row_y) for _ in seg.text]
            return chars[smap.label_width : smap.label_width + smap.cols]

        def bold_cells() -> list[int]:
            return [i for i, st in enumerate(cell_styles()) if i != cursor_col and st and st.bold]

        assert bold_cells()  # the partition under the cursor is selected: drawn in bold
        smap.select(None)
        assert bold_cells() == []
        smap.select(1)
        assert bold_cells()
        assert len(cell_styles()) == smap.cols
        segments = list(smap.render_line(row_y))
        assert len(segments) < smap.cols  # runs of equal cells are one segment: fewer bytes on the terminal
        assert "Partition 1 (proposed)" in app.query_one(ViewsPanel).text("explain")
        smap.set_table(replace(plan, partitions=()))
        await pilot.pause()
        assert smap.cursor_item is not None and smap.cursor_item.partition is None
        assert app.query_one(PartitionList).row_count == 0


@pytest.mark.parametrize("name", ["modern", "4kn"])
@run
async def test_switching_demos_from_the_picker(name: str) -> None:
    app = PlannerApp(ModelSource(), ("demo", "ssd-gpt-34"))
    async with app.run_test(size=(80, 25)) as pilot:
        await wait_for(pilot, lambda: app.target is not None, 1)
        assert app.target is not None and app.target.demo == "ssd-gpt-34"
        await pilot.press("d")
        await pilot.pause()
        index = demos.names().index(name)
        await pilot.press("home", *["down"] * index, "enter")
        await wait_for(pilot, lambda: app.target is not None and app.target.demo == name, 1)
        assert app.target.demo == name
        assert app.sector_map.geometry == demos.find(name).planned_disk().geometry


@run
async def test_a_key_storm_never_crashes_the_planner() -> None:
    """Random keys from everything the planner binds (but quit), screens opening and closing under them."""
    import random

    keys = ["left", "right", "up", "down", "pageup", "pagedown", "home", "end", "plus", "minus", "0", "1",
            "right_square_bracket", "left_square_bracket", "full_stop", "comma", "f", "g", "i", "e", "d", "o",
            "question_mark", "escape", "tab", "enter", "shift+tab", "x", "5", "ctrl+p"]
    rng = random.Random(4096)
    app = PlannerApp(ModelSource(), ("demo", "dos-63"), lister=lambda: [], watch_devices=False)
    async with app.run_test(size=(80, 25)) as pilot:
        await wait_for(pilot, lambda: app.target is not None, 5)
        for _ in range(45):
            await pilot.press(rng.choice(keys))
        await pilot.pause(0.2)
        assert app.target is not None
        assert app.return_code is None  # still running: nothing fatal happened


def _internal_error(capsys) -> tuple[PlannerApp, str]:
    """The planner meets an internal error ("boom"): the app, and what it said on stderr (one line of words)."""

    async def go() -> PlannerApp:
        app = PlannerApp(start=target("modern"))
        with pytest.raises(ValueError, match="boom"):
            async with app.run_test(size=(80, 25)) as pilot:
                await pilot.pause()
                app._handle_exception(ValueError("boom"))
                await pilot.pause()
        return app

    app = asyncio.run(go())
    return app, " ".join(capsys.readouterr().err.split())


def test_an_internal_error_is_one_line_not_a_traceback(monkeypatch, capsys) -> None:
    from diskplan.backend.write import backup

    monkeypatch.delenv("DISKPLAN_DEBUG", raising=False)
    monkeypatch.setattr(backup, "SAVED", [])  # no write in this process (earlier tests' commits would be one)
    app, err = _internal_error(capsys)
    assert app.return_code == Exit.UNREADABLE  # 2, as the commands: nothing written (1 would say "refused")
    assert "diskplan: internal error: boom (nothing was written; run with DISKPLAN_DEBUG=1 for details)" in err
    assert "Traceback" not in err


def test_an_internal_error_after_a_commit_does_not_say_nothing_was_written(monkeypatch, capsys) -> None:
    from diskplan.backend.write import backup

    monkeypatch.delenv("DISKPLAN_DEBUG", raising=False)
    monkeypatch.setattr(backup, "SAVED", ["/var/backups/disk-1.dpbackup"])  # as a commit in the planner leaves it
    app, err = _internal_error(capsys)
    assert "nothing was written" not in err and "disk-1.dpbackup" in err and "diskplan check" in err, err
    assert app.return_code == Exit.FAILED  # 3, as a command an internal error stops after its write began


@pytest.mark.parametrize(("saved", "code"), [([], Exit.UNREADABLE), (["/var/backups/disk-1.dpbackup"], Exit.FAILED)])
def test_sigterm_or_a_lost_terminal_ends_the_planner_as_ctrl_c_ends_a_command(monkeypatch, capsys, saved,
                                                                            code) -> None:
    """SIGTERM, SIGHUP: 2 while nothing was written, 3 once a write began (never 0, "done"), with one line."""
    import signal

    from diskplan.backend.write import backup

    monkeypatch.setattr(backup, "SAVED", saved)

    async def go() -> PlannerApp:
        app = PlannerApp(start=target("modern"))
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            app.end_by_signal(signal.SIGTERM)
            await pilot.pause()
        return app

    app = asyncio.run(go())
    assert app.return_code == code
    said = " ".join(capsys.readouterr().err.split())
    assert "diskplan: ended by SIGTERM" in said and ("nothing was written" in said) is (not saved), said


def _big_target(sectors: int, count: int) -> Target:
    from diskplan.model.disk import Disk
    from diskplan.model.geometry import Geometry
    from diskplan.model.table import new_table

    geom = Geometry(sectors=sectors, physical=4096)
    table = new_table("gpt", geom)
    size = (table.last_usable - 2048) // count
    parts = tuple(Partition(i + 1, 2048 + i * size + i % 3, 2048 + (i + 1) * size - 1) for i in range(count))
    return Target(Disk(geom, table.with_partitions(parts)), f"{count} partitions")


@run
async def test_a_20_tb_disk_with_128_partitions_draws_as_cheaply_as_1_gb() -> None:
    async def cost(t: Target) -> int:
        app = PlannerApp(start=t)
        total = 0
        async with app.run_test(size=(80, 25)) as pilot:
            smap = await started(app, pilot)
            middle = smap.content.sectors // 2  # type: ignore[union-attr]
            for spc in (smap.fit_spc, 2048, 8, 1):
                smap.zoom_to(spc)
                smap.move_to(middle)
                await pilot.pause()
                assert smap.cursor_lba == middle and smap.spc == spc
                # The cursor's row is on screen even when the map is 600 million rows tall.
                assert 0 <= screen_row(smap) < smap.scrollable_content_region.height

                def draw() -> None:
                    smap._cache.clear()
                    for y in range(smap.scrollable_content_region.height):
                        smap.render_line(y)

                draw()  # warm lazily built indexes, as a running planner has
                total += calls(draw)
        return total

    small = await cost(_big_target(2 * 1024**3 // 512, 1))
    big = await cost(_big_target(20 * 10**12 // 512, 128))
    # Counting calls, not seconds: a scan over the partitions or the disk would multiply the work.
    assert big < small * 1.5, (small, big)


@run
async def test_the_partition_list_scrolls_with_its_cursor_and_answers_clicks() -> None:
    app = PlannerApp(start=_big_target(20 * 10**12 // 512, 128))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        plist = app.query_one(PartitionList)
        assert plist.row_count == 128 and plist.get_row_at(127)[0].endswith(" 128")
        visible = plist.scrollable_content_region.height - 1  # below the header

        def row_on_screen(row: int) -> int:
            return row - round(plist.scroll_offset.y) + 1

        plist.focus()
        await pilot.press("end")
        await pilot.pause()
        last = app.session.plan.table.by_number(128)  # type: ignore[union-attr]
        assert plist.cursor_row == 127 and smap.cursor_lba == last.start  # type: ignore[union-attr]
        assert 1 <= row_on_screen(127) <= visible and plist.render_line(row_on_screen(127)).text.split()[1] == "128"
        await pilot.press("pageup")
        await pilot.pause()
        assert plist.cursor_row == 127 - visible and 1 <= row_on_screen(plist.cursor_row) <= visible
        # A click on a row highlights it and moves the map; a second click on it gives the map the focus.
        y = row_on_screen(plist.cursor_row) + 2
        await pilot.click(PartitionList, offset=(3, y))
        await pilot.pause()
        chosen = plist.cursor_row
        assert chosen == 127 - visible + 2 and plist.has_focus
        assert smap.cursor_lba == app.session.plan.table.by_number(chosen + 1).start  # type: ignore[union-attr]
        await pilot.click(PartitionList, offset=(3, y))
        await pilot.pause()
        assert smap.has_focus and plist.cursor_row == chosen
        await pilot.click(PartitionList, offset=(3, 0))  # the header: nothing happens
        await pilot.pause()
        assert plist.cursor_row == chosen
        # The map moves the list: its cursor row is scrolled into view.
        smap.move_to(app.session.plan.table.by_number(3).start)  # type: ignore[union-attr]
        await pilot.pause()
        assert plist.cursor_row == 2 and 1 <= row_on_screen(2) <= visible


@run
async def test_rows_drawn_from_equal_cells_match_drawing_every_cell() -> None:
    app = PlannerApp(start=target("advanced-format"))
    async with app.run_test(size=(100, 30)) as pilot:
        smap = await started(app, pilot)
        assert smap.content is not None
        first_part = smap.content.partition_items()[0].partition
        for spc in (smap.fit_spc, 4096, 8, 1):
            smap.zoom_to(spc)
            smap.move_to(first_part.start)  # type: ignore[union-attr]
            await pilot.pause()
            row = smap._row_of(smap.cursor_lba)
            cursor, marks, sel = smap._row_extras(row)
            assert sel is not None or spc == 1  # the selected partition's edges are drawn in this row
            drawn = smap._render_row(row, 200, cursor, marks, sel)
            first = row * smap.cols * smap.spc
            row_cells = smap.content.row(first, smap.spc, smap.cols)
            expected = [smap._cell(cell, first + c * smap.spc, first + (c + 1) * smap.spc - 1, c == cursor, marks,
                                   sel, smap.glyphs) for c, cell in enumerate(row_cells)]
            cells = [(ch, seg.style) for seg in list(drawn)[1:] for ch in seg.text][: len(expected)]
            assert cells == expected, spc


@run
async def test_the_painted_status_line_follows_the_cursor_and_the_legend_stays() -> None:
    from helpers.pilot import screen_text

    app = PlannerApp(start=target("advanced-format"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        before = screen_text(app)
        assert "LBA 34 " in before and "findings" in before
        await pilot.press("right_square_bracket")  # to partition 2 at 1 MiB
        await pilot.pause()
        assert smap.cursor_lba == 2048
        after = screen_text(app)  # what the terminal shows: only the status line was repainted
        assert "LBA 2,048 " in after and "LBA 34 " not in after and "findings" in after


@run
async def test_each_view_keeps_its_place_when_another_is_shown() -> None:
    app = PlannerApp(start=target("ssd-gpt-34"))
    async with app.run_test(size=(80, 25)) as pilot:
        await started(app, pilot)
        views = app.query_one(ViewsPanel)
        assert views.current == "facts" and views.max_scroll_y > 3  # a demo opens on its (long) lesson
        views.scroll_to(y=3, animate=False)
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        assert views.current == "explain" and "Partition 1" in views.text("explain")
        views.scroll_home(animate=False)  # the explanation read from its top
        await pilot.pause()
        await pilot.press("i")
        await pilot.pause()
        await pilot.pause()
        assert views.current == "facts" and views.scroll_y == 3


@run
async def test_a_resized_terminal_refits_the_whole_disk() -> None:
    app = PlannerApp(start=target("ssd-gpt-34"))
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        before = (smap.cols, smap.spc)
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await pilot.pause()
        assert smap.cols > before[0] and smap.spc < before[1] and smap.spc == smap.fit_spc
        assert smap.virtual_size.height == smap.rows and 0 <= screen_row(smap) < smap.scrollable_content_region.height


@run
async def test_the_ssd_demo_s_legend_names_its_page_gridline() -> None:
    """Issue 26 item 7: the ssd-gpt-34 demo reports 512/512 but the map draws 4 KiB page lines (it is flash):
    the legend must say what they are."""
    from helpers.pilot import demo, screen_text

    app = PlannerApp(start=demo("ssd-gpt-34"))
    async with app.run_test(size=(120, 30)) as pilot:
        await started(app, pilot)
        assert "4 KiB page" in screen_text(app)
    app = PlannerApp(start=demo("advanced-format"))
    async with app.run_test(size=(120, 30)) as pilot:
        await started(app, pilot)
        said = screen_text(app)
        assert "4 KiB block" in said and "4 KiB page" not in said
