"""Type GUIDs and attribute bits libparted 3.5 cannot write, put into the raw GPT entries right after its
commit, inside the same safe write (backend.tablewrite: under the same lock, after the same backup, then
read back and compared with the plan like the rest of the table).

libparted 3.5 sets a type only through a flag or a filesystem type (a dozen types: model.ptypes) and an
attribute only as "hidden" (bit 0) or "legacy_boot" (bit 2). Every other type (the Discoverable Partitions
Specification's root, /usr and verity types, anything by GUID) and every other bit (1, 48-63) is patched
here: the entry in both entry arrays, then both headers' entry-array CRC and header CRC. The bits a plan
does not name (3-47) are kept as they are.

The order keeps a valid copy at every moment: the backup (entries, then header) first, then the primary.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from diskplan.backend import backup as bk
from diskplan.backend.gptcheck import GptCopy, check_gpt, copies_differ, header_for
from diskplan.model import labels
from diskplan.model.extent import Partition
from diskplan.model.ptypes import describe
from diskplan.model.value import value


class PatchError(Exception):
    """The entries cannot be patched safely: one line."""


@value
class EntryWish:
    """What one partition's entry must hold: its type GUID and its planned attribute bits."""

    number: int
    first: int
    last: int
    type_guid: str  # upper case; "" keeps the type libparted wrote
    flags: tuple[str, ...]  # the planned attribute bits (labels.with_planned_bits); the others stay as they are


def wishes(partitions: Iterable[Partition]) -> tuple[EntryWish, ...]:
    """The entries a GPT write creates or changes, as the plan wants them."""
    return tuple(EntryWish(p.number, p.start, p.end, p.type.upper(), p.flags) for p in partitions)


def _patched(copy: GptCopy, wanted: tuple[EntryWish, ...], said: list[str] | None) -> bytes:
    """``copy``'s entry array with every wish applied."""
    h = copy.header
    assert h is not None
    raw = bytearray(copy.raw_entries)
    for w in wanted:
        at = (w.number - 1) * h.entry_size
        if not 0 <= at < len(raw):
            raise PatchError(f"partition {w.number} has no entry in the {copy.which} GPT ({h.entry_count} entries)")
        e = raw[at : at + 128]
        first, last = int.from_bytes(e[32:40], "little"), int.from_bytes(e[40:48], "little")
        if e[:16] == bytes(16) or (first, last) != (w.first, w.last):
            raise PatchError(f"entry {w.number} of the {copy.which} GPT is not partition {w.number} at "
                             f"{w.first}..{w.last} after libparted's commit: nothing patched")
        guid = uuid.UUID(w.type_guid).bytes_le if w.type_guid else bytes(e[:16])
        old_bits = int.from_bytes(e[48:56], "little")
        bits = labels.with_planned_bits(old_bits, w.flags)
        if said is not None and bytes(e[:16]) != guid:
            said.append(f"partition {w.number}: type {describe(w.type_guid)} written into the raw entries")
        if said is not None and bits != old_bits:
            said.append(f"partition {w.number}: attribute bits 0x{old_bits:016x} -> 0x{bits:016x}")
        raw[at : at + 16] = guid
        raw[at + 48 : at + 56] = bits.to_bytes(8, "little")
    return bytes(raw)


def patch_entries(path: str, sector_size: int, sectors: int, wanted: tuple[EntryWish, ...],
                  after_first: Callable[[], None] | None = None) -> tuple[str, ...]:
    """Make each wished entry hold its type GUID and planned attribute bits, in both copies, with every CRC
    right; what changed, one line each (nothing when libparted wrote them all). Raises PatchError before
    writing anything when the GPT is not as libparted's commit must have left it (both copies good, equal,
    the partitions where planned). ``after_first`` (tests: a fault) runs after the first write."""
    if not wanted:
        return ()
    state = check_gpt(path, sector_size, sectors)
    if state is None or not (state.primary.ok and state.backup.ok) or copies_differ(state):
        raise PatchError("the GPT libparted wrote does not read back as two good, equal copies: nothing patched")
    said: list[str] = []
    writes: list[tuple[int, bytes]] = []
    for copy in (state.backup, state.primary):
        h = copy.header
        assert h is not None
        entries = _patched(copy, wanted, said if copy is state.primary else None)
        if entries == copy.raw_entries:
            continue
        count = -(-len(entries) // sector_size)
        tail = bk.read_sectors(path, h.entries_lba, count, sector_size)[len(entries):]  # bytes after the array
        writes += [(h.entries_lba, entries + tail), (copy.lba, header_for(copy, entries))]
    if writes:
        bk.write_sectors(path, writes, sector_size, after_first=after_first)
    return tuple(said)
