"""`diskplan restore` trusts nothing it did not check (issue 11, items 1, 6, 9): a backup goes back only on
the disk it was taken from, never into a partition of the table now on the disk, and only once every byte
of it has been checked; hostile backups and targets (FIFOs, directories, /dev/zero, zlib bombs, sectors
past 2^64) end quickly with one clear line."""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import subprocess
import sys
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.backend.raw import sectorio
from diskplan.backend.write import backup as bk
from diskplan.model.extent import Extent
from helpers.cli import KEEP_1_SWAP_3, diskplan, plan_file
from helpers.images import file_sha, fill
from helpers.tools import need_tool, run
from helpers.units import MiB

N = 64 * MiB // 512
A_TABLE = "label: gpt\nstart=2048, size=20480\nstart=22528, size=20480\n"
B_TABLE = "label: dos\nstart=63, size=40000, type=83\n"


def sfdisk(target: pathlib.Path | str, script: str) -> None:
    run(need_tool("sfdisk"), "-q", "--no-reread", str(target), input=script)


def ext4_at(img: pathlib.Path, start: int, sectors: int, tmp_path: pathlib.Path) -> None:
    """An ext4 filesystem of ``sectors`` sectors written into ``img`` at LBA ``start``."""
    fs = tmp_path / f"fs-{start}.img"
    with open(fs, "wb") as f:
        f.truncate(sectors * 512)
    run(need_tool("mkfs.ext4"), "-q", "-F", str(fs))
    with open(img, "r+b") as out:
        out.seek(start * 512)
        out.write(fs.read_bytes())
    fs.unlink()


def superblock(img: pathlib.Path, start: int) -> bytes:
    with open(img, "rb") as f:
        f.seek(start * 512 + 1024)
        return f.read(1024)


@pytest.fixture
def a_and_b(sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path) -> tuple[pathlib.Path, str]:
    """B.img (msdos, ext4 at 63) and the backup of A.img (GPT, same size) a plan was applied to."""
    a = sparse_image(64 * MiB, "A.img")
    sfdisk(a, A_TABLE)
    b = sparse_image(64 * MiB, "B.img")
    sfdisk(b, B_TABLE)
    ext4_at(b, 63, 40000, tmp_path)
    backup = tmp_path / "A.bk"
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(a), "--yes", "--backup", str(backup))
    assert proc.returncode == 0, proc.stderr
    return b, str(backup)


