"""A backup of a partition table, taken before diskplan writes one: the old table as an sfdisk dump (for
people and for ``sfdisk``) and a raw copy of every sector the write may change (for ``diskplan restore``,
which puts them back byte for byte).

Which sectors: both ends of the disk (MBR or protective MBR, both GPT headers and entry arrays, the
areas libparted clears when it creates a new label, boot-loader gaps), every EBR of the old and the new
msdos table, and the old GPT's backup wherever its header says it is — never a sector inside a partition
the plan keeps, so restoring cannot roll back data written since.

The file is text: a header, the ``[sfdisk]`` dump, then each run of sectors as zlib-compressed base64
with its SHA-256, then ``[end]``. After the write, a ``[written ...]`` line (the seal) records what the write
left: the disk's table id and the SHA-256 of the sectors a restore would put back, so that restore can tell
this disk from any other. Pure Python over files and block devices; no libparted.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import itertools
import os
import pwd
import stat
import zlib
from collections.abc import Callable, Iterable

from diskplan.backend.raw.gptcheck import check_gpt
from diskplan.backend.raw.rawtable import (
    PROTECTIVE_ID,
    GptHeader,
    mbr_entries,
    mbr_layout,
    mbr_signature,
    parse_gpt_entries,
    parse_gpt_header,
)
from diskplan.backend.raw.sectorio import (
    DiskIOError,
    device_size,
    open_disk,
    path_kind,
    pread_sectors,
    reading,
    write_sectors,
)
from diskplan.backend.raw.tableid import table_id, weak
from diskplan.model.extent import Extent
from diskplan.model.labels import EXTENDED_IDS, partition_node
from diskplan.model.value import value

FORMAT = 2  # 2 adds the table id and the seal; format 1 (no seal) is still read
READS = (1, 2)
MAX_FILE_BYTES = 48 << 20  # a real backup is KiB to a few MiB; MAX_SAVED_BYTES in base64 fits
MAX_SAVED_BYTES = 32 << 20  # sectors in one backup: 1 MiB at each end, two entry arrays (4 MiB at most), EBRs
SECTOR_SIZES = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
MARGIN_BYTES = 1 << 20  # saved at each end of the disk: covers every label's metadata and boot gaps
GPT_ATTRS = {0: "RequiredPartition", 1: "NoBlockIOProtocol", 2: "LegacyBIOSBootable"}

# the table could not be backed up, read back or put back, or the sectors under it (backend.raw.sectorio)
BackupError = DiskIOError


@value
class Chunk:
    start: int  # first LBA
    data: bytes  # whole sectors

    def extent(self, sector_size: int) -> Extent:
        return Extent(self.start, self.start + len(self.data) // sector_size - 1)


@value
class Seal:
    """What a write left on the disk, recorded right after it: the table's id and the SHA-256 of the
    sectors a restore would write (``over``), read back from the disk."""

    table: str
    over: tuple[Extent, ...]
    sha256: str


@value
class TableBackup:
    target: str
    sectors: int
    sector_size: int
    label: str  # "gpt", "dos", or "none"
    dump: str  # sfdisk-compatible dump of the old table ("" when there was none)
    chunks: tuple[Chunk, ...]
    model: str = ""
    created: str = ""
    written: Seal | None = None  # None: format 1, or the write was interrupted before the seal
    format: int = FORMAT

    @property
    def table_id(self) -> str:
        """The id of the table this backup was taken over, read from its own sectors."""
        return table_id(chunk_reader(self), self.sectors)

    @property
    def extents(self) -> tuple[Extent, ...]:
        return tuple(c.extent(self.sector_size) for c in self.chunks)

    @property
    def saved_sectors(self) -> int:
        return sum(len(c.data) for c in self.chunks) // self.sector_size


# --- reading raw sectors ----------------------------------------------------------------------------


Reader = Callable[[int, int], bytes]  # (first LBA, count) -> that many whole sectors


def disk_kind(path: str) -> str:
    """Raises BackupError unless ``path`` is a regular file or a block device (a FIFO would block, a
    character device never ends, a directory has no sectors)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise BackupError(f"{path}: {exc.strerror}") from exc
    return path_kind(path, mode)


