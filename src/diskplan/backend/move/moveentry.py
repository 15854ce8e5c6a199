"""Rewrite one partition's table entry for a data move: its start and end, nothing else.

Why raw bytes instead of a libparted commit: libparted can only move a partition by deleting and
re-creating it, which gives it a new GPT unique GUID (its PARTUUID, which /etc/fstab and boot loaders
may name) and re-writes every other entry; on msdos, re-creating entries is where sfdisk --move-data
dropped logical partitions (util-linux #3568). Here exactly the entry's LBA fields change: on GPT in
both copies (entry array, its CRC, the header CRC), on msdos in the MBR (LBA and CHS start). Every other
byte of the table stays as it was, and the rewrite is idempotent, so ``resume`` can simply do it again.
A logical msdos partition's entry is in its EBR (backend.raw.ebrchain: the entry, the previous EBR's link and
the extended partition's size; hidden by parking it rather than emptying it, so no number changes).

**Hidden while half-moved** (``hide``/``reveal``): before the first byte moves, the entry is marked
unused the way every reader (the kernel, blkid, udev, udisks, systemd-gpt-auto, partitioners) skips it:
on GPT its type GUID becomes all zeros, on msdos its type and size become 0. Its place, PARTUUID, name
and attributes stay in the entry's bytes, and the old type (and msdos size) is in the journal. So
after a crash no partition node exists for it: nothing — not even /etc/fstab by UUID or a boot-time
fsck — can mount or "repair" a filesystem whose bytes are half moved. ``reveal`` writes the old type
back with the new place, in one rewrite, once the data is verified there.
"""

from __future__ import annotations

import uuid

from diskplan.backend.raw import ebrchain, sectorio
from diskplan.backend.raw.gptcheck import GptCopy, GptState, check_gpt, header_for, plan_repair
from diskplan.backend.raw.rawtable import chs
from diskplan.model.value import value


class EntryError(Exception):
    """The table does not hold the entry as expected: one line for the user."""


@value
class Entry:
    """Where the table says partition ``number`` is, and its GPT unique GUID ("" on msdos)."""

    label: str
    number: int
    start: int
    end: int
    guid: str = ""
    ptype: str = ""  # the type as raw hex (GPT type GUID bytes, msdos type byte); "" when hidden
    size: int = 0  # msdos: the size field (0 when hidden); GPT: end - start + 1
    ebr: int = 0  # a logical msdos partition: where its EBR is (0 for every other entry)

    @property
    def hidden(self) -> bool:
        return not self.ptype


def _gpt_copies(path: str, sector_size: int, sectors: int) -> tuple[GptCopy, GptCopy]:
    state = check_gpt(path, sector_size, sectors)
    if state is None or not state.primary.ok or not state.backup.ok:
        raise EntryError(f"the GPT on {path} is not whole (both copies must pass their checks): repair it first "
                         f"(`diskplan repair {path}` rebuilds the bad copy from the good one)")
    return state.primary, state.backup


def torn_copy(path: str, sector_size: int, sectors: int) -> GptState | None:
    """Both GPT copies when exactly one fails its checks and the other can rebuild it (a crash inside an
    entry rewrite leaves at most that: ``rewrite_entry`` writes one whole, synced copy at a time); None when
    both are whole, or when it is not such a state."""
    state = check_gpt(path, sector_size, sectors)
    if state is None or state.good is None or (state.primary.ok and state.backup.ok) or plan_repair(state) is None:
        return None
    return state


def mend_torn(path: str, sector_size: int, sectors: int) -> str:
    """Rebuild the GPT copy a crash cut short from the whole one (the repair ``diskplan repair`` would
    write), synced, both copies checked after: what was done ("" when both were whole). The caller has
    checked that the whole copy holds the entry where its journal expects it. Raises EntryError."""
    state = torn_copy(path, sector_size, sectors)
    if state is None:
        _gpt_copies(path, sector_size, sectors)  # whole, or damaged beyond a torn rewrite: say so
        return ""
    r = plan_repair(state)
    assert r is not None
    # the entries first, then the header that names their CRC: cut between them, the copy is still torn
    sectorio.write_sectors(path, sorted(r.writes, key=lambda w: w[0] != r.entries_lba), sector_size)
    _gpt_copies(path, sector_size, sectors)
    return f"the {r.rewrite} GPT copy ({r.reason}) was rebuilt from the {r.good} copy"


def _entry_bytes(copy: GptCopy, number: int) -> tuple[int, int]:
    assert copy.header is not None
    if not 1 <= number <= copy.header.entry_count:
        raise EntryError(f"the GPT has no entry {number}")
    at = (number - 1) * copy.header.entry_size
    return at, copy.header.entry_size


