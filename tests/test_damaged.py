"""Damaged tables made by real tools and then broken the way disks break: one GPT copy lost or corrupted,
both, a grown or truncated image, a hybrid MBR, an extended partition without its EBR, odd image sizes.
gdisk/sgdisk and sfdisk are the referees: which GPT copy is good, what the partitions are, and whether our
planned repair leaves a table they find no problem with."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

from diskplan.backend.read.reader import ReadError, read
from diskplan.model.disk import Disk
from diskplan.model.findings.codes import (
    EBR_CHAIN_DAMAGED,
    EXTENDED_WITHOUT_EBR,
    GPT_BACKUP_DAMAGED,
    GPT_BACKUP_NOT_AT_END,
    GPT_BOTH_DAMAGED,
    GPT_NO_PROTECTIVE_MBR,
    GPT_PRIMARY_DAMAGED,
    HYBRID_MBR,
    OVERLAP,
    SECTOR_SIZE_MISMATCH,
    SIZE_NOT_SECTOR_MULTIPLE,
    TABLE_LARGER_THAN_DISK,
    TINY_DISK,
    WHOLE_DISK_FS,
)
from diskplan.model.findings.report import build_report
from helpers.tools import need_tool, run
from helpers.units import SECTOR, MiB


def codes(disk: Disk) -> set[str]:
    return {f.code for f in build_report(disk).all_findings}


def parts(disk: Disk) -> dict[int, tuple[int, int]]:
    return {p.number: (p.start, p.end) for p in disk.table.partitions}


def sgdisk_parts(image: pathlib.Path) -> dict[int, tuple[int, int]]:
    """number -> (start, end) as `sgdisk -p` prints them."""
    out = run(need_tool("sgdisk"), "-p", str(image))
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\d+)\s+(\d+)\s+(\d+)\s", line)
        if m:
            found[int(m[1])] = (int(m[2]), int(m[3]))
    return found


def gdisk_verdict(image: pathlib.Path) -> dict[str, str]:
    """gdisk's own CRC verdicts: {"Main header": "OK", "Backup partition table": "ERROR", ...}."""
    proc = subprocess.run([need_tool("gdisk"), "-l", str(image)], capture_output=True, text=True, input="q\n")
    text = proc.stdout + proc.stderr  # gdisk prints its CRC verdicts on stderr
    return dict(re.findall(r"^(Main header|Backup header|Main partition table|Backup partition table): (\w+)",
                           text, re.M))


def sgdisk_verify_clean(image: pathlib.Path) -> bool:
    proc = subprocess.run([need_tool("sgdisk"), "-v", str(image)], capture_output=True, text=True)
    return "No problems found" in proc.stdout


