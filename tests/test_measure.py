"""`diskplan measure` on loop devices: it writes exactly the offsets it names inside the free-space range it
shows and nothing else (sha256 of the image outside the range, and the range's own bytes), refuses a
partition, a disk whose only unpartitioned bytes are metadata, a disk in use and a run without --yes,
reads anywhere with --read-only, and prints plain lines when not at a terminal."""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from diskplan.backend.iotime import PATTERN, DirectIOUnsupported
from diskplan.model.teach.measure import ranges_written, span
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


# --- issue 25 items 3-4: measure never writes a byte that holds data --------------------------------------


def test_a_scratch_file_with_data_a_link_or_a_loop_s_backing_file_is_refused(
    tmp_path: pathlib.Path, loop_device: Callable[..., str]
) -> None:
    data = tmp_path / "disk.img"
    data.write_bytes(os.urandom(2 * MiB))
    before = data.read_bytes()
    proc = measure("--scratch", str(data), "--yes", *FAST)
    assert proc.returncode == 1 and "already holds 2,097,152 B" in proc.stderr and "Nothing was written" in proc.stderr
    link = tmp_path / "link.bin"
    link.symlink_to(tmp_path / "nowhere.bin")
    proc = measure("--scratch", str(link), "--yes", *FAST)
    assert proc.returncode == 1 and "symbolic link" in proc.stderr and not (tmp_path / "nowhere.bin").exists()
    dev = loop_device(data)
    proc = measure("--scratch", str(data), "--yes", *FAST)
    assert proc.returncode == 1 and f"is the backing file of {dev}" in proc.stderr, proc.stderr
    assert data.read_bytes() == before
    assert "Traceback" not in proc.stderr


def test_an_empty_scratch_file_is_measured_and_left_empty(tmp_path: pathlib.Path) -> None:
    scratch = tmp_path / "empty.bin"
    scratch.touch()
    proc = measure("--scratch", str(scratch), "--yes", "--rounds", "1", "--count", "1")
    if proc.returncode == 2 and "direct I/O" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    assert scratch.exists() and scratch.stat().st_size == 0
    assert "1 round x 1 operation per offset" in proc.stdout  # not "1 rounds x 1 operations"


def test_count_and_rounds_are_bounded_and_the_scratch_is_streamed(tmp_path: pathlib.Path) -> None:
    import tracemalloc

    from diskplan.backend.iotime import Scratch

    for bad in (("--count", "4097"), ("--rounds", "101"), ("--count", "0")):
        proc = measure("--scratch", str(tmp_path / "s.bin"), "--yes", *bad)
        assert proc.returncode == 2 and "--count 1..4096" in proc.stderr and not (tmp_path / "s.bin").exists()
    tracemalloc.start()
    made = Scratch(str(tmp_path / "big.bin"), 32 * MiB)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (tmp_path / "big.bin").stat().st_size == 32 * MiB and peak < 2 * MiB, peak  # 1 MiB pieces
    made.close()
    assert not (tmp_path / "big.bin").exists()


