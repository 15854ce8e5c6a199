"""Type GUIDs, attribute bits, unique GUIDs and header fields libparted 3.5 cannot write, put into the raw
GPT right after its commit, inside the same safe write (backend.write.tablewrite: under the same lock, after the
same backup, then read back and compared with the plan like the rest of the table).

libparted 3.5 sets a type only through a flag or a filesystem type (a dozen types: model.ptypes) and an
attribute only as "hidden" (bit 0) or "legacy_boot" (bit 2). Every other type (the Discoverable Partitions
Specification's root, /usr and verity types, anything by GUID) and every other bit (1, 48-63) is patched
here: the entry in both entry arrays, then both headers' entry-array CRC and header CRC. The bits a plan
does not name (3-47) are kept as they are.

An sfdisk script also names what libparted always makes up (``HeaderWish``): the usable area (sfdisk's
``first-lba:``, 2048 by default on a new GPT where libparted starts at 34, and ``last-lba:``), the disk GUID
(``label-id:``) and each partition's unique GUID (``uuid=``). They are patched the same way: the header
fields into both headers (each then pointing at its own entry array as before), the unique GUID into both
entry arrays. After the write both copies are read again and must hold every wish.

The order keeps a valid copy at every moment: the backup (entries, then header) first, then the primary.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from diskplan.backend.raw import sectorio
from diskplan.backend.raw.gptcheck import GptCopy, GptState, check_gpt, copies_differ, header_for
from diskplan.backend.raw.rawtable import GptHeader
from diskplan.model import labels
from diskplan.model.extent import Partition
from diskplan.model.ptypes import describe
from diskplan.model.value import value


class PatchError(Exception):
    """The entries cannot be patched safely: one line."""


@value
class EntryWish:
    """What one partition's entry must hold: its type GUID, its planned attribute bits, its unique GUID."""

    number: int
    first: int
    last: int
    type_guid: str  # upper case; "" keeps the type libparted wrote
    flags: tuple[str, ...] | None  # the planned attribute bits (labels.with_planned_bits); None keeps them all
    guid: str = ""  # the unique GUID (PARTUUID), upper case; "" keeps the one libparted wrote


@value
class HeaderWish:
    """What both GPT headers must say (an sfdisk script's first-lba, last-lba and label-id); None and ""
    keep what libparted wrote."""

    first_usable: int | None  # None: as libparted wrote it
    last_usable: int | None
    disk_guid: str = ""

    def usable(self, h: GptHeader) -> tuple[int, int]:
        """The usable area the header must say: the wished ends, else ``h``'s."""
        return (h.first_usable if self.first_usable is None else self.first_usable,
                h.last_usable if self.last_usable is None else self.last_usable)


def wishes(partitions: Iterable[Partition], guids: Mapping[int, str] | None = None,
           kept: Iterable[Partition] = ()) -> tuple[EntryWish, ...]:
    """The entries a GPT write creates or changes, as the plan wants them; ``guids``: number -> the unique
    GUID the plan names (an sfdisk script's uuid=), also for ``kept`` partitions (only their GUID changes)."""
    guids = guids or {}
    out = [EntryWish(p.number, p.start, p.end, p.type.upper(), p.flags, guids.get(p.number, "")) for p in partitions]
    done = {w.number for w in out}
    out += [EntryWish(p.number, p.start, p.end, "", None, guids[p.number]) for p in kept
            if p.number in guids and p.number not in done]
    return tuple(out)


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
        unique = uuid.UUID(w.guid).bytes_le if w.guid else bytes(e[16:32])
        old_bits = int.from_bytes(e[48:56], "little")
        bits = old_bits if w.flags is None else labels.with_planned_bits(old_bits, w.flags)
        if said is not None and bytes(e[:16]) != guid:
            said.append(f"partition {w.number}: type {describe(w.type_guid)} written into the raw entries")
        if said is not None and bytes(e[16:32]) != unique:
            said.append(f"partition {w.number}: unique GUID {w.guid} written into the raw entries")
        if said is not None and bits != old_bits:
            said.append(f"partition {w.number}: attribute bits 0x{old_bits:016x} -> 0x{bits:016x}")
        raw[at : at + 16] = guid
        raw[at + 16 : at + 32] = unique
        raw[at + 48 : at + 56] = bits.to_bytes(8, "little")
    return bytes(raw)


def _header_fields(copy: GptCopy, wish: HeaderWish | None, said: list[str] | None) -> dict[int, bytes]:
    """The header bytes ``wish`` changes in ``copy`` (offset -> bytes)."""
    h = copy.header
    assert h is not None
    if wish is None:
        return {}
    fields: dict[int, bytes] = {}
    first, last = wish.usable(h)
    if (first, last) != (h.first_usable, h.last_usable):
        fields[40] = first.to_bytes(8, "little") + last.to_bytes(8, "little")
        if said is not None:
            said.append(f"usable area {h.first_usable}..{h.last_usable} -> {first}..{last} (the plan's first-lba "
                        "and last-lba)")
    if wish.disk_guid and wish.disk_guid.upper() != h.disk_guid:
        fields[56] = uuid.UUID(wish.disk_guid).bytes_le
        if said is not None:
            said.append(f"disk GUID {h.disk_guid} -> {wish.disk_guid.upper()} (the script's label-id)")
    return fields


