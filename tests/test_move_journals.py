"""Where move journals live and which disk they belong to (backend.move.movejournal, backend.move.diskmark): found by
every writing command whatever the caller's HOME or XDG_STATE_HOME (sudo vs sudo -i), matched by the disk's
identity (GPT disk GUID / MBR signature, size, serial) and never by a reused path of the same size; read only
from regular files and only as far as their own header allows."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

import pytest

from diskplan.backend.move import movejournal as mj
from diskplan.backend.move.diskmark import disk_mark
from diskplan.backend.write.steps import half_moved
from helpers.movedisk import unfinished_journal
from helpers.tools import REPO, run
from helpers.units import MiB

SIZE = 64 * MiB


def _gpt(path: pathlib.Path, guid: str = "") -> pathlib.Path:
    with open(path, "wb") as f:
        f.truncate(SIZE)
    head = f"label: gpt\nlabel-id: {guid}\n" if guid else "label: gpt\n"
    run("sfdisk", "-q", str(path), input=head + "start=2048, size=20480, type=L\n")
    return path


def _journal(target: pathlib.Path, name: str = "disk-20260101T000000Z") -> str:
    """An unfinished move's journal for ``target`` as a move writes it (its disk's mark in the header)."""
    return unfinished_journal(str(target), SIZE, name)


def _diskplan(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _env(home: pathlib.Path, **extra: str) -> dict[str, str]:
    """A caller's environment: its own HOME and XDG_STATE_HOME (as sudo and sudo -i differ)."""
    home.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state"),
            "PYTHONPATH": str(REPO / "src"), **extra}


