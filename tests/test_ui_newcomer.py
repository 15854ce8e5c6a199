"""What a newcomer meets first in the planner, driven with Pilot: a blank disk's Changes panel (no pending
label before one is chosen, no stale "create a label first" after), and the new-partition dialog, whose cursor
starts in Size, the first row, so a typed size goes there and Tab goes down the form as it is drawn; Ctrl+S and
Ctrl+O start in diskplan's plans folder or the last one used, and say which."""

from __future__ import annotations

import pathlib

import pytest
from textual.widgets import DataTable, Input

from diskplan.discovery.udev import DiskInfo
from diskplan.model.disk import Disk
from diskplan.model.geometry import Geometry
from diskplan.model.table import no_table
from diskplan.ui.app import PlannerApp
from diskplan.ui.dialogs import LabelScreen, PartitionScreen, PathScreen
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.screens import DevicePicker
from diskplan.ui.settings import Settings
from diskplan.ui.target import Target
from helpers.pilot import blank_gpt, part, plan_of, propose, run, started, wait_for
from helpers.units import MiB_SECTORS

SIZE = (80, 25)


def blank_disk() -> Target:
    """A disk with no partition table at all (a new drive)."""
    geom = Geometry(sectors=2 * 1024**3 // 512, physical=4096)
    return Target(Disk(geom, no_table(geom)), "blank")


def changes_text(app: PlannerApp) -> str:
    return app.query_one(ViewsPanel).text("changes")


def toasts(app: PlannerApp) -> str:
    return " | ".join(str(n.message) for n in app._notifications)


@run
async def test_a_blank_disk_has_no_pending_change_until_a_label_is_chosen() -> None:
    app = PlannerApp(start=blank_disk())
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        text = changes_text(app)
        assert plan_of(app).changes() == ()
        assert "No pending changes" in text and "cannot be written" not in text and "new gpt label" not in text
        await pilot.press("n")  # no table: the label dialog first, then the partition
        await wait_for(pilot, lambda: isinstance(app.screen, LabelScreen))
        await pilot.press("enter")  # gpt
        await wait_for(pilot, lambda: isinstance(app.screen, PartitionScreen))
        assert "create a gpt or msdos label first" not in toasts(app)
        await pilot.press("escape")
        text = changes_text(app)
        assert "1 pending change" in text and "new gpt label" in text and "cannot be written" not in text


@run
async def test_a_typed_size_goes_into_size_and_tab_goes_down_the_form() -> None:
    app = PlannerApp(start=blank_gpt())
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(MiB_SECTORS)
        await pilot.press("n")
        screen = app.screen
        assert isinstance(screen, PartitionScreen)
        fields = [w.id for w in screen.query(Input)]
        assert fields[:2] == ["size", "start"]  # drawn in the order Tab visits them
        assert app.focused is not None and app.focused.id == "size"
        await pilot.press(*"64MiB")
        await pilot.press("tab")
        assert app.focused.id == "start"
        await pilot.press("tab")
        assert app.focused.id == "type"
        await pilot.press("enter")
        assert part(app, 1).size == 64 * MiB_SECTORS


def folder_line(app: PlannerApp) -> str:
    return next(line for line in str(app.screen.query_one(".note").render()).splitlines() if "Folder:" in line)


@run
async def test_save_and_load_start_in_the_plans_folder_then_in_the_last_one_used(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)  # the working directory (a checkout, a live medium) is never the default
    settings = Settings(str(tmp_path / "config"))
    plans = tmp_path / "data" / "diskplan" / "plans"
    app = PlannerApp(start=blank_gpt(), settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        propose(app, MiB_SECTORS, 16 * MiB_SECTORS)
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, PathScreen)
        path = app.screen.query_one("#path", Input).value
        assert path == str(plans / "diskplan-blank-gpt.json")
        assert f"Folder: {plans} (diskplan's plans folder" in folder_line(app)
        await pilot.press("enter")  # the folder is made (0700) on the first save
        await wait_for(pilot, lambda: not isinstance(app.screen, PathScreen))
        assert (plans / "diskplan-blank-gpt.json").exists() and plans.stat().st_mode & 0o777 == 0o700
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        await pilot.press("ctrl+s")
        app.screen.query_one("#path", Input).value = str(elsewhere / "mine.json")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, PathScreen))
        await pilot.press("ctrl+o")
        assert app.screen.query_one("#path", Input).value.startswith(str(elsewhere) + "/")
        assert f"Folder: {elsewhere} (the folder last used)" in folder_line(app)
    app = PlannerApp(start=blank_gpt(), settings=settings)  # the next run remembers it
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("ctrl+o")
        assert isinstance(app.screen, PathScreen)
        assert app.screen.query_one("#path", Input).value == str(elsewhere / "diskplan-blank-gpt.json")


@run
async def test_the_device_picker_says_why_a_disk_has_no_access() -> None:
    disks = [DiskInfo("sdb", "/dev/sdb", "USB stick", 16 << 30, 512, 512, "no access", True, "mq-deadline",
                      unread="/dev/sdb cannot be opened: Permission denied: reading disks needs root (sudo)")]
    app = PlannerApp(start=None, lister=lambda: disks, watch_devices=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DevicePicker)
                       and app.screen.query_one(DataTable).row_count == 1)
        help_text = str(app.screen.query_one("#picker-help").render())
        assert "/dev/sdb cannot be opened: Permission denied: reading disks needs root (sudo)." in help_text