def _usable_problem(state: GptState, wish: HeaderWish | None, wanted: tuple[EntryWish, ...], ss: int) -> str:
    """Why the wished usable area cannot be written on this GPT, or ""."""
    p, b = state.primary.header, state.backup.header
    if wish is None or p is None or b is None:
        return ""
    array = -(-p.entry_count * p.entry_size // ss)
    first, last = wish.usable(p)
    if not p.entries_lba + array <= first <= last < b.entries_lba:
        return (f"the usable area {first}..{last} would overlap an entry array (the primary ends at "
                f"{p.entries_lba + array - 1}, the backup starts at {b.entries_lba})")
    outside = [w.number for w in wanted if not first <= w.first <= w.last <= last]
    return f"partition {outside[0]} would lie outside the usable area" if outside else ""


def patch_entries(path: str, sector_size: int, sectors: int, wanted: tuple[EntryWish, ...],
                  after_first: Callable[[], None] | None = None, header: HeaderWish | None = None) -> tuple[str, ...]:
    """Make each wished entry hold its type GUID, planned attribute bits and unique GUID, and both headers
    ``header``'s usable area and disk GUID, in both copies, with every CRC right; what changed, one line each
    (nothing when libparted wrote them all). Raises PatchError before writing anything when the GPT is not as
    libparted's commit must have left it (both copies good, equal, the partitions where planned) or the wish
    does not fit it, and after writing when the copies do not read back as wished. ``after_first`` (tests: a
    fault) runs after the first write."""
    if not wanted and header is None:
        return ()
    state = check_gpt(path, sector_size, sectors)
    if state is None or not (state.primary.ok and state.backup.ok) or copies_differ(state):
        raise PatchError("the GPT libparted wrote does not read back as two good, equal copies: nothing patched")
    problem = _usable_problem(state, header, wanted, sector_size)
    if problem:
        raise PatchError(f"{problem}: nothing patched")
    said: list[str] = []
    writes: list[tuple[int, bytes]] = []
    for copy in (state.backup, state.primary):
        h = copy.header
        assert h is not None
        entries = _patched(copy, wanted, said if copy is state.primary else None)
        fields = _header_fields(copy, header, said if copy is state.primary else None)
        if entries == copy.raw_entries and not fields:
            continue
        count = -(-len(entries) // sector_size)
        tail = sectorio.read_sectors(path, h.entries_lba, count, sector_size)[len(entries):]  # bytes after the array
        writes += [(h.entries_lba, entries + tail), (copy.lba, header_for(copy, entries, fields))]
    if writes:
        sectorio.write_sectors(path, writes, sector_size, after_first=after_first)
        _read_back(path, sector_size, sectors, wanted, header)
    return tuple(said)


def _read_back(path: str, sector_size: int, sectors: int, wanted: tuple[EntryWish, ...],
               header: HeaderWish | None) -> None:
    """Both copies read again: good, equal, and holding every wish."""
    state = check_gpt(path, sector_size, sectors)
    if state is None or not (state.primary.ok and state.backup.ok) or copies_differ(state):
        raise PatchError("the patched GPT does not read back as two good, equal copies")
    h = state.primary.header
    assert h is not None
    if header is not None and ((h.first_usable, h.last_usable) != header.usable(h)
                               or (header.disk_guid and h.disk_guid != header.disk_guid.upper())):
        raise PatchError("the patched GPT header does not read back as written")
    entries = {e.number: e for e in state.primary.entries}
    for w in wanted:
        e = entries.get(w.number)
        if e is None or (w.guid and e.part_guid.upper() != w.guid.upper()) or (
                w.type_guid and e.type_guid.upper() != w.type_guid):
            raise PatchError(f"entry {w.number} does not read back as written")


def pending(path: str, sector_size: int, sectors: int, header: HeaderWish, guids: Mapping[int, str],
            written: tuple[int, int], fresh: bool) -> tuple[str, ...]:
    """What the patch will set that libparted's write alone would not leave on the disk, one line each:
    ``written`` is the usable area libparted writes (its new GPT's, or the one on the disk it keeps); the
    disk GUID and unique GUIDs are compared with the disk's GPT now (a new label: every one named)."""
    state = None if fresh else check_gpt(path, sector_size, sectors)
    good = state.good if state is not None else None
    h = good.header if good is not None else None
    now = {e.number: e.part_guid.upper() for e in good.entries} if good is not None else {}
    out = []
    first = written[0] if header.first_usable is None else header.first_usable
    last = written[1] if header.last_usable is None else header.last_usable
    if (first, last) != written:
        out.append(f"the GPT's usable area becomes {first}..{last} (libparted alone would write "
                   f"{written[0]}..{written[1]}): written into both headers after the commit")
    if header.disk_guid and (h is None or h.disk_guid != header.disk_guid):
        out.append(f"the disk GUID becomes {header.disk_guid}: written into both headers after the commit")
    changed = [n for n, g in sorted(guids.items()) if now.get(n) != g]
    if changed:
        out.append(f"the unique GUID (PARTUUID) of partition{'s' if len(changed) > 1 else ''} "
                   f"{', '.join(map(str, changed))} becomes the plan's: written into both entry arrays after the "
                   "commit")
    return tuple(out)
