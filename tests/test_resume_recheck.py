"""Recovery never dead-ends and never trusts the journal over the disk (issue 23, items 1-4): ``resume`` and
``resume --rollback`` rebuild a GPT copy a crash tore inside an entry rewrite; refuse, naming both disks and
writing nothing, a disk that is not the journal's, a destination someone has used since, a journal whose
new place leaves the disk; write only the disk they checked; copy again chunks that read back wrong; go on
past a damaged slot whose chunk is still whole on the disk; roll back a move whose copy never began.

On image files (the move writes an image as it writes a disk); referees: sfdisk, sgdisk -v, blkid, the
SHA-256 of the partition's bytes."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess

import pytest

from helpers.crashrec import entry_of, sha256_at
from helpers.movedisk import PY, View, make_image, state_env
from helpers.tools import need_tool, run

SIZE = 20_480  # 10 MiB: two chunks of 8 MiB when it moves by more than that


def dp(state: pathlib.Path, *args: str, kill: str = "", strace: int = 0) -> subprocess.CompletedProcess[str]:
    """The CLI; ``strace``: killed by strace at the N-th pwrite64 (the table writes, nothing else uses it)."""
    cmd = [PY, "-m", "diskplan", *args]
    if strace:
        cmd = [need_tool("strace"), "-f", "-o", os.devnull, "-e", f"inject=pwrite64:signal=SIGKILL:when={strace}",
               *cmd]
    env = state_env(state, **({"DISKPLAN_MOVE_KILL": kill} if kill else {}))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)


def out(got: subprocess.CompletedProcess[str]) -> str:
    return got.stdout + got.stderr


def journal_of(state: pathlib.Path) -> pathlib.Path:
    (path,) = (state / "moves").glob("*.dpmove")  # DISKPLAN_MOVES_DIR (helpers.movedisk.state_env)
    return path


def gpt_torn(image: str) -> bool:
    got = subprocess.run(["sgdisk", "-v", image], capture_output=True, text=True)
    return "CRC" in got.stdout and "No problems found" not in got.stdout


# --- 1. a crash inside a GPT entry rewrite -----------------------------------------------------------------


@pytest.mark.parametrize(("n", "how"), [(2, "resume"), (4, "resume"), (2, "rollback"), (4, "rollback"),
                                        (6, "resume"), (8, "resume")])
def test_a_torn_gpt_entry_rewrite_is_finished_or_rolled_back(tmp_path: pathlib.Path, n: int, how: str) -> None:
    """Killed at the n-th table write (2, 4: hiding the entry; 6, 8: showing it at its new place), one GPT copy
    fails its CRC. resume (and a rollback, before the copy) rebuild it from the other copy and end whole; no
    command sends the user to the other one."""
    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 90_000, SIZE)
    killed = dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", strace=n)
    assert killed.returncode != 0, out(killed)
    assert gpt_torn(image), run("sgdisk", "-v", image)
    repair = dp(state, "repair", image)
    assert "diskplan resume" in out(repair), out(repair)  # repair sends the user to resume, which now goes on
    args = ["--rollback"] if how == "rollback" and n < 5 else []
    done = dp(state, "resume", image, *args, "--yes")
    assert done.returncode == 0, out(done)
    assert "was rebuilt from the" in out(done), out(done)
    assert not gpt_torn(image), run("sgdisk", "-v", image)
    where = 90_000 if args else 2048
    assert entry_of(image)[:2] == (where, SIZE)
    assert sha256_at(image, where, SIZE) == sha


# --- 2. the disk, the places and the data are checked again ----------------------------------------------


def test_a_partition_made_in_the_destination_after_the_crash_is_refused(tmp_path: pathlib.Path) -> None:
    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    assert dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="hidden:1").returncode < 0
    run("sgdisk", "-n", "2:2048:+8M", image)
    with View(image, 2048, 16384, read_only=False) as v:
        run("mkfs.ext4", "-q", "-L", "newer", v)
    newer = sha256_at(image, 2048, 16384)
    got = dp(state, "resume", image, "--yes")
    assert got.returncode == 1, out(got)
    assert "partition 2 (2048..18431)" in got.stderr and "new place" in got.stderr, got.stderr
    assert sha256_at(image, 2048, 16384) == newer  # nothing written over it


def test_a_journal_whose_new_place_leaves_the_disk_is_refused(tmp_path: pathlib.Path) -> None:
    """A journal saying ``to`` 0 would have the copy start over the protective MBR and the primary GPT."""
    from diskplan.backend.move.movejournal import _line

    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    assert dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="hidden:1").returncode < 0
    path = journal_of(state)
    first, header, *rest = path.read_bytes().splitlines(keepends=True)
    fields = json.loads(header.decode().rsplit(" *", 1)[0][len("header "):])
    fields["to"] = 0
    path.write_bytes(first + _line("header " + json.dumps(fields, sort_keys=True)) + b"".join(rest))
    head = sha256_at(image, 0, 2048)
    got = dp(state, "resume", image, "--yes")
    assert got.returncode == 1 and "outside the usable area" in got.stderr, out(got)
    assert sha256_at(image, 0, 2048) == head


def test_resume_writes_only_the_disk_it_checked(tmp_path: pathlib.Path) -> None:
    """``resume B --journal J`` with J made on A (B a byte copy of A): B is finished, A is not touched."""
    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 90_000, SIZE)
    assert dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="write:1").returncode < 0
    twin = str(tmp_path / "twin.img")
    run("cp", "--sparse=always", image, twin)
    a_before = sha256_at(image, 0, 72 * 2048)
    got = dp(state, "resume", twin, "--journal", str(journal_of(state)), "--yes")
    assert got.returncode == 0, out(got)
    assert sha256_at(image, 0, 72 * 2048) == a_before  # the journal's own disk: not written
    assert entry_of(twin)[:2] == (2048, SIZE) and sha256_at(twin, 2048, SIZE) == sha


@pytest.mark.parametrize("label", ["gpt", "dos"])
def test_another_disk_is_refused_naming_both(tmp_path: pathlib.Path, label: str) -> None:
    """A disk of the same size and layout, another table id: refused before anything is written."""
    image, _ = make_image(tmp_path, label=label, start=90_000, size=SIZE, disk_mib=72)
    other, _ = make_image(tmp_path, label=label, start=90_000, size=SIZE, disk_mib=72, name="other.img", seed=5)
    state = tmp_path / "state"
    assert dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="hidden:1").returncode < 0
    before = sha256_at(other, 0, 72 * 2048)
    got = dp(state, "resume", other, "--journal", str(journal_of(state)), "--yes")
    assert got.returncode == 1, out(got)
    assert image in got.stderr and other in got.stderr and "not the disk the journal was made for" in got.stderr
    assert sha256_at(other, 0, 72 * 2048) == before


def test_an_msdos_twin_with_another_filesystem_is_refused(tmp_path: pathlib.Path) -> None:
    """Same size, layout and disk id: only the filesystem at the old place tells them apart, before any write."""
    same_id = "label-id: 0x1234abcd\n"
    image, _ = make_image(tmp_path, label="dos", start=90_000, size=SIZE, disk_mib=72, head=same_id)
    twin, _ = make_image(tmp_path, label="dos", start=90_000, size=SIZE, disk_mib=72, head=same_id,
                         name="twin.img", fs="vfat")
    state = tmp_path / "state"
    assert dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="hidden:1").returncode < 0
    before = sha256_at(twin, 0, 72 * 2048)
    got = dp(state, "resume", twin, "--journal", str(journal_of(state)), "--yes")
    assert got.returncode == 1 and "old place" in got.stderr, out(got)
    assert sha256_at(twin, 0, 72 * 2048) == before


@pytest.mark.parametrize("written_over", [False, True])
def test_a_table_mark_is_no_proof_the_disk_kept_the_rewrite(tmp_path: pathlib.Path, written_over: bool) -> None:
    """Killed with "table" in the journal, then the table as it was before the move (the disk lost the rewrite in
    its cache, or the old table was put back): resume must see the entry at its old place and rewrite it, not
    say "moved and verified" over a table that still points at the old place. ``written_over``: the new place
    was written meanwhile too (that table shows it free), so it is read back again first, as after "verified"
    alone; the entry was pointed at the changed bytes (exit 3: the ext4 checker found them, after the rewrite)."""
    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 90_000, SIZE)
    sectors = 72 * 2048
    with open(image, "rb") as f:
        head, tail = f.read(34 * 512), (f.seek((sectors - 33) * 512), f.read(33 * 512))[1]
    got = dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="record:4")
    assert got.returncode == -signal.SIGKILL, out(got)
    assert journal_of(state).read_text().splitlines()[-1].startswith("table"), journal_of(state).read_text()
    with open(image, "r+b") as f:
        f.write(head)
        f.seek((sectors - 33) * 512)
        f.write(tail)
        if written_over:
            f.seek((2048 + 100) * 512)  # chunk 0's new place; same_data samples the last chunk's only
            f.write(os.urandom(4096))
    assert entry_of(image)[:2] == (90_000, SIZE)
    done = dp(state, "resume", image, "--yes")
    assert done.returncode == 0, out(done)
    assert entry_of(image)[:2] == (2048, SIZE) and sha256_at(image, 2048, SIZE) == sha


def test_a_verified_mark_is_no_proof_the_new_place_still_holds_the_data(tmp_path: pathlib.Path) -> None:
    """Killed right after "verified", then the new place written over (the hidden entry's range looks free): resume
    reads it back again and copies the changed chunk from its intact source, instead of pointing the entry at it."""
    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 90_000, SIZE)
    got = dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="verified:1")
    assert got.returncode == -signal.SIGKILL, out(got)
    assert journal_of(state).read_text().splitlines()[-1].startswith("verified")
    with open(image, "r+b") as f:  # chunk 0's new place; same_data samples the last chunk's only
        f.seek((2048 + 100) * 512)
        f.write(os.urandom(4096))
    done = dp(state, "resume", image, "--yes")
    assert done.returncode == 0, out(done)
    assert entry_of(image)[:2] == (2048, SIZE) and sha256_at(image, 2048, SIZE) == sha


# --- 3. other dead ends ---------------------------------------------------------------------------------


def test_a_chunk_that_reads_back_wrong_is_copied_again(tmp_path: pathlib.Path) -> None:
    """Both chunks copied and recorded, then chunk 0's new place damaged (what a read-back mismatch finds):
    resume copies it again from its intact source and finishes."""
    from diskplan.backend.move.movejournal import MARKS

    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 90_000, SIZE)
    n = 2 if "copy" in MARKS else 1  # the append of the chunks' records (after the "copy" mark, when there is one)
    got = dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill=f"record:{n}")
    assert got.returncode == -signal.SIGKILL, out(got)
    assert "W 1" in journal_of(state).read_text() and "verified" not in journal_of(state).read_text()
    with open(image, "r+b") as f:
        f.seek((2048 + 100) * 512)
        f.write(os.urandom(4096))
    done = dp(state, "resume", image, "--yes")
    assert done.returncode == 0, out(done)
    assert entry_of(image)[:2] == (2048, SIZE) and sha256_at(image, 2048, SIZE) == sha


def test_a_damaged_slot_does_not_block_a_chunk_still_whole_on_the_disk(tmp_path: pathlib.Path) -> None:
    """Realign 34 -> 2048 (the chunk overlaps its own source: its old bytes go to the slot first), killed after
    the slot and its record are synced but before the chunk's write: the slot damaged, the source is whole."""
    image, _ = make_image(tmp_path, start=34, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 34, SIZE)
    got = dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="read:1")
    assert got.returncode == -signal.SIGKILL, out(got)
    slot = pathlib.Path(str(journal_of(state)) + ".slot")
    assert slot.stat().st_size
    slot.write_bytes(b"\xff" * 4096)
    done = dp(state, "resume", image, "--yes")
    assert done.returncode == 0, out(done)
    assert entry_of(image)[:2] == (2048, SIZE) and sha256_at(image, 2048, SIZE) == sha


