"""A planner a person can trust (issue 12): no plan lost without asking, nothing covering a confirmation, the
selection following a mouse drag, `i` showing the facts, EBRs drawn as the one sector they are, a label
refused on a disk too small for it. Driven with Pilot; images written by parted, read through libparted."""

from __future__ import annotations

import asyncio
import pathlib

from textual.widgets import DataTable, Input

from diskplan.backend.read.reader import read
from diskplan.discovery.udev import DiskInfo
from diskplan.model.disk import Disk
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.plan.plan import Plan
from diskplan.model.table import new_table, no_table
from diskplan.model.teach import demos
from diskplan.model.value import replace
from diskplan.ui.app import PlannerApp
from diskplan.ui.cells import Kind, MapContent
from diskplan.ui.commit_screen import CommitScreen
from diskplan.ui.dialogs import PathScreen, UnsavedScreen
from diskplan.ui.explain import explain
from diskplan.ui.panels import StatusLine, ViewsPanel
from diskplan.ui.screens import DevicePicker
from diskplan.ui.sectormap import SectorMap
from diskplan.ui.target import Target
from helpers.pilot import blank_gpt, cell_at, demo, plan_of, propose, run, screen_text, started, wait_for
from helpers.tools import need_tool
from helpers.tools import run as run_tool
from helpers.units import MiB_SECTORS

SIZE = (80, 25)


