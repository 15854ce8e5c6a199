"""Rewrite one partition's table entry for a data move: its start and end, nothing else.

Why raw bytes instead of a libparted commit: libparted can only move a partition by deleting and
re-creating it, which gives it a new GPT unique GUID (its PARTUUID, which /etc/fstab and boot loaders
may name) and re-writes every other entry; on msdos, re-creating entries is where sfdisk --move-data
dropped logical partitions (util-linux #3568). Here exactly the entry's LBA fields change: on GPT in
both copies (entry array, its CRC, the header CRC), on msdos in the MBR (LBA and CHS start). Every other
byte of the table stays as it was, and the rewrite is idempotent, so ``resume`` can simply do it again.
Logical msdos partitions are refused earlier (their EBR would have to move with them).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from diskplan.backend import backup as bk
from diskplan.backend.gptcheck import GptCopy, check_gpt
from diskplan.backend.rawtable import mbr_entries


class EntryError(Exception):
    """The table does not hold the entry as expected: one line for the user."""


@dataclass(frozen=True)
class Entry:
    """Where the table says partition ``number`` is, and its GPT unique GUID ("" on msdos)."""

    label: str
    number: int
    start: int
    end: int
    guid: str = ""


def _gpt_copies(path: str, sector_size: int, sectors: int) -> tuple[GptCopy, GptCopy]:
    state = check_gpt(path, sector_size, sectors)
    if state is None or not state.primary.ok or not state.backup.ok:
        raise EntryError(f"the GPT on {path} is not whole (both copies must pass their checks): repair it first")
    return state.primary, state.backup


def _entry_bytes(copy: GptCopy, number: int) -> tuple[int, int]:
    assert copy.header is not None
    if not 1 <= number <= copy.header.entry_count:
        raise EntryError(f"the GPT has no entry {number}")
    at = (number - 1) * copy.header.entry_size
    return at, copy.header.entry_size


def read_entry(path: str, label: str, number: int, sector_size: int, sectors: int) -> Entry:
    if label == "gpt":
        primary, _ = _gpt_copies(path, sector_size, sectors)
        # The primary is what readers use; a rewrite interrupted between the copies is simply done again.
        e = next((e for e in primary.entries if e.number == number), None)
        if e is None:
            raise EntryError(f"the GPT has no partition {number}")
        return Entry("gpt", number, e.first, e.last, e.part_guid)
    if label == "msdos":
        if not 1 <= number <= 4:
            raise EntryError("moving a logical partition needs its EBR moved too: not supported yet")
        entries = mbr_entries(bk.read_sectors(path, 0, 1, sector_size))
        if not entries or not entries[number - 1].size:
            raise EntryError(f"the MBR has no partition {number}")
        m = entries[number - 1]
        return Entry("msdos", number, m.start, m.start + m.size - 1)
    raise EntryError(f"diskplan moves partitions on gpt and msdos tables, not {label}")


def _chs(lba: int) -> bytes:
    """CHS for the usual 255 heads × 63 sectors geometry; the 'beyond CHS' marker past cylinder 1023."""
    c, rest = divmod(lba, 255 * 63)
    if c > 1023:
        return bytes((0xFE, 0xFF, 0xFF))
    h, s = divmod(rest, 63)
    return bytes((h, (s + 1) | ((c >> 2) & 0xC0), c & 0xFF))


def entry_writes(path: str, entry: Entry, to: int, sector_size: int, sectors: int) -> list[tuple[int, bytes]]:
    """The (LBA, sectors) writes that put ``entry`` at ``to`` (same length), all else unchanged."""
    length = entry.end - entry.start + 1
    if entry.label == "gpt":
        out: list[tuple[int, bytes]] = []
        for copy in _gpt_copies(path, sector_size, sectors)[::-1]:  # the backup first: readers trust the primary
            assert copy.header is not None
            at, _ = _entry_bytes(copy, entry.number)
            raw = bytearray(copy.raw_entries)
            raw[at + 32 : at + 40] = to.to_bytes(8, "little")
            raw[at + 40 : at + 48] = (to + length - 1).to_bytes(8, "little")
            size = int.from_bytes(copy.raw_header[12:16], "little")
            head = bytearray(copy.raw_header[:size])
            head[88:92] = (zlib.crc32(raw) & 0xFFFFFFFF).to_bytes(4, "little")
            head[16:20] = b"\0\0\0\0"
            head[16:20] = (zlib.crc32(head) & 0xFFFFFFFF).to_bytes(4, "little")
            pad = -len(raw) % sector_size
            out.append((copy.header.entries_lba, bytes(raw) + bytes(pad)))
            out.append((copy.lba, bytes(head) + copy.raw_header[size:]))
        return out
    mbr = bytearray(bk.read_sectors(path, 0, 1, sector_size))
    base = 446 + 16 * (entry.number - 1)
    mbr[base + 8 : base + 12] = to.to_bytes(4, "little")
    mbr[base + 1 : base + 4] = _chs(to)
    mbr[base + 5 : base + 8] = _chs(to + length - 1)
    return [(0, bytes(mbr))]


def rewrite_entry(path: str, entry: Entry, to: int, sector_size: int, sectors: int) -> Entry:
    """Move the entry to ``to``, sync, and read it back: the entry now, which must be at ``to`` with the
    same GUID. Raises EntryError when it is not."""
    bk.write_sectors(path, entry_writes(path, entry, to, sector_size, sectors), sector_size)
    now = read_entry(path, entry.label, entry.number, sector_size, sectors)
    length = entry.end - entry.start + 1
    if (now.start, now.end, now.guid) != (to, to + length - 1, entry.guid):
        raise EntryError(f"partition {entry.number} reads back at {now.start}..{now.end}, not {to}..{to + length - 1}")
    if entry.label == "gpt":
        _gpt_copies(path, sector_size, sectors)  # both copies still pass every check
    return now