def test_root_journals_live_in_one_place_whatever_home_and_xdg_say(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("the machine-wide directory is root's")
    monkeypatch.delenv(mj.MOVES_ENV)
    seen = set()
    for home, state in (("/root", ""), ("/home/someone", "/home/someone/.state"), ("/tmp/x", "/tmp/y")):
        monkeypatch.setenv("HOME", home)
        monkeypatch.setenv("XDG_STATE_HOME", state)
        seen.add(mj.moves_dir())
        seen.add(os.path.dirname(mj.journal_path(f"{state or home}/diskplan/backups/sdb-x.dpbackup")))
    assert seen == {"/var/lib/diskplan/moves"}


def test_a_write_under_another_home_still_sees_the_unfinished_move(tmp_path: pathlib.Path) -> None:
    """The move ran under `sudo` (one HOME), restore and measure run under `sudo -i` (another): both refuse."""
    from diskplan.backend.write import backup as bk

    img = _gpt(tmp_path / "disk.img")
    n = SIZE // 512
    backup = bk.save(bk.capture(str(img), 512, n, bk.backup_extents(str(img), 512, n)), str(tmp_path / "t.dpbackup"))
    dump = tmp_path / "table.sfdisk"
    dump.write_text(run("sfdisk", "-d", str(img)).replace("size=20480", "size=30720"))
    mover = _env(tmp_path / "user-home", DISKPLAN_MOVE_KILL="read:1")  # killed after its first record
    killed = _diskplan("move", str(img), "--partition", "1", "--to", "40960s", "--yes", env=mover)
    assert killed.returncode == -9, killed.stderr
    other = _env(tmp_path / "root-home")
    for args in (("restore", backup, str(img), "--yes"), ("apply", str(dump), str(img), "--yes"),
                 ("measure", str(img), "--yes", "--rounds", "1"),
                 ("repair", str(img), "--yes"), ("resize", str(img), "--partition", "1", "--size", "12MiB",
                                                  "--yes")):
        got = _diskplan(*args, env=other)
        said = got.stdout + got.stderr
        assert "a data move on" in said and "is unfinished" in said, (args, said)
        assert got.returncode == 1, (args, got.returncode, said)


def test_the_journal_follows_the_disk_not_its_path(tmp_path: pathlib.Path) -> None:
    a = _gpt(tmp_path / "a.img")
    path = _journal(a)
    assert half_moved(str(a), SIZE)
    moved = tmp_path / "renamed.img"  # the disk under another name (sdb after a reboot is sdc)
    a.rename(moved)
    assert mj.unfinished(str(moved), SIZE) == [path]
    other = _gpt(tmp_path / "a.img")  # another disk of the same size where the first one was
    assert mj.unfinished(str(other), SIZE) == []
    assert half_moved(str(other), SIZE) == []


def test_a_clone_with_another_serial_is_another_disk(tmp_path: pathlib.Path) -> None:
    a = _gpt(tmp_path / "a.img")
    header = mj.Header(str(a), SIZE, 512, "gpt", 1, "", 2048, 40960, 20480, 16384, "/x/a.dpbackup",
                       table_id=disk_mark(str(a), SIZE).table_id, serial="WD-1234")
    mark = disk_mark(str(a), SIZE)
    assert mj.belongs(header, "/dev/elsewhere", mark.__class__(mark.table_id, SIZE, "WD-1234"))
    assert not mj.belongs(header, str(a), mark.__class__(mark.table_id, SIZE, "WD-9999"))
    assert not mj.belongs(header, str(a), mark.__class__(mark.table_id, SIZE + 512, "WD-1234"))


def test_an_msdos_disk_without_a_signature_is_known_by_its_path(tmp_path: pathlib.Path) -> None:
    """Nothing else tells two such disks apart: the path counts, and only then."""
    img = tmp_path / "dos.img"
    with open(img, "wb") as f:
        f.truncate(SIZE)
    run("sfdisk", "-q", str(img), input="label: dos\nlabel-id: 0x0\nstart=2048, size=20480, type=83\n")
    mark = disk_mark(str(img), SIZE)
    assert mark.weak and mark.table_id == "dos:0x00000000"
    path = _journal(img)
    assert mj.unfinished(str(img), SIZE) == [path]
    twin = tmp_path / "twin.img"
    shutil.copy(img, twin)
    assert mj.unfinished(str(twin), SIZE) == []


def test_a_journal_is_read_only_from_a_regular_file_and_only_so_far(tmp_path: pathlib.Path) -> None:
    img = _gpt(tmp_path / "disk.img")
    env = _env(tmp_path / "home")
    t = time.monotonic()
    zero = _diskplan("resume", str(img), "--journal", "/dev/zero", env=env, timeout=30)
    assert zero.returncode == 2 and "not a regular file" in zero.stderr and time.monotonic() - t < 20, zero.stderr
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: None)
    writer.start()
    got = _diskplan("resume", str(img), "--journal", str(fifo), env=env, timeout=30)  # no writer: must not wait
    writer.join()
    assert got.returncode == 2 and "not a regular file" in got.stderr, got.stderr
    # a regular file longer than its own header allows (a journal with gigabytes appended) is not read whole
    path = pathlib.Path(_journal(img))
    with open(path, "ab") as f:
        f.truncate(path.stat().st_size + (64 << 20))
    with pytest.raises(mj.JournalDamaged, match="longer than its move"):
        mj.read(str(path))


def test_a_journal_damaged_past_its_header_still_holds_the_disk(tmp_path: pathlib.Path) -> None:
    """A bad line in the middle: resume cannot go on (exit 2, it says which line), and it must not say "nothing to
    resume" while every other write (measure here) offers the hidden partition's bytes as free space."""
    img = _gpt(tmp_path / "disk.img")
    path = _journal(img)
    with open(path, "ab") as f:  # a record whose checksum fails, then an intact one: damaged, not torn
        f.write(b"copy *00000000\n" + mj._line("R 0 00000000"))
    with pytest.raises(mj.JournalDamaged):
        mj.read(path)
    assert mj.unfinished(str(img), SIZE) == [path]
    assert half_moved(str(img), SIZE)
    env = _env(tmp_path / "home", DISKPLAN_MOVES_DIR=os.path.dirname(path))
    got = _diskplan("resume", str(img), env=env)
    assert got.returncode == 2 and "damaged" in got.stderr and "nothing to do" not in got.stdout, got
    got = _diskplan("measure", str(img), "--yes", "--rounds", "1", "--count", "1", env=env)
    assert got.returncode == 1 and "is unfinished" in got.stdout + got.stderr, got
    # a journal whose header itself is damaged names no disk: still skipped
    with open(path, "r+b") as f:
        f.seek(len(f.readline()) + 10)
        f.write(b"#")
    assert mj.unfinished(str(img), SIZE) == []


