"""Planning in the planner, driven with Pilot: propose through the dialog, move and resize with the keys and
the mouse, snapping targets, refusals, delete/undelete, undo/redo, plan files. Every assertion reads the
resulting sectors from the plan (and, for the screen, from what the map draws)."""

from __future__ import annotations

import json

from textual.widgets import Input

from diskplan.model.extent import Extent, State
from diskplan.model.formats.planfile import load_plan
from diskplan.model.grain import SnapTarget
from diskplan.model.teach import demos
from diskplan.model.typenames import GPT_NAMES
from diskplan.ui.app import PlannerApp
from diskplan.ui.dialogs import PartitionScreen, PathScreen, SnapScreen
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.partlist import PartitionList
from diskplan.ui.sectormap import SectorMap
from helpers.pilot import blank_gpt, cell_at, demo, part, plan_of, propose, run, started, status_text
from helpers.units import MiB_SECTORS

SIZE = (80, 25)


def notes(app: PlannerApp) -> str:
    return " | ".join(str(n.message) for n in app._notifications)


def nearest(lba: int, grain: int) -> int:
    """The grain boundary nearest ``lba`` (a tie goes up), worked out here independently of the model."""
    return (lba + grain // 2) // grain * grain


@run
async def test_propose_through_the_dialog_says_which_units_are_in_force() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(5 * MiB_SECTORS + 7)
        await pilot.press("n")
        screen = app.screen
        assert isinstance(screen, PartitionScreen)
        await pilot.press("ctrl+a", "ctrl+k", *"100MB")
        note = str(screen.query_one("#size-note").render())
        assert "100 MB = 100,000,000 B (SI, decimal) = 195,313 sectors" in note
        assert "100 MiB would be 104,857,600 B" in note and "units: SI" in note
        await pilot.press("ctrl+a", "ctrl+k", *"100M")  # ambiguous: refused, saying both readings
        assert "ambiguous" in str(screen.query_one("#result").render())
        await pilot.press("ctrl+a", "ctrl+k", *"100MiB")
        assert "units: IEC" in str(screen.query_one("#size-note").render())
        await pilot.press("tab", "tab", "ctrl+a", "ctrl+k", *"swap", "tab", *"scratch", "enter")  # Start, then Type
        assert not isinstance(app.screen, PartitionScreen)
        p = part(app, 1)
        # The start was the cursor's LBA, snapped up to the 1 MiB grain; 100 MiB is whole grains.
        assert (p.start, p.size, p.state) == (6 * MiB_SECTORS, 100 * MiB_SECTORS, State.PROPOSED)
        assert p.type == "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F" and p.name == "scratch"
        assert smap.cursor_lba == p.start and smap.selected == 1  # the new partition is selected
        # An SI size lands on the grain boundary nearest to its end.
        smap.move_to(200 * MiB_SECTORS)
        await pilot.press("n", "ctrl+a", "ctrl+k", *"100MB", "enter")
        q = part(app, 2)
        assert q.start == 200 * MiB_SECTORS and q.end + 1 == nearest(q.start + 195_313, MiB_SECTORS)


@run
async def test_keys_move_one_grain_per_press_and_ten_with_a_modifier() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        smap.move_to(part(app, n).start)
        await pilot.press("m", "right")
        assert "move #1" in status_text(app) and "2,097,152 B" in status_text(app)
        assert plan_of(app).partition(n).start == MiB_SECTORS  # type: ignore[union-attr]  # a preview, not yet a step
        await pilot.press("shift+right")
        assert app.session.shown.partition(n).start == 12 * MiB_SECTORS  # type: ignore[union-attr]
        await pilot.press("up")  # ten back (the Linux console has no shift+arrows)
        await pilot.press("enter")
        assert (part(app, n).start, part(app, n).size) == (2 * MiB_SECTORS, 16 * MiB_SECTORS)
        await pilot.press("u")
        assert part(app, n).start == MiB_SECTORS  # one undo takes back the whole keyboard move
        await pilot.press("ctrl+y")
        assert part(app, n).start == 2 * MiB_SECTORS
        # Resize: the end first, space for the start.
        await pilot.press("r", "right", "right", "space", "left", "enter")
        p = part(app, n)
        assert (p.start, p.end) == (MiB_SECTORS, 20 * MiB_SECTORS - 1)
        # Esc leaves everything as it was.
        await pilot.press("m", "right", "right", "escape")
        assert part(app, n) == p and app.session.drag is None  # type: ignore[union-attr]
        assert "cancelled" in status_text(app)


@run
async def test_mouse_drags_move_the_body_and_resize_either_edge() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        smap.zoom_to(MiB_SECTORS)  # one cell is one grain
        smap.move_to(0)
        await pilot.pause()
        p = part(app, n)
        # Move: grab the body 4 cells in, let go 5 cells to the right.
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, p.start + 4 * MiB_SECTORS))
        await pilot.hover(SectorMap, offset=cell_at(smap, p.start + 9 * MiB_SECTORS))
        await pilot.pause()
        assert "move #1" in status_text(app)
        assert smap.marks == (Extent(p.start + 5 * MiB_SECTORS, p.end + 5 * MiB_SECTORS),)  # the requested position
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, p.start + 9 * MiB_SECTORS))
        await pilot.pause()
        q = part(app, n)
        assert (q.start, q.size) == (p.start + 5 * MiB_SECTORS, p.size) and smap.marks != (Extent(q.start, q.end),)
        # Resize the end: grab the cell holding the last sector.
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, q.end))
        await pilot.hover(SectorMap, offset=cell_at(smap, q.end + 3 * MiB_SECTORS))
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, q.end + 3 * MiB_SECTORS))
        r = part(app, n)
        assert (r.start, r.end) == (q.start, q.end + 3 * MiB_SECTORS)
        # Resize the start: grab the cell holding the first sector.
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, r.start))
        await pilot.hover(SectorMap, offset=cell_at(smap, r.start - 2 * MiB_SECTORS))
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, r.start - 2 * MiB_SECTORS))
        s = part(app, n)
        assert (s.start, s.end) == (r.start - 2 * MiB_SECTORS, r.end)
        # Three drags, three undo steps.
        await pilot.press("u")
        assert part(app, n) == r
        await pilot.press("u", "u")
        assert part(app, n) == p


