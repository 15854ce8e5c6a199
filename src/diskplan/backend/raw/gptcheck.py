"""Judge both copies of a GPT ourselves: signature, header CRC, its own LBA, entry array inside the disk
and its CRC. Says which copy is good, builds a table from it when libparted cannot, and computes the
bytes a repair would write (nothing is written here)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from diskplan.backend.raw import look
from diskplan.backend.raw.look import one_look as one_look  # cli.check's name for it
from diskplan.backend.raw.rawtable import (
    PROTECTIVE_ID,
    GptEntry,
    GptHeader,
    mbr_entries,
    parse_gpt_entries,
    parse_gpt_header,
    read_bytes,
)
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.table import Region, Table
from diskplan.model.value import field, value

# model.plan.repair is imported where a repair is planned: this module is imported before libparted's reading
# child is forked (which never plans one), so what it imports is on every check's critical path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from diskplan.model.plan.repair import GptRepair

MAX_ENTRY_BYTES = 4 << 20  # far above any real table (128 × 128 B = 16 KiB; Android uses a few hundred)


@value
class GptCopy:
    """One GPT copy (header and entry array) as found at its place, and what is wrong with it."""
    which: str  # "primary" or "backup"
    lba: int  # where the header was looked for
    header: GptHeader | None  # None: no GPT signature there
    problem: str  # empty when the copy passed every check
    entries: tuple[GptEntry, ...] = ()
    raw_header: bytes = field(default=b"", repr=False)
    raw_entries: bytes = field(default=b"", repr=False)

    @property
    def ok(self) -> bool:
        return self.header is not None and not self.problem


@value
class GptState:
    """Both GPT copies of a disk, as read once."""
    primary: GptCopy
    backup: GptCopy
    sectors: int
    logical: int

    @property
    def good(self) -> GptCopy | None:
        return self.primary if self.primary.ok else self.backup if self.backup.ok else None

    @property
    def table_sectors(self) -> int:
        """How many sectors the good copy says the disk has (its backup header sits on the last one)."""
        g = self.good
        if g is None or g.header is None:
            return 0
        return (g.header.backup if g.which == "primary" else g.header.current) + 1


def _entry_sectors(header: GptHeader, logical: int) -> int:
    return -(-(header.entry_count * header.entry_size) // logical)


def read_copy(path: str, which: str, lba: int, sectors: int, logical: int, twin: GptCopy | None = None) -> GptCopy:
    """The copy whose header is at ``lba``. ``twin``, the copy read before: when its array passed and this one
    is the same bytes in the same shape, its entries are taken as they are (parsing 128 entries again cost a
    check ~0.5 ms, and a healthy disk's two arrays are always the same)."""
    if lba < 1 or lba >= sectors:
        return GptCopy(which, lba, None, f"LBA {lba} is outside the disk (0..{sectors - 1})")
    raw = read_bytes(path, lba * logical, logical)
    header = parse_gpt_header(raw, lba)
    if raw[:8] != b"EFI PART":
        return GptCopy(which, lba, None, f"no GPT header at LBA {lba}")
    if header.problem and not header.current:  # header size impossible: nothing else is trustworthy
        return GptCopy(which, lba, header, header.problem, raw_header=raw)
    if not header.valid:
        return GptCopy(which, lba, header, header.problem, raw_header=raw)
    if header.current != lba:
        return GptCopy(which, lba, header, f"header says it is at LBA {header.current}, found at LBA {lba}", (), raw)
    if header.entry_size < 128 or header.entry_size % 8 or header.entry_count == 0:
        problem = f"impossible entry array ({header.entry_count} entries of {header.entry_size} B)"
        return GptCopy(which, lba, header, problem, (), raw)
    nbytes = header.entry_count * header.entry_size
    if nbytes > MAX_ENTRY_BYTES:
        return GptCopy(which, lba, header, f"entry array of {nbytes} B is implausibly large", (), raw)
    count = _entry_sectors(header, logical)
    if header.entries_lba < 1 or header.entries_lba + count > sectors:
        problem = f"entry array at LBA {header.entries_lba}..{header.entries_lba + count - 1} lies outside the disk"
        return GptCopy(which, lba, header, problem, (), raw)
    if header.entries_lba <= lba < header.entries_lba + count:
        return GptCopy(which, lba, header, "entry array overlaps its own header", (), raw)
    entries_raw = read_bytes(path, header.entries_lba * logical, nbytes)
    if len(entries_raw) < nbytes:
        return GptCopy(which, lba, header, "entry array is cut off by the end of the image", (), raw)
    if zlib.crc32(entries_raw) & 0xFFFFFFFF != header.entries_crc:
        return GptCopy(which, lba, header, "entry array CRC does not match", (), raw, entries_raw)
    if header.first_usable > header.last_usable + 1:
        problem = f"usable area {header.first_usable}..{header.last_usable} is empty"
        return GptCopy(which, lba, header, problem, (), raw, entries_raw)
    shape = (header.entry_count, header.entry_size)
    if twin is not None and twin.ok and twin.header is not None and twin.raw_entries == entries_raw \
            and (twin.header.entry_count, twin.header.entry_size) == shape:
        return GptCopy(which, lba, header, "", twin.entries, raw, entries_raw)
    entries = tuple(parse_gpt_entries(entries_raw, *shape))
    return GptCopy(which, lba, header, "", entries, raw, entries_raw)


def check_gpt(path: str, logical: int, sectors: int) -> GptState | None:
    """Both copies judged; None when neither LBA 1 nor the last LBA has a GPT signature. Within a look
    (backend.raw.look: ``check`` asks three times per disk, a move before each entry rewrite) judged once until
    diskplan writes; outside one, read now through one descriptor."""
    with one_look():
        return look.judged(("gpt", path, logical, sectors), lambda: _check_gpt(path, logical, sectors))


def _check_gpt(path: str, logical: int, sectors: int) -> GptState | None:
    if sectors < 2:
        return None
    primary = read_copy(path, "primary", 1, sectors, logical)
    candidates = []
    if primary.header is not None and primary.header.valid and 1 < primary.header.backup < sectors:
        candidates.append(primary.header.backup)  # where the primary says (a grown disk: not the end)
    if sectors - 1 > 1:
        candidates.append(sectors - 1)
    backup = GptCopy("backup", sectors - 1, None, "the disk has no room for a backup GPT")
    for i, lba in enumerate(dict.fromkeys(candidates)):
        copy = read_copy(path, "backup", lba, sectors, logical, primary)
        if copy.header is not None or i == 0:
            backup = copy
        if copy.header is not None:
            break
    if primary.header is None and backup.header is None:
        return None
    return GptState(primary, backup, sectors, logical)


def copies_differ(state: GptState) -> str:
    """Why two valid copies disagree, "" when they agree."""
    p, b = state.primary, state.backup
    if not (p.ok and b.ok) or p.header is None or b.header is None:
        return ""
    if p.header.disk_guid != b.header.disk_guid:
        return "different disk GUIDs"
    if (p.header.first_usable, p.header.last_usable) != (b.header.first_usable, b.header.last_usable):
        return "different usable areas"
    if p.raw_entries != b.raw_entries:
        return "different partition entries"
    return ""


def header_for(copy: GptCopy, entries: bytes, fields: Mapping[int, bytes] | None = None) -> bytes:
    """``copy``'s header sector saying ``entries``' CRC, its own CRC computed again, all else as read
    except ``fields`` (byte offset -> bytes: the usable area, the disk GUID)."""
    size = int.from_bytes(copy.raw_header[12:16], "little")
    h = bytearray(copy.raw_header[:size])
    for at, raw in (fields or {}).items():
        h[at : at + len(raw)] = raw
    h[88:92] = (zlib.crc32(entries) & 0xFFFFFFFF).to_bytes(4, "little")
    h[16:20] = bytes(4)
    h[16:20] = (zlib.crc32(h) & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(h) + copy.raw_header[size:]


def _rebuilt_header(good: GptCopy, current: int, alternate: int, entries_lba: int, logical: int,
                    last_usable: int | None = None) -> bytes:
    assert good.header is not None
    size = int.from_bytes(good.raw_header[12:16], "little")
    h = bytearray(good.raw_header[:size])
    h[16:20] = b"\0\0\0\0"
    h[24:32] = current.to_bytes(8, "little")
    h[32:40] = alternate.to_bytes(8, "little")
    if last_usable is not None:
        h[48:56] = last_usable.to_bytes(8, "little")
    h[72:80] = entries_lba.to_bytes(8, "little")
    h[16:20] = (zlib.crc32(bytes(h)) & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(h) + bytes(logical - size)


def plan_repair(state: GptState) -> GptRepair | None:
    """Rebuild the bad copy from the good one, where the good header says it belongs; None when there is
    nothing to repair or no safe place to put it (a truncated disk: the backup's place does not exist)."""
    good, logical = state.good, state.logical
    if good is None or good.header is None or (state.primary.ok and state.backup.ok):
        return None
    h = good.header
    count = _entry_sectors(h, logical)
    entries = good.raw_entries + bytes(count * logical - len(good.raw_entries))
    if good.which == "primary":
        bad = state.backup
        header_lba = h.backup
        entries_lba = header_lba - count
        if header_lba >= state.sectors or header_lba <= h.last_usable or entries_lba <= h.last_usable:
            return None
        header = _rebuilt_header(good, header_lba, 1, entries_lba, logical)
    else:
        bad = state.primary
        header_lba, entries_lba = 1, 2
        if entries_lba + count > h.first_usable:
            return None
        header = _rebuilt_header(good, 1, h.current, entries_lba, logical)
    from diskplan.model.plan.repair import GptRepair

    return GptRepair(
        good=good.which,
        rewrite=bad.which,
        header_lba=header_lba,
        entries_lba=entries_lba,
        entries_sectors=count,
        reason=bad.problem,
        writes=((header_lba, header), (entries_lba, entries)),
    )


def grown_repair(path: str, state: GptState) -> GptRepair | None:
    """The backup GPT moved to the end of a grown disk, as ``sgdisk -e`` moves it: both headers say the new
    backup LBA and a last usable LBA that takes in the new space, the entry array is copied before the last
    LBA, the protective MBR's 0xEE entry is stretched over the disk (when it covered the old one exactly), and
    the old backup header is erased. None unless both copies are good, equal, and the backup sits where
    the primary says but before the last LBA."""
    p, b, logical, n = state.primary, state.backup, state.logical, state.sectors
    h = p.header
    if not (p.ok and b.ok) or h is None or copies_differ(state) or b.lba != h.backup or b.lba >= n - 1:
        return None
    count = _entry_sectors(h, logical)
    header_lba, entries_lba = n - 1, n - 1 - count
    last_usable = entries_lba - 1
    if last_usable < h.last_usable:
        return None
    entries = p.raw_entries + read_bytes(path, h.entries_lba * logical + len(p.raw_entries),
                                         count * logical - len(p.raw_entries))
    # In this order, so that a write cut short leaves a primary that points at a valid backup: the new
    # backup first, then the primary header that points at it, then the MBR and the old header. (A disk
    # grown by no more than the entry array's sectors: the new array covers the old backup header, so a
    # cut there leaves the primary alone good, which a repair rebuilds the backup from.)
    writes = [
        (entries_lba, entries.ljust(count * logical, b"\0")),
        (header_lba, _rebuilt_header(p, header_lba, 1, entries_lba, logical, last_usable)),
        (1, _rebuilt_header(p, 1, header_lba, h.entries_lba, logical, last_usable)),
    ]
    pmbr = _stretched_pmbr(read_bytes(path, 0, logical), n, b.lba + 1)
    if pmbr:
        writes.append((0, pmbr))
    if b.lba < entries_lba:  # a stale header in the new free space would be found by tools that scan for one
        writes.append((b.lba, bytes(logical)))
    from diskplan.model.plan.repair import GptRepair

    return GptRepair(
        good="primary",
        rewrite="backup",
        header_lba=header_lba,
        entries_lba=entries_lba,
        entries_sectors=count,
        reason=f"the backup GPT is at LBA {b.lba}, not at the last LBA {n - 1}",
        writes=tuple(writes),
        moved_from=b.lba,
        grown=(h.last_usable, last_usable),
    )


def _stretched_pmbr(sector0: bytes, sectors: int, old_sectors: int) -> bytes:
    """Sector 0 with its protective entry covering ``sectors`` (capped at 2^32-1), or b"" when it has no
    protective entry that covered the old disk exactly (a hybrid MBR, or one another tool sized otherwise)."""
    for e in mbr_entries(sector0):
        if e.type_id == PROTECTIVE_ID and e.start == 1 and e.size == min(old_sectors - 1, 0xFFFFFFFF):
            new = min(sectors - 1, 0xFFFFFFFF)
            if new == e.size:
                return b""
            at = 446 + 16 * e.index
            out = bytearray(sector0)
            out[at + 12 : at + 16] = new.to_bytes(4, "little")
            return bytes(out)
    return b""


def gpt_table(copy: GptCopy, sectors: int, read_only: str) -> Table:
    """The table one good copy describes, read-only (used when libparted could not read it)."""
    h = copy.header
    assert h is not None
    parts = tuple(
        sorted(
            (
                Partition(
                    number=e.number,
                    start=e.first,
                    end=e.last,
                    type=e.type_guid,
                    name=e.name,
                    role=Role.PRIMARY,
                    state=State.EXISTING,
                    uuid=e.part_guid,
                )
                for e in copy.entries
                if e.last >= e.first
            ),
            key=lambda p: (p.start, p.number),
        )
    )
    meta = [Region("pmbr", Extent(0, 0), "protective MBR"), Region("gpt-header", Extent(1, 1), "GPT header")]
    if h.first_usable > 2:
        meta.append(Region("gpt-entries", Extent(2, min(h.first_usable, sectors) - 1), "GPT entries"))
    if h.last_usable + 1 < sectors - 1:
        meta.append(Region("gpt-entries", Extent(h.last_usable + 1, sectors - 2), "backup GPT entries"))
    meta.append(Region("gpt-header", Extent(sectors - 1, sectors - 1), "backup GPT header"))
    return Table(
        label="gpt",
        first_usable=h.first_usable,
        last_usable=h.last_usable,
        partitions=parts,
        metadata=tuple(meta),
        max_partitions=h.entry_count,
        read_only=read_only,
    )


def protective_mbr_repair(path: str, state: GptState) -> GptRepair:
    """Sector 0 rewritten as a protective MBR: libparted 3.5 (and some firmware) ignore a GPT without one.
    The boot code and disk signature (bytes 0..445) are kept; the four entries become one 0xEE entry."""
    from diskplan.model.plan.repair import PROTECTIVE_MBR, GptRepair

    logical = state.logical
    old = read_bytes(path, 0, logical)
    sector = bytearray(old[:446].ljust(446, b"\0") + bytes(logical - 446))
    size = min(state.sectors - 1, 0xFFFFFFFF)
    entry = bytes([0x00, 0x00, 0x02, 0x00, 0xEE, 0xFF, 0xFF, 0xFF]) + (1).to_bytes(4, "little")
    sector[446:462] = entry + size.to_bytes(4, "little")
    sector[510:512] = b"\x55\xaa"
    return GptRepair(
        good=state.good.which if state.good else "primary",
        rewrite=PROTECTIVE_MBR,
        header_lba=0,
        entries_lba=0,
        entries_sectors=0,
        reason="sector 0 has no protective 0xEE entry",
        writes=((0, bytes(sector)),),
    )
