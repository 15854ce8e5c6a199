"""`diskplan measure` on loop devices: it writes exactly the offsets it names inside the free-space range it
shows and nothing else (sha256 of the image outside the range, and the range's own bytes), refuses a
partition, a disk whose only unpartitioned bytes are metadata, a disk in use and a run without --yes,
reads anywhere with --read-only, and prints plain lines when not at a terminal."""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

from diskplan.backend.iotime import PATTERN
from diskplan.model.measure import ranges_written, span
from helpers.images import mounted, partx_update
from helpers.lockholders import holding
from helpers.tools import need_tool, run

MiB = 1024**2
FAST = ("--rounds", "1", "--count", "2")


def measure(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diskplan", "measure", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def sha_outside(path: pathlib.Path, lo: int = 0, hi: int = 0) -> str:
    """sha256 of the whole file except bytes [lo, hi)."""
    h = hashlib.sha256()
    data = path.read_bytes()
    h.update(data[:lo])
    h.update(data[hi:])
    return h.hexdigest()


def gpt_disk(sparse_image: Callable[..., pathlib.Path], script: str) -> pathlib.Path:
    img = sparse_image(16 * MiB)
    with open(img, "r+b") as f:  # random bytes everywhere, so "unchanged" means something
        f.write(os.urandom(16 * MiB))
    run(need_tool("sfdisk"), "-q", str(img), input=script)
    return img


def test_writes_exactly_the_named_offsets_inside_the_free_range(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = gpt_disk(sparse_image, "label: gpt\nstart=2048, size=2048\n")
    dev = loop_device(img)
    before = img.read_bytes()
    proc = measure(dev, "--yes", *FAST)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr  # not a terminal: plain lines
    m = re.search(r"bytes ([\d,]+)-([\d,]+) of", proc.stdout)  # grouped: 2,097,152
    assert m, proc.stdout
    lo, hi = int(m[1].replace(",", "")), int(m[2].replace(",", "")) + 1
    assert (lo, hi) == (2 * MiB, 2 * MiB + span(512, 2))  # the first 1 MiB boundary after partition 1
    assert "loop device over" in proc.stdout and "say nothing about a disk's hardware" in proc.stdout
    assert re.search(r"rotational \S+ .*physical block 512 B, scheduler", proc.stdout)
    assert "fio --name=" in proc.stdout and "--offset=2097664" in proc.stdout  # +512 B
    subprocess.run(["losetup", "--detach", dev], capture_output=True)
    after = img.read_bytes()
    assert sha_outside(img, lo, hi) == hashlib.sha256(before[:lo] + before[hi:]).hexdigest()
    written = bytearray(before[lo:hi])
    for a, b in ranges_written(lo, 512, 2):
        pattern = (PATTERN * ((b - a) // len(PATTERN) + 2))
        for k in range(a, b, 16384 if (b - a) == 2 * 16384 else 4096):
            size = 16384 if (b - a) == 2 * 16384 else 4096
            written[k - lo:k - lo + size] = pattern[:size]
    assert after[lo:hi] == bytes(written)
    # Independently of the model: the last write ends 2 x 16 KiB after the LBA-63 offset (32256 B).
    assert after[lo + 32256 + 32768:hi] == before[lo + 32256 + 32768:hi]
    assert after[lo + 32256 + 32768 - len(PATTERN):lo + 32256 + 32768] != before[lo + 65024 - len(PATTERN):lo + 65024]
    assert after[lo:hi] != before[lo:hi]


def test_refuses_a_partition_and_a_disk_with_only_metadata_free(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = gpt_disk(sparse_image, "label: gpt\nfirst-lba: 34\nstart=34, size=32701\n")  # to the last usable LBA
    dev = loop_device(img)
    partx_update(dev)
    before = sha_outside(img)
    proc = measure(dev, "--yes", *FAST)
    assert proc.returncode == 1 and "no free space" in proc.stderr and "Nothing was written" in proc.stderr
    if not os.path.exists(f"{dev}p1"):
        pytest.skip("the kernel did not list the loop device's partitions")
    proc = measure(f"{dev}p1", "--yes", *FAST)
    assert proc.returncode == 1 and "is a partition" in proc.stderr
    # Reads are harmless: --read-only times them anywhere, a partition included.
    proc = measure(f"{dev}p1", "--read-only", *FAST)
    assert proc.returncode == 0, proc.stderr
    assert "read 4 KiB:" in proc.stdout and "write 4 KiB:" not in proc.stdout
    assert sha_outside(img) == before
    assert "Traceback" not in proc.stderr


def test_refuses_without_yes_and_a_disk_in_use(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = gpt_disk(sparse_image, "label: gpt\nstart=2048, size=8192\n")
    dev = loop_device(img)
    proc = measure(dev, *FAST)
    assert proc.returncode == 0 and "run again with --yes" in proc.stdout
    partx_update(dev)
    if not os.path.exists(f"{dev}p1"):
        pytest.skip("the kernel did not list the loop device's partitions")
    with mounted(f"{dev}p1", tmp_path / "mnt"):
        before = hashlib.sha256(pathlib.Path(dev).read_bytes()[8192 * 512 + 2048 * 512:]).hexdigest()
        proc = measure(dev, "--yes", *FAST)
        assert proc.returncode == 1 and "is mounted on" in proc.stderr, proc.stderr
        assert hashlib.sha256(pathlib.Path(dev).read_bytes()[8192 * 512 + 2048 * 512:]).hexdigest() == before
    with holding("flock", dev):
        proc = measure(dev, "--yes", *FAST)
        assert proc.returncode == 1 and "refused" in proc.stderr


def test_a_scratch_file_is_created_measured_and_removed(tmp_path: pathlib.Path) -> None:
    scratch = tmp_path / "scratch.bin"
    proc = measure("--scratch", str(scratch), "--yes", *FAST)
    if proc.returncode == 2 and "direct I/O" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    assert not scratch.exists()
    assert "is a file on" in proc.stdout and "write 16 KiB + flush:" in proc.stdout
    assert re.search(r"as LBA 63 +byte +32,256: [\d,]+ IOPS \(rounds", proc.stdout)


def test_a_4kn_disk_has_no_512_byte_offset(sparse_image: Callable[..., pathlib.Path],
                                           loop_device: Callable[..., str]) -> None:
    """Direct I/O needs whole 4096-byte sectors: +512 B cannot be asked for, LBA 34 is at 34 x 4096 B."""
    img = sparse_image(16 * MiB)
    dev = loop_device(img, sector_size=4096)
    run(need_tool("sfdisk"), "-q", dev, input="label: gpt\nfirst-lba: 6\nstart=256, size=256\n")
    proc = measure(dev, "--read-only", *FAST)
    assert proc.returncode == 0, proc.stderr
    assert "+512 B" not in proc.stdout and "as LBA 34" in proc.stdout
    assert f"byte {2 * MiB + 34 * 4096 % MiB:,}:" in proc.stdout  # from the first free 1 MiB boundary
