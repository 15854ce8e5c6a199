"""Device discovery through pyudev/sysfs, the watcher, and the picker, on real loop devices."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading

import pytest
from textual.widgets import DataTable

from diskplan.backend.demo_image import build
from diskplan.cli.planner import CliSource, parser
from diskplan.discovery.udev import DiskInfo, Watcher, list_disks, probe_table
from diskplan.model.teach import demos
from diskplan.ui.app import PlannerApp
from diskplan.ui.screens import DevicePicker
from helpers.pilot import wait_for


def _losetup(*args: str) -> str:
    done = subprocess.run(["losetup", *args], capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        pytest.skip(f"losetup failed: {done.stderr.strip()}")
    return done.stdout.strip()


@pytest.fixture
def loop_4096(tmp_path):
    """A 512-byte-sector GPT image attached with 4096-byte sectors (what a 4Kn disk looks like to the kernel)."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup to attach a loop device")
    image = build(demos.find("modern"), str(tmp_path))  # a plain GPT image, 512-byte sectors
    device = _losetup("--find", "--show", "--sector-size", "4096", image.image)
    try:
        yield device
    finally:
        subprocess.run(["losetup", "--detach", device], capture_output=True, timeout=20)


def test_a_loop_device_is_listed_with_its_sizes_from_sysfs(loop_4096: str) -> None:
    disks = {d.node: d for d in list_disks()}
    assert loop_4096 in disks
    d = disks[loop_4096]
    assert d.logical == 4096 and d.physical >= 4096
    assert d.size_bytes == os.path.getsize(d.backing_file) and d.kind == "loop"
    # A 512-byte GPT seen through 4096-byte sectors has no GPT header at LBA 1; its protective MBR remains.
    assert probe_table(loop_4096, 4096) == "dos"
    assert probe_table(loop_4096, 512) == "gpt"


def test_the_watcher_notices_a_disk_coming_and_going(tmp_path) -> None:
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup to attach a loop device")
    changed = threading.Event()
    watcher = Watcher(changed.set)
    watcher.POLL_SECONDS = 0.2
    watcher.start()
    try:
        assert watcher.mode in ("udev", "kernel", "poll")
        image = tmp_path / "w.img"
        image.write_bytes(b"")
        os.truncate(image, 8 << 20)
        device = _losetup("--find", "--show", str(image))
        try:
            assert changed.wait(5), f"no change seen in {watcher.mode} mode"
        finally:
            subprocess.run(["losetup", "--detach", device], capture_output=True, timeout=20)
    finally:
        watcher.stop()


def test_polling_works_when_no_netlink_socket_can_be_opened(monkeypatch, tmp_path) -> None:
    watcher = Watcher(lambda: None)
    monkeypatch.setattr(Watcher, "_monitor", lambda self: setattr(self, "mode", "poll"))
    watcher.start()
    try:
        assert watcher.mode == "poll"
    finally:
        watcher.stop()
    snap = Watcher._snapshot()
    assert snap and all(os.path.isdir(f"/sys/block/{n}") for n in snap)


def test_picking_a_device_opens_it_in_the_planner(loop_4096: str) -> None:
    source = CliSource(parser().parse_args([]))

    async def go() -> None:
        app = PlannerApp(source, None, lister=list_disks, watch_devices=False)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DevicePicker)
                           and app.screen.query_one(DataTable).row_count, 2, what="the device picker's rows")
            picker = app.screen
            assert isinstance(picker, DevicePicker)
            table = picker.query_one(DataTable)
            row = table.get_row_index(loop_4096)
            table.move_cursor(row=row)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.target is not None, 10)
            assert app.target is not None and app.target.title == loop_4096
            assert app.target.disk.geometry.logical == 4096

    try:
        asyncio.run(go())
    finally:
        source.close()


def test_disk_kinds() -> None:
    def info(name: str, rot: bool | None) -> DiskInfo:
        return DiskInfo(name, f"/dev/{name}", "", 1, 512, 512, "gpt", rot, None)

    assert [info("loop3", False).kind, info("sda", True).kind, info("nvme0n1", False).kind, info("vdb", None).kind] == [
        "loop", "HDD", "SSD", "disk"]
