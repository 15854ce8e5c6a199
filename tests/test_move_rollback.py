"""``diskplan resume --rollback`` (backend.move.moveundo): a move killed while no byte of its old place can have been
overwritten goes back there with a table write only; one that may have overwritten it is refused (resume
finishes it). Referees as for every move: sfdisk, the filesystem's checker, blkid, the files' SHA-256."""

from __future__ import annotations

import os
import random
import signal

from helpers.logicals import assert_whole, ebr_of, make
from helpers.movedisk import assert_intact, diskplan, entry, make_disk


def test_a_move_into_free_space_rolls_back(loop_device, tmp_path) -> None:
    """90000 -> 2048: the destination never touches the old place, so after a kill mid-copy the partition can be put
    back, its type and PARTUUID as before, and nothing is left to resume."""
    d = make_disk(loop_device, tmp_path, start=90_000, size=40960, disk_mib=72)
    partuuid = entry(d)[2]
    got = diskplan(d, "move", d.dev, "--partition", "1", "--to", "2048", "--yes", kill="write:2")
    assert got.returncode == -signal.SIGKILL, got.stdout + got.stderr
    dry = diskplan(d, "resume", d.dev, "--rollback")
    assert dry.returncode == 0 and "roll it back" in dry.stdout + dry.stderr, dry.stdout + dry.stderr
    done = diskplan(d, "resume", d.dev, "--rollback", "--yes")
    assert done.returncode == 0 and "rolled back" in done.stdout, done.stdout + done.stderr
    assert_intact(d, 90_000, partuuid)
    assert diskplan(d, "resume", d.dev).returncode == 0  # no unfinished move any more: nothing to do
    again = diskplan(d, "move", d.dev, "--partition", "1", "--to", "2048", "--yes")  # and other writes may go on
    assert again.returncode == 0, again.stdout + again.stderr
    assert_intact(d, 2048, partuuid)


def test_a_move_over_its_old_place_rolls_back_by_copying_back(loop_device, tmp_path) -> None:
    """34 -> 2048 (right by less than a chunk: every chunk's write overwrites part of its own source), killed after
    two chunks: the rollback copies them back (the one in flight from the journal's slot) and the partition is at 34
    with every byte as before. The old code refused ("may already be written over the partition's old place")."""
    d = make_disk(loop_device, tmp_path, start=34, size=40960, disk_mib=48)
    partuuid = entry(d)[2]
    got = diskplan(d, "move", d.dev, "--partition", "1", "--to", "2048", "--yes", kill="write:2")
    assert got.returncode == -signal.SIGKILL
    dry = diskplan(d, "resume", d.dev, "--rollback")
    assert dry.returncode == 0 and "copies the chunks written over the old place back" in dry.stdout, (
        dry.stdout + dry.stderr)
    done = diskplan(d, "resume", d.dev, "--rollback", "--yes")
    assert done.returncode == 0 and "rolled back" in done.stdout, done.stdout + done.stderr
    assert_intact(d, 34, partuuid)
    assert diskplan(d, "resume", d.dev).returncode == 0  # nothing left to resume


def test_a_plain_resume_during_a_copy_back_sends_to_the_rollback(loop_device, tmp_path) -> None:
    """Killed while copying back (a chunk written back over the new place of another): a plain resume refuses and
    names `--rollback`, without calling it another disk (its data is checked as the rollback leaves it)."""
    d = make_disk(loop_device, tmp_path, start=34, size=40960, disk_mib=48)
    partuuid = entry(d)[2]
    assert diskplan(d, "move", d.dev, "--partition", "1", "--to", "2048", "--yes", kill="write:3").returncode < 0
    killed = diskplan(d, "resume", d.dev, "--rollback", "--yes", kill="synced:2")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    got = diskplan(d, "resume", d.dev, "--yes")
    assert got.returncode == 1 and "--rollback" in got.stderr, got.stdout + got.stderr
    assert "not the disk the move ran on" not in got.stderr, got.stderr
    assert diskplan(d, "resume", d.dev, "--rollback", "--yes").returncode == 0
    assert_intact(d, 34, partuuid)


