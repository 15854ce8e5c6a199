"""Snapshots of the main screens, in an ordinary terminal and in the console profile at 80x25.

Update after an intended change with: .venv/bin/python -m pytest tests/test_ui_snapshots.py --snapshot-update
(and look at the SVGs in tests/__snapshots__/ before committing them).
"""

from __future__ import annotations

from diskplan.discovery.udev import DiskInfo
from diskplan.ui.app import PlannerApp
from helpers.pilot import demo as target
from helpers.pilot import settle

NORMAL = (100, 30)
CONSOLE = (80, 25)


def fake_disks() -> list[DiskInfo]:
    return [
        DiskInfo("sda", "/dev/sda", "Example SSD 500GB", 500107862016, 512, 512, "gpt", False, "none"),
        DiskInfo("sdb", "/dev/sdb", "Example HDD 2TB", 2000398934016, 512, 4096, "dos", True, "mq-deadline"),
    ]


def test_main_screen_whole_disk(snap_compare) -> None:
    assert snap_compare(PlannerApp(start=target("modern")), terminal_size=NORMAL, run_before=settle)


def test_main_screen_sector_zoom_on_a_512e_disk(snap_compare) -> None:
    app = PlannerApp(start=target("advanced-format"))
    assert snap_compare(app, press=["1"], terminal_size=NORMAL, run_before=settle)


def test_stripe_grain_lines(snap_compare) -> None:
    app = PlannerApp(start=target("stripe"))
    assert snap_compare(app, press=["1", *["minus"] * 8, "i"], terminal_size=NORMAL, run_before=settle)


def test_layer_data_start_mark(snap_compare) -> None:
    """lvm-partition at one sector per cell: the PV's extent 0 (LBA 4,096) marked, named in the status line."""
    app = PlannerApp(start=target("lvm-partition"))
    assert snap_compare(app, press=["1", "g", *"4096", "enter"], terminal_size=NORMAL, run_before=settle)


def test_console_main_screen(snap_compare) -> None:
    app = PlannerApp(start=target("dos-63"), console=True)
    assert snap_compare(app, terminal_size=CONSOLE, run_before=settle)


def test_console_sector_zoom(snap_compare) -> None:
    app = PlannerApp(start=target("ssd-gpt-34"), console=True)
    assert snap_compare(app, press=["1"], terminal_size=CONSOLE, run_before=settle)


def test_console_help(snap_compare) -> None:
    app = PlannerApp(start=target("empty"), console=True)
    assert snap_compare(app, press=["question_mark"], terminal_size=CONSOLE, run_before=settle)


def test_console_device_picker(snap_compare) -> None:
    app = PlannerApp(start=None, console=True, lister=fake_disks, watch_devices=False)
    assert snap_compare(app, terminal_size=CONSOLE, run_before=settle)


def test_demo_picker(snap_compare) -> None:
    app = PlannerApp(start=target("ssd-gpt-34"))
    assert snap_compare(app, press=["d", "down", "down"], terminal_size=CONSOLE, run_before=settle)


def test_no_color_console_main_screen(snap_compare, monkeypatch) -> None:
    """NO_COLOR on the Linux console: partitions by their number, the cursor reversed, notices by '?'."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = PlannerApp(start=target("dos-63"), console=True)
    assert snap_compare(app, press=["right"], terminal_size=CONSOLE, run_before=settle)
