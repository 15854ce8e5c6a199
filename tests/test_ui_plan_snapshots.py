"""Snapshots of the planning screens: the propose dialog, a plan with pending changes, a keyboard move,
and the confirmation screen, in an ordinary terminal and in the console profile at 80x25.

Update after an intended change with: .venv/bin/python -m pytest tests/test_ui_plan_snapshots.py --snapshot-update
(and look at the SVGs in tests/__snapshots__/ before committing them).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from diskplan.backend.read.reader import read
from diskplan.backend.write.steps import Host
from diskplan.model.plan.fsresize import Limits
from diskplan.model.teach import demos
from diskplan.ui.app import PlannerApp
from diskplan.ui.commit_screen import CommitScreen
from diskplan.ui.target import Target
from helpers.pilot import demo, settle, wait_for

NORMAL = (100, 30)
CONSOLE = (80, 25)
# The confirmation screen shows the image's path: a fixed one keeps the snapshot stable.
IMAGE = pathlib.Path("/tmp/diskplan-ui-snapshot/disk.img")
NOBODY = Host(users=lambda path: [])


def planned(pilot) -> None:
    """The modern demo with its home partition marked for deletion and two proposals in its space."""
    app = pilot.app
    s = demos.find("modern")
    home = s.partitions[3]
    app.sector_map.move_to(home.start)
    app.action_delete()
    plan = app.session.plan
    out = plan.propose(home.start, 100 * 2048, name="scratch")
    app._step(out)
    out = app.session.plan.propose(out.plan.partition(out.number).end + 1, 8 * 2048, ptype="swap")
    app._step(out)
    app.sector_map.move_to(home.start)


async def plan_then(pilot, *keys: str) -> None:
    await settle(pilot)
    planned(pilot)
    await pilot.pause()
    await pilot.press(*keys)
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()


@pytest.fixture
def image() -> Iterator[pathlib.Path]:
    if shutil.which("sfdisk") is None:
        pytest.skip("sfdisk is not installed")
    IMAGE.parent.mkdir(exist_ok=True)
    with open(IMAGE, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["sfdisk", "-q", str(IMAGE)], input="label: gpt\nstart=2048, size=16384, type=L\n",
                   text=True, check=True, capture_output=True)
    yield IMAGE
    shutil.rmtree(IMAGE.parent, ignore_errors=True)


async def confirm(pilot) -> None:
    await settle(pilot)
    app = pilot.app
    app.sector_map.move_to(40960)
    await pilot.press("n", "ctrl+a", "ctrl+k", *"16MiB", "enter", "w")
    screen = app.screen
    assert isinstance(screen, CommitScreen)
    await wait_for(pilot, lambda: screen.proposal is not None, 20)
    app.clear_notifications()
    await pilot.pause()


def test_propose_dialog(snap_compare) -> None:
    app = PlannerApp(start=demo("empty"))
    keys = ["L", "enter", "n", "ctrl+a", "ctrl+k", *"100MB"]
    assert snap_compare(app, press=keys, terminal_size=NORMAL, run_before=settle)


def test_console_propose_dialog(snap_compare) -> None:
    app = PlannerApp(start=demo("empty"), console=True)
    keys = ["L", "enter", "n", "ctrl+a", "ctrl+k", *"100MiB"]
    assert snap_compare(app, press=keys, terminal_size=CONSOLE, run_before=settle)


def test_plan_with_pending_changes(snap_compare) -> None:
    app = PlannerApp(start=demo("modern"))
    assert snap_compare(app, terminal_size=NORMAL, run_before=lambda p: plan_then(p, "c"))


def test_console_moving_with_the_keys(snap_compare) -> None:
    app = PlannerApp(start=demo("modern"), console=True)
    assert snap_compare(app, terminal_size=CONSOLE, run_before=lambda p: plan_then(p, "m", "right", "right"))


def test_confirmation_screen(snap_compare, image) -> None:
    app = PlannerApp(start=Target(read(str(image)), image.name, path=str(image)), host=NOBODY)
    assert snap_compare(app, terminal_size=NORMAL, run_before=confirm)


def test_console_confirmation_screen(snap_compare, image) -> None:
    app = PlannerApp(start=Target(read(str(image)), image.name, path=str(image)), host=NOBODY, console=True)
    assert snap_compare(app, terminal_size=CONSOLE, run_before=confirm)


async def resized(pilot) -> None:
    """The modern demo's root partition shrunk by 30 MiB with the keys, its ext4 measured (as the worker would
    have: the demo has no filesystem to measure), and the pending changes."""
    await settle(pilot)
    app = pilot.app
    root = demos.find("modern").partitions[2]
    app.session.limits[root.number] = Limits("ext4", True, True, 20 << 30)
    app.sector_map.move_to(root.start)
    await pilot.press("r", "up", "up", "up", "enter", "c")
    await pilot.pause()
    app.clear_notifications()
    await pilot.pause()


def test_resizing_a_partition_that_holds_data(snap_compare) -> None:
    app = PlannerApp(start=demo("modern"))
    assert snap_compare(app, terminal_size=NORMAL, run_before=resized)
