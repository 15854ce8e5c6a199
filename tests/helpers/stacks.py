"""Storage-stack headers for the tests: LVM2 PVs made by the real pvcreate (on loop devices, the file
descriptor warnings quiet), and md 1.x superblocks written from the format (md_p.h; there is no md driver
here, ``mdadm --examine`` referees them)."""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

from diskplan.model import stack as S
from helpers.tools import need_tool
from helpers.units import MiB

LVM_QUIET = {"LVM_SUPPRESS_FD_WARNINGS": "1"}


def lvm(*cmd: str) -> str:

    proc = subprocess.run([need_tool(cmd[0]), *cmd[1:]], capture_output=True, text=True,
                          env={**os.environ, **LVM_QUIET})
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc.stdout


def pv_head(loop_device, sparse_image, size: int, *args: str) -> tuple[bytes, int]:
    """The first MiB of a PV pvcreate made on a loop device of ``size`` bytes, and its pe_start per pvs.
    (Partitions of loop devices have no device node here without udev: the header is copied into one.)"""
    pv = loop_device(sparse_image(size, "pv.img"))
    lvm("pvcreate", "-y", *args, pv)
    try:
        pe = int(lvm("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", pv).strip())
        with open(pv, "rb") as f:
            return f.read(MiB), pe
    finally:
        lvm("pvremove", "-y", pv)


def md_super(level: int, disks: int, chunk_sectors: int, data_offset: int, data_size: int,
             super_offset: int = 8) -> bytes:
    """A ``struct mdp_superblock_1`` as md_p.h lays it out (little-endian), with its checksum."""
    sb = bytearray(4096)
    struct.pack_into("<II", sb, 0, S.MD_MAGIC, 1)
    sb[16:32] = bytes(range(1, 17))  # set_uuid
    sb[32:39] = b"teach:0"
    struct.pack_into("<Q", sb, 64, 1_700_000_000)  # ctime
    struct.pack_into("<iIQII", sb, 72, level, 2 if level == 5 else 0, data_size, chunk_sectors, disks)
    struct.pack_into("<QQQ", sb, 128, data_offset, data_size, super_offset)  # sectors; 8 = 4 KiB: version 1.2
    struct.pack_into("<I", sb, 220, disks)  # max_dev: one role per device follows at 256
    for i in range(disks):
        struct.pack_into("<H", sb, 256 + 2 * i, i)
    struct.pack_into("<I", sb, 216, S.md_csum(bytes(sb)))
    return bytes(sb)


def md_image(path: Path, size: int, sb: bytes, at: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)
        f.seek(at)
        f.write(sb)
