"""`diskplan realign` shrinks a filesystem when no aligned start leaves room for it as it is (issue 14), by the
planner's rule (model.plan.move.realign_shrinking): an ext4 at 34s filling a GPT disk on a loop device shrinks to
end where it ends now, then moves to 2048s; the proposal shows the shrink; afterwards e2fsck finds it clean,
every file keeps its SHA-256 and the PARTUUID is unchanged."""

from __future__ import annotations

from diskplan.backend.move.resize import content_limits
from diskplan.backend.read.reader import read
from diskplan.model.extent import Extent
from diskplan.model.plan.plan import Plan
from helpers.movedisk import Disk, View, assert_intact, diskplan, entry, make_disk
from helpers.tools import run
from helpers.units import MiB

DISK_MIB = 96
LAST = DISK_MIB * MiB // 512 - 34  # the last usable sector of a GPT with 128 entries


def test_realign_shrinks_an_ext4_that_fills_the_disk_then_moves_it(loop_device, tmp_path) -> None:
    d = make_disk(loop_device, tmp_path, start=34, size=LAST - 34 + 1, disk_mib=DISK_MIB)
    partuuid = entry(d)[2]
    new = LAST - 2048 + 1  # from the boundary up to where it ends now (512-byte physical blocks)
    # The planner's A decides the same place and size from the same measurement.
    disk = read(d.dev)
    limits = content_limits(d.dev, 34, d.size, 512)
    planned = Plan.open(disk.geometry, disk.table).realign(1, limits)
    assert planned.ok and planned.plan.partition(1).extent == Extent(2048, LAST), planned.message  # type: ignore[union-attr]
    dry = diskplan(d, "realign", d.dev)
    out = dry.stdout
    assert dry.returncode == 0 and "Nothing written" in out, out + dry.stderr
    assert "no aligned start leaves room for it as it is: its ext4 shrinks from 96 MiB to 95 MiB first" in out
    assert "then moves to 2048" in out, out
    assert f"from 34..{LAST} " in out and f"to 34..{34 + new - 1} " in out, out  # the shrink, start kept
    assert f"from 34..{34 + new - 1} to 2048..{LAST}" in out, out  # then the move
    assert "the filesystem can shrink to" in out
    assert entry(d)[:2] == (34, d.size)  # the dry run wrote nothing
    done = diskplan(d, "realign", d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    d.size = new
    assert_intact(d, 2048, partuuid)  # e2fsck -fn clean, label, every file's SHA-256, the PARTUUID


def test_realign_refuses_when_the_content_cannot_shrink(loop_device, tmp_path) -> None:
    img = tmp_path / "raw.img"
    with open(img, "wb") as f:
        f.truncate(DISK_MIB * MiB)
    run("sfdisk", "-q", str(img), input=f"label: gpt\nfirst-lba: 34\nstart=34, size={LAST - 33}, type=L\n")
    d = Disk(loop_device(img), "gpt", 1, 34, LAST - 33, "", {}, tmp_path / "state")
    got = diskplan(d, "realign", d.dev, "--yes")
    assert got.returncode == 1, got.stdout + got.stderr
    assert "partition 1 cannot be realigned: no 1 MiB boundary leaves room for it (" in got.stdout, got.stdout
    assert entry(d)[:2] == (34, d.size)  # nothing written


def test_realigns_dry_run_says_a_filesystem_with_errors_will_be_refused(loop_device, tmp_path) -> None:
    """The dry run proposed moving it; only the write (after the confirmation) found it not clean (issue 25)."""
    d = make_disk(loop_device, tmp_path, start=34, size=20480)
    with View(d.dev, 34, 20480, read_only=False) as v:
        run("debugfs", "-w", "-R", "clri <11>", v)  # lost+found's inode wiped
    dry = diskplan(d, "realign", d.dev)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert "diskplan realign: partition 1: its ext4 filesystem has errors (" in dry.stderr, dry.stderr
    assert "realigning it will be refused; repair it first" in dry.stderr
    assert "to 2048.." not in dry.stdout, dry.stdout  # no move proposed
    assert entry(d)[:2] == (34, 20480)