def test_an_overlapping_move_whose_copy_never_began_rolls_back(tmp_path: pathlib.Path) -> None:
    """The entry hidden, the copy not begun (the kernel refused the hidden entry, or a kill right there): the
    rollback needs no data and is not refused for the overlap."""
    image, _ = make_image(tmp_path, start=34, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 34, SIZE)
    assert dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="hidden:1").returncode < 0
    assert entry_of(image)[1] == 0  # hidden
    done = dp(state, "resume", image, "--rollback", "--yes")
    assert done.returncode == 0 and "rolled back" in done.stdout, out(done)
    assert entry_of(image)[:2] == (34, SIZE) and sha256_at(image, 34, SIZE) == sha


def test_a_journal_that_cannot_be_written_during_resume_is_not_called_a_torn_gpt(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """with_journal's catch for the torn-GPT rebuild covered the whole resume: an OSError from the journal's own
    appends (a full state disk) was reported as "the torn GPT copy could not be rebuilt"."""
    from diskplan.backend.move.engine import MoveOutcome, prepare_resume, with_journal
    from diskplan.backend.move.movejournal import Journal
    from diskplan.cli.options import host

    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    assert dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill="verified:1").returncode < 0
    monkeypatch.setenv("DISKPLAN_MOVES_DIR", str(state / "moves"))  # where the CLI's move put it (state_env)
    p = prepare_resume(image, host())
    assert not p.refusals, p.refusals

    def full(journal: Journal, base: MoveOutcome) -> MoveOutcome:  # as the journal's appends fail on a full disk
        raise OSError(28, "No space left on device")

    got = with_journal(p, p.confirm_word, host(), full)
    assert "torn GPT" not in got.message and "No space left" in got.message and got.exit_code == 3, got.message
    assert got.resume_command, got