class Opened:
    """A source that records what the planner was asked to open."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def ready(self, kind: str, name: str) -> Target | None:
        return None

    def open_demo(self, name: str) -> Target:
        self.opened.append(f"demo:{name}")
        return demo(name)

    def open_path(self, path: str) -> Target:
        self.opened.append(path)
        return blank_gpt()


# --- 1. pending changes are never lost without asking -------------------------------------------------


@run
async def test_quitting_with_unsaved_changes_asks_first_by_every_path() -> None:
    for keys in (["q"], ["ctrl+q"], ["ctrl+p", *"Quit", "enter"]):
        app = PlannerApp(start=blank_gpt())
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
            await pilot.press(*keys)
            await pilot.pause()
            assert isinstance(app.screen, UnsavedScreen), keys
            assert "1 pending change" in screen_text(app) and app.is_running
            await pilot.press("c")  # cancel: the plan is still there
            await pilot.pause()
            assert not isinstance(app.screen, UnsavedScreen) and app.is_running
            assert len(plan_of(app).changes()) == 1
            await pilot.press(*keys)
            await pilot.pause()
            await pilot.press("ctrl+q")  # asked already: one question at a time
            await pilot.pause()
            assert len([s for s in app.screen_stack if isinstance(s, UnsavedScreen)]) == 1
            await pilot.press("d")  # discard: gone
            await pilot.pause()
            assert not app.is_running, keys


@run
async def test_quitting_a_clean_or_saved_plan_asks_nothing(tmp_path: pathlib.Path) -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, PathScreen)
        app.screen.query_one("#path", Input).value = str(tmp_path / "plan.json")
        await pilot.press("enter")
        await pilot.pause()
        assert (tmp_path / "plan.json").exists()
        await pilot.press("q")  # saved since the last change: nothing is lost
        await pilot.pause()
        assert not app.is_running
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        await pilot.press("u", "q")  # undone: the plan is the disk's again
        await pilot.pause()
        assert not app.is_running


@run
async def test_save_from_the_question_saves_then_quits(tmp_path: pathlib.Path) -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        await pilot.press("q", "s")
        await pilot.pause()
        assert isinstance(app.screen, PathScreen)
        app.screen.query_one("#path", Input).value = str(tmp_path / "kept.json")
        await pilot.press("enter")
        await pilot.pause()
        assert (tmp_path / "kept.json").exists() and not app.is_running


@run
async def test_opening_another_disk_or_demo_or_loading_a_plan_asks_first() -> None:
    source = Opened()
    app = PlannerApp(source, start=blank_gpt(), lister=list, watch_devices=False)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        before = plan_of(app)
        # A demo from the palette, from the demo list; a plan file.
        for keys in (["ctrl+p", *"Demo: modern", "enter"], ["d", "enter"], ["ctrl+o"]):
            await pilot.press(*keys)
            await pilot.pause()
            assert isinstance(app.screen, UnsavedScreen), keys
            await pilot.press("escape")
            await pilot.pause()
            assert plan_of(app) is before and source.opened == [], keys
        # A device from the picker.
        app.open_path("/dev/sdz")
        await pilot.pause()
        assert isinstance(app.screen, UnsavedScreen) and source.opened == []
        await pilot.press("d")
        await wait_for(pilot, lambda: app.target is not None and app.target.title == "blank gpt"
                       and not plan_of(app).dirty)
        assert source.opened == ["/dev/sdz"]
        await pilot.press("d", "enter")  # nothing pending now: the demo opens at once
        await wait_for(pilot, lambda: source.opened[-1:] == [f"demo:{demos.DEFAULT}"])


# --- 3. nothing covers a confirmation -----------------------------------------------------------------


def test_no_toast_covers_the_write_confirmation(sparse_image, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    need_tool("sfdisk")
    img = sparse_image(64 << 20)
    run_tool("sfdisk", "-q", str(img), input=f"label: gpt\nstart={MiB_SECTORS}, size={8 * MiB_SECTORS}, type=L\n")

    async def go() -> None:
        app = PlannerApp(start=Target(read(str(img)), img.name, path=str(img)))
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await started(app, pilot)
            propose(app, 20 * MiB_SECTORS, 16 * MiB_SECTORS)
            # Toasts as long as the ones that covered the dialog, raised just before it opens.
            for i in range(3):
                app.notify(f"plan {i} saved to /a/rather/long/path/that/fills/the/toast/diskplan-plan.json " * 2,
                           title="This table can be repaired", timeout=30)
            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            app.notify("raised while the confirmation is up", timeout=30)
            await pilot.pause()
            text = screen_text(app)
            prompt = str(screen.query_one("#commit-prompt").render()).strip()
            keys = str(screen.query_one("#commit-keys").render()).strip()
            assert prompt.startswith("Type yes") and keys.startswith("Enter: write")
            lines = text.splitlines()
            # The whole line that asks, as far as the dialog shows it, and the whole line of keys.
            assert any(prompt[:70] in line for line in lines), text
            assert any(keys in line for line in lines), text
            assert "raised while" not in text and "plan saved" not in text
            await pilot.press("ctrl+q")  # the confirmation is answered first
            await pilot.pause()
            assert app.is_running and app.screen is screen
            await pilot.press("escape")
            await pilot.pause()
            assert "raised while the confirmation is up" in " ".join(str(n.message) for n in app._notifications)

    asyncio.run(go())


@run
async def test_no_toast_covers_the_unsaved_question() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await started(app, pilot)
        propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        for _ in range(4):
            app.notify("a long notification about something else entirely, " * 3, title="Refused", timeout=30)
        await pilot.press("q")
        await pilot.pause()
        text = screen_text(app)
        assert "Esc cancels" in text and "cancel: back to the plan" in text and "something else" not in text


# --- 5. the selection follows a mouse drag ------------------------------------------------------------


@run
async def test_after_a_mouse_drag_the_partition_stays_selected_under_the_cursor() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        n = propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        smap.zoom_to(MiB_SECTORS)
        smap.move_to(0)
        await pilot.pause()
        p = plan_of(app).partition(n)
        assert p is not None
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, p.start + 2 * MiB_SECTORS))
        await pilot.hover(SectorMap, offset=cell_at(smap, p.start + 30 * MiB_SECTORS))
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, p.start + 30 * MiB_SECTORS))
        await pilot.pause()
        q = plan_of(app).partition(n)
        assert q is not None and q.start == p.start + 28 * MiB_SECTORS  # it moved past where it was
        item = smap.cursor_item
        assert item is not None and item.number == n and q.start <= smap.cursor_lba <= q.end
        assert smap.selected == n
        row = smap.render_line(cell_at(smap, q.start)[1]).text
        assert "[" in row  # its first cell is bracketed
        assert app.query_one(ViewsPanel).text("explain").startswith("Partition 1")


# --- 11. i shows the facts ----------------------------------------------------------------------------


@run
async def test_i_shows_the_facts_every_time() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        views = app.query_one(ViewsPanel)
        for _ in range(3):
            await pilot.press("i")
            assert views.current == "facts"
        await pilot.press("e")
        assert views.current == "explain"


# --- 7. EBRs, one-sector runs, the next partition, the write dialog's header --------------------------


def test_an_ebr_is_one_sector_and_the_rest_a_gap(sparse_image) -> None:
    need_tool("parted")
    img = sparse_image(64 << 20)
    run_tool("parted", "-s", str(img), "mklabel", "msdos", "mkpart", "primary", "1MiB", "8MiB",
             "mkpart", "extended", "8MiB", "60MiB", "mkpart", "logical", "9MiB", "20MiB",
             "mkpart", "logical", "21MiB", "30MiB")
    disk = read(str(img))
    assert any(r.kind == "ebr" and r.extent.size > 1 for r in disk.table.metadata)  # as libparted says
    content = MapContent(disk.geometry, disk.table, [], optimal_grain(disk.geometry))
    ebrs = [it for it in content.items if it.label == "EBR"]
    assert ebrs and all(it.extent.size == 1 for it in ebrs)
    gaps = [it for it in content.items if it.label == "gap after the EBR"]
    assert len(gaps) == len(ebrs)
    lines = " ".join(line.text for line in explain(ebrs[0], disk.geometry, content.grain, disk.table))
    assert f"LBA {ebrs[0].extent.start:,}: 1 sector = 512 B" in lines
    # ] stops on every partition of the table, the extended one too.
    ext = next(p for p in disk.table.partitions if p.role.value == "extended")
    assert content.next_start(8 * MiB_SECTORS - 1) == ext.start


def test_a_one_sector_block_reads_lba_n_not_n_to_n() -> None:
    s = demos.find("4kn")
    disk = s.planned_disk()
    content = MapContent(disk.geometry, disk.table, [], optimal_grain(disk.geometry))
    p = disk.table.partitions[0]
    item = content.item_at(p.start)
    assert item is not None and item.kind is Kind.PARTITION
    text = " ".join(line.text for line in explain(item, disk.geometry, content.grain, disk.table))
    assert f"block is LBA {p.start:,} " in text and f"{p.start}-{p.start}" not in text, text


def test_the_write_dialog_header_has_no_nested_parentheses(sparse_image, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    need_tool("sfdisk")
    img = sparse_image(64 << 20)
    run_tool("sfdisk", "-q", str(img), input="label: gpt\n")
    disk = read(str(img))
    disk = replace(disk, geometry=replace(disk.geometry, model="1 TB NVMe SSD (demo)"))

    async def go() -> None:
        app = PlannerApp(start=Target(disk, img.name, path=str(img)))
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot)
            propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            text = str(screen.query_one("#commit-proposal").render())
            assert "(1 TB NVMe SSD, demo)" in text and "))" not in text.splitlines()[0], text

    asyncio.run(go())


# --- 14. a label on a disk too small for it ------------------------------------------------------------


@run
async def test_a_label_too_big_for_the_disk_is_refused_at_l() -> None:
    geom = Geometry(sectors=40)
    app = PlannerApp(start=Target(Disk(geom, no_table(geom)), "tiny"))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        before = plan_of(app)
        await pilot.press("L", "enter")  # gpt, the first choice
        await pilot.pause()
        said = " ".join(str(n.message) for n in app._notifications)
        assert "a gpt label needs at least 69 sectors; this disk has 40" in said, said
        assert plan_of(app) is before and plan_of(app).table.label is None
    assert Plan.open(Geometry(sectors=69), no_table(Geometry(sectors=69))).new_label("gpt").ok
    assert not Plan.open(Geometry(sectors=68), no_table(Geometry(sectors=68))).new_label("gpt").ok
    assert Plan.open(geom, no_table(geom)).new_label("msdos").ok


# --- 6. at 80x25 nothing is cut mid-word --------------------------------------------------------------


@run
async def test_at_80_columns_the_status_line_leaves_out_fields_instead_of_cutting_words() -> None:
    geom = Geometry(sectors=20 * 10**12 // 512, physical=4096)
    table = new_table("gpt", geom)
    name = "scratch space for builds"
    app = PlannerApp(start=Target(Disk(geom, table), "20 TB"))
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        outcome = plan_of(app).propose(12_345_678_901, 100 * MiB_SECTORS, name=name)
        assert outcome.ok and app._step(outcome)
        await pilot.press("u", "ctrl+y")  # the step's own message gives way to the cursor's status
        start = plan_of(app).partition(1).start  # type: ignore[union-attr]
        smap.move_to(start + 1)
        await pilot.pause()
        shown = str(app.query_one(StatusLine).render()).splitlines()[1].rstrip()
        assert len(shown) <= SIZE[0] and shown.startswith(f" LBA {start + 1:,} "), shown
        assert shown.endswith(f"#1 {name} (proposed)"), shown  # what lies there, whole


@run
async def test_a_long_step_message_is_cut_at_a_word() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        said = ("snapping to custom: 6,144 sectors (3 MiB); every proposed partition was re-snapped to the grain "
                "and nothing else moved at all")
        app.say(said)
        await pilot.pause()
        shown = str(app.query_one(StatusLine).render()).splitlines()[1].rstrip()
        assert len(shown) <= SIZE[0] and (" " + said).startswith(shown) and said[len(shown) - 1] == " ", shown


@run
async def test_the_device_picker_keeps_kind_and_scheduler_at_80_columns() -> None:
    disks = [
        DiskInfo("nvme0n1", "/dev/nvme0n1", "Samsung SSD 990 PRO with Heatsink 4TB firmware 4B2QJXD7",
                 4 * 10**12, 512, 512, "gpt", False, "none"),
        DiskInfo("loop7", "/dev/loop7", "", 64 << 20, 4096, 4096, "no access", None, "mq-deadline",
                 backing_file="/var/tmp/images/a-rather-long-directory/rescue-test-disk.img"),
    ]
    app = PlannerApp(start=None, lister=lambda: disks, watch_devices=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DevicePicker)
                       and app.screen.query_one(DataTable).row_count == 2)
        await pilot.pause()
        lines = screen_text(app).splitlines()
        header = next(line for line in lines if "device" in line and "model" in line)
        assert "kind" in header and "scheduler" in header, header
        nvme = next(line for line in lines if "/dev/nvme0n1" in line)
        loop = next(line for line in lines if "/dev/loop7" in line)
        assert " SSD " in nvme and nvme.rstrip().endswith("none"), nvme
        assert " loop " in loop and loop.rstrip().endswith("mq-deadline"), loop
        assert "Samsung SSD" in nvme and "~" in nvme  # the model gave way, saying so


@run
async def test_at_80_columns_the_list_keeps_the_deletion_mark_whole() -> None:
    s = demos.find("modern")
    app = PlannerApp(start=demo("modern"), console=True)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        home = s.partitions[3]
        smap.move_to(home.start)
        await pilot.press("x")
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if f"{home.start:,}s" in line)
        listed = row.split("│")[0].rstrip()
        assert listed.endswith("(del)"), row  # not "home (d"


@run
async def test_the_same_note_again_does_not_stack_a_second_toast() -> None:
    """A key pressed again at a limit (a shrink at the filesystem's minimum) said the same refusal once per
    press: at 80x25 four identical toasts covered the map. The same text and title while it is still shown
    is not raised again; another text is."""
    app = PlannerApp(start=demo("modern"))
    async with app.run_test(size=(80, 25), notifications=True) as pilot:
        await started(app, pilot)
        app.clear_notifications()
        for _ in range(4):  # one per key press: each handled before the next
            app.notify("partition 2 cannot be resized further: stopped at its vfat minimum", title="Refused")
            await pilot.pause()
        assert len(app._notifications) == 1
        app.notify("partition 2 cannot be resized further: stopped at its vfat minimum", title="Other")
        app.notify("another refusal", title="Refused")
        await pilot.pause()
        assert len(app._notifications) == 3
