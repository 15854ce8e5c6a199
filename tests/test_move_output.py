"""What a data move (and the device picker) says, as a user reads it: the steps after the copy below the copy's
bar on a terminal (a live bar stays at the bottom, so a step printed while it lived read as done before the
copy); a mounted filesystem is "not read" in the preview, not "no filesystem blkid knows"; an msdos partition
has no PARTUUID line; a device the picker cannot open says why."""

from __future__ import annotations

import io
import os
import stat
import subprocess

import pytest
from rich.console import Console

from diskplan.cli.dataprogress import progress_display
from diskplan.cli.textout import Out
from diskplan.discovery.udev import probe
from helpers.images import partx_update, sfdisk_uuids
from helpers.movedisk import PY, diskplan, make_disk, state_env
from helpers.tools import run as tool


def test_the_steps_after_a_copy_print_below_its_bar() -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100, color_system=None)
    with progress_display(Out(io.StringIO()), bar_console=terminal) as show:
        show(0, 1, "checking the filesystem")
        for done in (0, 512 << 10, 1 << 20):
            show(done, 1 << 20, "copying")
        show(0, 1, "rewriting the partition's table entry")
        show(0, 1, "checking the filesystem at its new place")
    text = screen.getvalue()
    last_bar = text.rindex("copying")
    assert text.index("checking the filesystem") < text.index("copying")
    assert last_bar < text.index("rewriting the partition's table entry")
    assert last_bar < text.index("checking the filesystem at its new place")
    assert text.count("rewriting the partition's table entry") == 1  # each step once


def test_a_mounted_ext4_is_not_called_no_filesystem_in_the_preview(loop_device, tmp_path) -> None:
    d = make_disk(loop_device, tmp_path, start=2048, size=20480)
    partx_update(d.dev)
    node = f"{d.dev}p1"
    if not os.path.exists(node):
        pytest.skip("the kernel did not create the partition node")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    tool("mount", "-o", "ro", node, str(mnt))
    try:
        got = diskplan(d, "move", d.dev, "--partition", "1", "--to", "30000")
    finally:
        tool("umount", str(mnt))
    assert got.returncode == 1 and "mounted" in got.stderr
    header = got.stdout.splitlines()[0]
    assert "no filesystem blkid knows" not in got.stdout
    assert header.endswith("partition 1 (filesystem not read)"), header


def test_an_msdos_move_does_not_print_a_partuuid_it_has_not(loop_device, tmp_path) -> None:
    d = make_disk(loop_device, tmp_path, label="msdos", start=2048, size=20480)
    got = diskplan(d, "move", d.dev, "--partition", "1", "--to", "30720", "--yes")
    assert got.returncode == 0, got.stderr
    assert "moved and verified" in got.stdout and "PARTUUID" not in got.stdout + got.stderr
    (tmp_path / "gpt").mkdir()
    gpt = make_disk(loop_device, tmp_path / "gpt", start=2048, size=20480)
    got = diskplan(gpt, "move", gpt.dev, "--partition", "1", "--to", "30720", "--yes")
    assert got.returncode == 0, got.stderr
    assert f"PARTUUID {sfdisk_uuids(gpt.dev)[1]} unchanged" in got.stdout


def test_no_access_says_why() -> None:
    assert probe("/nonexistent/sdz", 512) == ("no /dev node", "/nonexistent/sdz does not exist (no udev to make it?)")


def test_a_device_node_that_cannot_be_opened_says_why(tmp_path) -> None:
    node = tmp_path / "nodev"
    try:
        os.mknod(node, 0o600 | stat.S_IFBLK, os.makedev(259, 1 << 19))  # a minor no driver has
    except PermissionError:
        pytest.skip("mknod needs root")
    table, why = probe(str(node), 512)
    assert table == "no access" and why == f"{node} cannot be opened: No such device or address"


def test_a_partition_that_does_not_exist_is_not_shown_moving_0_sectors(tmp_path) -> None:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    tool("sfdisk", "-q", str(img), input="label: gpt\nstart=2048, size=20480, type=L\n")
    got = subprocess.run([PY, "-m", "diskplan", "move", str(img), "-N", "9", "--to", "4096s"], capture_output=True,
                         text=True, env=state_env(tmp_path / "state"), stdin=subprocess.DEVNULL, timeout=120)
    assert got.returncode == 1 and "has no partition 9" in got.stderr, got
    assert "moves 0 sectors" not in got.stdout and "0..-1" not in got.stdout, got.stdout