def test_an_overlapping_rollback_killed_anywhere_finishes(loop_device, tmp_path) -> None:
    """kill -9 of an overlapping move at a random point, then of its rollback at random points (a chunk written
    back, synced, saved in the slot, a torn half-chunk), 1-3 times: `resume --rollback` always ends with the
    partition at its old place, byte for byte. DISKPLAN_FAULT_RUNS=N: N rounds (the long run); 1 by default."""
    runs = max(1, int(os.environ.get("DISKPLAN_FAULT_RUNS", "0") or 0))
    rng = random.Random(int(os.environ.get("DISKPLAN_FAULT_SEED", "23")))
    cases = [(34, 2048, 40960), (30_000, 2048, 40960), (2048, 20_000, 40960)]  # right < chunk, left, right: 3 chunks
    moved = kills = 0
    for run in range(runs):
        start, to, size = cases[run % len(cases)]
        (tmp_path / f"r{run}").mkdir()
        d = make_disk(loop_device, tmp_path / f"r{run}", start=start, size=size, disk_mib=48)
        partuuid = entry(d)[2]
        point = f"{rng.choice(['write', 'torn'])}:{rng.randint(2, 3)}"  # a chunk after the first: the old place hit
        got = diskplan(d, "move", d.dev, "--partition", "1", "--to", str(to), "--yes", kill=point)
        assert got.returncode == -signal.SIGKILL, got.stdout + got.stderr
        said = [point]
        for _ in range(rng.randint(1, 3)):
            kill = f"{rng.choice(['write', 'synced', 'slot', 'torn', 'record'])}:{rng.randint(1, 2)}"
            got = diskplan(d, "resume", d.dev, "--rollback", "--yes", kill=kill)
            said.append(f"{kill}: {got.returncode}")
            assert got.returncode in (0, -signal.SIGKILL), f"{said}: {got.stdout}{got.stderr}"
            if got.returncode == 0:
                break
            kills += 1
        done = diskplan(d, "resume", d.dev, "--rollback", "--yes")
        assert done.returncode == 0, f"{said}: {done.stdout}{done.stderr}"  # rolled back, or nothing left to do
        assert_intact(d, start, partuuid)
        assert diskplan(d, "resume", d.dev).returncode == 0, f"{said}: something left to resume"
        moved += 1
    print(f"{moved} overlapping moves killed and rolled back, {kills} kills during their rollbacks")


def test_a_begun_rollback_is_not_resumed_the_other_way(loop_device, tmp_path) -> None:
    """Once a rollback is begun (and killed), plain resume refuses: the copy must not start again."""
    d = make_disk(loop_device, tmp_path, start=90_000, size=40960, disk_mib=72)
    partuuid = entry(d)[2]
    assert diskplan(d, "move", d.dev, "--partition", "1", "--to", "2048", "--yes", kill="synced:1").returncode < 0
    killed = diskplan(d, "resume", d.dev, "--rollback", "--yes", kill="record:1")  # its "rollback" mark written
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    got = diskplan(d, "resume", d.dev, "--yes")
    assert got.returncode == 1 and "--rollback" in got.stderr, got.stdout + got.stderr
    assert diskplan(d, "resume", d.dev, "--rollback", "--yes").returncode == 0
    assert_intact(d, 90_000, partuuid)


def test_a_ctrl_c_during_a_rollback_says_it_finishes(loop_device, tmp_path) -> None:
    """A rollback has no chunk boundary to stop at: Ctrl+C (at its "rollback" mark) is answered truthfully and the
    rollback ends whole."""
    d = make_disk(loop_device, tmp_path, start=90_000, size=40960, disk_mib=72)
    partuuid = entry(d)[2]
    assert diskplan(d, "move", d.dev, "--partition", "1", "--to", "2048", "--yes", kill="synced:1").returncode < 0
    got = diskplan(d, "resume", d.dev, "--rollback", "--yes", kill="record:1:INT")
    assert got.returncode == 0 and "rolled back" in got.stdout, got.stdout + got.stderr
    assert "chunk boundary" not in got.stderr and "a rollback cannot stop half-way" in got.stderr, got.stderr
    assert_intact(d, 90_000, partuuid)


def test_a_logical_move_rolls_back_its_ebr_too(loop_device, tmp_path) -> None:
    """6 moving left past its EBR into free space (EBR 39000 -> 15937): killed mid-copy, rolled back, the EBR is
    at 39000 again and 5's EBR links there."""
    layout = {5: (63, 126), 6: (39_000, 39_063)}
    disks = make(loop_device, tmp_path, layout, size=14_000)
    d = disks[6]
    got = diskplan(d, "move", d.dev, "--partition", "6", "--to", "16000", "--yes", kill="write:1")
    assert got.returncode == -signal.SIGKILL, got.stdout + got.stderr
    assert ebr_of(d.dev, 6) == 15_937
    killed = diskplan(d, "resume", d.dev, "--rollback", "--yes", kill="ebr:1")  # old EBR written, not yet linked
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert ebr_of(d.dev, 6) == 15_937
    done = diskplan(d, "resume", d.dev, "--rollback", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_whole(disks)
    assert ebr_of(d.dev, 6) == 39_000


def test_an_overlapping_logical_move_rolls_back_its_bytes_and_ebr(loop_device, tmp_path) -> None:
    """6 (30000 sectors at 39063) moving left past its EBR over its own old place (to 31000): killed after its second
    chunk, rolled back: the chunks come back first, then its EBR goes back to 39000 and 5's links there; both
    filesystems clean with every file. The old code refused."""
    disks = make(loop_device, tmp_path, {5: (63, 126), 6: (39_000, 39_063)})
    d = disks[6]
    got = diskplan(d, "move", d.dev, "--partition", "6", "--to", "31000", "--yes", kill="write:2")
    assert got.returncode == -signal.SIGKILL, got.stdout + got.stderr
    done = diskplan(d, "resume", d.dev, "--rollback", "--yes")
    assert done.returncode == 0 and "rolled back" in done.stdout, done.stdout + done.stderr
    assert_whole(disks)
    assert ebr_of(d.dev, 6) == 39_000