@pytest.fixture(scope="module")
def gpt_template(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A 64 MiB GPT made by sgdisk: three partitions, names, the usual 128-entry arrays."""
    image = tmp_path_factory.mktemp("gpt") / "template.img"
    os.truncate(os.open(image, os.O_CREAT | os.O_WRONLY), 0)
    os.truncate(image, 64 * MiB)
    run(need_tool("sgdisk"), "-n1:2048:+8M", "-c1:boot", "-t1:ef00", "-n2:0:+16M", "-c2:root", "-n3:0:0", str(image))
    return image


@pytest.fixture
def gpt_image(gpt_template: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    """A fresh copy of the template for each test to damage (sgdisk takes a second per run)."""
    image = tmp_path / "disk.img"
    run("cp", "--sparse=always", str(gpt_template), str(image))
    return image


def poke(image: pathlib.Path, offset: int, data: bytes) -> None:
    with open(image, "r+b") as f:
        f.seek(offset)
        f.write(data)


def flip(image: pathlib.Path, offset: int) -> None:
    with open(image, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def apply_repair(disk: Disk, image: pathlib.Path) -> None:
    assert disk.repair is not None
    for lba, data in disk.repair.writes:
        poke(image, lba * SECTOR, data)


def last_lba(image: pathlib.Path) -> int:
    return image.stat().st_size // SECTOR - 1


# --- GPT: one copy damaged ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "which", "gdisk_key", "problem"),
    [
        (lambda img: poke(img, 1 * SECTOR, bytes(SECTOR)), "primary", "Main header", "no GPT header at LBA 1"),
        (lambda img: flip(img, 2 * SECTOR + 56), "primary", "Main partition table", "entry array CRC does not match"),
        (lambda img: flip(img, 1 * SECTOR + 60), "primary", "Main header", "header CRC does not match"),
        (lambda img: poke(img, last_lba(img) * SECTOR, bytes(SECTOR)), "backup", "Backup header", "no GPT header"),
        (lambda img: flip(img, (last_lba(img) - 32) * SECTOR + 60), "backup", "Backup partition table",
         "entry array CRC does not match"),
    ],
    ids=["primary-header-zeroed", "primary-entries-flipped", "primary-header-flipped", "backup-header-zeroed",
         "backup-entries-flipped"],
)
def test_one_damaged_gpt_copy_is_named_the_good_one_shown_and_the_repair_works(
    gpt_image: pathlib.Path, damage: Callable[[pathlib.Path], None], which: str, gdisk_key: str, problem: str
) -> None:
    before = sgdisk_parts(gpt_image)
    damage(gpt_image)
    assert gdisk_verdict(gpt_image)[gdisk_key] == "ERROR", "the referee sees the same damage"

    disk = read(str(gpt_image))
    code = GPT_PRIMARY_DAMAGED if which == "primary" else GPT_BACKUP_DAMAGED
    found = [f for f in disk.findings if f.code == code]
    assert found, codes(disk)
    good = "backup" if which == "primary" else "primary"
    assert f"the {which} GPT is damaged" in found[0].message and f"the {good} copy is good" in found[0].message
    assert problem in found[0].message
    assert disk.table.label == "gpt" and parts(disk) == before
    assert {p.name for p in disk.table.partitions} >= {"boot", "root"}
    p1 = disk.table.by_number(1)
    assert p1 is not None and p1.type == "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"  # from the good copy's bytes

    # The repair is planned, not done: the image is untouched until the writes are applied.
    assert disk.repair is not None and disk.repair.good == good and disk.repair.rewrite == which
    assert gdisk_verdict(gpt_image)[gdisk_key] == "ERROR"
    apply_repair(disk, gpt_image)
    assert sgdisk_verify_clean(gpt_image), run("sgdisk", "-v", str(gpt_image))
    assert sgdisk_parts(gpt_image) == before
    again = read(str(gpt_image))
    assert not codes(again) & {GPT_PRIMARY_DAMAGED, GPT_BACKUP_DAMAGED, GPT_BOTH_DAMAGED}
    assert again.repair is None and not again.table.read_only and again.messages == ()


def test_a_gpt_whose_protective_mbr_was_wiped(gpt_image: pathlib.Path) -> None:
    before = sgdisk_parts(gpt_image)
    poke(gpt_image, 0, bytes(SECTOR))
    gdisk = subprocess.run([need_tool("gdisk"), "-l", str(gpt_image)], capture_output=True, text=True, input="q\n")
    assert "MBR: not present" in gdisk.stdout and "GPT: present" in gdisk.stdout
    disk = read(str(gpt_image))
    assert GPT_NO_PROTECTIVE_MBR in codes(disk)
    assert parts(disk) == before and disk.table.label == "gpt" and disk.table.read_only
    assert disk.repair is not None and disk.repair.rewrite == "protective MBR"
    apply_repair(disk, gpt_image)
    assert sgdisk_verify_clean(gpt_image)
    again = read(str(gpt_image))
    assert again.table.label == "gpt" and parts(again) == before and not again.table.read_only
    assert again.findings == ()


def test_both_gpt_copies_damaged(gpt_image: pathlib.Path) -> None:
    flip(gpt_image, 1 * SECTOR + 60)
    flip(gpt_image, last_lba(gpt_image) * SECTOR + 60)
    gdisk = subprocess.run([need_tool("gdisk"), "-l", str(gpt_image)], capture_output=True, text=True, input="q\n")
    assert "GPT: not present" in gdisk.stdout  # the referee finds no usable copy either
    disk = read(str(gpt_image))
    assert GPT_BOTH_DAMAGED in codes(disk)
    assert not disk.table.partitions and disk.table.label is None, "the protective MBR is not shown as a table"
    assert disk.repair is None
    assert disk.geometry.sectors == 64 * MiB // SECTOR  # a new label can still be planned


def test_a_grown_image_has_its_backup_gpt_before_the_end(gpt_image: pathlib.Path) -> None:
    before = sgdisk_parts(gpt_image)
    os.truncate(gpt_image, 80 * MiB)
    disk = read(str(gpt_image))
    found = [f for f in disk.findings if f.code == GPT_BACKUP_NOT_AT_END]
    assert found and f"LBA {64 * MiB // SECTOR - 1}" in found[0].message
    assert parts(disk) == before and not disk.table.read_only


def test_a_truncated_gpt_image_is_read_only_with_partitions_past_the_end(gpt_image: pathlib.Path) -> None:
    before = sgdisk_parts(gpt_image)
    os.truncate(gpt_image, 20 * MiB)
    disk = read(str(gpt_image))
    assert TABLE_LARGER_THAN_DISK in codes(disk)
    assert parts(disk) == before
    assert "past-end-of-disk" in {f.code for f in build_report(disk).all_findings if f.partition == 3}
    assert disk.table.read_only and disk.repair is None


# --- hybrid MBR ----------------------------------------------------------------------------------------


def test_a_hybrid_mbr_shows_both_views_and_is_read_only(gpt_image: pathlib.Path) -> None:
    run(need_tool("sgdisk"), "-h", "1:2", str(gpt_image))
    disk = read(str(gpt_image))
    assert HYBRID_MBR in codes(disk)
    assert parts(disk) == sgdisk_parts(gpt_image)
    assert len(disk.views) == 1 and disk.views[0].label == "msdos" and disk.views[0].read_only
    nested = run(need_tool("sfdisk"), "--dump", "--label-nested", "dos", str(gpt_image))
    theirs = {
        int(m[1]): (int(m[2]), int(m[2]) + int(m[3]) - 1, int(m[4], 16))
        for m in re.finditer(r"(\d+) : start=\s*(\d+), size=\s*(\d+), type=([0-9a-f]+)", nested)
    }
    ours = {p.number: (p.start, p.end, int(p.type, 16)) for p in disk.views[0].partitions}
    assert ours == theirs
    assert "hybrid MBR" in disk.table.read_only


# --- msdos ---------------------------------------------------------------------------------------------


@pytest.fixture
def dos_image(sparse_image: Callable[..., pathlib.Path]) -> pathlib.Path:
    image = sparse_image(64 * MiB)
    layout = "label: dos\nstart=2048, size=16384, type=83\nstart=18432, type=5\nstart=20480, size=8192, type=83\n"
    layout += "start=30720, size=8192, type=82\n"
    run(need_tool("sfdisk"), "-q", str(image), input=layout)
    return image


def test_an_extended_partition_without_its_ebr(dos_image: pathlib.Path) -> None:
    assert set(parts(read(str(dos_image)))) == {1, 2, 5, 6}
    poke(dos_image, 18432 * SECTOR, bytes(SECTOR))  # the first EBR, as images that kept only the MBR lose it
    disk = read(str(dos_image))
    found = [f for f in build_report(disk).all_findings if f.code == EXTENDED_WITHOUT_EBR]
    assert found and found[0].partition == 2 and "LBA 18432" in found[0].message
    sfdisk_numbers = {int(n) for n in re.findall(r"img(\d+) :", run("sfdisk", "--dump", str(dos_image)))}
    assert set(parts(disk)) == sfdisk_numbers == {1, 2}


def test_a_looping_ebr_chain_is_bounded_and_read_only(dos_image: pathlib.Path) -> None:
    # Point the second EBR's link at itself: a loop a naive reader follows forever.
    raw = dos_image.read_bytes()
    first_ebr = raw[18432 * SECTOR : 18433 * SECTOR]
    link = int.from_bytes(first_ebr[446 + 16 + 8 : 446 + 16 + 12], "little")
    ebr2 = 18432 + link
    entry = bytearray(raw[ebr2 * SECTOR + 446 + 16 : ebr2 * SECTOR + 446 + 32])
    entry[4] = 0x05
    entry[8:12] = link.to_bytes(4, "little")  # relative to the extended start: this same EBR
    entry[12:16] = (1).to_bytes(4, "little")
    poke(dos_image, ebr2 * SECTOR + 446 + 16, bytes(entry))
    disk = read(str(dos_image), timeout=20)
    found = [f for f in build_report(disk).all_findings if f.code == EBR_CHAIN_DAMAGED]
    assert found and found[0].partition == 2 and "loops back" in found[0].message
    assert disk.table.read_only
    assert {1, 2, 5} <= set(parts(disk))


def test_overlapping_partitions_are_read_only(sparse_image: Callable[..., pathlib.Path]) -> None:
    image = sparse_image(16 * MiB)
    mbr = bytearray(SECTOR)
    for i, (start, size) in enumerate([(2048, 8192), (8192, 8192)]):
        e = 446 + 16 * i
        mbr[e + 4] = 0x83
        mbr[e + 8 : e + 12] = start.to_bytes(4, "little")
        mbr[e + 12 : e + 16] = size.to_bytes(4, "little")
    mbr[510:512] = b"\x55\xaa"
    poke(image, 0, bytes(mbr))
    sfdisk = run(need_tool("sfdisk"), "--dump", str(image))
    assert "start=        8192" in sfdisk
    disk = read(str(image))
    assert parts(disk) == {1: (2048, 10239), 2: (8192, 16383)}
    assert OVERLAP in codes(disk) and "overlap" in disk.table.read_only


def test_an_image_whose_size_is_not_a_whole_number_of_sectors(dos_image: pathlib.Path) -> None:
    with open(dos_image, "ab") as f:
        f.write(b"x" * 100)
    disk = read(str(dos_image))
    found = [f for f in disk.findings if f.code == SIZE_NOT_SECTOR_MULTIPLE]
    assert found and "the last 100 B are unused" in found[0].message
    assert disk.geometry.sectors == 64 * MiB // SECTOR and set(parts(disk)) == {1, 2, 5, 6}


# --- tiny and empty files -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 100, 511])
def test_files_smaller_than_a_sector_are_refused_in_one_line(tmp_path: pathlib.Path, size: int) -> None:
    image = tmp_path / "tiny.img"
    image.write_bytes(b"\x01" * size)
    with pytest.raises(ReadError, match="nothing to read"):
        read(str(image))
    proc = subprocess.run([sys.executable, "-m", "diskplan", "check", str(image)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_one_sector_mbr_image(tmp_path: pathlib.Path) -> None:
    mbr = bytearray(SECTOR)
    mbr[446 + 4], mbr[446 + 8 : 446 + 12], mbr[446 + 12 : 446 + 16] = 0x0C, (2048).to_bytes(4, "little"), (
        61440
    ).to_bytes(4, "little")
    mbr[510:512] = b"\x55\xaa"
    image = tmp_path / "mbr.bin"
    image.write_bytes(bytes(mbr))
    disk = read(str(image))
    assert disk.geometry.sectors == 1
    assert {TINY_DISK, "past-end-of-disk"} <= codes(disk)
    assert parts(disk) == {1: (2048, 63487)} and disk.table.read_only


# --- no table -------------------------------------------------------------------------------------------


def test_a_whole_disk_ext4_is_shown_as_such(sparse_image: Callable[..., pathlib.Path]) -> None:
    image = sparse_image(32 * MiB)
    run(need_tool("mkfs.ext4"), "-q", "-F", str(image))
    blkid = run(need_tool("blkid"), "-p", "-o", "value", "-s", "TYPE", str(image)).strip()
    disk = read(str(image))
    assert disk.table.label is None and disk.filesystem == blkid == "ext4"
    assert WHOLE_DISK_FS in codes(disk) and "no-partition-table" not in codes(disk)


def test_a_whole_disk_swap_is_shown_as_such(sparse_image: Callable[..., pathlib.Path]) -> None:
    image = sparse_image(32 * MiB)
    run(need_tool("mkswap"), str(image))
    assert run("blkid", "-p", "-o", "value", "-s", "TYPE", str(image)).strip() == "swap"
    disk = read(str(image))
    assert disk.table.label is None and disk.filesystem == "swap"


def test_a_512_byte_gpt_on_a_4096_byte_loop_device_says_so(
    gpt_image: pathlib.Path, loop_device: Callable[..., str]
) -> None:
    dev = loop_device(gpt_image, sector_size=4096, read_only=True)
    disk = read(dev)
    assert disk.geometry.logical == 4096
    found = [f for f in disk.findings if f.code == SECTOR_SIZE_MISMATCH]
    assert found and found[0].message == (
        "this looks like a 512-byte-sector disk: attach it with losetup --sector-size 512"
    )
    assert disk.table.read_only