def chunk_reader(b: TableBackup) -> Reader:
    """The backed-up disk as the backup saw it: its saved sectors, zeros elsewhere."""
    ss = b.sector_size

    def read(lba: int, count: int) -> bytes:
        out = bytearray(count * ss)
        for c in b.chunks:
            e = c.extent(ss)
            lo, hi = max(lba, e.start), min(lba + count - 1, e.end)
            if lo <= hi:
                out[(lo - lba) * ss : (hi - lba + 1) * ss] = c.data[(lo - e.start) * ss : (hi - e.start + 1) * ss]
        return bytes(out)

    return read


# --- which sectors hold the old table ---------------------------------------------------------------


def _ebr_chain(read: Reader, ext_start: int, sectors: int) -> list[tuple[int, bytes]]:
    """(LBA, sector) of every EBR, following the links; stops on a loop, a bad link or 256 EBRs."""
    out: list[tuple[int, bytes]] = []
    ebr, seen = ext_start, set[int]()
    while ebr not in seen and len(seen) < 256 and 0 < ebr < sectors:
        seen.add(ebr)
        raw = read(ebr, 1)
        out.append((ebr, raw))
        links = mbr_entries(raw)
        if not links or not links[1].type_id or not links[1].start:
            break
        ebr = ext_start + links[1].start
    return out