def hidden_copies(path: str, label: str, number: int, sector_size: int, sectors: int, guid: str) -> tuple[str, ...]:
    """Which of the table's copies show partition ``number`` (of ``guid`` on GPT) hidden now: "primary" and/or
    "backup" on GPT (a copy that fails its checks counts as neither), "table" on msdos. After a failed flush an
    entry rewrite may have reached one GPT copy only (``rewrite_entry`` writes the backup first)."""
    if label != "gpt":
        try:
            return ("table",) if read_entry(path, label, number, sector_size, sectors, hidden=True).hidden else ()
        except (EntryError, OSError):
            return ()
    state = check_gpt(path, sector_size, sectors)
    found = []
    for name, copy in (("primary", state.primary), ("backup", state.backup)) if state is not None else ():
        if not copy.ok:
            continue
        at, size = _entry_bytes(copy, number)
        raw = copy.raw_entries[at : at + size]
        if not any(raw[:16]) and any(raw[16:48]) and str(uuid.UUID(bytes_le=bytes(raw[16:32]))).upper() == guid:
            found.append(name)
    return tuple(found)


def read_entry(path: str, label: str, number: int, sector_size: int, sectors: int, *, hidden: bool = False,
               torn: bool = False) -> Entry:
    """The entry as the table holds it. A hidden entry (see the module's doc) is an error unless
    ``hidden``: then it is returned with ``ptype`` empty. ``torn``: a GPT with one copy cut short by a
    crash (``torn_copy``) is read from its whole copy, the one ``mend_torn`` rebuilds the other from."""
    if label == "gpt":
        state = torn_copy(path, sector_size, sectors) if torn else None
        primary = state.good if state is not None and state.good is not None else _gpt_copies(
            path, sector_size, sectors)[0]
        # The primary is what readers use; a rewrite interrupted between the copies is simply done again.
        at, size = _entry_bytes(primary, number)
        raw = primary.raw_entries[at : at + size]
        first, last = int.from_bytes(raw[32:40], "little"), int.from_bytes(raw[40:48], "little")
        guid = str(uuid.UUID(bytes_le=bytes(raw[16:32]))).upper()
        zero = not any(raw[:16])
        if (zero and not hidden) or not any(raw[:48]):
            raise EntryError(f"the GPT has no partition {number}")
        return Entry("gpt", number, first, last, guid, "" if zero else raw[:16].hex(), last - first + 1)
    if label == "msdos" and number > 4:
        return _logical(path, number, sector_size, hidden)
    if label == "msdos":
        if number < 1:
            raise EntryError(f"the MBR has no partition {number}")
        mbr = sectorio.read_sectors(path, 0, 1, sector_size)
        raw = mbr[446 + 16 * (number - 1) : 446 + 16 * number]
        start, size, kind = int.from_bytes(raw[8:12], "little"), int.from_bytes(raw[12:16], "little"), raw[4]
        if mbr[510:512] != b"\x55\xaa" or not start or (not (size and kind) and not hidden):
            raise EntryError(f"the MBR has no partition {number}")
        if not (size and kind):  # hidden: its end is known from the journal only
            return Entry("msdos", number, start, start, "", "", 0)
        return Entry("msdos", number, start, start + size - 1, "", f"{kind:02x}", size)
    raise EntryError(f"diskplan moves partitions on gpt and msdos tables, not {label}")


def _logical(path: str, number: int, sector_size: int, hidden: bool) -> Entry:
    """A logical partition's entry in its EBR; a parked one (backend.raw.ebrchain) is hidden."""
    try:
        link = ebrchain.read_chain(path, sector_size).link(number)
    except ebrchain.ChainError as exc:
        raise EntryError(str(exc)) from exc
    if link.parked and hidden:
        return Entry("msdos", number, link.start, link.start, "", "", 0, link.lba)
    end = link.start + link.size - 1
    return Entry("msdos", number, link.start, end, "", f"{link.type_id:02x}", link.size, link.lba)


def _rewrite_logical(path: str, entry: Entry, to: int, length: int, ptype: str, sector_size: int) -> None:
    """Grow the extended partition if the partition now ends past it (synced first: nothing may point
    outside it), then the entry in its EBR, then the previous EBR's link size."""
    try:
        chain = ebrchain.read_chain(path, sector_size)
        link = chain.link(entry.number)
    except ebrchain.ChainError as exc:
        raise EntryError(str(exc)) from exc
    if link.lba != entry.ebr or to <= link.lba:
        raise EntryError(f"partition {entry.number}'s EBR is at LBA {link.lba}, not before {to}")
    ebrchain.grow_extended(path, chain, to + length - 1, sector_size)
    ebrchain.set_entry(path, link.lba, to, length, int(ptype, 16), sector_size)
    ebrchain.set_link(path, chain, entry.number, link.lba, to + length - 1, sector_size)