def test_a_read_only_device_is_refused_before_the_confirmation(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = gpt_disk(sparse_image, "label: gpt\nstart=2048, size=2048\n")
    dev = loop_device(img, read_only=True)
    proc = measure(dev, *FAST)  # no --yes: the refusal comes first, not "run again with --yes"
    assert proc.returncode == 1 and "read-only" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "run again with --yes" not in proc.stdout


def test_ctrl_c_after_writes_says_what_was_written(tmp_path: pathlib.Path) -> None:
    from diskplan.backend.iotime import Interrupted
    from diskplan.backend.iotime import measure as timed
    from diskplan.model.teach.measure import READ_TESTS, WRITE_TESTS, offsets

    scratch = tmp_path / "s.bin"
    scratch.write_bytes(bytes(span(512, 2)))

    def stop(done: int, total: int) -> None:
        raise KeyboardInterrupt

    for tests, written in (((*WRITE_TESTS, *READ_TESTS), True), (READ_TESTS, False)):
        try:
            timed(str(scratch), 0, tests, offsets(512), 3, 2, stop)
        except DirectIOUnsupported:
            pytest.skip("no direct I/O here")
        except Interrupted as exc:
            assert exc.written is written and exc.rounds_done == 0
        else:
            raise AssertionError("the interrupt was swallowed")
    # the command: SIGINT once a round has ended
    code, err = _interrupted_in_round_2("--scratch", str(tmp_path / "n.bin"), "--yes")
    assert code == 3 and "test data was written to bytes 0-" in err and "nothing was written" not in err, err
    assert not (tmp_path / "n.bin").exists()  # the scratch it made is removed all the same


def _interrupted_in_round_2(*args: str) -> tuple[int, str]:
    """``measure ARGS`` (100 rounds of 64) sent SIGINT once its first round ended: its status and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "diskplan", "measure", *args, "--rounds", "100", "--count", "64"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "round 1/" not in line:
        proc.kill()
        proc.communicate()
        pytest.skip(line.strip())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_ctrl_c_before_any_write_is_2_as_at_the_top_level(sparse_image: Callable[..., pathlib.Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing written and nothing refused: a Ctrl+C before any write is 2 wherever it lands (it was 1 here),
    so `check` (1: findings) and `export` (0 and 2 only) never exit with a status they do not document."""
    from diskplan.backend.write import backup
    from diskplan.cli.main import main

    def ctrl_c(argv: list[str]) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(backup, "SAVED", [])  # no write in this process (earlier tests' would be one)
    assert main(["check", "x"], run=ctrl_c) == 2  # the top level, as every command meets it
    img = gpt_disk(sparse_image, "label: gpt\nstart=2048, size=2048\n")
    code, err = _interrupted_in_round_2(str(img), "--read-only")
    assert "nothing was written" in err and "Traceback" not in err, err
    assert code == 2, err


# --- issue 26 items 8-9: offsets on the disk, holes, page cache, fio lines that can verify --------------------


def test_a_partition_node_is_judged_on_the_disk_and_holes_are_said(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(16 * MiB)  # sparse: every byte past the table is a hole
    run(need_tool("sfdisk"), "-q", str(img), input="label: dos\nstart=63,size=20000,type=83\n")
    dev = loop_device(img)
    partx_update(dev)
    if not os.path.exists(f"{dev}p1"):
        pytest.skip("the kernel did not list the loop device's partitions")
    proc = measure(f"{dev}p1", "--read-only", *FAST)
    assert proc.returncode == 0, proc.stderr
    # the partition's byte 0 is disk byte 32,256: "aligned" is the first 1 MiB boundary of the disk inside it
    assert "its byte 0 is byte 32,256 of the disk" in proc.stdout
    assert "aligned    byte 1,016,320:" in proc.stdout and "= disk byte 1,048,576" in proc.stdout
    assert "are holes of" in proc.stdout and "measure memory" in proc.stdout
    assert "(loop/dio 0)" in proc.stdout and "page cache" in proc.stdout
    assert "--time_based --runtime=5" in proc.stdout  # a fio line long enough to be timed


def test_a_direct_io_loop_is_not_called_page_cache_and_written_bytes_are_no_holes(
    sparse_image: Callable[..., pathlib.Path]
) -> None:
    img = gpt_disk(sparse_image, "label: gpt\nstart=2048, size=2048\n")  # random bytes: no holes
    proc = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(img)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(proc.stderr.strip())
    dev = proc.stdout.strip()
    try:
        if pathlib.Path(f"/sys/block/{os.path.basename(dev)}/loop/dio").read_text().strip() != "1":
            pytest.skip("the loop device did not take direct I/O here")
        got = measure(dev, "--read-only", *FAST)
    finally:
        subprocess.run(["losetup", "--detach", dev], capture_output=True)
    assert got.returncode == 0, got.stderr
    assert "(loop/dio 1)" in got.stdout and "no page cache" in got.stdout and "page cache of" not in got.stdout
    assert "are holes of" not in got.stdout


# --- issue 26 item 10: each experiment a lab ----------------------------------------------------------------


def test_the_striped_lv_arithmetic() -> None:
    from diskplan.model.teach.lab import stripe_arithmetic, stripe_chunks

    assert stripe_chunks(0) == 128 and stripe_chunks(17408) == 129 and stripe_chunks(8192) == 128
    said = " ".join(stripe_arithmetic(17408))
    assert "128 chunks, 64 per device" in said and "1,024 B off a boundary it touches 129 chunks" in said


@pytest.mark.parametrize("lab", ["ssd", "fsync", "metadata", "stripe"])
def test_each_lab_runs_on_a_new_scratch_file_with_the_experiment_beside(tmp_path: pathlib.Path, lab: str) -> None:
    scratch = tmp_path / "lab.bin"
    job = tmp_path / "job.fio"
    extra = ("--fio-job", str(job)) if lab == "ssd" else ()
    proc = measure("--scratch", str(scratch), "--yes", "--lab", lab, "--seconds", "0.02", *extra)
    if proc.returncode == 2 and "direct I/O" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    assert not scratch.exists()
    out = proc.stdout
    assert f"lab {lab}:" in out and "the experiment:" in out and "what it cannot show:" in out
    assert re.search(r"aligned +byte 0: [\d,.]+", out) and "yours: " in out
    assert "cannot show a disk's alignment effect" in out  # a file on a filesystem: said so
    seed = {"ssd": "19x (~28,000 vs ~1,500 IOPS)", "fsync": "+25% (3,991 -> 4,989 ops/s)",
            "metadata": "file creation up to 2.6x slower", "stripe": "2.9 GB/s with PVs on whole disks"}[lab]
    assert seed in out
    if lab == "ssd":  # the job file fio reads, with the experiment's shape and these bytes
        text = job.read_text()
        assert "numjobs=8" in text and "iodepth=4" in text and "offset=17408" in text and f"filename={scratch}" in text
        fio = subprocess.run([need_tool("fio"), "--parse-only", str(job)], capture_output=True, text=True)
        assert fio.returncode == 0, fio.stderr


def test_the_scheduler_lab_compares_each_scheduler_and_puts_the_first_back(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = gpt_disk(sparse_image, "label: gpt\nstart=2048, size=2048\n")
    img.write_bytes(img.read_bytes() + bytes(16 * MiB))  # room for the lab's 9 MiB after partition 1
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=2048\n")
    dev = loop_device(img)
    sched = pathlib.Path(f"/sys/block/{os.path.basename(dev)}/queue/scheduler")
    before = sched.read_text()
    offered = before.replace("[", "").replace("]", "").split()
    if os.geteuid() != 0 or len(offered) < 2:
        pytest.skip("needs root and a device with two schedulers")
    proc = measure(dev, "--yes", "--lab", "scheduler", "--seconds", "0.02")
    assert proc.returncode == 0, proc.stderr
    assert f"schedulers offered (queue/scheduler): {' '.join(offered)}" in proc.stdout
    for name in offered:
        assert re.search(rf"^  {re.escape(name)} +reads [\d,]+ IOPS, writes [\d,]+ IOPS$", proc.stdout, re.M), name
    assert sched.read_text() == before and "scheduler put back" in proc.stdout
    assert "cfq reads 62,815" in proc.stdout


@pytest.mark.parametrize("lab", ["stripe", "metadata"])
def test_a_lab_writes_only_inside_the_range_it_shows(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], lab: str
) -> None:
    img = sparse_image(64 * MiB)
    with open(img, "r+b") as f:  # random bytes everywhere, so "unchanged" means something
        f.write(os.urandom(64 * MiB))
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=2048\n")
    dev = loop_device(img)
    before = img.read_bytes()
    proc = measure(dev, "--yes", "--lab", lab, "--seconds", "0.02")
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"bytes ([\d,]+)-([\d,]+) of", proc.stdout)
    assert m, proc.stdout
    lo, hi = int(m[1].replace(",", "")), int(m[2].replace(",", "")) + 1
    subprocess.run(["losetup", "--detach", dev], capture_output=True)
    after = img.read_bytes()
    assert lo == 2 * MiB and after[:lo] == before[:lo] and after[hi:] == before[hi:]
    assert after[lo:hi] != before[lo:hi]


def _lab_interrupted(after: str, wait: float, *args: str) -> subprocess.CompletedProcess[str]:
    """``measure --lab`` sent SIGINT ``wait`` seconds after it printed a line containing ``after``."""
    proc = subprocess.Popen([sys.executable, "-m", "diskplan", "measure", "--yes", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if after in line:
            break
    time.sleep(wait)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_in_a_lab_stops_its_threads_and_says_what_was_written(tmp_path: pathlib.Path) -> None:
    """32 writer threads: Ctrl+C waits for them before their descriptor is closed (each wrote on to the closed
    number, a traceback apiece), and exits 3 as measure does once test data was written."""
    got = _lab_interrupted("what it cannot show", 1.0, "--scratch", str(tmp_path / "lab.bin"), "--lab", "ssd",
                           "--seconds", "8")
    if got.returncode == 2 and "direct I/O" in got.stderr:
        pytest.skip(got.stderr.strip())
    assert got.returncode == 3 and "lab data was written to bytes 0-" in got.stderr, got.stderr
    assert "Traceback" not in got.stderr and "Exception in thread" not in got.stderr, got.stderr[-2000:]
    assert not (tmp_path / "lab.bin").exists()


def test_ctrl_c_in_the_scheduler_lab_after_writes_does_not_say_nothing_was_written(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = gpt_disk(sparse_image, "label: gpt\nstart=2048, size=2048\n")
    img.write_bytes(img.read_bytes() + bytes(16 * MiB))
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=2048\n")
    dev = loop_device(img)
    sched = pathlib.Path(f"/sys/block/{os.path.basename(dev)}/queue/scheduler")
    before = sched.read_text()
    if os.geteuid() != 0 or len(before.split()) < 2:
        pytest.skip("needs root and a device with two schedulers")
    got = _lab_interrupted("schedulers offered", 3.0, dev, "--lab", "scheduler", "--seconds", "2")  # its writes
    assert got.returncode == 3 and "lab data was written" in got.stderr, got.stderr
    assert "nothing was written" not in got.stderr and sched.read_text() == before
