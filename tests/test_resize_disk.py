"""Resizing partitions that hold real filesystems on loop devices, with their own tools: grow, shrink,
a shrink below the minimum refused, XFS shrink refused. Afterwards the table says the new size (sfdisk
referee), the checker finds the filesystem clean, blkid sees the same UUID and label, the PARTUUID is the
same and every file's SHA-256 is unchanged (tests/helpers/movedisk.py's disks and referees)."""

from __future__ import annotations

import re
import subprocess

import pytest

from diskplan.backend.fs.fssize import filesystem_bytes
from diskplan.model.plan.fsresize import refusals, resizer, steps
from helpers.movedisk import CHECK, Disk, View, diskplan, entry, file_sums, make_disk
from helpers.tools import need_tool, run


def assert_resized(d: Disk, size: int, partuuid: str) -> None:
    assert entry(d) == (d.start, size, partuuid)
    with View(d.dev, d.start, size) as v:
        check = subprocess.run([*CHECK[d.fs], v], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        ids = run("blkid", "-p", "-o", "export", v)
        assert f"TYPE={d.fs}" in ids and "LABEL=moved" in ids
        assert file_sums(v, d.fs, list(d.sums)) == d.sums


def resize(d: Disk, size: int) -> subprocess.CompletedProcess[str]:
    return diskplan(d, "resize", d.dev, "--partition", "1", "--size", f"{size}s", "--yes")


BTRFS_EINVAL = pytest.mark.xfail(
    reason="this machine's kernel (6.18, btrfs-progs 6.2) answers EINVAL to every `btrfs filesystem resize` of a "
    "btrfs made at 117-120 MiB (max, +10M, 140M; even on an image's whole loop device), while one made at 300 MiB "
    "grows and shrinks: kept to show it", strict=False)


@pytest.mark.parametrize(("fs", "size", "grown", "shrunk"), [
    ("ext4", 40960, 61440, 30720),
    ("btrfs", 614_400, 700_000, 660_000),
    pytest.param("btrfs", 240_000, 300_000, 230_000, marks=BTRFS_EINVAL),
])
def test_grow_then_shrink(loop_device, tmp_path, fs, size, grown, shrunk) -> None:
    d = make_disk(loop_device, tmp_path, start=2048, size=size, fs=fs, disk_mib=grown // 2048 + 4)
    partuuid = entry(d)[2]
    dry = diskplan(d, "resize", d.dev, "--partition", "1", "--size", f"{grown}s")
    assert dry.returncode == 0 and "1. rewrite the table entry" in dry.stdout and "Nothing written" in dry.stdout
    got = resize(d, grown)
    assert got.returncode == 0 and "grown" in got.stdout, got.stdout + got.stderr
    assert_resized(d, grown, partuuid)
    dry = diskplan(d, "resize", d.dev, "--partition", "1", "--size", f"{shrunk}s")
    assert "can shrink to" in dry.stdout and f"1. resize the {fs} filesystem" in dry.stdout, dry.stdout + dry.stderr
    got = resize(d, shrunk)
    assert got.returncode == 0 and "shrunk" in got.stdout, got.stdout + got.stderr
    assert_resized(d, shrunk, partuuid)


def test_shrink_below_the_minimum_is_refused(loop_device, tmp_path) -> None:
    d = make_disk(loop_device, tmp_path, start=2048, size=40960, disk_mib=32)
    before = entry(d)
    got = resize(d, 4096)  # 2 MiB: the files alone take more
    assert got.returncode == 1 and "below the smallest size its ext4 filesystem can shrink to" in got.stderr, got.stderr
    assert entry(d) == before


def test_xfs_grows_and_never_shrinks(loop_device, tmp_path) -> None:
    need_tool("xfs_growfs")
    d = make_disk(loop_device, tmp_path, start=2048, size=620_000, fs="xfs", disk_mib=340)
    partuuid = entry(d)[2]
    got = resize(d, 680_000)
    assert got.returncode == 0, got.stdout + got.stderr
    assert_resized(d, 680_000, partuuid)
    got = resize(d, 650_000)
    assert got.returncode == 1 and "an XFS filesystem cannot shrink" in got.stderr
    assert entry(d)[1] == 680_000


@pytest.mark.parametrize(("fs", "size", "grown"), [("ext4", 40960, 61440), ("xfs", 620_000, 680_000)])
def test_a_grow_cut_after_its_entry_is_finished_by_the_same_resize(loop_device, tmp_path, fs, size, grown) -> None:
    """A crash between a grow's entry write and its filesystem's tool leaves the entry grown and the filesystem
    its old size: the same resize grows the filesystem alone (it said "nothing to do" before, the filesystem
    left small), the dry run says so, and a filesystem that fills its entry is nothing to do again."""
    need_tool("xfs_growfs" if fs == "xfs" else "resize2fs")
    d = make_disk(loop_device, tmp_path, start=2048, size=size, fs=fs, disk_mib=grown // 2048 + 4)
    partuuid = entry(d)[2]
    run("sfdisk", "-q", "--no-reread", "-N", "1", d.dev, input=f"2048,{grown}\n")  # the entry alone, grown
    dry = diskplan(d, "resize", d.dev, "--partition", "1", "--size", f"{grown}s")
    assert dry.returncode == 0 and f"its {fs} filesystem spans" in dry.stdout, dry.stdout + dry.stderr
    assert f"1. grow the {fs} filesystem with its own tool to fill the entry" in dry.stdout
    got = resize(d, grown)
    assert got.returncode == 0 and "grown" in got.stdout, got.stdout + got.stderr
    assert_resized(d, grown, partuuid)
    with View(d.dev, d.start, grown) as v:
        spans = filesystem_bytes(v, 0, fs)
    assert spans is not None and grown * 512 - spans < 1 << 20  # it fills the entry, but for the tool's rounding
    again = resize(d, grown)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr


def test_the_rules_order_and_refuse() -> None:
    assert steps(10, 5) == ("filesystem", "entry") and steps(5, 10) == ("entry", "filesystem")
    assert refusals("ext4", 100, 50, 60) and not refusals("ext4", 100, 60, 60) and not refusals("ext4", 100, 200, None)
    assert "LUKS" in refusals("crypto_LUKS", 100, 200, None)[0]
    assert "no filesystem blkid knows" in refusals("", 100, 200, None)[0]
    assert resizer("xfs")[0] is not None and refusals("xfs", 100, 99, None)


def test_swap_keeps_its_uuid_and_label(loop_device, tmp_path) -> None:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(24 << 20)
    run("sfdisk", "-q", str(img), input="label: gpt\nstart=2048, size=8192, type=S\n")
    dev = loop_device(img)
    uuid = "0f3c7b1e-5a52-4b8e-9d0a-1c2b3d4e5f60"
    with View(dev, 2048, 8192, read_only=False) as v:
        run("mkswap", "-L", "moved", "-U", uuid, v)
    d = Disk(dev, "gpt", 1, 2048, 8192, "swap", {}, tmp_path / "state")
    partuuid = entry(d)[2]
    for size in (16384, 6144):
        got = resize(d, size)
        assert got.returncode == 0, got.stdout + got.stderr
        assert entry(d) == (2048, size, partuuid)
        with View(dev, 2048, size) as v:
            ids = run("blkid", "-p", "-o", "export", v)
            assert f"UUID={uuid}" in ids and "LABEL=moved" in ids and "TYPE=swap" in ids
            # the swap header's last page number (at byte 1028) says the area fills the new size
            with open(v, "rb") as f:
                f.seek(1028)
                assert int.from_bytes(f.read(4), "little") == size * 512 // 4096 - 1


def test_ntfs_grows_and_shrinks_with_ntfsresize(loop_device, tmp_path) -> None:
    need_tool("mkntfs")
    need_tool("ntfsresize")
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(80 << 20)
    run("sfdisk", "-q", str(img), input="label: gpt\nstart=2048, size=81920, type=L\n")
    dev = loop_device(img)
    with View(dev, 2048, 81920, read_only=False) as v:
        run("mkntfs", "-Q", "-F", "-L", "moved", v)
        before = [x for x in run("blkid", "-p", "-o", "export", v).split() if x.startswith(("UUID=", "LABEL="))]
    d = Disk(dev, "gpt", 1, 2048, 81920, "ntfs", {}, tmp_path / "state")
    partuuid = entry(d)[2]
    for size in (120_000, 61440):
        got = resize(d, size)
        assert got.returncode == 0, got.stdout + got.stderr
        assert entry(d) == (2048, size, partuuid)
        with View(dev, 2048, size) as v:
            ids = run("blkid", "-p", "-o", "export", v).split()
            assert "TYPE=ntfs" in ids and all(x in ids for x in before), (ids, before)
            said = run("ntfsresize", "--info", "--force", "--no-progress-bar", v)
            volume = int(re.search(r"Current volume size: (\d+) bytes", said).group(1))  # type: ignore[union-attr]
            assert size * 512 - 8192 <= volume <= size * 512, said  # the volume fills its partition
            check = subprocess.run(["ntfsfix", "--no-action", v], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr


def test_a_missing_tool_is_named_with_its_debian_package(monkeypatch) -> None:
    from diskplan.backend.fs.fsresize import missing

    monkeypatch.setenv("PATH", "/nonexistent")
    assert missing("xfs") == "xfs_growfs is needed to resize a xfs filesystem (Debian package xfsprogs)"
    assert missing("ntfs").endswith("(Debian package ntfs-3g)") and missing("crypto_LUKS") == ""


@pytest.mark.parametrize(("start", "to", "size", "new"), [
    (34, 2048, 40960, 61440),  # realign from 34 and grow: the move first
    (40_000, 2048, 40960, 30720),  # left and shrink: the shrink first
])
def test_move_with_size_resizes_in_the_order_that_has_room(
    loop_device, tmp_path, start, to, size, new
) -> None:
    d = make_disk(loop_device, tmp_path, start=start, size=size, disk_mib=48)
    partuuid = entry(d)[2]
    dry = diskplan(d, "move", d.dev, "--partition", "1", "--to", str(to), "--size", f"{new}s")
    assert dry.returncode == 0 and "Nothing written" in dry.stdout, dry.stdout + dry.stderr
    assert ("then grow it" in dry.stdout) == (new > size)
    got = diskplan(d, "move", d.dev, "--partition", "1", "--to", str(to), "--size", f"{new}s", "--yes")
    assert got.returncode == 0, got.stdout + got.stderr
    assert "moved and verified" in got.stdout and ("grown" if new > size else "shrunk") in got.stdout
    d.start = to
    assert_resized(d, new, partuuid)


def test_fat_grows_and_shrinks_with_libparted_and_keeps_its_label(loop_device, tmp_path) -> None:
    """backend.fs.fatfs: fatresize's engine on a view of the partition, the table entry diskplan's (PARTUUID kept)."""
    d = make_disk(loop_device, tmp_path, start=2048, size=200_000, fs="vfat", disk_mib=160)
    with open(d.dev, "r+b") as f:  # as mkfs.fat on the partition node writes it: "hidden sectors" = its start
        f.seek(2048 * 512 + 28)
        f.write((2048).to_bytes(4, "little"))
    with open(d.dev, "rb") as f:
        f.seek(2048 * 512)
        oem = f.read(11)[3:]
    partuuid = entry(d)[2]
    dry = diskplan(d, "resize", d.dev, "--partition", "1", "--size", "150000s")
    assert "can shrink to" in dry.stdout and "1. resize the vfat filesystem" in dry.stdout, dry.stdout + dry.stderr
    for size in (250_000, 150_000):  # a FAT16 of 2 KiB clusters grows to 65524 clusters at most (about 262000s)
        got = resize(d, size)
        assert got.returncode == 0, got.stdout + got.stderr
        assert entry(d) == (2048, size, partuuid)
        with View(d.dev, 2048, size) as v:
            check = subprocess.run([*CHECK["vfat"], v], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr  # the boot sector's label put back
            ids = run("blkid", "-p", "-o", "export", v).split()
            assert {"TYPE=vfat", "LABEL_FATBOOT=MOVED", "LABEL=MOVED", "VERSION=FAT16"} <= set(ids), ids
            assert file_sums(v, "vfat", list(d.sums)) == d.sums
            with open(v, "rb") as f:
                boot = f.read(32)  # libparted wrote its own OEM name and hidden sectors 0 (the view's start)
                assert (boot[3:11], int.from_bytes(boot[28:32], "little")) == (oem, 2048)
                f.seek(19)  # the boot sector's sector count: the filesystem fills its partition
                small = int.from_bytes(f.read(2), "little")
                f.seek(32)
                assert (small or int.from_bytes(f.read(4), "little")) == size


def test_a_fat_resize_that_needs_a_fat16_conversion_is_refused(loop_device, tmp_path) -> None:
    """fatresize -f converts FAT32 to FAT16 when libparted asks; diskplan answers Cancel and writes nothing."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(220 << 20)
    run("sfdisk", "-q", str(img), input="label: gpt\nstart=2048, size=400000, type=L\n")
    dev = loop_device(img)
    with View(dev, 2048, 400_000, read_only=False) as v:
        run("mkfs.vfat", "-I", "-F", "32", "-s", "8", "-n", "MOVED", v)
    d = Disk(dev, "gpt", 1, 2048, 400_000, "vfat", {}, tmp_path / "state")
    before = entry(d)
    got = resize(d, 300_000)
    assert got.returncode == 3 and "by converting to FAT16" in got.stderr, got.stdout + got.stderr
    assert "nothing was changed" in got.stderr and entry(d) == before
    with View(dev, 2048, 400_000) as v:
        assert "VERSION=FAT32" in run("blkid", "-p", "-o", "export", v)


def test_a_fat_with_4096_byte_sectors_is_refused_before_libparted_corrupts_it(loop_device, tmp_path) -> None:
    """libparted's FAT resizer reads a FAT of 4096-byte sectors (an ESP on a 4Kn disk has them) as if they were
    512: its minimum says "bigger than its volume", and a grow left "both FATs corrupt" (fsck.fat)."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(700 << 20)
    dev = loop_device(img, sector_size=4096)
    run("sfdisk", "-q", dev, input="label: gpt\nstart=256, size=80000, type=L\n")
    with View(dev, 256 * 8, 80_000 * 8, read_only=False) as v:
        run("mkfs.vfat", "-I", "-F", "32", "-S", "4096", "-s", "1", "-n", "MOVED", v)
    d = Disk(dev, "gpt", 1, 256, 80_000, "vfat", {}, tmp_path / "state")
    before = entry(d)
    got = resize(d, 120_000)
    assert got.returncode == 1 and "512-byte sectors only" in got.stdout + got.stderr, got.stdout + got.stderr
    assert entry(d) == before  # refused before the entry was grown
    with View(dev, 256 * 8, 80_000 * 8) as v:
        check = subprocess.run([*CHECK["vfat"], v], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "LABEL=MOVED" in run("blkid", "-p", "-o", "export", v)


def test_the_planner_is_told_a_4096_byte_fat_cannot_be_resized(tmp_path) -> None:
    """What the planner measures before a resize says so too (it used to offer a grow that the write refused)."""
    from diskplan.backend.move.resize import content_limits

    for sector, resizable in ((4096, False), (512, True)):
        img = tmp_path / f"fat{sector}.img"
        with open(img, "wb") as f:
            f.truncate(64 << 20)
        run("mkfs.vfat", "-F", "32", "-S", str(sector), "-s", "1", str(img))
        got = content_limits(str(img), 0, (64 << 20) // 512, 512)
        assert got.fs == "vfat" and got.grow is resizable, got
        assert ("512-byte sectors only" in got.why) is not resizable, got.why