def test_a_backup_is_not_restored_onto_another_disk(a_and_b: tuple[pathlib.Path, str]) -> None:
    b, backup = a_and_b
    before, sb = file_sha(b), superblock(b, 63)
    assert sb[56:58] == b"\x53\xef"  # the ext4 magic
    proc = diskplan("restore", backup, str(b), "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "refused" in out and "--force-foreign" in out
    assert "dos:0x" in out and "gpt:" in out  # names what differs: the table B holds and the one expected
    assert file_sha(b) == before


def test_forced_onto_another_disk_it_still_leaves_its_partitions_alone(
    a_and_b: tuple[pathlib.Path, str],
) -> None:
    b, backup = a_and_b
    sb = superblock(b, 63)
    data = b.read_bytes()[63 * 512 : 40063 * 512]
    proc = diskplan("restore", backup, str(b), "--yes", "--force-foreign")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "left alone" in proc.stdout  # the saved sectors inside B's partition are named as not written
    assert superblock(b, 63) == sb
    assert b.read_bytes()[63 * 512 : 40063 * 512] == data  # not one byte of the partition changed
    assert "label: gpt" in run(need_tool("sfdisk"), "--dump", str(b))  # what was forced: A's table


def test_restore_on_its_own_disk_after_a_new_label_is_accepted(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    """msdos -> gpt: the disk's id changes with the write; the seal written after it says what to expect."""
    img = sparse_image(64 * MiB)
    sfdisk(img, B_TABLE)
    before = file_sha(img)
    backup = tmp_path / "b.dpbackup"
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3[1:]), str(img), "--yes", "--backup", str(backup))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[written table=gpt:" in backup.read_text()
    done = diskplan("restore", str(backup), str(img), "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert file_sha(img) == before


def test_a_later_change_to_the_table_is_not_undone_silently(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, A_TABLE)
    backup = tmp_path / "b.dpbackup"
    assert diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes", "--backup",
                    str(backup)).returncode == 0
    run(need_tool("sfdisk"), "-q", "--no-reread", "-N", "3", str(img), input="start=43008, size=2048\n")  # later
    later = file_sha(img)
    proc = diskplan("restore", str(backup), str(img), "--yes")
    assert proc.returncode == 1 and "changed since" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert file_sha(img) == later


def unsealed(text: str) -> str:
    """The backup as an older diskplan (format 1), or a write interrupted before the seal, leaves it."""
    lines = [line for line in text.splitlines() if not line.startswith("[written ")]
    return "\n".join(lines).replace("format: 2", "format: 1") + "\n"


def test_an_unsealed_backup_needs_the_table_it_was_taken_over(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, A_TABLE)
    taken = bk.capture(str(img), 512, N, bk.backup_extents(str(img), 512, N))
    path = tmp_path / "old.dpbackup"
    path.write_text(unsealed(bk.render(taken)))
    sfdisk(img, "label: gpt\nstart=4096, size=2048\n")  # a new GPT: another disk GUID
    other = file_sha(img)
    proc = diskplan("restore", str(path), str(img), "--yes")
    assert proc.returncode == 1 and "not the one this backup was taken over" in proc.stderr, proc.stderr
    assert file_sha(img) == other
    # the same table (same disk GUID), partly overwritten: accepted
    same = sparse_image(64 * MiB, "same.img")
    sfdisk(same, A_TABLE)
    head = sectorio.read_sectors(str(same), 1, 1, 512)
    fill(same, 2, 1, 512)
    assert sectorio.read_sectors(str(same), 1, 1, 512) == head
    taken = bk.capture(str(same), 512, N, bk.backup_extents(str(same), 512, N))
    path.unlink()
    path.write_text(unsealed(bk.render(taken)))
    fill(same, 34, 100, 512)
    done = diskplan("restore", str(path), str(same), "--yes")
    assert done.returncode == 0, done.stdout + done.stderr


def test_sectors_inside_a_current_partition_are_never_written(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    """A hand-made backup naming sectors inside partition 1 (not the table's): those are left alone."""
    img = sparse_image(64 * MiB)
    sfdisk(img, A_TABLE)
    inside = fill(img, 4096, 8, 512)
    table = sectorio.read_sectors(str(img), 0, 34, 512)
    forged = bk.TableBackup(str(img), N, 512, "gpt", "", (bk.Chunk(0, table), bk.Chunk(4096, bytes(8 * 512))))
    fill(img, 40, 8, 512)  # something to do outside any partition
    got = bk.put_back(forged, str(img))
    assert got.kept == (Extent(4096, 4103),)
    assert hashlib.sha256(sectorio.read_sectors(str(img), 4096, 8, 512)).hexdigest() == inside


def chunk_text(start: int, data: bytes, count: int | None = None) -> list[str]:
    n = len(data) // 512 if count is None else count
    return [f"[sectors {start}+{n} sha256={hashlib.sha256(data).hexdigest()}]",
            base64.b64encode(zlib.compress(data)).decode()]


def handmade(chunks: list[list[str]], sectors: int = N) -> str:
    head = ["# diskplan table backup, format 2.", "[backup]", "format: 2", "target: x", f"sectors: {sectors}",
            "sector-size: 512", "label: none", "[sfdisk]"]
    return "\n".join([*head, *(line for c in chunks for line in c), "[end]"]) + "\n"


def test_overlapping_chunks_are_refused_before_any_write(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    before = file_sha(img)
    bad = tmp_path / "overlap.dpbackup"
    bad.write_text(handmade([chunk_text(10, b"\1" * 4096), chunk_text(12, bytes(4096))]))
    with pytest.raises(bk.BackupError, match="overlap"):
        bk.load(str(bad))
    proc = diskplan("restore", str(bad), str(img), "--yes", "--force-foreign")
    assert proc.returncode == 2 and "overlap" in proc.stderr, proc.stdout + proc.stderr
    assert file_sha(img) == before


def test_a_chunk_past_the_end_or_at_2_to_the_70_is_a_clear_error(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    for start in (N - 1, 1 << 70):
        bad = tmp_path / f"far-{start}.dpbackup"
        bad.write_text(handmade([chunk_text(start, bytes(1024))]))
        proc = diskplan("restore", str(bad), str(img), "--yes", "--force-foreign")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "outside the disk" in proc.stderr and "internal error" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_a_zlib_bomb_is_refused_without_inflating_it(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    bomb = zlib.compress(bytes(1 << 30), 9)  # ~1 MB that inflates to 1 GiB
    bad = tmp_path / "bomb.dpbackup"
    head = handmade([])[: -len("[end]\n")]
    digest = hashlib.sha256(bytes(1024)).hexdigest()
    bad.write_text(head + f"[sectors 0+2 sha256={digest}]\n" + base64.b64encode(bomb).decode() + "\n[end]\n")
    # The peak of a process started by a small one: Linux keeps a process's peak across exec, so a process
    # forked from this test runner (hundreds of MB after a long run) would report the runner's size.
    code = ("import resource, subprocess, sys; rc = subprocess.run([sys.executable, '-m', 'diskplan', *sys.argv[1:]])"
            ".returncode; print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "restore", str(bad), str(img)], capture_output=True,
                          text=True, timeout=120)
    *message, peak = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "damaged" in " ".join(message), proc.stderr
    assert int(peak) < 300 * 1024, f"restore peaked at {int(peak) // 1024} MiB"


@pytest.mark.parametrize("which", ["backup", "target"])
def test_a_fifo_is_refused_at_once(
    which: str, sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, A_TABLE)
    backup = bk.save(bk.capture(str(img), 512, N, bk.backup_extents(str(img), 512, N)), str(tmp_path / "b.dp"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = [str(fifo), str(img)] if which == "backup" else [backup, str(fifo)]
    proc = subprocess.run([sys.executable, "-m", "diskplan", "restore", *args, "--yes"], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr


def test_a_directory_or_dev_zero_is_a_clear_error(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, A_TABLE)
    backup = bk.save(bk.capture(str(img), 512, N, bk.backup_extents(str(img), 512, N)), str(tmp_path / "b.dp"))
    somedir = tmp_path / "somedir"
    somedir.mkdir()
    cases = [([backup, str(somedir)], "is a directory"), ([str(somedir), str(img)], "is a directory"),
             (["/dev/zero", str(img)], "not a regular file"), ([backup, "/dev/zero"], "not a regular file")]
    for args, want in cases:
        proc = subprocess.run([sys.executable, "-m", "diskplan", "restore", *args, "--yes"], capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert proc.returncode == 2 and want in proc.stderr, (args, proc.stdout, proc.stderr)
        assert "9223372036854775807" not in proc.stdout + proc.stderr



SMALL = bk.render(bk.TableBackup("small.img", 4096, 512, "none", "", (
    bk.Chunk(0, bytes(510) + b"\x55\xaa" + os.urandom(1024)), bk.Chunk(4000, os.urandom(512 * 3)))))
LINES = st.sampled_from([
    "[end]", "[sectors 0+1 sha256=00]", "[sectors 4095+2 sha256=00]", "format: 1", "[backup]", "sectors: 0",
    "sectors: 99999999999999999999999", "sector-size: 4097", "[written table=none sectors=0+1 sha256=0]",
    "[sectors 1180591620717411303424+1 sha256=00]", "eJwDAAAAAAE=", "\udcff", "\x00", "target: \\N{x}",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SMALL)), st.integers(0, 40), st.one_of(st.text(max_size=30), LINES)),
                min_size=1, max_size=4))
def test_a_mangled_backup_is_refused_in_one_line_or_checked_whole(edits: list[tuple[int, int, str]]) -> None:
    text = SMALL
    for at, cut, put in edits:
        text = text[:at] + put + text[at + cut :]
    try:
        b = bk.parse(text)
    except bk.BackupError as exc:
        assert "\n" not in str(exc)
        return
    bk.check_chunks(b.chunks, b.sectors, b.sector_size)  # what parse returns is whole: it never raises here
    assert all(len(c.data) == c.extent(b.sector_size).size * b.sector_size for c in b.chunks)


def test_a_seal_spelled_as_backups_on_disk_spell_it_still_matches_its_disk(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    """Backups already written name an msdos table ``dos:0xSIGNATURE`` (sfdisk's label-id) in their seal, and
    saved plans hash ``msdos:signature`` into made_against: both spellings are kept (backend.raw.tableid)."""
    from diskplan.backend.raw.tableid import disk_id
    from diskplan.model.geometry import Geometry

    img = sparse_image(64 * MiB)
    sfdisk(img, "label: dos\nlabel-id: 0x1234abcd\nstart=2048, size=20480, type=83\n")
    taken = bk.capture(str(img), 512, N, bk.backup_extents(str(img), 512, N))
    assert taken.table_id == "dos:0x1234abcd"
    assert disk_id(str(img), "msdos", Geometry(N, 512)) == "msdos:1234abcd"
    # the write the backup was taken for (same signature), sealed as diskplan wrote seals before this test
    sfdisk(img, "label: dos\nlabel-id: 0x1234abcd\nstart=4096, size=20480, type=83\n")
    sector0 = hashlib.sha256(sectorio.read_sectors(str(img), 0, 1, 512)).hexdigest()
    path = tmp_path / "sealed.dpbackup"
    path.write_text(bk.render(taken) + f"[written table=dos:0x1234abcd sectors=0+1 sha256={sector0}]\n")
    sfdisk(img, "label: dos\nlabel-id: 0x1234abcd\nstart=6144, size=20480, type=83\n")  # a later change
    proc = diskplan("restore", str(path), str(img), "--yes")
    # the disk's id read now matches the seal's: a later change, not another disk
    assert proc.returncode == 1 and "changed since" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    sfdisk(img, "label: dos\nlabel-id: 0x1234abcd\nstart=4096, size=20480, type=83\n")  # what the write left
    done = diskplan("restore", str(path), str(img), "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "start=        2048" in run(need_tool("sfdisk"), "--dump", str(img))  # the backed-up table again