@run
async def test_a_click_on_an_edge_moves_nothing() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, 3 * MiB_SECTORS + 2 * MiB_SECTORS, 200 * MiB_SECTORS)  # its start: inside a whole-disk cell
        await pilot.pause()
        before = plan_of(app)
        p = part(app, n)
        assert smap.hit_at(*cell_at(smap, p.start)).lba < p.start  # type: ignore[union-attr]
        for lba in (p.start, p.end, p.start + p.size // 2):
            await pilot.click(SectorMap, offset=cell_at(smap, lba))
            assert plan_of(app) is before and app.session.drag is None  # type: ignore[union-attr]


@run
async def test_a_mouse_drag_between_grains_snaps_and_says_so() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, 4 * MiB_SECTORS, 8 * MiB_SECTORS)
        smap.zoom_to(MiB_SECTORS // 2)  # two cells per grain
        smap.move_to(0)
        await pilot.pause()
        p = part(app, n)
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, p.start + MiB_SECTORS))
        await pilot.hover(SectorMap, offset=cell_at(smap, p.start + MiB_SECTORS + 3 * MiB_SECTORS // 2))
        await pilot.pause()
        requested = p.start + 3 * MiB_SECTORS // 2
        text = status_text(app)
        assert f"{requested:,}s ({requested * 512:,} B) -> {nearest(requested, MiB_SECTORS):,}s" in text, text
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, p.start + MiB_SECTORS + 3 * MiB_SECTORS // 2))
        assert part(app, n).start == nearest(requested, MiB_SECTORS)


@run
async def test_each_snapping_target_and_fix_my_layout() -> None:
    app = PlannerApp(start=blank_gpt(physical=4096))
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        assert "snap optimal 1 MiB" in str(app.query_one("#titlebar").render())
        smap.move_to(MiB_SECTORS)

        async def choose(steps_down: int, *extra: str) -> None:
            await pilot.press("s")
            assert isinstance(app.screen, SnapScreen)
            await pilot.press("home", *["down"] * steps_down, "enter", *extra)
            await pilot.pause()

        await choose(1)  # physical
        assert plan_of(app).target is SnapTarget.PHYSICAL and plan_of(app).grain.sectors == 8
        await pilot.press("m", "right", "enter")
        assert part(app, n).start == MiB_SECTORS + 8
        await choose(2, *"192KiB", "enter")  # custom: a stripe of 192 KiB with 4 KiB blocks: 384 sectors
        assert plan_of(app).target is SnapTarget.CUSTOM and plan_of(app).grain.sectors == 384
        assert "snap custom 192 KiB" in str(app.query_one("#titlebar").render())
        smap.move_to(part(app, n).start)
        await pilot.press("m", "right", "enter")
        start = part(app, n).start
        assert start % 384 == 0 and abs(start - (MiB_SECTORS + 8 + 384)) <= 192
        await choose(3)  # none
        assert plan_of(app).grain.sectors == 1
        smap.move_to(start)
        await pilot.press("m", "right", "right", "right", "enter")
        assert part(app, n).start == start + 3
        await choose(0)  # back to optimal: the partition stays where it is until the layout is fixed
        assert part(app, n).start == start + 3
        # Optimal is the lcm of 1 MiB and the device's grains: the custom target's 192 KiB was a planning
        # choice, not a fact about the disk (that is --grain), so it is 1 MiB again.
        grain = plan_of(app).grain.sectors
        assert grain == MiB_SECTORS and "snap optimal 1 MiB" in str(app.query_one("#titlebar").render())
        await pilot.press("a")
        p = part(app, n)
        assert p.start % grain == 0 and (p.end + 1) % grain == 0 and p.start == nearest(start + 3, MiB_SECTORS)


@run
async def test_refusals_are_notified_with_the_reason_and_change_nothing() -> None:
    s = demos.find("modern")
    app = PlannerApp(start=demo("modern"))
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        existing = s.partitions[2]
        smap.move_to(existing.start)
        before = plan_of(app)
        await pilot.press("r")  # a demo shown from the model has no filesystem to measure: refused, nothing else
        said = notes(app)
        assert "partition 3 cannot be resized: this disk is shown from the model" in said and "Enter plans" not in said
        assert plan_of(app) is before and app.session.drag is None  # type: ignore[union-attr]
        app.clear_notifications()
        await pilot.press("m")  # moved only with its data: said before anything moves; Esc takes it back
        assert "plans a data move" in notes(app) and app.session.drag is not None  # type: ignore[union-attr]
        await pilot.press("escape")
        assert plan_of(app) is before and app.session.drag is None
        app.clear_notifications()
        # Make room: delete the last partition, propose two partitions side by side in its space.
        smap.move_to(s.partitions[3].start)
        await pilot.press("x")
        first = propose(app, s.partitions[3].start, 100 * MiB_SECTORS)
        second = propose(app, part(app, first).end + 1, 100 * MiB_SECTORS)
        smap.move_to(part(app, first).start)
        before = plan_of(app)
        await pilot.press("m", "right")  # against partition `second`
        assert f"stopped against partition {second}" in notes(app)
        await pilot.press("left")  # against the existing partition before it
        assert f"stopped against partition {existing.number + 1}" in notes(app) or "partition 3" in notes(app)
        await pilot.press("enter")
        assert plan_of(app) is before
        # The mouse on an existing partition moves it with its data: test_ui_move.py.
        # A partition near the end cannot pass the backup GPT.
        app.clear_notifications()
        last_usable = plan_of(app).table.last_usable
        third = propose(app, last_usable - 60 * MiB_SECTORS, 20 * MiB_SECTORS)
        smap.move_to(part(app, third).end)
        await pilot.press("r", *["shift+right"] * 5)
        assert "backup GPT" in notes(app)
        await pilot.press("enter")
        assert part(app, third).end == last_usable  # an end may stop on the area's last sector


@run
async def test_delete_undelete_clear_and_the_pending_changes() -> None:
    s = demos.find("modern")
    app = PlannerApp(start=demo("modern"))
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        target = s.partitions[1]
        smap.move_to(target.start + 10)
        await pilot.press("x", "c")
        assert plan_of(app).table.by_number(target.number).state is State.DELETE  # type: ignore[union-attr]
        changes = app.query_one(ViewsPanel).text("changes")
        assert f"delete {target.number} ({target.start}..{target.end})" in changes
        assert "Changes (c): 1" in str(app.query_one(ViewsPanel).border_title)
        listing = app.query_one(PartitionList)
        assert any("(del)" in str(listing.get_row_at(i)[3]) for i in range(listing.row_count))
        row = smap.render_line(cell_at(smap, target.start + target.size // 2)[1])
        assert "x" in row.text  # the deletion has a glyph, not only a colour
        await pilot.press("x")  # keep it after all
        assert plan_of(app).table.by_number(target.number).state is State.EXISTING  # type: ignore[union-attr]
        await pilot.press("x")
        smap.move_to(s.partitions[3].start + 10)
        await pilot.press("x")
        assert len(plan_of(app).changes()) == 2
        await pilot.press("C")
        assert not plan_of(app).dirty
        assert "No pending changes" in app.query_one(ViewsPanel).text("changes")
        await pilot.press("u")  # clear all is a step too
        assert len(plan_of(app).changes()) == 2


@run
async def test_type_name_and_flags_of_a_partition() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, MiB_SECTORS, 64 * MiB_SECTORS)
        smap.move_to(MiB_SECTORS)
        await pilot.press("t")
        assert isinstance(app.screen, PartitionScreen)
        await pilot.press("down")  # the next named type after Linux filesystem
        await pilot.press("tab", *"boot", "tab", "tab", "tab", "space", "enter")
        p = part(app, n)
        assert p.type == "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"  # EFI system
        assert p.name == "boot" and p.flags == ("legacy_boot",)


@run
async def test_save_and_load_a_plan_file(tmp_path) -> None:
    path = tmp_path / "plan.json"
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        propose(app, MiB_SECTORS, 32 * MiB_SECTORS)
        wanted = plan_of(app).table.live
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, PathScreen)

        async def enter_path(text: str) -> None:  # typed in one go: the path is not what is tested here
            app.screen.query_one("#path", Input).value = text
            await pilot.press("enter")

        await enter_path(str(path))
        assert not isinstance(app.screen, PathScreen)
        spec = load_plan(path.read_text())
        assert [(p.start, p.end) for p in spec.partitions] == [(MiB_SECTORS, 33 * MiB_SECTORS - 1)]
        assert json.loads(path.read_text())["label"] == "gpt"
        await pilot.press("C")
        assert not plan_of(app).live
        await pilot.press("ctrl+o")
        await enter_path(str(tmp_path / "missing.json"))
        assert isinstance(app.screen, PathScreen)  # the error is shown, the dialog stays
        assert "cannot read" in str(app.screen.query_one("#path-error").render())
        await enter_path(str(path))
        assert [(p.start, p.end) for p in plan_of(app).live] == [(p.start, p.end) for p in wanted]


@run
async def test_a_key_drag_step_repaints_only_the_rows_of_the_edges() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, MiB_SECTORS, 1200 * MiB_SECTORS)  # many rows tall at the whole-disk zoom
        smap.move_to(MiB_SECTORS)
        await pilot.press("m")
        await pilot.pause()
        first_row = MiB_SECTORS // smap.spc // smap.cols
        last_row = (1201 * MiB_SECTORS - 1) // smap.spc // smap.cols
        assert last_row - first_row >= 4
        rendered: list[int] = []
        original = smap._render_row

        def spy(row: int, *args):
            rendered.append(row)
            return original(row, *args)

        smap._render_row = spy  # type: ignore[method-assign, assignment]  # a spy in the method's place
        await pilot.press("right")
        await pilot.pause()
        assert app.session.shown.partition(n).start == 2 * MiB_SECTORS  # type: ignore[union-attr]
        assert set(rendered) <= {first_row, last_row}, rendered  # not the rows in between
        await pilot.press("enter")


@run
async def test_the_type_picker_offers_every_gpt_type_libfdisk_names() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, MiB_SECTORS, 64 * MiB_SECTORS)
        smap.move_to(MiB_SECTORS)
        await pilot.press("t")
        assert isinstance(app.screen, PartitionScreen)
        field = app.screen.query_one("#type", Input)
        await pilot.press("up")  # before the first name: the last type libfdisk names
        assert field.value == list(GPT_NAMES.values())[-1] == "NX emuMMC"
        field.value = "Linux root (x86-64)"  # a Discoverable Partitions type, which libparted 3.5 cannot set
        await pilot.press("down")
        assert field.value == "Linux root (Alpha)"  # the next one in libfdisk's order
        await pilot.press("up", "enter")
        assert part(app, n).type == "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"


@run
async def test_the_status_line_on_a_4kn_disk_counts_4096_byte_sectors_right_after_m_and_r() -> None:
    """Issue 26 item 7: before the first arrow key there is no snap yet; the sizes are still the disk's."""
    app = PlannerApp(start=blank_gpt(sectors=2 * 1024**3 // 4096, logical=4096))
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, 256, 16 * 256)  # 16 MiB at 1 MiB
        smap.move_to(part(app, n).start)
        for key, where in (("m", "start 256s (1,048,576 B"), ("r", "end 4,351s (17,821,696 B")):
            await pilot.press(key)
            said = status_text(app)
            assert "size 4,096s = 16 MiB" in said and where in said, said  # not 2 MiB and 131,072 B
            await pilot.press("escape")