def test_a_move_rolled_back_while_its_resume_waited_for_yes_is_refused_under_the_lock(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare said what the journal allows (not ended, no rollback begun), but only journal_checks ran again under
    the lock: a `resume --rollback` finished by another process while this resume waited for its confirmation left
    the journal 'undone' and the partition back at its old place, and the resume hid it and moved it again over
    the records of the undone move."""
    from diskplan.backend.move.engine import execute_resume, prepare_resume
    from diskplan.backend.move.movejournal import MARKS
    from diskplan.cli.options import host

    image, _ = make_image(tmp_path, start=90_000, size=SIZE, disk_mib=72)
    state = tmp_path / "state"
    sha = sha256_at(image, 90_000, SIZE)
    n = 2 if "copy" in MARKS else 1
    got = dp(state, "move", image, "--partition", "1", "--to", "2048", "--yes", kill=f"record:{n}")
    assert got.returncode == -signal.SIGKILL, out(got)
    monkeypatch.setenv("DISKPLAN_MOVES_DIR", str(state / "moves"))  # where the CLI's move put it (state_env)
    p = prepare_resume(image, host())
    assert not p.refusals, p.refusals
    undone = dp(state, "resume", image, "--rollback", "--yes")  # meanwhile, from another terminal
    assert undone.returncode == 0 and "rolled back" in undone.stdout, out(undone)
    o = execute_resume(p, p.confirm_word, host())
    assert o.message.startswith("refused") and "rolled back" in o.message, o.message
    assert journal_of(state).read_text().splitlines()[-1].startswith("undone")
    assert entry_of(image)[:2] == (90_000, SIZE) and sha256_at(image, 90_000, SIZE) == sha
