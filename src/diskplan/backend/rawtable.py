"""Parse MBR, EBR and GPT structures from raw bytes: type ids libparted 3.5 does not expose, and the
CRCs and header fields needed to judge a damaged GPT. Pure Python over ``bytes``; reads files only
through ``read_sectors``."""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass


def read_sectors(path: str, lba: int, count: int, sector: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(lba * sector)
        return f.read(count * sector)


@dataclass(frozen=True)
class MbrEntry:
    index: int  # 0..3
    boot: bool
    type_id: int
    start: int  # relative LBA as stored
    size: int


def mbr_entries(sector0: bytes) -> list[MbrEntry]:
    if len(sector0) < 512 or sector0[510:512] != b"\x55\xaa":
        return []
    out = []
    for i in range(4):
        e = sector0[446 + 16 * i : 446 + 16 * (i + 1)]
        out.append(
            MbrEntry(
                i,
                e[0] == 0x80,
                e[4],
                int.from_bytes(e[8:12], "little"),
                int.from_bytes(e[12:16], "little"),
            )
        )
    return out


def msdos_types(path: str, sector: int, max_logical: int = 256) -> dict[int, int]:
    """Partition number -> MBR type id, following the EBR chain for logical partitions (5, 6, ...)."""
    types: dict[int, int] = {}
    entries = mbr_entries(read_sectors(path, 0, 1, sector))
    ext_start = None
    for e in entries:
        if e.type_id and e.size:
            types[e.index + 1] = e.type_id
            if e.type_id in (0x05, 0x0F, 0x85):
                ext_start = e.start
    if ext_start is None:
        return types
    ebr, number, seen = ext_start, 5, set()
    while ebr not in seen and len(seen) < max_logical:
        seen.add(ebr)
        try:
            links = mbr_entries(read_sectors(path, ebr, 1, sector))
        except OSError:
            break
        if not links:
            break
        if links[0].type_id:
            types[number] = links[0].type_id
            number += 1
        if not links[1].type_id or not links[1].start:
            break
        ebr = ext_start + links[1].start
    return types


@dataclass(frozen=True)
class GptHeader:
    lba: int  # where it was read
    valid: bool
    problem: str  # why not valid, empty when valid
    current: int = 0
    backup: int = 0
    first_usable: int = 0
    last_usable: int = 0
    disk_guid: str = ""
    entries_lba: int = 0
    entry_count: int = 0
    entry_size: int = 0
    entries_crc: int = 0


def parse_gpt_header(raw: bytes, lba: int) -> GptHeader:
    if len(raw) < 92 or raw[:8] != b"EFI PART":
        return GptHeader(lba, False, "no GPT signature")
    size = int.from_bytes(raw[12:16], "little")
    if not 92 <= size <= len(raw):
        return GptHeader(lba, False, f"header size {size} is impossible")
    stored = int.from_bytes(raw[16:20], "little")
    blank = raw[:16] + b"\0\0\0\0" + raw[20:size]
    crc_ok = zlib.crc32(blank) & 0xFFFFFFFF == stored
    h = GptHeader(
        lba,
        crc_ok,
        "" if crc_ok else "header CRC does not match",
        current=int.from_bytes(raw[24:32], "little"),
        backup=int.from_bytes(raw[32:40], "little"),
        first_usable=int.from_bytes(raw[40:48], "little"),
        last_usable=int.from_bytes(raw[48:56], "little"),
        disk_guid=str(uuid.UUID(bytes_le=raw[56:72])).upper(),
        entries_lba=int.from_bytes(raw[72:80], "little"),
        entry_count=int.from_bytes(raw[80:84], "little"),
        entry_size=int.from_bytes(raw[84:88], "little"),
        entries_crc=int.from_bytes(raw[88:92], "little"),
    )
    return h


@dataclass(frozen=True)
class GptEntry:
    number: int
    type_guid: str
    part_guid: str
    first: int
    last: int
    name: str


def parse_gpt_entries(raw: bytes, count: int, size: int) -> list[GptEntry]:
    out = []
    for i in range(count):
        e = raw[i * size : (i + 1) * size]
        if len(e) < 128 or e[:16] == b"\0" * 16:
            continue
        out.append(
            GptEntry(
                i + 1,
                str(uuid.UUID(bytes_le=e[0:16])).upper(),
                str(uuid.UUID(bytes_le=e[16:32])).upper(),
                int.from_bytes(e[32:40], "little"),
                int.from_bytes(e[40:48], "little"),
                e[56:128].decode("utf-16-le", "replace").rstrip("\0"),
            )
        )
    return out


def gpt_types(path: str, sector: int) -> dict[int, str]:
    """Partition number -> type GUID from the primary GPT (empty when it cannot be read)."""
    try:
        header = parse_gpt_header(read_sectors(path, 1, 1, sector), 1)
        if not header.valid or not 0 < header.entry_count <= 4096 or header.entry_size < 128:
            return {}
        nbytes = header.entry_count * header.entry_size
        raw = read_sectors(path, header.entries_lba, -(-nbytes // sector), sector)
    except OSError:
        return {}
    return {e.number: e.type_guid for e in parse_gpt_entries(raw, header.entry_count, header.entry_size)}
