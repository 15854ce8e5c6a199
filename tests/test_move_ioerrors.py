"""I/O errors during a move, on a real failing block device: a loop device over a FUSE file that answers EIO
at chosen byte ranges (tests/helpers/faultydisk.py). A transient error is retried and the move completes; a
persistent one names the exact failing sector (not the start of its 8 MiB chunk), exits 3 and leaves the move
resumable; a failed flush after the entry was hidden does not claim it "could not be hidden"."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from helpers.faultydisk import FaultyDisk
from helpers.movedisk import PY, Disk, assert_intact, diskplan, entry, make_disk, state_env
from helpers.tools import need_tool
from helpers.tools import run as tool_run

START, SIZE, TO = 2048, 40960, 65536  # a 20 MiB ext4 moved right past itself: three 8 MiB chunks


@pytest.fixture
def faulty(tmp_path: pathlib.Path) -> Iterator[tuple[Disk, FaultyDisk]]:
    pytest.importorskip("fuse", reason="fusepy (a test dependency) and libfuse2 are needed for a failing disk")
    if not pathlib.Path("/dev/fuse").exists():
        pytest.skip("no /dev/fuse here")
    with contextlib.ExitStack() as stack:
        held: list[FaultyDisk] = []

        def attach(img: pathlib.Path, *_: object, **__: object) -> str:
            held.append(stack.enter_context(FaultyDisk(img, tmp_path)))
            return held[-1].dev

        d = make_disk(attach, tmp_path, start=START, size=SIZE, disk_mib=64)
        yield d, held[0]


def _move(d: Disk) -> tuple[int, str]:
    got = diskplan(d, "move", d.dev, "--partition", "1", "--to", f"{TO}s", "--yes")
    return got.returncode, got.stdout + got.stderr


def test_a_transient_write_error_is_retried_and_the_move_completes(faulty) -> None:
    d, disk = faulty
    partuuid = entry(d)[2]
    # only the copy writes there (a read fault would be met first by the checks' reads); at the first sector of a
    # chunk (moving right, 8 MiB chunks are laid from the partition's end: TO+8192 starts the middle one), where a
    # request begins: within a request this FUSE+loop stack may take a short write for a whole one, and only
    # the read-back would notice
    bad = (TO + 8192) * 512
    disk.fail({"op": "write", "start": bad, "end": bad + 512, "times": 2})
    code, said = _move(d)
    assert code == 0 and "moved and verified" in said, said
    disk.fail()
    assert_intact(d, TO, partuuid)


@pytest.mark.parametrize("op", ["read", "write"])
def test_a_persistent_error_names_its_sector_and_the_move_resumes(faulty, op: str) -> None:
    d, disk = faulty
    partuuid = entry(d)[2]
    # in the middle chunk (TO+8192..TO+24575), 1234 sectors after the start of a request
    sector = (START if op == "read" else TO) + 8192 + 1234
    disk.fail({"op": op, "start": sector * 512, "end": sector * 512 + 512, "times": -1})
    code, said = _move(d)
    assert code == 3, said
    assert f"sector {sector} " in said and "resumable" in said and "tried 4 times" in said, said
    disk.fail()  # the disk answers again (a cable reseated): resume finishes from the journal
    again = diskplan(d, "resume", d.dev, "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    assert_intact(d, TO, partuuid)


def test_a_failed_flush_after_hiding_does_not_say_it_could_not_hide(faulty) -> None:
    d, disk = faulty
    partuuid = entry(d)[2]
    disk.fail({"op": "fsync", "start": 0, "end": 0, "times": -1})
    code, said = _move(d)
    assert code == 3, said
    assert "could not be hidden" not in said and "is hidden" in said and "diskplan resume" in said, said
    disk.fail()
    again = diskplan(d, "resume", d.dev, "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    assert_intact(d, TO, partuuid)


def test_the_planner_offers_retry_after_an_io_error_and_r_finishes_the_move(tmp_path: pathlib.Path) -> None:
    """The move dialog on a failing disk: the I/O error is said with its sector, R tries again (here after the
    disk answers again) and the move finishes from its journal; the bytes arrive intact."""
    pytest.importorskip("fuse", reason="fusepy (a test dependency) and libfuse2 are needed for a failing disk")
    from textual.widgets import Input, Static

    from diskplan.backend.read.reader import read
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.move_screen import MoveScreen
    from diskplan.ui.target import Target
    from helpers.images import HOST, digest, fill, sfdisk_parts
    from helpers.pilot import run, started, wait_for
    from helpers.tools import run as run_tool

    sectors = 16384
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(64 * 1024 * 1024)
    run_tool("sfdisk", "-q", str(image), input=f"label: gpt\nfirst-lba: 34\nstart=34, size={sectors}, type=L\n")
    before = fill(image, 34, sectors, 512)

    @run
    async def drive() -> None:
        with FaultyDisk(image, tmp_path) as disk:
            # in the source: a read error propagates from this FUSE+loop stack wherever it is (a write error in
            # the middle of a request may be taken for success by it, and only the read-back would notice)
            bad = 34 + 1000
            disk.fail({"op": "read", "start": bad * 512, "end": bad * 512 + 512, "times": -1})
            app = PlannerApp(start=Target(read(disk.dev), disk.dev, path=disk.dev), host=HOST)
            async with app.run_test(size=(100, 30)) as pilot:
                smap = await started(app, pilot)
                smap.move_to(34)
                await pilot.press("A")
                await pilot.press("w")
                await wait_for(pilot, lambda: isinstance(app.screen, MoveScreen), what="the move dialog")
                screen = app.screen
                assert isinstance(screen, MoveScreen)
                await wait_for(pilot, lambda: screen.first is not None, what="the move checked")
                first = screen.first
                assert first is not None
                assert not first.refusals, first.refusals
                screen.query_one("#move-answer", Input).value = first.confirm_word
                await pilot.press("enter")
                await wait_for(pilot, lambda: screen.outcome is not None and not screen.running, seconds=120,
                               what="the I/O error")
                o = screen.outcome
                assert o is not None and o.io_error and f"sector {bad} " in o.message, o
                assert "R: retry" in str(screen.query_one("#move-keys", Static).render())
                disk.fail()  # the disk answers again
                await pilot.press("r")
                await wait_for(pilot, lambda: screen.outcome is not None and not screen.running, seconds=120,
                               what="the move finished")
                assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
                await pilot.press("enter")
            assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(pathlib.Path(disk.dev))] == [(1, 2048, sectors)]
        assert digest(image, 2048, sectors, 512) == before

    drive()


def test_a_failed_flush_is_never_tried_again(tmp_path: pathlib.Path) -> None:
    """A second fdatasync after a failed one succeeds with nothing left to flush (the failed write-back's data
    may be gone): the first failure must stop the copy (its group unrecorded, so resume writes it again)."""
    pytest.importorskip("fuse", reason="fusepy (a test dependency) and libfuse2 are needed for a failing disk")
    if not pathlib.Path("/dev/fuse").exists():
        pytest.skip("no /dev/fuse here")
    from diskplan.backend.move.datamove import Device, MoveIOError

    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(1 << 20)
    with FaultyDisk(img, tmp_path) as disk:
        dev = Device(disk.dev, 512, 4096)
        try:
            dev.write(8, memoryview(dev.buffers[0])[:4096])
            disk.fail({"op": "fsync", "start": 0, "end": 0, "times": 1})  # fails once, then answers
            with pytest.raises(MoveIOError, match="syncing"):
                dev.sync()
        finally:
            dev.close()


def test_a_full_journal_disk_stops_the_move_resumably_not_as_an_internal_error(loop_device, tmp_path) -> None:
    """The journal's slot (a small shift saves each chunk's old bytes) cannot be written: ENOSPC on the state
    disk stops the move with that error (3), not "cannot close exported pointers exist"; resume finishes it."""
    d = make_disk(loop_device, tmp_path, start=START, size=SIZE, disk_mib=64)
    partuuid = entry(d)[2]
    moves = d.state / "moves"
    moves.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(moves)], check=True)
    try:
        got = diskplan(d, "move", d.dev, "--partition", "1", "--to", f"{START + 512}s", "--yes")
        said = got.stdout + got.stderr
        assert got.returncode == 3 and "No space left" in said and "internal error" not in said, said
        subprocess.run(["mount", "-o", "remount,size=64m", str(moves)], check=True)
        again = diskplan(d, "resume", d.dev, "--yes")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        subprocess.run(["umount", str(moves)], capture_output=True)
    assert_intact(d, START + 512, partuuid)


def test_closing_the_device_while_a_view_of_its_buffer_lives_does_not_mask_the_error(tmp_path) -> None:
    """An error in the copy keeps the chunk's view alive in its traceback: closing the device then must not raise
    BufferError ("cannot close exported pointers exist") over the error that ended the move."""
    from diskplan.backend.move.datamove import Device

    img = tmp_path / "disk.img"
    img.write_bytes(bytes(1 << 16))
    dev = Device(str(img), 512, 4096)
    view = dev.read(0, 8)
    dev.close()  # raised BufferError
    assert len(view) == 4096


def test_a_failed_flush_names_no_sector_minus_one(tmp_path) -> None:
    """The copy's first fdatasync fails (strace injects EIO): the move stops resumably, and says so without an
    "I/O error at sector -1" (a flush has no sector); resume finishes it."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    tool_run("sfdisk", "-q", str(img), input="label: gpt\nstart=2048, size=20480, type=L\n")
    env = state_env(tmp_path / "state")
    got = subprocess.run([need_tool("strace"), "-f", "-o", "/dev/null", "-e", "inject=fdatasync:error=EIO:when=1",
                          PY, "-m", "diskplan", "move", str(img), "-N", "1", "--to", "65536s", "--yes"],
                         capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert got.returncode == 3 and "syncing" in got.stderr and "resumable" in got.stderr, got.stderr
    assert "sector -1" not in got.stderr, got.stderr
    again = subprocess.run([PY, "-m", "diskplan", "resume", str(img), "--yes"], capture_output=True, text=True,
                           env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
