"""The Apple Partition Map and the BSD disklabel, read raw: libparted misreads the one (2048 B blocks) and
does not read the other stand-alone. Apart from backend.raw.rawtable because few disks have them: the reader
imports this only for a disk that does (each dataclass costs start-up time)."""

from __future__ import annotations

from diskplan.backend.raw.rawtable import read_bytes
from diskplan.model.value import value

# --- Apple Partition Map ------------------------------------------------------------------------------


@value
class ApmEntry:
    """One entry of an Apple Partition Map."""
    number: int  # the entry's index in the map, from 1 (what libblkid, parted and pdisk number)
    start: int  # in the map's blocks (the driver descriptor's block size), not in sectors
    count: int
    name: str
    type: str


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


def apm_block_size(sector0: bytes) -> int:
    """The driver descriptor's block size ("ER" signature), 0 when there is none."""
    if len(sector0) < 4 or sector0[:2] != b"ER":
        return 0
    size = int.from_bytes(sector0[2:4], "big")
    return size if size in (512, 1024, 2048, 4096) else 0


def apm_entries(path: str, max_entries: int = 256) -> tuple[int, list[ApmEntry]]:
    """(block size, map entries) of an Apple Partition Map; starts and counts in bytes / block size.
    Entry i lives at byte i × block size; every entry says how many entries the map has."""
    block = apm_block_size(read_bytes(path, 0, 512)) or 512
    out: list[ApmEntry] = []
    count = 1
    i = 1
    while i <= min(count, max_entries):
        raw = read_bytes(path, i * block, 512)
        if len(raw) < 88 or raw[:2] != b"PM":
            break
        if i == 1:
            count = int.from_bytes(raw[4:8], "big")
        out.append(
            ApmEntry(
                i,
                int.from_bytes(raw[8:12], "big"),
                int.from_bytes(raw[12:16], "big"),
                _cstr(raw[16:48]),
                _cstr(raw[48:80]),
            )
        )
        i += 1
    return block, out


# --- BSD disklabel ------------------------------------------------------------------------------------

BSD_MAGIC = 0x82564557
BSD_LABEL_OFFSETS = (512, 64)  # i386 puts it in sector 1; some ports at byte 64 of sector 0


@value
class BsdPartition:
    """One slot of a BSD disklabel."""
    number: int  # slot index + 1 (a=1, b=2, c=3, ...), as sfdisk numbers them
    start: int
    size: int
    fstype: int


def bsd_label(path: str) -> tuple[int, list[BsdPartition]] | None:
    """(offset of the label, used slots) of a stand-alone BSD disklabel, or None."""
    for off in BSD_LABEL_OFFSETS:
        raw = read_bytes(path, off, 148 + 16 * 22)
        if len(raw) < 148 or int.from_bytes(raw[0:4], "little") != BSD_MAGIC:
            continue
        if int.from_bytes(raw[132:136], "little") != BSD_MAGIC:
            continue
        n = min(int.from_bytes(raw[138:140], "little"), 22, (len(raw) - 148) // 16)
        parts = []
        for i in range(n):
            e = raw[148 + 16 * i : 164 + 16 * i]
            size, start, fstype = int.from_bytes(e[0:4], "little"), int.from_bytes(e[4:8], "little"), e[12]
            if size and fstype:  # fstype 0 is "unused" (the whole-disk slot c is usually that)
                parts.append(BsdPartition(i + 1, start, size, fstype))
        return off, parts
    return None
