"""Nothing that says "nothing written" opens a disk for writing (issue 24, defect 2): libparted opens a
device read-write, and every partition node too, and systemd-udevd re-probes a disk closed after writing
(inotify IN_CLOSE_WRITE), so a dry run re-activated a logical volume the user had just deactivated. The
reading children cannot open anything for writing (backend.parted.readonly); watched here on a loop device."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

import pytest

from helpers.cli import diskplan
from helpers.closewrite import closed_after_writing
from helpers.tools import need_tool, run
from helpers.units import MiB

pytestmark = pytest.mark.root


@pytest.fixture
def disk(sparse_image: Callable[..., object], loop_device: Callable[..., str]) -> str:
    need_tool("mkfs.ext4")
    dev = loop_device(sparse_image(64 * MiB))
    run("sfdisk", "-q", dev, input="label: gpt\nfirst-lba: 34\nstart=34, size=30000\nstart=40960, size=20480\n")
    subprocess.run(["partx", "-u", dev], capture_output=True)
    run("mkfs.ext4", "-q", f"{dev}p1")
    return dev


def nodes(dev: str) -> list[str]:
    return [dev, *(f"{dev}p{n}" for n in (1, 2) if os.path.exists(f"{dev}p{n}"))]


def test_the_fixture_is_watched(disk):
    """The watch itself sees what libparted did before (an open for writing, closed)."""
    with closed_after_writing(nodes(disk)) as seen:
        os.close(os.open(disk, os.O_RDWR))
    assert seen == [disk]


@pytest.mark.parametrize("command", [
    ["check"],
    ["check", "--json"],
    ["resize", "--partition", "1", "--size", "20MiB"],
    ["move", "--partition", "2", "--to", "2MiB"],
    ["realign"],
])
def test_a_dry_run_opens_nothing_for_writing(disk, command):
    assert len(nodes(disk)) == 3  # the partitions are watched too: libparted opened each for writing
    with closed_after_writing(nodes(disk)) as seen:
        proc = diskplan(command[0], disk, *command[1:])
    assert proc.returncode in (0, 1), proc.stderr
    assert seen == [], f"{' '.join(command)} closed {seen} after opening them for writing"


def test_apply_without_yes_opens_nothing_for_writing(disk, tmp_path):
    plan = tmp_path / "plan.sfdisk"
    plan.write_text("label: gpt\nfirst-lba: 34\nstart=34, size=30000\nstart=40960, size=10240\n")
    with closed_after_writing(nodes(disk)) as seen:
        proc = diskplan("apply", str(plan), disk)
    assert "Nothing written: run again with --yes" in proc.stdout, proc.stdout + proc.stderr
    assert "refused" not in proc.stdout + proc.stderr  # so libparted built the new table: the preview ran
    assert seen == []


def test_the_planners_read_opens_nothing_for_writing(disk):
    from diskplan.backend.read.reader import read

    with closed_after_writing(nodes(disk)) as seen:
        found = read(disk)
    assert [p.start for p in found.table.partitions] == [34, 40960]
    assert seen == []