def entry_writes(
    path: str, entry: Entry, to: int, sector_size: int, sectors: int, *, length: int = 0, ptype: str | None = None
) -> list[tuple[int, bytes]]:
    """The (LBA, sectors) writes that put ``entry`` at ``to`` with ``length`` sectors (default: its own)
    and type ``ptype`` (default: unchanged; "" hides it), all else unchanged."""
    length = length or entry.end - entry.start + 1
    if entry.label == "gpt":
        out: list[tuple[int, bytes]] = []
        for copy in _gpt_copies(path, sector_size, sectors)[::-1]:  # the backup first: readers trust the primary
            assert copy.header is not None
            at, _ = _entry_bytes(copy, entry.number)
            raw = bytearray(copy.raw_entries)
            if ptype is not None:
                raw[at : at + 16] = bytes.fromhex(ptype) if ptype else bytes(16)
            raw[at + 32 : at + 40] = to.to_bytes(8, "little")
            raw[at + 40 : at + 48] = (to + length - 1).to_bytes(8, "little")
            pad = -len(raw) % sector_size
            out.append((copy.header.entries_lba, bytes(raw) + bytes(pad)))
            out.append((copy.lba, header_for(copy, bytes(raw))))
        return out
    mbr = bytearray(sectorio.read_sectors(path, 0, 1, sector_size))
    base = 446 + 16 * (entry.number - 1)
    mbr[base + 8 : base + 12] = to.to_bytes(4, "little")
    mbr[base + 1 : base + 4] = chs(to)
    mbr[base + 5 : base + 8] = chs(to + length - 1)
    if ptype is not None:
        mbr[base + 4] = int(ptype, 16) if ptype else 0
    mbr[base + 12 : base + 16] = (length if ptype != "" else 0).to_bytes(4, "little")
    return [(0, bytes(mbr))]


def rewrite_entry(
    path: str, entry: Entry, to: int, sector_size: int, sectors: int, *, length: int = 0, ptype: str | None = None
) -> Entry:
    """Move the entry to ``to`` (and set its type, see ``entry_writes``), sync, and read it back: the
    entry now, which must be at ``to`` with the same GUID and the type asked. Raises EntryError when not."""
    length = length or entry.end - entry.start + 1
    if entry.ebr:
        _rewrite_logical(path, entry, to, length, entry.ptype if ptype is None else ptype, sector_size)
    else:
        writes = entry_writes(path, entry, to, sector_size, sectors, length=length, ptype=ptype)
        # One GPT copy (entries, header) written and synced before the other is touched: a crash tears at
        # most one copy, which ``mend_torn`` rebuilds from the whole one (an msdos rewrite is one sector).
        for copy in (writes[i : i + 2] for i in range(0, len(writes), 2)):
            sectorio.write_sectors(path, copy, sector_size)
    now = read_entry(path, entry.label, entry.number, sector_size, sectors, hidden=True)
    want = entry.ptype if ptype is None else ptype
    end = to + length - 1 if want or entry.label == "gpt" else to
    if (now.start, now.end, now.guid, now.ptype) != (to, end, entry.guid, want):
        raise EntryError(f"partition {entry.number} reads back at {now.start}..{now.end}, not {to}..{to + length - 1}")
    if entry.label == "gpt":
        _gpt_copies(path, sector_size, sectors)  # both copies still pass every check
    return now


def hide(path: str, entry: Entry, sector_size: int, sectors: int, *, park: int = 0) -> Entry:
    """Mark the entry unused in place (see the module's doc); ``entry`` as read, not hidden. A logical
    entry is parked on the free sector ``park`` instead (backend.raw.ebrchain)."""
    if not entry.ebr:
        return rewrite_entry(path, entry, entry.start, sector_size, sectors, ptype="")
    if park <= entry.ebr:
        raise EntryError(f"no free sector to park partition {entry.number}'s entry on while it is hidden")
    ebrchain.set_entry(path, entry.ebr, park, 1, ebrchain.PARKED_TYPE, sector_size)
    now = read_entry(path, entry.label, entry.number, sector_size, sectors, hidden=True)
    if not now.hidden or now.ebr != entry.ebr:
        raise EntryError(f"partition {entry.number}'s entry reads back at {now.start}..{now.end}, not hidden")
    return now


def reveal(path: str, entry: Entry, to: int, length: int, ptype: str, sector_size: int, sectors: int) -> Entry:
    """Give the (hidden or visible) entry back its type ``ptype``, at ``to`` with ``length`` sectors."""
    return rewrite_entry(path, entry, to, sector_size, sectors, length=length, ptype=ptype)
