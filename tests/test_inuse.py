"""discovery.inuse: every use of a disk named — parsed from fake /proc and /sys trees (escapes, dm names),
and seen on real loop devices (exclusive opens, a loop reading an image, the kernel's partition list)."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from diskplan.backend.raw import kernelparts
from diskplan.discovery import inuse
from diskplan.discovery.sysfs import sysfs_dir
from helpers.images import digest, mounted, partx_update
from helpers.lockholders import holding
from helpers.tools import need_tool, run
from helpers.units import MiB

TWO = "label: gpt\nstart=2048, size=20480\nstart=22528, size=20480\n"


def two_partitions(sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]) -> tuple[pathlib.Path,
                                                                                                       str]:
    """A 64 MiB image with two partitions (TWO), on a loop device whose partitions the kernel lists."""
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input=TWO)
    dev = loop_device(img)
    partx_update(dev)
    return img, dev


def test_mountinfo_names_the_mount_point_with_its_escapes(tmp_path: pathlib.Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountinfo").write_text(
        "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        "95 22 259:3 / /mnt/my\\040disk rw,relatime shared:50 - ext4 /dev/sdz1 rw\n"
    )
    uses = inuse.mounts({(259, 3): "/dev/sdz1", (8, 240): "/dev/sdz"}, proc_root=str(tmp_path))
    assert [str(u) for u in uses] == ["/dev/sdz1 is mounted on /mnt/my disk (ext4)"]
    assert uses[0].blocking


def test_a_swap_file_that_is_the_image_is_named(tmp_path: pathlib.Path) -> None:
    img = tmp_path / "swap image"
    img.write_bytes(b"\0" * 4096)
    (tmp_path / "swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        f"{str(img).replace(' ', chr(92) + '040')}\tfile\t\t4\t\t0\t\t-2\n"
    )
    uses = inuse.swaps({}, os.stat(img), proc_root=str(tmp_path))
    assert [str(u) for u in uses] == [f"{img} is in use as swap (file file)"]


def test_proc_locks_name_the_holder_and_skip_waiters_our_own_lock_and_udev_probing(tmp_path: pathlib.Path) -> None:
    me = os.getpid()
    for pid, comm in ((101, "qemu-system-x86"), (102, "sfdisk"), (103, "(udev-worker)")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text(comm + "\n")
    (tmp_path / "locks").write_text(
        f"1: FLOCK  ADVISORY  WRITE {me} fe:00:77 0 EOF\n"  # this process writing: its own lock
        "2: POSIX  ADVISORY  WRITE 101 fe:00:77 100 100\n"
        "3: POSIX  ADVISORY  WRITE 101 fe:00:77 103 103\n"  # QEMU's second byte: the same use
        "4: -> FLOCK  ADVISORY  WRITE 102 00:06:94 0 EOF\n"  # waiting: holds nothing yet
        "5: FLOCK  ADVISORY  READ 103 00:06:94 0 EOF\n"
        "6: FLOCK  ADVISORY  WRITE 102 fe:00:78 0 EOF\n"  # another file
    )
    uses = inuse.locks({(0xFE, 0, 77): "/img/d.img", (0, 6, 94): "/dev/sdz"}, proc_root=str(tmp_path))
    assert [(str(u), u.blocking) for u in uses] == [
        ("/img/d.img is locked: a POSIX lock (write) held by qemu-system-x86 (pid 101)", True),
        ("/dev/sdz is locked: a BSD flock (read) held by (udev-worker) (pid 103) while it probes the disk; "
         "the write waits for it", False),
    ]


def test_holders_name_lvm_and_md(tmp_path: pathlib.Path) -> None:
    disk = tmp_path / "block" / "sdz"
    for holder in ("dm-0", "md0"):
        (disk / "sdz1" / "holders" / holder).mkdir(parents=True)
    dm = tmp_path / "class" / "block" / "dm-0" / "dm"
    dm.mkdir(parents=True)
    (dm / "name").write_text("vg0-root\n")
    (dm / "uuid").write_text("LVM-abcdef\n")
    nodes = [inuse.Node("sdz", (8, 240), str(disk)), inuse.Node("sdz1", (8, 241), str(disk / "sdz1"))]
    uses = inuse.holders(nodes, sys_root=str(tmp_path))
    assert [str(u) for u in uses] == ["/dev/sdz1 is held by dm-0 (LVM vg0-root)", "/dev/sdz1 is held by md0"]
    # A real md array's sysfs (an md member): /sys/class/block/md0/md/level and md/dev-sdz1
    md = tmp_path / "class" / "block" / "md0" / "md"
    (md / "dev-sdz1").mkdir(parents=True)
    (md / "level").write_text("raid1\n")
    (md / "dev-sdz1" / "offset").write_text("2048\n")
    crypt = tmp_path / "class" / "block" / "dm-1" / "dm"  # an open LUKS mapping, as cryptsetup names it
    crypt.mkdir(parents=True)
    (crypt / "name").write_text("luks-0b1c\n")
    (crypt / "uuid").write_text("CRYPT-LUKS2-0b1c2d3e-luks-0b1c\n")
    (disk / "sdz1" / "holders" / "dm-1").mkdir()
    assert [str(u) for u in inuse.holders(nodes, sys_root=str(tmp_path))] == [
        "/dev/sdz1 is held by dm-0 (LVM vg0-root)", "/dev/sdz1 is held by dm-1 (dm-crypt luks-0b1c)",
        "/dev/sdz1 is held by md0 (md raid1 array)"]


def _ours(lines: list[str], *pids: int) -> list[str]:
    """``lines`` with every process but ``pids`` dropped from their "; open in ..." lists: what other programs
    on this machine have open for a moment (a device scanner, another test run reading every loop device)
    is no part of the test."""
    out = []
    for line in lines:
        m = re.search(r"; open in ((?:[^,;]+? \(pid \d+\)(?:, )?)+)( …)?", line)
        if m:
            kept = [t.strip() for t, pid in re.findall(r"([^,]+? \(pid (\d+)\))", m.group(1)) if int(pid) in pids]
            line = line[:m.start()] + (f"; open in {', '.join(kept)}" if kept else "") + line[m.end():]
        out.append(line)
    return out


def test_ours_drops_other_processes_only() -> None:
    line = "/dev/loop3 is busy: the kernel or another program holds it open exclusively"
    assert _ours([f"{line}; open in python (pid 7), blkid (pid 9) (/dev/loop3 reads x)"], 9) == [
        f"{line}; open in blkid (pid 9) (/dev/loop3 reads x)"]
    assert _ours([f"{line}; open in python (pid 7)"]) == [line]


def test_an_exclusive_opener_is_named_busy(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img, dev = two_partitions(sparse_image, loop_device)
    assert [u for u in inuse.find_users(dev) if u.blocking] == []
    fd = os.open(f"{dev}p2", os.O_RDONLY | os.O_EXCL)  # as mount, md or dm-crypt would claim it
    try:
        uses = _ours([str(u) for u in inuse.find_users(dev)])
        assert uses == [f"{dev}p2 is busy: the kernel or another program holds it open exclusively"]
        assert _ours(inuse.culprits(str(img))) == [f"{uses[0]} ({dev} reads this image)"]
    finally:
        os.close(fd)


def test_an_idle_loop_over_an_image_is_a_note_not_a_refusal(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(64 * MiB)
    assert inuse.find_users(str(img)) == []
    dev = loop_device(img)
    uses = inuse.find_users(str(img))
    assert len(uses) == 1 and not uses[0].blocking
    assert str(uses[0]).startswith(f"{dev} reads this image") and f"partx -u {dev}" in str(uses[0])
    assert inuse.culprits(str(img)) == []


def test_kernel_partitions_follow_sysfs(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    """The kernel's partition list (backend.kernelparts, which the write paths and the host's check share)."""
    img = sparse_image(64 * MiB)
    assert kernelparts.kernel_list(str(img)) is None  # an image file has no kernel view
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input=TWO)
    dev = loop_device(img, sector_size=4096)
    run(need_tool("sfdisk"), "-q", "--no-reread", dev, input="label: gpt\nstart=256, size=512\n")
    partx_update(dev)
    assert kernelparts.kernel_list(dev) == {1: (256 * 8, 512 * 8)}  # sysfs counts 512-byte units
    assert [n.name for n in inuse.nodes(sysfs_dir(dev) or "")] == [os.path.basename(dev),
                                                                            f"{os.path.basename(dev)}p1"]


def _comm(pid: int) -> str:
    return f"{pathlib.Path(f'/proc/{pid}/comm').read_text().strip()} (pid {pid})"


@contextlib.contextmanager
def offset_loop(image: pathlib.Path | str, offset: int, size: int) -> Iterator[str]:
    """A second loop device over ``image``, ``size`` bytes from ``offset`` (as `losetup -o` gives)."""
    proc = subprocess.run(["losetup", "--find", "--show", "--offset", str(offset), "--sizelimit", str(size),
                           str(image)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"losetup could not attach a loop device: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "--detach", dev], capture_output=True)
        # While another program has it open the kernel only marks it to go (autoclear): wait till it has.
        end = time.monotonic() + 10
        while any(n.path == dev for n in inuse.loops_backed_by(str(image))) and time.monotonic() < end:
            time.sleep(0.05)


def test_a_loop_target_is_seen_through_to_an_offset_loop_of_its_file_whose_filesystem_is_mounted(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input=TWO)
    dev = loop_device(img)
    plan = tmp_path / "plan.json"  # keeps partition 1, deletes partition 2: where the offset loop's data lies
    plan.write_text(json.dumps({"label": "gpt", "partitions": [{"number": 1, "start": 2048, "end": 22527}]}))
    with offset_loop(img, 22528 * 512, 20480 * 512) as other, mounted(other, tmp_path / "mnt"):
        uses = [str(u) for u in inuse.find_users(dev) if u.blocking]
        assert uses == [f"{other} is mounted on {tmp_path / 'mnt'} (ext4) ({other} reads {img}, the file {dev} reads)"]
        # Everything but partition 2, whose mounted ext4 the kernel may still be writing (ext4lazyinit zeroes
        # its inode tables in the background after a mount): the tables at both ends and partition 1.
        def outside() -> tuple[str, str]:
            return digest(img, 0, 22528, 512), digest(img, 43008, 131072 - 43008, 512)

        before = outside()
        proc = subprocess.run([sys.executable, "-m", "diskplan", "apply", str(plan), dev, "--yes", "--backup",
                               str(tmp_path / "b.dpbackup")], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert proc.returncode == 1 and f"refused: {dev} is in use: {uses[0]}" in proc.stderr, proc.stderr
        assert outside() == before
    # Idle, the other loop is a note: writing through one loop leaves the other's partition list stale.
    with offset_loop(img, 22528 * 512, 20480 * 512) as other:
        found = inuse.find_users(dev)
        assert [(u.device, u.blocking) for u in found] == [(other, False)]
        assert str(found[0]).startswith(f"{other} reads {img}, the file {dev} reads too")


LOCKS = {"flock": "a BSD flock (write)", "posix": "a POSIX lock (write)",
         "ofd": "an open file description lock (as QEMU takes) (read)"}


@pytest.mark.parametrize("kind", list(LOCKS))
def test_a_lock_another_process_holds_on_the_image_is_a_use(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], kind: str
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img)
    with holding(kind, img) as pid:
        what = f"{img} is locked: {LOCKS[kind]} held by {_comm(pid)}"
        assert inuse.culprits(str(img)) == [what]
        # Through a loop device that reads it, the same lock on its file.
        assert inuse.culprits(dev) == [f"{what} (the file {dev} reads)"]
    assert inuse.culprits(str(img)) == []


def test_a_lock_on_a_loop_device_of_the_image_is_a_use(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img)
    with holding("flock", dev) as pid:  # another partitioner (or diskplan) writing through the loop device
        assert inuse.culprits(str(img)) == [f"{dev} is locked: a BSD flock (write) held by {_comm(pid)} "
                                            f"({dev} reads this image)"]


def test_a_whole_disk_held_exclusively_is_named_not_its_partition(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    _img, dev = two_partitions(sparse_image, loop_device)
    busy = "is busy: the kernel or another program holds it open exclusively"
    with holding("excl", dev) as pid:
        assert _ours(inuse.culprits(dev), pid) == [f"{dev} {busy}; open in {_comm(pid)}"]
    with holding("excl", f"{dev}p1") as pid:
        assert _ours(inuse.culprits(dev), pid) == [f"{dev}p1 {busy}; open in {_comm(pid)}"]
    fd = os.open(dev, os.O_RDONLY | os.O_EXCL)  # held by nobody diskplan can see (this process is left out)
    try:
        said = inuse.culprits(dev)
        st = os.stat(dev)
        if not inuse.openers({("blk", os.major(st.st_rdev), os.minor(st.st_rdev))}):
            assert said == [f"{dev} is busy: the kernel or another program holds it (or each of its "
                            "partitions) open exclusively"]
        else:  # another program has it open for a moment: then it is named as the holder
            assert _ours(said) == [f"{dev} {busy}"], said
    finally:
        os.close(fd)


def _diskplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


def test_an_offset_loop_over_the_disk_itself_is_a_user_of_exactly_its_bytes(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """The rescue workflow: a table lost, a filesystem found in unpartitioned space and mounted with
    `losetup -o OFFSET /dev/sdX`. A move onto those bytes was "moved and verified" (issue 25)."""
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input="label: gpt\nstart=2048, size=20480\n")
    dev = loop_device(img)
    partx_update(dev)
    start, size = 40960 * 512, 20480 * 512  # unpartitioned space
    with offset_loop(dev, start, size) as other, mounted(other, tmp_path / "mnt"):
        uses = [u for u in inuse.find_users(dev) if u.blocking]
        assert [(str(u), u.span) for u in uses] == [
            (f"{other} maps bytes {start} to {start + size - 1} of {dev} (a loop device reading {dev} from its "
             f"byte {start}, {size} bytes)", (start, start + size)),
            (f"{other} is mounted on {tmp_path / 'mnt'} (ext4)", None)]
        def outside() -> tuple[str, str]:  # all but the mounted filesystem's bytes
            return digest(img, 0, 40960, 512), digest(img, 61440, 131072 - 61440, 512)

        before = outside()
        moved = _diskplan("move", dev, "--partition", "1", "--to", "40960", "--yes",
                          "--backup", str(tmp_path / "b.dpbackup"))
        assert moved.returncode == 1, moved.stderr
        assert f"{dev} is in use: {uses[0]}" in moved.stderr + moved.stdout
        grown = _diskplan("resize", dev, "--partition", "1", "--size", "40960s", "--yes")
        assert grown.returncode == 1 and f"{other} maps bytes {start}" in grown.stderr + grown.stdout
        # measure writes test data into free space: this free space is the mounted filesystem's
        measured = _diskplan("measure", dev, "--yes", "--rounds", "1", "--count", "1")
        assert measured.returncode == 1 and f"{other} maps bytes {start}" in measured.stderr + measured.stdout
        assert outside() == before
    # Unmounted, the mapping alone still refuses: it reads those bytes.
    with offset_loop(dev, start, size) as other:
        assert inuse.culprits(dev) == [f"{other} maps bytes {start} to {start + size - 1} of {dev} (a loop device "
                                       f"reading {dev} from its byte {start}, {size} bytes)"]
        # Seen from the image file the loop device reads, too.
        assert any(c.startswith(f"{other} maps bytes {start} to ") for c in inuse.culprits(str(img)))
    assert inuse.culprits(dev) == []


def test_a_loop_over_a_partition_node_and_a_loop_over_that_loop_are_named_with_their_bytes(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    _img, dev = two_partitions(sparse_image, loop_device)
    with offset_loop(f"{dev}p2", 4096, 8192) as inner, offset_loop(inner, 512,
                                                                                      1024) as third:
        begin = 22528 * 512 + 4096
        assert inuse.culprits(dev) == [
            f"{inner} maps bytes {begin} to {begin + 8191} of {dev} (a loop device reading {dev}p2 from its "
            "byte 4096, 8192 bytes)",
            f"{third} maps bytes {begin + 512} to {begin + 1535} of {dev} (a loop device reading {inner} from its "
            "byte 512, 1024 bytes)"]


def test_a_process_holding_a_partition_open_for_writing_is_named_and_refuses_unless_allowed(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """No lock, no mount, no exclusive claim: a VM or a database on the raw partition, a `dd` in progress.
    `resize --yes` grew the partition and ran resize2fs beside the writer (issue 25)."""
    img, dev = two_partitions(sparse_image, loop_device)
    run(need_tool("mkfs.ext4"), "-q", "-F", f"{dev}p2")
    reader = subprocess.Popen([sys.executable, "-c", "import os, sys; os.open(sys.argv[1], os.O_RDONLY); "
                               "print(flush=True); sys.stdin.read()", f"{dev}p2"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "\n"
        assert inuse.culprits(dev) == []  # a reader changes nothing: not a user
    finally:
        assert reader.stdin is not None
        reader.stdin.close()
        reader.wait(timeout=10)
    table = run("sfdisk", "--dump", dev)
    with holding("write", f"{dev}p2") as pid:
        said = f"{dev}p2 is open for writing in {_comm(pid)}"
        assert said in inuse.culprits(dev)
        assert said in inuse.culprits(str(img)) or f"{said} ({dev} reads this image)" in inuse.culprits(str(img))
        grown = _diskplan("resize", dev, "--partition", "2", "--size", "40960s", "--yes",
                          "--backup", str(tmp_path / "a.dpbackup"))
        assert grown.returncode == 1 and f"{dev} is in use: {said}" in grown.stderr + grown.stdout, grown.stderr
        assert run("sfdisk", "--dump", dev) == table
        # Said explicitly, the writer is named but does not refuse.
        assert not [u for u in inuse.find_users(dev, writers_allowed=True) if u.blocking]
        allowed = _diskplan("resize", dev, "--partition", "2", "--size", "40960s", "--yes", "--allow-open-writers",
                            "--backup", str(tmp_path / "b.dpbackup"))
        assert allowed.returncode == 0, allowed.stderr
        assert said in allowed.stdout + allowed.stderr
    assert run("sfdisk", "--dump", dev) != table


def test_a_partition_in_use_as_swap_is_named(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    _img, dev = two_partitions(sparse_image, loop_device)
    run(need_tool("mkswap"), "-q", f"{dev}p2")
    on = subprocess.run(["swapon", f"{dev}p2"], capture_output=True, text=True)
    if on.returncode != 0:
        pytest.skip(f"swapon: {on.stderr.strip()}")
    try:
        assert f"{dev}p2 is in use as swap (partition {dev}p2)" in inuse.culprits(dev)
    finally:
        subprocess.run(["swapoff", f"{dev}p2"], capture_output=True)
    assert inuse.culprits(dev) == []
