"""An msdos disk laid out the way DOS-era fdisk did, for the logical-partition move tests: the extended
partition at 63, partition 5's EBR at 63 (data at 126), partition 6's EBR at 39000 (data at 39063), each
holding ext4 with files of known SHA-256; the EBR chain written by hand, and the referees that judge it
afterwards (sfdisk, parted, e2fsck, blkid, the files' checksums)."""

from __future__ import annotations

import json
import pathlib
import subprocess

from helpers.movedisk import CHECK, Disk, View, file_sums, populate
from helpers.tools import need_tool, run
from helpers.units import MiB

EXT = (63, 150_000)  # the extended partition: start, size (ends at 150062)
LAYOUT = {5: (63, 126), 6: (39_000, 39_063)}  # number: (EBR, data start)
SIZE = 30_000


def _entry(sector: bytearray, slot: int, rel: int, size: int, type_id: int) -> None:
    at = 446 + 16 * slot
    sector[at + 4] = type_id
    sector[at + 8 : at + 16] = rel.to_bytes(4, "little") + size.to_bytes(4, "little")


def write_chain(img: pathlib.Path, ext: tuple[int, int], logicals: list[tuple[int, int, int]]) -> None:
    """An MBR with the extended partition only (sfdisk), then the EBR chain by hand: (EBR, start, size) each."""
    run("sfdisk", "-q", str(img), input=f"label: dos\nstart={ext[0]}, size={ext[1]}, type=5\n")
    with open(img, "r+b") as f:
        for i, (ebr, start, size) in enumerate(logicals):
            sector = bytearray(512)
            sector[510:512] = b"\x55\xaa"
            _entry(sector, 0, start - ebr, size, 0x83)
            if i + 1 < len(logicals):
                nxt, nstart, nsize = logicals[i + 1]
                _entry(sector, 1, nxt - ext[0], nstart + nsize - nxt, 0x05)
            f.seek(ebr * 512)
            f.write(sector)


def make(
    loop_device, tmp: pathlib.Path, layout: dict[int, tuple[int, int]] = LAYOUT, size: int = SIZE
) -> dict[int, Disk]:
    need_tool("mkfs.ext4")
    img = tmp / "disk.img"
    with open(img, "wb") as f:
        f.truncate(96 * MiB)
    write_chain(img, EXT, [(ebr, start, size) for ebr, start in layout.values()])
    dev = loop_device(img)
    disks = {}
    for n, (_, start) in layout.items():
        with View(dev, start, size, read_only=False) as v:
            run("mkfs.ext4", "-q", "-L", f"part{n}", v)
            sums = populate(v, "ext4", tmp, seed=n)
        disks[n] = Disk(dev, "dos", n, start, size, "ext4", sums, tmp / "state")
    return disks


def dump(dev: str) -> dict[int, tuple[int, int, str]]:
    """number: (start, size, type) as sfdisk reads the table."""
    table = json.loads(run("sfdisk", "--json", dev))["partitiontable"]["partitions"]
    return {int(p["node"].rsplit("p", 1)[1]): (p["start"], p["size"], p["type"]) for p in table}


def assert_whole(disks: dict[int, Disk], ext_size: int = EXT[1]) -> None:
    """The chain reads back with every number (sfdisk, parted), and each filesystem is clean with its files."""
    dev = next(iter(disks.values())).dev
    want = {1: (EXT[0], ext_size, "5"), **{n: (d.start, d.size, "83") for n, d in disks.items()}}
    assert dump(dev) == want
    verify = subprocess.run(["sfdisk", "--verify", dev], capture_output=True, text=True)
    assert verify.returncode == 0 and "No errors detected" in verify.stdout, verify.stdout + verify.stderr
    parted = run("parted", "-s", "-m", dev, "unit", "s", "print")
    for n, d in disks.items():
        assert f"\n{n}:{d.start}s:{d.start + d.size - 1}s:" in parted, parted
    for n, d in disks.items():
        with View(dev, d.start, d.size) as v:
            check = subprocess.run([*CHECK["ext4"], v], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
            assert f"LABEL=part{n}" in run("blkid", "-p", "-o", "export", v)
            assert file_sums(v, "ext4", list(d.sums)) == d.sums


def ebr_of(dev: str, number: int) -> int:
    from diskplan.backend.raw.ebrchain import read_chain

    return read_chain(dev, 512).link(number).lba
