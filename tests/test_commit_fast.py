"""The fast write path keeps every safety step: 128 partitions through the real CLI, read back by the
referees; work that stays linear in the partition count (pyparted objects counted, not timed: speed is
measured by `make bench`); the write and the read-back sharing one child, which pyparted's handler
bug used to crash; the read-back's own raw checks; filesystem probing off only while reading back."""

from __future__ import annotations

import gc
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from diskplan.backend.parted import libparted, pedread
from diskplan.backend.parted.isolate import run_isolated
from diskplan.backend.write import commit
from diskplan.backend.write.steps import DiskState, Verdict
from diskplan.model.extent import Partition, Role
from diskplan.model.table import Table
from helpers.images import HOST, expect_sfdisk, file_sha, sfdisk_parts
from helpers.tools import need_tool, run
from helpers.units import MiB

LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"


def gpt_plan(count: int, size: int = 2048) -> Table:
    parts = tuple(
        Partition(i + 1, 2048 + i * size, 2048 + (i + 1) * size - 1, type=LINUX, name=f"p{i + 1}", role=Role.PRIMARY)
        for i in range(count)
    )
    return Table("gpt", 0, 0, parts)  # the plan's usable area is not read: the disk's is


def test_128_partitions_through_the_cli_are_written_backed_up_and_verified(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * 2**30)  # the benchmark's disk: 64 GiB, sparse
    size = 256 * 2048
    parts = [{"number": i + 1, "start": 2048 + i * size, "size": size, "type": "Linux filesystem"} for i in range(128)]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"label": "gpt", "sector_size": 512, "partitions": parts}))
    backup = tmp_path / "b.dpbackup"
    proc = subprocess.run([sys.executable, "-m", "diskplan", "apply", str(plan), str(img), "--yes", "--backup",
                           str(backup)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "written and verified" in proc.stdout and backup.is_file()
    assert "Traceback" not in proc.stderr and "udevadm" not in proc.stderr
    for step in range(1, 6):
        assert f"[{step}/5]" in proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] == ["128"]]
    assert ["128", str(2048 + 127 * size), str(2048 + 128 * size - 1), str(size), "256", "MiB", "primary", "Linux",
            "filesystem", "new"] in rows
    want = [(i + 1, 2048 + i * size, 2048 + (i + 1) * size - 1, LINUX, "") for i in range(128)]
    assert sfdisk_parts(img) == expect_sfdisk("gpt", want)
    assert "No problems found" in run(need_tool("sgdisk"), "-v", str(img))


def _pyparted_partitions_built(build: Callable[[], object]) -> int:
    """How many pyparted Partition wrappers ``build`` makes (each one costs two setlocale calls)."""
    import parted

    count = 0
    original = parted.Partition.__init__

    def counting(self: object, *args: object, **kwargs: object) -> None:
        nonlocal count
        count += 1
        original(self, *args, **kwargs)

    parted.Partition.__init__ = counting
    try:
        build()
    finally:
        parted.Partition.__init__ = original
    return count


def _build_counts(path: str) -> tuple[int, int]:
    import parted

    device = parted.getDevice(path)
    small = _pyparted_partitions_built(lambda: libparted.build_disk(device, "gpt", fresh=True,
                                                                    create=gpt_plan(16).partitions))
    large = _pyparted_partitions_built(lambda: libparted.build_disk(device, "gpt", fresh=True,
                                                                    create=gpt_plan(128).partitions))
    return small, large