def _gpt_header_extents(
    read: Reader, lba: int, sector_size: int, sectors: int, found: bool, h: GptHeader | None = None
) -> list[Extent]:
    """The header at ``lba`` (``h``: already parsed) and the entry array it points to (when its fields are
    sane). ``found``: only where a GPT signature is (else the sector is included anyway: one may be written
    there)."""
    if not 0 < lba < sectors:
        return []
    h = h if h is not None else parse_gpt_header(read(lba, 1), lba)
    if h.problem == "no GPT signature":
        return [] if found else [Extent(lba, lba)]
    out = [Extent(lba, lba)]
    count = -(-(h.entry_count * h.entry_size) // sector_size)
    if 0 < count <= 4096 and h.entries_lba > 0 and h.entries_lba + count <= sectors:
        out.append(Extent(h.entries_lba, h.entries_lba + count - 1))
    return out


def table_extents(read: Reader, sector_size: int, sectors: int, *, found: bool = False) -> list[Extent]:
    """Where a table lives: MBR, EBRs, both GPT headers and entry arrays. ``found``: only the structures
    really there (else sector 0, LBA 1 and the last LBA are always included)."""
    mbr = read(0, 1)
    out = [Extent(0, 0)] if mbr_entries(mbr) or not found else []
    for e in mbr_entries(mbr):
        if e.type_id in EXTENDED_IDS and e.size:
            out += [Extent(lba, lba) for lba, _ in _ebr_chain(read, e.start, sectors)]
    if sectors > 2:
        h = parse_gpt_header(read(1, 1), 1)  # parsed once: its extents, and where it says the backup is
        out += _gpt_header_extents(read, 1, sector_size, sectors, found, h)
        if h.problem != "no GPT signature" and 0 < h.backup < sectors:
            out += _gpt_header_extents(read, h.backup, sector_size, sectors, found)
        out += _gpt_header_extents(read, sectors - 1, sector_size, sectors, found)
    return out


def old_table_extents(path: str, sector_size: int, sectors: int) -> list[Extent]:
    """Where the table now on ``path`` lives: MBR, EBRs, both GPT headers and entry arrays."""
    with reading(path) as fd:
        return table_extents(lambda lba, n: pread_sectors(fd, lba, n, sector_size), sector_size, sectors)


def data_extents(path: str, sector_size: int, sectors: int) -> list[Extent]:
    """Every partition of the table now on ``path`` — MBR primaries, logicals, the entries of either GPT
    copy (even one failing its CRC): where data may live. Not the extended container or a 0xEE entry."""
    out: list[Extent] = []
    layout = mbr_layout(path, sector_size, sectors)
    if layout is not None:
        out += [Extent(p.start, p.end) for p in (*layout.primaries, *layout.logicals)
                if p.size and p.type_id not in (*EXTENDED_IDS, PROTECTIVE_ID)]
    state = check_gpt(path, sector_size, sectors)
    for copy in (state.primary, state.backup) if state is not None else ():
        h = copy.header
        if h is not None and copy.raw_entries and h.entry_size >= 128:
            out += [Extent(e.first, e.last) for e in parse_gpt_entries(copy.raw_entries, h.entry_count, h.entry_size)
                    if e.first <= e.last]
    return merge(Extent(max(0, e.start), min(sectors - 1, e.end)) for e in out if e.start < sectors)


def merge(extents: Iterable[Extent]) -> list[Extent]:
    out: list[Extent] = []
    for e in sorted(extents):
        if out and e.start <= out[-1].end + 1:
            out[-1] = Extent(out[-1].start, max(out[-1].end, e.end))
        else:
            out.append(e)
    return out


def subtract(extents: Iterable[Extent], holes: Iterable[Extent]) -> list[Extent]:
    out = merge(extents)
    for hole in holes:
        nxt: list[Extent] = []
        for e in out:
            if not e.overlaps(hole):
                nxt.append(e)
                continue
            if e.start < hole.start:
                nxt.append(Extent(e.start, hole.start - 1))
            if e.end > hole.end:
                nxt.append(Extent(hole.end + 1, e.end))
        out = nxt
    return out


def backup_extents(
    path: str, sector_size: int, sectors: int, *, also: Iterable[Extent] = (), protect: Iterable[Extent] = ()
) -> list[Extent]:
    """Every sector to save before writing: the old table, ``also`` (the new table's sectors), both
    ends of the disk; minus ``protect`` (partitions the plan keeps: their data is not ours to restore)."""
    margin = max(1, min(MARGIN_BYTES // sector_size, sectors // 2))
    ends = [Extent(0, margin - 1), Extent(sectors - margin, sectors - 1)]
    wanted = [*old_table_extents(path, sector_size, sectors), *also, *ends]
    inside = [Extent(max(0, e.start), min(sectors - 1, e.end)) for e in wanted if e.end >= 0 and e.start < sectors]
    return subtract(inside, protect)


# --- the sfdisk dump --------------------------------------------------------------------------------


def _field(name: str, value: int) -> str:
    return f"{name}={value:>12}"


def _gpt_attrs(raw: int) -> str:
    words = [text for bit, text in GPT_ATTRS.items() if raw >> bit & 1]
    guid_bits = [str(bit) for bit in range(48, 64) if raw >> bit & 1]
    if guid_bits:
        words.append("GUID:" + ",".join(guid_bits))
    return " ".join(words)


def _dump_gpt(path: str, device: str, sector_size: int, sectors: int) -> str:
    """The GPT copy that passes every check (a damaged one is not what the disk means), "" with none."""
    state = check_gpt(path, sector_size, sectors)
    good = state.good if state is not None else None
    if good is None or good.header is None:
        return ""
    h, raw = good.header, good.raw_entries
    lines = [
        "label: gpt",
        f"label-id: {h.disk_guid}",
        f"device: {device}",
        "unit: sectors",
        f"first-lba: {h.first_usable}",
        f"last-lba: {h.last_usable}",
    ]
    if h.entry_count != 128:
        lines.append(f"table-length: {h.entry_count}")
    lines += [f"sector-size: {sector_size}", ""]
    for e in parse_gpt_entries(raw, h.entry_count, h.entry_size):
        fields = [_field("start", e.first), _field("size", e.last - e.first + 1), f"type={e.type_guid}",
                  f"uuid={e.part_guid}"]
        if e.name:  # escaped where not printable: a name from the disk must not break the backup's lines
            name = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in e.name)
            fields.append(f'name="{name}"')
        attrs = int.from_bytes(raw[(e.number - 1) * h.entry_size + 48 : (e.number - 1) * h.entry_size + 56], "little")
        if attrs:
            fields.append(f'attrs="{_gpt_attrs(attrs)}"')
        lines.append(f"{partition_node(device, e.number)} : {', '.join(fields)}")
    return "\n".join(lines) + "\n"


def _dump_dos(fd: int, device: str, sector_size: int, sectors: int, mbr: bytes) -> str:
    lines = [
        "label: dos",
        f"label-id: 0x{mbr_signature(mbr):08x}",
        f"device: {device}",
        "unit: sectors",
        f"sector-size: {sector_size}",
        "",
    ]

    def line(number: int, start: int, size: int, type_id: int, boot: bool) -> str:
        fields = [_field("start", start), _field("size", size), f"type={type_id:x}"]
        if boot:
            fields.append("bootable")
        return f"{partition_node(device, number)} : {', '.join(fields)}"

    number = 5
    for e in mbr_entries(mbr):
        if not e.type_id or not e.size:
            continue
        lines.append(line(e.index + 1, e.start, e.size, e.type_id, e.boot))
    for e in mbr_entries(mbr):
        if e.type_id in EXTENDED_IDS and e.size:
            for lba, raw in _ebr_chain(lambda lba, n: pread_sectors(fd, lba, n, sector_size), e.start, sectors):
                first = mbr_entries(raw)[0] if mbr_entries(raw) else None
                if first is not None and first.type_id and first.size:
                    lines.append(line(number, lba + first.start, first.size, first.type_id, first.boot))
                    number += 1
    return "\n".join(lines) + "\n"


def sfdisk_dump(path: str, sector_size: int, sectors: int, device: str | None = None) -> tuple[str, str]:
    """(label, dump) of the table on ``path`` as ``sfdisk --dump`` writes it; ("none", "") without one."""
    with reading(path) as fd:
        mbr = pread_sectors(fd, 0, 1, sector_size)
        entries = mbr_entries(mbr)
        name = device or path
        if entries and any(e.type_id == 0xEE for e in entries):
            dump = _dump_gpt(path, name, sector_size, sectors)
            return ("gpt", dump) if dump else ("none", "")
        if entries:
            return "dos", _dump_dos(fd, name, sector_size, sectors, mbr)
        dump = _dump_gpt(path, name, sector_size, sectors)  # a GPT whose protective MBR is gone
        return ("gpt", dump) if dump else ("none", "")


# --- taking, saving, loading ------------------------------------------------------------------------


def capture(path: str, sector_size: int, sectors: int, extents: Iterable[Extent], *, model: str = "") -> TableBackup:
    """Read the sectors in ``extents`` and the old table's dump from ``path``."""
    runs = merge(extents)
    if sum(e.size for e in runs) * sector_size > MAX_SAVED_BYTES:
        raise BackupError(f"the sectors to save exceed {MAX_SAVED_BYTES >> 20} MiB; this is not a table")
    try:
        label, dump = sfdisk_dump(path, sector_size, sectors, _one_line(path))
        with reading(path) as fd:  # under a write's lock: its look's descriptor (backend.raw.look)
            chunks = tuple(Chunk(e.start, pread_sectors(fd, e.start, e.size, sector_size)) for e in runs)
    except OSError as exc:
        raise BackupError(f"could not read {path} for the backup: {exc.strerror or exc}") from exc
    created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return TableBackup(path, sectors, sector_size, label, dump, chunks, model, created)


def _one_line(text: str) -> str:
    """A header value on one line: backslashes and what is not printable (a newline in an image's name)
    escaped as Python does; ``_unescape`` gives it back."""
    return "".join(c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode() for c in text)


def _unescape(text: str) -> str:
    try:
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise BackupError(f"not a diskplan backup: bad escape in {text[:40]!r}") from exc


def _runs_text(extents: Iterable[Extent]) -> str:
    return ",".join(f"{e.start}+{e.size}" for e in extents)


def _seal_line(s: Seal) -> str:
    return f"[written table={s.table} sectors={_runs_text(s.over)} sha256={s.sha256}]"


def render(b: TableBackup) -> str:
    out = [
        f"# diskplan table backup, format {FORMAT}. Put it back with: diskplan restore THIS-FILE "
        f"{_one_line(b.target)} --yes",
        "# The [sfdisk] section is the old table for sfdisk; [sectors] are raw copies of the table sectors.",
        "[backup]",
        f"format: {FORMAT}",
        f"target: {_one_line(b.target)}",
        f"model: {_one_line(b.model)}",
        f"sectors: {b.sectors}",
        f"sector-size: {b.sector_size}",
        f"label: {b.label}",
        f"table: {b.table_id}",
        f"created: {b.created}",
        "[sfdisk]",
        *b.dump.splitlines(),
    ]
    for c in b.chunks:
        count = len(c.data) // b.sector_size
        out.append(f"[sectors {c.start}+{count} sha256={hashlib.sha256(c.data).hexdigest()}]")
        packed = base64.b64encode(zlib.compress(c.data, 1)).decode()  # fastest: a few KiB either way
        out += [packed[i : i + 76] for i in range(0, len(packed), 76)]
    out.append("[end]")
    if b.written is not None:
        out.append(_seal_line(b.written))
    return "\n".join(out) + "\n"


def state_dir() -> str:
    """$XDG_STATE_HOME, or ~/.local/state (a relative XDG_STATE_HOME is ignored, as the spec says)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    return state if os.path.isabs(state) else os.path.join(os.path.expanduser("~"), ".local", "state")


def default_dir() -> str:
    return os.path.join(state_dir(), "diskplan", "backups")


def _mkdir_private(path: str) -> bool:
    """Create ``path`` 0700 whatever the umask; False when it was already there."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return False
    except OSError as exc:
        raise BackupError(f"cannot create the backup directory {path}: {exc.strerror}") from exc
    os.chmod(path, 0o700)
    return True


def _make_parents(path: str) -> None:
    """Every missing directory down to ``path``, each 0700."""
    missing = []
    while not os.path.isdir(path) and path != os.path.dirname(path):
        missing.append(path)
        path = os.path.dirname(path)
    for d in reversed(missing):
        _mkdir_private(d)


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def private_dir(path: str) -> None:
    """The default backup directory and diskplan/ above it: made 0700 where missing (and the state
    directory above them); refused when either is a symbolic link, belongs to another user or can be
    written by others — any of them could send a backup elsewhere or swap in a forged one."""
    _make_parents(os.path.dirname(os.path.dirname(path)))
    for d in (os.path.dirname(path), path):
        _mkdir_private(d)
        st = os.lstat(d)
        if stat.S_ISLNK(st.st_mode):
            raise BackupError(f"{d} is a symbolic link; diskplan keeps backups only in a directory of its own "
                              "(remove the link, or choose a file with --backup)")
        if not stat.S_ISDIR(st.st_mode):
            raise BackupError(f"{d} is not a directory")
        if st.st_uid != os.geteuid():
            raise BackupError(f"{d} belongs to {_owner(st.st_uid)}, not to {_owner(os.geteuid())}: refusing to "
                              "keep backups there (remove it, or choose a file with --backup)")
        if st.st_mode & 0o022:
            raise BackupError(f"{d} can be written by other users (mode {stat.S_IMODE(st.st_mode):04o}): run "
                              f"`chmod 700 {d}` first")


SAVED: list[str] = []  # this process's backups: every write saves one before its first sector, so none = none written


def write_synced(fd: int, data: bytes) -> None:
    """All of ``data`` written to ``fd`` (os.write may write less than asked), then fsynced."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def sync_dir(path: str) -> None:
    """fsync the directory ``path``: the names created or replaced in it are durable too."""
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def save(b: TableBackup, path: str) -> str:
    """Write the backup to ``path`` (created 0600, never overwritten, never through a symlink), synced to
    disk; returns its absolute path. Any failure removes what was written: no partial backup is left.
    In the default directory (``default_dir``), that directory's rules hold first (``private_dir``)."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if parent == os.path.abspath(default_dir()):
        private_dir(parent)
    else:
        _make_parents(parent)
    text = render(b).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError as exc:
        raise BackupError(f"{path} already exists; diskplan never overwrites a backup") from exc
    except OSError as exc:
        raise BackupError(f"cannot create the backup {path}: {exc.strerror}") from exc
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            write_synced(fd, text)
        finally:
            os.close(fd)
        sync_dir(parent)
        if load(path) != b:
            raise BackupError(f"the backup {path} does not read back as written")
    except (OSError, BackupError) as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        if isinstance(exc, BackupError):
            raise
        raise BackupError(f"cannot write the backup {path}: {exc.strerror}; nothing was kept") from exc
    SAVED.append(path)
    return path


def _int(text: str, what: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 40:
        raise BackupError(f"not a diskplan backup: bad {what} {text[:40]!r}")
    return int(text)


def _runs(text: str) -> tuple[Extent, ...]:
    out = []
    for run in text.split(",") if text else ():
        start, _, count = run.partition("+")
        n = _int(count, "sector count")
        if n < 1:
            raise BackupError("not a diskplan backup: an empty run of sectors")
        out.append(Extent(_int(start, "sector"), _int(start, "sector") + n - 1))
    return tuple(out)


def _seal(line: str) -> Seal | None:
    """The ``[written ...]`` line; None when it is torn (a crash while it was appended: as if unsealed)."""
    fields = dict(f.partition("=")[::2] for f in line[len("[written ") : -1].split(" "))
    try:
        seal = Seal(fields["table"], _runs(fields["sectors"]), fields["sha256"])
    except (KeyError, BackupError):
        return None
    return seal if len(seal.sha256) == 64 else None


def _geometry(head: dict[str, str]) -> tuple[int, int]:
    """(sectors, sector size) from the header, both checked."""
    if "sectors" not in head or "sector-size" not in head:
        raise BackupError("not a diskplan backup (no sectors or sector-size before the saved sectors)")
    sectors, ss = _int(head["sectors"], "sector count"), _int(head["sector-size"], "sector size")
    if ss not in SECTOR_SIZES:
        raise BackupError(f"not a diskplan backup: sector size {ss}")
    if not 0 < sectors * ss < 1 << 63:
        raise BackupError(f"not a diskplan backup: a disk of {sectors} sectors")
    return sectors, ss


def check_chunks(chunks: Iterable[Chunk], sectors: int, sector_size: int) -> None:
    """Every run inside the disk, of whole sectors, none overlapping another, all within the limit."""
    total, seen = 0, []
    for c in chunks:
        if not c.data or len(c.data) % sector_size:
            raise BackupError(f"the sectors at {c.start} are not whole {sector_size} B sectors: the backup is damaged")
        e = c.extent(sector_size)
        if e.start < 0 or e.end >= sectors:
            raise BackupError(f"the backup holds sectors {e.start}..{e.end}, outside the disk (0..{sectors - 1})")
        total += len(c.data)
        seen.append(e)
    if total > MAX_SAVED_BYTES:
        raise BackupError(f"the backup holds more than {MAX_SAVED_BYTES >> 20} MiB of sectors: not a table backup")
    seen.sort()
    for a, b in itertools.pairwise(seen):
        if a.overlaps(b):
            raise BackupError(f"the backup's runs {a.start}..{a.end} and {b.start}..{b.end} overlap: it is damaged")


def _inflate(packed: str, start: int, want: int) -> bytes:
    """Decode one run, never inflating more than the ``want`` bytes its header declares (a zlib bomb
    stops there)."""
    try:
        raw = base64.b64decode(packed, validate=True)
        z = zlib.decompressobj()
        data = z.decompress(raw, want + 1)
    except (ValueError, zlib.error) as exc:
        raise BackupError(f"the sectors at {start} are damaged in the backup") from exc
    if len(data) != want or not z.eof or z.unconsumed_tail:
        raise BackupError(f"the sectors at {start} are damaged in the backup (they do not inflate to {want} bytes)")
    return data


def parse(text: str) -> TableBackup:
    """Every byte checked before anything is returned: header, bounds, overlaps, lengths, checksums."""
    head: dict[str, str] = {}
    dump: list[str] = []
    chunks: list[Chunk] = []
    section, pending, body = "", None, list[str]()
    seal: Seal | None = None
    saved = 0

    def close_chunk() -> None:
        nonlocal saved
        if pending is None:
            return
        start, count, digest = pending
        sectors, ss = _geometry(head)
        if start + count > sectors:
            raise BackupError(f"the backup holds sectors {start}..{start + count - 1}, outside the disk "
                              f"(0..{sectors - 1})")
        saved += count * ss
        if saved > MAX_SAVED_BYTES:
            raise BackupError(f"the backup holds more than {MAX_SAVED_BYTES >> 20} MiB of sectors: not a table backup")
        data = _inflate("".join(body), start, count * ss)
        if hashlib.sha256(data).hexdigest() != digest:
            raise BackupError(f"the sectors at {start} fail their checksum: the backup is damaged")
        chunks.append(Chunk(start, data))

    for line in text.splitlines():
        if section == "end":
            if line.startswith("[written ") and line.endswith("]"):
                seal = _seal(line)
            continue
        if line.startswith("[") and line.endswith("]"):
            close_chunk()
            pending, body = None, []
            section = line[1:-1]
            if section.startswith("sectors "):
                where, _, digest = section[len("sectors ") :].partition(" sha256=")
                start, _, count = where.partition("+")
                pending = (_int(start, "sector"), _int(count, "sector count"), digest)
                if pending[1] < 1:
                    raise BackupError(f"not a diskplan backup line: {line[:80]}")
            continue
        if section == "backup" and ": " in line:
            key, value = line.split(": ", 1)
            head[key] = value
        elif section == "backup" and line.endswith(":"):
            head[line[:-1]] = ""
        elif section == "sfdisk":
            dump.append(line)
        elif pending is not None:
            body.append(line.strip())
    if section != "end":
        raise BackupError("the backup is truncated (no [end] line)")
    try:
        fmt = _int(head["format"], "format")
        if fmt not in READS:
            raise BackupError(f"backup format {fmt} is not one this diskplan reads ({', '.join(map(str, READS))})")
        sectors, ss = _geometry(head)
        check_chunks(chunks, sectors, ss)
        if seal is not None and any(e.end >= sectors for e in seal.over):
            seal = None
        return TableBackup(
            target=_unescape(head["target"]),
            sectors=sectors,
            sector_size=ss,
            label=head["label"],
            dump="\n".join(dump) + "\n" if dump else "",
            chunks=tuple(chunks),
            model=_unescape(head.get("model", "")),
            created=head.get("created", ""),
            written=seal,
            format=fmt,
        )
    except KeyError as exc:
        raise BackupError(f"not a diskplan backup (missing {exc})") from exc


def load(path: str) -> TableBackup:
    """Read and check a backup: only a regular file (opened without blocking, so a FIFO cannot stall it),
    at most MAX_FILE_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BackupError(f"cannot read the backup {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BackupError(f"the backup {path} is a directory, not a backup file")
        if not stat.S_ISREG(st.st_mode):
            raise BackupError(f"the backup {path} is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise BackupError(f"{path} is {st.st_size} bytes: far too large for a diskplan backup")
        parts, got = [], 0
        while got <= MAX_FILE_BYTES:
            part = os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - got))
            if not part:
                break
            parts.append(part)
            got += len(part)
        if got > MAX_FILE_BYTES:
            raise BackupError(f"{path} grew past {MAX_FILE_BYTES} bytes: far too large for a diskplan backup")
        text = b"".join(parts).decode("utf-8")
    except OSError as exc:
        raise BackupError(f"cannot read the backup {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise BackupError(f"{path} is not a diskplan backup (not UTF-8 text)") from exc
    finally:
        os.close(fd)
    if not text.startswith("# diskplan table backup"):
        raise BackupError(f"{path} is not a diskplan backup")
    return parse(text)


def default_path(target: str, when: datetime.datetime | None = None) -> str:
    """$XDG_STATE_HOME/diskplan/backups/<disk>-<UTC time>.dpbackup (off the disk being changed, as long
    as the home directory is not on it)."""
    stamp = (when or datetime.datetime.now(datetime.UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    name = os.path.basename(os.path.normpath(target)) or "disk"
    return os.path.join(default_dir(), f"{name}-{stamp}.dpbackup")


# --- comparing and putting back ---------------------------------------------------------------------


def differing(chunks: Iterable[Chunk], path: str, sector_size: int) -> list[Extent]:
    """Sectors of ``chunks`` whose bytes on ``path`` now differ from them."""
    fd = open_disk(path)
    try:
        out = []
        ss = sector_size
        for c in chunks:
            now = pread_sectors(fd, c.start, len(c.data) // ss, ss)
            if now != c.data:
                bad = [i for i in range(0, len(c.data), ss) if now[i : i + ss] != c.data[i : i + ss]]
                out += [Extent(c.start + i // ss, c.start + i // ss) for i in bad]
        return merge(out)
    finally:
        os.close(fd)


def changed_extents(b: TableBackup, path: str) -> list[Extent]:
    """Saved sectors whose bytes on ``path`` now differ from the backup (empty: the disk is as it was)."""
    return differing(b.chunks, path, b.sector_size)


@value
class PutBack:
    """What a restore writes now: the saved sectors outside every partition of the table on the disk,
    and those that held the backed-up table itself; ``kept``: saved sectors inside a partition now on the
    disk (data written since), which are left alone."""

    writes: tuple[Chunk, ...]
    kept: tuple[Extent, ...]


def plan_put_back(b: TableBackup, path: str) -> PutBack:
    ss = b.sector_size
    old_table = table_extents(chunk_reader(b), ss, b.sectors, found=True)
    hold = subtract(data_extents(path, ss, b.sectors), old_table)
    writes: list[Chunk] = []
    kept: list[Extent] = []
    for c in b.chunks:
        e = c.extent(ss)
        free = subtract([e], hold)
        writes += [Chunk(f.start, c.data[(f.start - e.start) * ss : (f.end - e.start + 1) * ss]) for f in free]
        kept += subtract([e], free)
    return PutBack(tuple(writes), tuple(merge(kept)))


def _digest(path: str, over: Iterable[Extent], sector_size: int) -> str:
    h = hashlib.sha256()
    fd = open_disk(path)
    try:
        for e in over:
            h.update(pread_sectors(fd, e.start, e.size, sector_size))
    finally:
        os.close(fd)
    return h.hexdigest()


def seal(b: TableBackup, backup_path: str, target: str) -> bool:
    """Right after a write: append to the backup what a restore will find on this disk — its table id
    and the SHA-256 of the sectors a restore would write. Best effort (False when it could not): an
    unsealed backup still restores while the disk holds the table it was taken over."""
    try:
        over = merge(c.extent(b.sector_size) for c in plan_put_back(b, target).writes)
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            now = table_id(lambda lba, n: pread_sectors(fd, lba, n, b.sector_size), b.sectors)
        finally:
            os.close(fd)
        line = _seal_line(Seal(now, tuple(over), _digest(target, over, b.sector_size))) + "\n"
        fd = os.open(backup_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    except (OSError, BackupError):
        return False
    return True


def foreign(b: TableBackup, path: str) -> list[str]:
    """Why ``path`` may not be the disk this backup was taken from (empty: it is). Sealed: the sectors a
    restore would write must hold what the write left (or the disk must hold the backed-up table again).
    Unsealed (format 1, or a write interrupted before the seal): the disk must hold the backed-up table,
    by its id (a GPT disk GUID, an MBR signature other than 0)."""
    ss = b.sector_size
    fd = open_disk(path)
    try:
        now = table_id(lambda lba, n: pread_sectors(fd, lba, n, ss), b.sectors)
    finally:
        os.close(fd)
    old, s = b.table_id, b.written
    back = now == old and not weak(old)
    if s is not None:
        if _digest(path, s.over, ss) == s.sha256 or (back and s.table != old):
            return []
        if now == s.table:
            return [f"{path} has changed since diskplan wrote it after taking this backup (its table sectors "
                    "differ from what that write left): restoring would undo a later change"]
        return [f"{path} holds the table {now}; this backup was taken over {old} and its write left {s.table}: "
                "it is not the disk the backup was taken from"]
    if back:
        return []
    return [f"{path} holds the table {now}, not the one this backup was taken over ({old}), and the backup does "
            "not record what its write left (format 1, or the write was interrupted)"]


def put_back(b: TableBackup, path: str, progress: Callable[[int, int], None] | None = None) -> PutBack:
    """Write the saved sectors back to ``path`` — never one inside a partition of the table now on it,
    unless it held the backed-up table (``plan_put_back``) — sync, and check the bytes read back. Checks
    the whole backup first, and refuses a device of another size or sector size: the backup's sectors
    would land elsewhere. Whether ``path`` is the disk it was taken from is the caller's (``foreign``)."""
    check_chunks(b.chunks, b.sectors, b.sector_size)
    try:
        size = device_size(path)
    except OSError as exc:
        raise BackupError(f"cannot open {path}: {exc.strerror}") from exc
    if size != b.sectors * b.sector_size:
        raise BackupError(
            f"{path} has {size} bytes; the backup is of a disk of {b.sectors} sectors of {b.sector_size} B "
            f"({b.sectors * b.sector_size} bytes): refusing to write it elsewhere"
        )
    plan = plan_put_back(b, path)
    total = len(plan.writes)
    write_sectors(path, [(c.start, c.data) for c in plan.writes], b.sector_size,
                  each=(lambda done: progress(done, total)) if progress else None)
    bad = differing(plan.writes, path, b.sector_size)
    if bad:
        where = ", ".join(f"{e.start}..{e.end}" for e in bad[:5])
        raise BackupError(f"after restoring, sectors {where} of {path} still differ from the backup")
    return plan
