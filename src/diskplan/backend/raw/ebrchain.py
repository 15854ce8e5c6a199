"""The msdos EBR chain as raw bytes: read it, and rewrite one logical partition's entry, its EBR's place,
the previous EBR's link and the extended partition's size, every other byte left as it was.

Raw bytes, not libparted: libparted (and libfdisk) rewrite every EBR of the chain from their own picture
of it; that is where ``sfdisk --move-data`` lost logical partitions (util-linux #3568, model.plan.ebrmove).

**Hidden** (as backend.move.moveentry hides a primary, before the first byte moves): an msdos entry with no
size is skipped by the kernel, libparted and libfdisk alike, and every later logical partition would then
be renumbered (/dev/sda6 showing up as /dev/sda5) until the move is done. So a logical entry is hidden as a
*parked* entry instead: type 0xDA ("non-FS data"), one sector long, on a free sector of the extended
partition (model.plan.ebrmove picks it). Measured with util-linux 2.41, parted 3.6 and this kernel: all three
keep every number; type 0 would make libparted skip it (and renumber), and an entry on its own EBR makes
libparted reject the whole table. No filesystem fits in one sector, so nothing mounts or checks it.

**Moving the EBR** (``relocate``): the new EBR (the old one's bytes, its entry hidden) is written and
synced first, to a free sector nothing points at; then the previous EBR's link is pointed at it, one
sector written at once. A crash between leaves the old chain whole; after, the new one.
"""

from __future__ import annotations

from diskplan.backend.faults import fault
from diskplan.backend.raw import sectorio
from diskplan.backend.raw.rawtable import chs, mbr_entries
from diskplan.model.labels import EXTENDED_IDS
from diskplan.model.value import value

PARKED_TYPE = 0xDA  # "Non-FS data": what a hidden logical entry says it holds
MAX_LOGICAL = 256


class ChainError(Exception):
    """The EBR chain is not what a logical move can work on: one line for the user."""


@value
class Link:
    """One EBR: where it is, its logical partition (absolute start, size, type id) and the next EBR (0: none)."""

    lba: int
    start: int
    size: int
    type_id: int
    next: int

    @property
    def parked(self) -> bool:
        return self.type_id == PARKED_TYPE and self.size == 1


@value
class Chain:
    slot: int  # the extended partition's MBR entry, 0..3
    ext_start: int
    ext_size: int
    links: tuple[Link, ...]

    @property
    def ext_end(self) -> int:
        return self.ext_start + self.ext_size - 1

    def link(self, number: int) -> Link:
        k = number - 5
        if not 0 <= k < len(self.links):
            raise ChainError(f"the EBR chain has no partition {number}")
        return self.links[k]


def read_chain(path: str, sector_size: int) -> Chain:
    """The extended partition and every EBR of its chain, in chain order. Raises ChainError when there is
    no extended partition, or the chain loops, leaves it, or holds an EBR with no partition (numbers would
    not follow chain positions)."""
    mbr = mbr_entries(sectorio.read_sectors(path, 0, 1, sector_size))
    ext = [e for e in mbr if e.type_id in EXTENDED_IDS and e.size]
    if len(ext) != 1:
        raise ChainError("the MBR has no extended partition" if not ext else "the MBR has two extended partitions")
    x = ext[0]
    links: list[Link] = []
    at = x.start
    while at:
        if len(links) >= MAX_LOGICAL or any(lk.lba == at for lk in links):
            raise ChainError(f"the EBR chain loops back to LBA {at}")
        if not x.start <= at < x.start + x.size:
            raise ChainError(f"an EBR link points to LBA {at}, outside the extended partition")
        entries = mbr_entries(sectorio.read_sectors(path, at, 1, sector_size))
        if not entries:
            raise ChainError(f"the EBR at LBA {at} has no 0x55AA signature")
        first, nxt, *rest = entries
        if any(e.size for e in rest) or (nxt.size and nxt.type_id not in EXTENDED_IDS):
            raise ChainError(f"the EBR at LBA {at} uses more than its first two entries")
        if not (first.size and first.type_id):
            if nxt.start or at != x.start:
                raise ChainError(f"the EBR at LBA {at} holds no partition")
            break  # an extended partition with no logical partition yet
        following = x.start + nxt.start if nxt.start and nxt.type_id else 0
        links.append(Link(at, at + first.start, first.size, first.type_id, following))
        at = following
    return Chain(x.index, x.start, x.size, tuple(links))


def _set(sector: bytearray, slot: int, base: int, start: int, size: int, type_id: int | None = None) -> None:
    """Entry ``slot`` of an MBR or EBR sector: ``start`` absolute, stored relative to ``base``."""
    at = 446 + 16 * slot
    sector[at + 1 : at + 4] = chs(start)
    sector[at + 5 : at + 8] = chs(start + max(size, 1) - 1)
    sector[at + 8 : at + 12] = (start - base).to_bytes(4, "little")
    sector[at + 12 : at + 16] = size.to_bytes(4, "little")
    if type_id is not None:
        sector[at + 4] = type_id


def _write(path: str, writes: list[tuple[int, bytes]], sector_size: int) -> None:
    sectorio.write_sectors(path, writes, sector_size)  # each call synced before the next one starts


def grow_extended(path: str, chain: Chain, end: int, sector_size: int) -> None:
    """The extended partition ends at ``end`` (never shrinks): its MBR entry's size, nothing else."""
    if end <= chain.ext_end:
        return
    mbr = bytearray(sectorio.read_sectors(path, 0, 1, sector_size))
    _set(mbr, chain.slot, 0, chain.ext_start, end - chain.ext_start + 1)
    _write(path, [(0, bytes(mbr))], sector_size)


def set_entry(path: str, lba: int, start: int, size: int, type_id: int, sector_size: int) -> None:
    """The EBR at ``lba`` says its partition is ``size`` sectors at ``start``, of type ``type_id``."""
    ebr = bytearray(sectorio.read_sectors(path, lba, 1, sector_size))
    _set(ebr, 0, lba, start, size, type_id)
    _write(path, [(lba, bytes(ebr))], sector_size)


def set_link(path: str, chain: Chain, number: int, ebr: int, end: int, sector_size: int) -> None:
    """The EBR before partition ``number`` links to ``ebr``, sized to ``end`` (libfdisk's and libparted's
    convention: from the EBR to its partition's last sector). Nothing for the first (the extended's start)."""
    if number == 5:
        return
    prev = chain.link(number - 1).lba
    sector = bytearray(sectorio.read_sectors(path, prev, 1, sector_size))
    _set(sector, 1, chain.ext_start, ebr, end - ebr + 1)
    _write(path, [(prev, bytes(sector))], sector_size)


def relocate(path: str, chain: Chain, number: int, to: int, end: int, sector_size: int) -> None:
    """Move partition ``number``'s EBR to ``to`` (see the module's doc), its entry as it is (relative to the
    new place), the link of the EBR before it pointed there. ``end``: the partition's last sector afterwards."""
    link = chain.link(number)
    if link.lba == to:
        return
    if number == 5:
        raise ChainError("the first EBR is the extended partition's first sector: it cannot move")
    sector = bytearray(sectorio.read_sectors(path, link.lba, 1, sector_size))
    _set(sector, 0, to, link.start, link.size)
    _write(path, [(to, bytes(sector))], sector_size)
    fault("ebr")
    set_link(path, chain, number, to, end, sector_size)
