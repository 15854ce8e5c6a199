"""Moving and resizing msdos logical partitions that hold ext4 on loop devices (model.plan.ebrmove,
backend.raw.ebrchain).

The disk is laid out the way DOS-era fdisk did (each EBR 63 sectors before its partition, nothing aligned):
the extended partition at 63, partition 5's EBR at 63 (data at 126), partition 6's EBR at 39000 (data at
39063). Afterwards sfdisk reads the whole chain with the same numbers (util-linux #3568 lost the partitions
after a moved one), `sfdisk --verify` and parted accept it, e2fsck finds both filesystems clean and every
file has its SHA-256; after a kill anywhere, `diskplan resume` gets there too.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess

import pytest

from helpers.logicals import EXT, SIZE, assert_whole, dump, ebr_of, make
from helpers.movedisk import POINTS, Disk, diskplan
from helpers.tools import run


def moved(disks: dict[int, Disk], number: int, *args: str) -> str:
    got = diskplan(disks[number], *args, "--yes")
    assert got.returncode == 0, got.stdout + got.stderr
    return got.stdout


def test_realign_both_logicals_from_63_style_offsets(loop_device, tmp_path) -> None:
    """5: 126 -> 2048 (right, its EBR stays at the extended's start); 6: 39063 -> 38912 (left past its own EBR
    at 39000: the EBR moves to 38849, the same 63 sectors before it, and 5's EBR links there)."""
    disks = make(loop_device, tmp_path)
    dry = diskplan(disks[5], "realign", disks[5].dev)
    assert dry.returncode == 0 and "126..30125 to 2048..32047" in dry.stdout and "39063..69062 to 38912..68911" in (
        dry.stdout), dry.stdout + dry.stderr
    moved(disks, 5, "realign", disks[5].dev)
    disks[5].start, disks[6].start = 2048, 38_912
    assert_whole(disks)
    assert (ebr_of(disks[5].dev, 5), ebr_of(disks[5].dev, 6)) == (63, 38_849)


def test_move_right_past_the_extended_end_grows_it_then_back_left(loop_device, tmp_path) -> None:
    disks = make(loop_device, tmp_path)
    d = disks[6]
    moved(disks, 6, "move", d.dev, "--partition", "6", "--to", "140000")
    d.start = 140_000
    assert_whole(disks, ext_size=140_000 + SIZE - EXT[0])  # grown to the partition's new end
    assert ebr_of(d.dev, 6) == 39_000  # still before it: only the entry's relative start changed
    moved(disks, 6, "move", d.dev, "--partition", "6", "--to", "30200")  # left of its EBR, next to partition 5
    d.start = 30_200
    assert_whole(disks, ext_size=140_000 + SIZE - EXT[0])
    assert ebr_of(d.dev, 6) == 30_126  # its old distance (101000) is not there: the first sector after partition 5


def test_a_plan_moving_the_last_logical_past_the_extended_end_applies_and_grows_it(loop_device, tmp_path) -> None:
    """What the planner's Ctrl+S writes for a drag past the extended partition's end: partition 6 at 140000 and
    the extended grown to its new end, everything kept. `apply` runs it as one move (which grows the extended
    first), not as a table change mixed with a move."""
    disks = make(loop_device, tmp_path)
    d = disks[6]
    got = diskplan(d, "export", d.dev)
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    for p in doc["partitions"]:
        if p["number"] in (1, 6):
            start = EXT[0] if p["number"] == 1 else 140_000
            size = 140_000 + SIZE - EXT[0] if p["number"] == 1 else SIZE
            p.update(start=start, end=start + size - 1, size=size)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    got = diskplan(d, "apply", str(plan), d.dev, "--yes")
    assert got.returncode == 0, got.stdout + got.stderr
    assert "step 1: move partition 6: 39063..69062 -> 140000..169999" in got.stdout and "step 2" not in got.stdout
    d.start = 140_000
    assert_whole(disks, ext_size=140_000 + SIZE - EXT[0])


def test_grow_and_shrink_a_logical(loop_device, tmp_path) -> None:
    disks = make(loop_device, tmp_path)
    d = disks[6]
    for size in (60_000, 40_000):
        got = diskplan(d, "resize", d.dev, "--partition", "6", "--size", f"{size}s", "--yes")
        assert got.returncode == 0, got.stdout + got.stderr
        d.size = size
        assert_whole(disks)
    got = diskplan(d, "resize", d.dev, "--partition", "6", "--size", "200000s", "--yes")  # past the disk's end
    assert got.returncode == 1 and "would leave the usable area" in got.stderr, got.stdout + got.stderr
    got = diskplan(d, "resize", d.dev, "--partition", "6", "--size", "140000s", "--yes")  # the extended grows
    assert got.returncode == 0, got.stdout + got.stderr
    d.size = 140_000
    assert_whole(disks, ext_size=39_063 + 140_000 - EXT[0])


def test_the_plan_keeps_the_chain_in_order_and_every_ebr_free() -> None:
    from diskplan.model.extent import Extent
    from diskplan.model.plan.ebrmove import LogicalMove, free_sector, plan_logical, window

    ebrs, parts, ext = [63, 39_000], [Extent(126, 30_125), Extent(39_063, 69_062)], Extent(63, 150_062)
    assert plan_logical(1, ebrs, parts, ext, 150_062, 38_912, SIZE) == LogicalMove(39_000, 38_849, 69_063, 150_062)
    assert plan_logical(0, ebrs, parts, ext, 150_062, 2048, SIZE) == LogicalMove(63, 63, 64, 150_062)
    assert plan_logical(1, ebrs, parts, ext, 160_000, 130_000, SIZE) == LogicalMove(39_000, 39_000, 39_001, 159_999)
    assert "free space after it (up to 155000)" in str(plan_logical(1, ebrs, parts, ext, 155_000, 130_000, SIZE))
    assert "nothing after it is free to grow it into" in str(plan_logical(1, ebrs, parts, ext, 150_062, 130_000, SIZE))
    assert "no sector for its EBR" in str(plan_logical(1, ebrs, parts, ext, 150_062, 30_126, SIZE))
    assert "not in disk order" in str(plan_logical(0, [63, 100], parts, ext, 150_062, 2048, SIZE))
    assert window(1, ebrs, parts, ext) == Extent(30_127, 150_062) and window(0, ebrs, parts, ext) == Extent(64, 38_999)
    # the parked entry's sector is free of every partition, EBR, source and destination
    assert free_sector(10, 20, [Extent(11, 12), Extent(14, 14), Extent(13, 13)]) == 15
    assert free_sector(10, 14, [Extent(11, 14)]) == 0


def test_nothing_is_moved_over_the_next_ebr(loop_device, tmp_path) -> None:
    """util-linux #3568: sfdisk --move-data moved partition 7's data over partition 8's EBR, and 8 was gone."""
    disks = make(loop_device, tmp_path)
    d = disks[5]
    for cmd in (("move", d.dev, "--partition", "5", "--to", "9100"), ("resize", d.dev, "--partition", "5", "--size",
                                                                       "38950s")):
        got = diskplan(d, *cmd, "--yes")
        assert got.returncode == 1 and "would overwrite the EBR of partition 6 at LBA 39000" in got.stderr, (
            got.stdout + got.stderr)
    got = diskplan(d, "move", d.dev, "--partition", "5", "--to", "63", "--yes")
    assert got.returncode == 1 and "does not move the extended partition" in got.stderr
    assert_whole(disks)


def test_a_half_moved_logical_is_parked_and_keeps_every_number(loop_device, tmp_path) -> None:
    """Killed mid-copy: the kernel and sfdisk still number 5 and 6 (6 is a one-sector 0xDA entry on a free
    sector, holding no filesystem); resume puts it at its new place."""
    disks = make(loop_device, tmp_path)
    d = disks[6]
    run("partx", "-u", d.dev)
    got = diskplan(d, "move", d.dev, "--partition", "6", "--to", "38912", "--yes", kill="write:2")
    assert got.returncode == -signal.SIGKILL, got.stdout + got.stderr
    table = dump(d.dev)
    assert table[5] == (126, SIZE, "83") and table[6][1:] == (1, "da"), table
    subprocess.run(["partx", "-u", d.dev], capture_output=True)
    node = f"/sys/class/block/{os.path.basename(d.dev)}p6"
    assert pathlib.Path(node, "size").read_text().strip() == "1"
    probe = subprocess.run(["blkid", "-p", "-o", "export", f"{d.dev}p6"], capture_output=True, text=True)
    assert not any(x.startswith(("TYPE=", "UUID=")) for x in probe.stdout.split()), probe.stdout
    done = diskplan(d, "resume", d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    d.start = 38_912
    assert_whole(disks)
    assert pathlib.Path(node, "start").read_text().strip() == "38912"


SAMPLE = [  # kills around the EBR steps and in the copy of 6 moving left past its EBR
    ("parked", 1), ("ebr", 1), ("hidden", 1), ("torn", 1), ("table", 1),
]


@pytest.mark.parametrize(("point", "n"), SAMPLE)
def test_killed_logical_move_resumes(loop_device, tmp_path, point, n) -> None:
    disks = make(loop_device, tmp_path)
    d = disks[6]
    got = diskplan(d, "move", d.dev, "--partition", "6", "--to", "38912", "--yes", kill=f"{point}:{n}")
    assert got.returncode == -signal.SIGKILL, f"{point}: not killed: {got.stdout} {got.stderr}"
    assert set(dump(d.dev)) == {1, 5, 6}  # the chain is whole at every kill point
    done = diskplan(d, "resume", d.dev, "--yes")
    assert done.returncode == 0, f"{point}: {done.stdout} {done.stderr}"
    d.start = 38_912
    assert_whole(disks)
    assert ebr_of(d.dev, 6) == 38_849


def test_many_random_logical_kills(loop_device, tmp_path) -> None:
    """DISKPLAN_FAULT_RUNS=N: N moves of partition 6 (left past its EBR, right by less than a chunk, right past
    the extended partition's end), each killed at a random point, then resumed."""
    import random

    from diskplan.model.plan.move import BATCH_BYTES, schedule
    runs = int(os.environ.get("DISKPLAN_FAULT_RUNS", "0"))
    if not runs:
        pytest.skip("set DISKPLAN_FAULT_RUNS=N for N random kills (the long run)")
    rng = random.Random(int(os.environ.get("DISKPLAN_FAULT_SEED", "14")))
    for i in range(runs):
        to = rng.choice((38_912, 40_960, 30_200, 140_000))
        point = rng.choice((*POINTS, "parked", "ebr") if to < 39_000 else POINTS)
        plan = schedule(39_063, to, SIZE, 512)
        groups = len(list(plan.groups(0, BATCH_BYTES // (plan.chunk * 512))))
        n = {"record": rng.randint(1, groups + 2), "synced": rng.randint(1, groups)}.get(
            point, 1 if point in ("verified", "table", "hidden", "parked", "ebr") else rng.randint(1, plan.count))
        sub = tmp_path / f"run{i}"
        sub.mkdir()
        disks = make(loop_device, sub)
        d = disks[6]
        try:
            got = diskplan(d, "move", d.dev, "--partition", "6", "--to", str(to), "--yes", kill=f"{point}:{n}")
            assert got.returncode == -signal.SIGKILL, f"not killed: {got.stdout} {got.stderr}"
            assert set(dump(d.dev)) == {1, 5, 6}
            done = diskplan(d, "resume", d.dev, "--yes")
            assert done.returncode == 0, done.stdout + done.stderr
            d.start = to
            assert_whole(disks, ext_size=max(EXT[1], to + SIZE - EXT[0]))
        except AssertionError as exc:
            raise AssertionError(f"run {i}: 39063 -> {to}, kill at {point}:{n}: {exc}") from exc
        finally:
            subprocess.run(["losetup", "--detach", d.dev], capture_output=True)


def test_move_with_size_on_a_logical(loop_device, tmp_path) -> None:
    """`move --size`: realign 6 left past its EBR and grow it (the move first, then the grow)."""
    disks = make(loop_device, tmp_path)
    d = disks[6]
    moved(disks, 6, "move", d.dev, "--partition", "6", "--to", "38912", "--size", "45000s")
    d.start, d.size = 38_912, 45_000
    assert_whole(disks)
    assert ebr_of(d.dev, 6) == 38_849