def test_building_the_table_stays_linear(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(2 * 2**30)
    small, large = run_isolated(_build_counts, str(img), timeout=60)
    # It was quadratic: every creation listed every partition (8,900 wrappers for 128 partitions).
    assert large <= 8 * max(small, 1) + 16, (small, large)
    assert large < 2 * 128


def _swap_handlers(rounds: int) -> tuple[int, int]:
    before = sys.getrefcount(pedread._read_handler)
    for _ in range(rounds):
        with pedread.answering(pedread._read_handler):
            pass
        with pedread.answering():
            pass
    gc.collect()
    return before, sys.getrefcount(pedread._read_handler)


def test_swapping_libparted_handlers_keeps_them_alive() -> None:
    """pyparted drops a reference from the handler it replaces without taking one for the new one: each
    swap must hand it one, or the handler is freed while in use (a SIGSEGV when one child writes and
    then reads back)."""
    before, after = run_isolated(_swap_handlers, 20, timeout=30)
    assert after >= before


def _write_then_read_back(path: str, rounds: int) -> list[int]:
    """Several commits and read-backs in one process, as the commit child does once."""
    seen = []
    for i in range(rounds):
        table = gpt_plan(4 + i)
        libparted.commit_table(path, "gpt", fresh=True, create=table.partitions, sectors=os.path.getsize(path) // 512,
                               sector_size=512)
        found, problems = libparted.read_back(path, os.path.getsize(path) // 512, 512)
        assert problems == ()
        seen.append(len(found.partitions))
        gc.collect()
    return seen


def test_one_process_can_write_and_read_back_again_and_again(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    assert run_isolated(_write_then_read_back, str(img), 5, timeout=60) == [4, 5, 6, 7, 8]


def test_the_read_back_checks_the_raw_gpt_copies(sparse_image: Callable[..., pathlib.Path],
                                                 tmp_path: pathlib.Path) -> None:
    img = sparse_image(64 * MiB)
    desired = gpt_plan(3)
    p = commit.prepare(str(img), desired, HOST)
    last = p.sectors - 1

    def spoil_backup_header(stage: str) -> None:
        if stage == "verify":  # after our write, before the read-back: one bit of the backup header flips
            with open(img, "r+b") as f:
                f.seek(last * 512 + 40)
                b = f.read(1)
                f.seek(last * 512 + 40)
                f.write(bytes([b[0] ^ 1]))

    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=spoil_backup_header)
    assert o.verdict is Verdict.FAILED and o.state is DiskState.DIFFERENT, (o.message, o.details)
    assert any("backup GPT" in d for d in o.details), o.details
    assert o.restore_command


@pytest.fixture
def ext4_image(sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input="label: gpt\nstart=2048, size=20480\n")
    fs = tmp_path / "fs.img"
    with open(fs, "wb") as f:
        f.truncate(20480 * 512)
    run(need_tool("mkfs.ext4"), "-q", "-F", str(fs))
    with open(img, "r+b") as out, open(fs, "rb") as src:
        out.seek(2048 * 512)
        out.write(src.read())
    yield img


def _filesystems_seen(path: str) -> tuple[str, str, str]:
    import parted

    before = libparted.read_disk(path).table.partitions[0].fs
    with pedread._no_filesystem_probing():
        inside = parted.newDisk(parted.getDevice(path)).partitions[0].fileSystem
    after = libparted.read_disk(path).table.partitions[0].fs
    return before, "" if inside is None else inside.type, after


def test_filesystem_probing_is_off_only_while_reading_back(ext4_image: pathlib.Path) -> None:
    before = file_sha(ext4_image)
    assert run_isolated(_filesystems_seen, str(ext4_image), timeout=60) == ("ext4", "", "ext4")
    assert file_sha(ext4_image) == before


def test_a_read_does_without_the_parted_package_and_a_write_after_it_loads_it(
    sparse_image: Callable[..., pathlib.Path],
) -> None:
    """The reading child reads on pyparted's _ped objects: the parted package (~8 ms to import, a tenth of a
    `check`) is first imported by a write, which then works in the same process."""
    img = sparse_image(64 * MiB)
    run("sfdisk", "-q", str(img), input="label: gpt\n,8MiB,L\n,8MiB,S\n")
    code = (
        "import sys\n"
        "from diskplan.backend.parted import libparted\n"
        "from diskplan.model.extent import Partition\n"
        f"disk = libparted.read_disk({str(img)!r}, filesystems=False)\n"
        "print([(p.number, p.start, p.end, p.flags) for p in disk.table.partitions], 'parted.disk' in sys.modules)\n"
        f"libparted.write_table({str(img)!r}, 'gpt', (Partition(1, 2048, 4095, type='Linux filesystem'),))\n"
        "print('parted.disk' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[(1, 2048, 18431, ()), (2, 18432, 34815, ('swap',))] False", "True"]
    assert [(n, start, size) for n, start, size, _, _ in sfdisk_parts(img)] == [(1, 2048, 2048)]
