"""Images and what the referees read from them: referees' views of a table, random data in partitions and
its checksums, kernel partitions, mounts and swap on loop devices, and GPTs damaged the way disks break."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import re
import subprocess
from collections.abc import Callable, Iterator

import pytest

from diskplan.backend.raw import kernelparts
from diskplan.backend.write.steps import Host
from diskplan.discovery import inuse
from helpers.tools import need_tool, run
from helpers.units import SECTOR, MiB

HOST = Host(users=inuse.find_users, kernel_partitions=kernelparts.kernel_list)
_SFDISK_LINE = re.compile(r"^(\S+) : start=\s*(\d+), size=\s*(\d+), type=([0-9A-Fa-f-]+)(.*)$")


def fill(path: str | os.PathLike[str], start: int, count: int, sector_size: int) -> str:
    """Random bytes over ``count`` sectors from ``start``; returns their SHA-256."""
    data = os.urandom(count * sector_size)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, start * sector_size)
        os.fsync(fd)
    finally:
        os.close(fd)
    return hashlib.sha256(data).hexdigest()


def digest(path: str | os.PathLike[str], start: int, count: int, sector_size: int) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return hashlib.sha256(os.pread(fd, count * sector_size, start * sector_size)).hexdigest()
    finally:
        os.close(fd)


def file_sha(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sfdisk_header(dev: str | os.PathLike[str]) -> dict[str, str]:
    out = run(need_tool("sfdisk"), "--dump", str(dev))
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line and " : " not in line)


def sfdisk_parts(dev: str | os.PathLike[str]) -> list[tuple[int, int, int, str, str]]:
    """(number, start, size, type, name) per partition from ``sfdisk --dump``."""
    out = run(need_tool("sfdisk"), "--dump", str(dev))
    parts = []
    for line in out.splitlines():
        m = _SFDISK_LINE.match(line)
        if m:
            number = int(re.search(r"(\d+)$", m.group(1)).group(1))  # type: ignore[union-attr]
            name = re.search(r'name="([^"]*)"', m.group(5))
            parts.append((number, int(m.group(2)), int(m.group(3)), m.group(4).lower(), name.group(1) if name else ""))
    return sorted(parts)


def sfdisk_uuids(dev: str | os.PathLike[str]) -> dict[int, str]:
    out = run(need_tool("sfdisk"), "--dump", str(dev))
    found = {}
    for line in out.splitlines():
        m = _SFDISK_LINE.match(line)
        u = re.search(r"uuid=([0-9A-F-]+)", line)
        if m and u:
            found[int(re.search(r"(\d+)$", m.group(1)).group(1))] = u.group(1)  # type: ignore[union-attr]
    return found


def parted_parts(dev: str | os.PathLike[str]) -> list[tuple[int, int, int]]:
    """(number, start, end) per partition from ``parted -m -s DEV unit s print``."""
    out = run(need_tool("parted"), "-m", "-s", str(dev), "unit", "s", "print")
    rows = []
    for line in out.splitlines()[2:]:
        f = line.rstrip(";").split(":")
        rows.append((int(f[0]), int(f[1].rstrip("s")), int(f[2].rstrip("s"))))
    return sorted(rows)


def expect_sfdisk(label: str, parts: list[tuple[int, int, int, str, str]]) -> list[tuple[int, int, int, str, str]]:
    """What sfdisk prints for (number, start, end, type, name): sizes, GUIDs in lower case here, MBR ids
    as bare hex."""
    out = []
    for number, start, end, ptype, name in parts:
        t = ptype.lower() if label == "gpt" else f"{int(ptype, 16):x}"
        out.append((number, start, end - start + 1, t, name))
    return sorted(out)


def partx_update(dev: str) -> None:
    """Make the kernel list the partitions of ``dev`` (this kernel's loop devices do not rescan)."""
    subprocess.run(["partx", "-u", dev], capture_output=True)
    subprocess.run(["partx", "-a", dev], capture_output=True)


@contextlib.contextmanager
def mounted(node: str, where: pathlib.Path) -> Iterator[None]:
    need_tool("mkfs.ext4")
    where.mkdir()
    # Inode tables and journal zeroed now: by default the kernel's ext4lazyinit zeroes them in the seconds
    # after the mount, and a test that compares the disk's bytes before and after would see them change.
    run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", node)
    proc = subprocess.run(["mount", node, str(where)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount here: {proc.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


@contextlib.contextmanager
def swapping(node: str) -> Iterator[None]:
    need_tool("mkswap")
    run("mkswap", node)
    proc = subprocess.run(["swapon", node], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot swapon here: {proc.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["swapoff", node], capture_output=True)


# --- damaged GPTs -----------------------------------------------------------------------------------


def poke(image: pathlib.Path | str, offset: int, data: bytes) -> None:
    fd = os.open(image, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def flip(image: pathlib.Path | str, offset: int) -> None:
    fd = os.open(image, os.O_RDWR)
    try:
        b = os.pread(fd, 1, offset)
        os.pwrite(fd, bytes([b[0] ^ 0xFF]), offset)
    finally:
        os.close(fd)


def last_lba(image: pathlib.Path | str, sector: int = SECTOR) -> int:
    fd = os.open(image, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END) // sector - 1
    finally:
        os.close(fd)


DAMAGE: dict[str, Callable[[pathlib.Path | str], None]] = {
    "primary-header-zeroed": lambda img: poke(img, SECTOR, bytes(SECTOR)),
    "primary-header-flipped": lambda img: flip(img, SECTOR + 60),
    "primary-entries-flipped": lambda img: flip(img, 2 * SECTOR + 56),
    "backup-header-zeroed": lambda img: poke(img, last_lba(img) * SECTOR, bytes(SECTOR)),
    "backup-entries-flipped": lambda img: flip(img, (last_lba(img) - 32) * SECTOR + 60),
    "protective-mbr-zeroed": lambda img: poke(img, 0, bytes(SECTOR)),
}


def sgdisk_clean(target: pathlib.Path | str) -> bool:
    """`sgdisk -v` finds no problem, and found none while loading either: it verifies the table it loaded,
    after quietly rebuilding a bad header or a missing protective MBR in memory (said only on stderr).
    gdisk agrees that the GPT and its protective MBR are valid."""
    proc = subprocess.run([need_tool("sgdisk"), "-v", str(target)], capture_output=True, text=True)
    said = proc.stdout + proc.stderr
    gdisk = subprocess.run([need_tool("gdisk"), "-l", str(target)], capture_output=True, text=True, input="q\n")
    return (
        "No problems found" in proc.stdout
        and not re.search(r"corrupt|invalid|CRC|ERROR|regenerat|new protective MBR|Warning", said, re.I)
        and "Found valid GPT with protective MBR; using GPT." in gdisk.stdout
    )


def damaged_gpt(tmp_path: pathlib.Path) -> pathlib.Path:
    """A 32 MiB GPT made by sgdisk (boot, root), its backup header zeroed."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(32 * MiB)
    run(need_tool("sgdisk"), "-n1:2048:+8M", "-c1:boot", "-t1:ef00", "-n2:0:+8M", "-c2:root", str(img))
    DAMAGE["backup-header-zeroed"](img)
    assert not sgdisk_clean(img)
    return img
