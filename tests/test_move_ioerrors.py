"""I/O errors during a move, on a real failing block device: a loop device over a FUSE file that answers EIO
at chosen byte ranges (tests/helpers/faultydisk.py). A transient error is retried and the move completes; a
persistent one names the exact failing sector (not the start of its 8 MiB chunk), exits 3 and leaves the move
resumable; a failed flush after the entry was hidden does not claim it "could not be hidden"."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

import pytest

from helpers.faultydisk import FaultyDisk
from helpers.movedisk import Disk, assert_intact, diskplan, entry, make_disk

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