def test_measure_names_an_unfinished_move_once(tmp_path: pathlib.Path) -> None:
    img = _gpt(tmp_path / "disk.img")
    path = _journal(img)
    env = _env(tmp_path / "home", DISKPLAN_MOVES_DIR=os.path.dirname(path))
    got = _diskplan("measure", str(img), "--rounds", "1", "--count", "1", env=env)
    said = got.stdout + got.stderr
    assert got.returncode == 1 and said.count("is unfinished") == 1, said


@pytest.mark.parametrize(("field", "bad"), [("sector_size", 0), ("chunk", 0), ("length", -5), ("start", "x"),
                                            ("size", None), ("to", True)])
def test_a_header_that_no_move_wrote_is_refused_not_an_internal_error(tmp_path: pathlib.Path, field: str,
                                                                      bad: object) -> None:
    """Its CRC is whole (``--journal`` names any file): a zero sector size or chunk, a negative length, a string
    where a number goes are "cannot read" (exit 2), not a ZeroDivisionError or TypeError later."""
    import json

    img = _gpt(tmp_path / "disk.img")
    path = pathlib.Path(_journal(img))
    first, header = path.read_bytes().splitlines(keepends=True)[:2]
    fields = json.loads(header.decode().rsplit(" *", 1)[0][len("header "):])
    fields[field] = bad
    path.write_bytes(first + mj._line("header " + json.dumps(fields, sort_keys=True)))
    with pytest.raises(mj.JournalDamaged, match=f"header's {field}|not those of a move"):
        mj.read(str(path))
    if field == "sector_size":
        got = _diskplan("resume", str(img), "--journal", str(path), env=_env(tmp_path / "home"))
        assert got.returncode == 2 and "internal error" not in got.stderr and "cannot read" in got.stderr, got


def test_a_journal_that_cannot_be_opened_is_one_line(tmp_path: pathlib.Path) -> None:
    img = _gpt(tmp_path / "disk.img")
    path = _journal(img)
    if subprocess.run(["chattr", "+i", path], capture_output=True).returncode != 0:
        pytest.skip("no immutable files here")
    try:
        got = _diskplan("resume", str(img), env=_env(tmp_path / "home", DISKPLAN_MOVES_DIR=os.path.dirname(path)))
    finally:
        subprocess.run(["chattr", "-i", path], capture_output=True)
    assert got.returncode == 2 and f"cannot open the move journal {path}: Operation not permitted" in got.stderr, got
    assert "[Errno" not in got.stderr, got.stderr


def test_the_slot_file_is_made_durable_by_name_before_a_record_relies_on_it(tmp_path, monkeypatch) -> None:
    """The old bytes a chunk saves go to ``<journal>.slot``; an fsync of a new file need not make its name durable,
    so its directory is synced when it is created (the crash-state suite found realign states, right after a chunk's
    saved bytes and read record were durable, with the slot gone: a dead end). Not again for later saves."""
    monkeypatch.setenv(mj.MOVES_ENV, str(tmp_path / "moves"))
    h = mj.Header("/x/disk.img", SIZE, 512, "gpt", 1, "", 2048, 2049, 20480, 16384, "/x/d.dpbackup")
    j = mj.Journal.create(mj.journal_path("/x/d.dpbackup"), h)
    synced: list[str] = []
    monkeypatch.setattr(mj, "_sync_dir", lambda path: synced.append(path))
    try:
        j.save(0, b"old bytes" * 57)
        assert synced == [j.slot_path] and os.path.exists(j.slot_path)
        j.save(1, b"more" * 128)
        assert synced == [j.slot_path]
    finally:
        j.close()
