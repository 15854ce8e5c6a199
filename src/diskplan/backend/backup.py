"""A backup of a partition table, taken before diskplan writes one: the old table as an sfdisk dump (for
people and for ``sfdisk``) and a raw copy of every sector the write may change (for ``diskplan restore``,
which puts them back byte for byte).

Which sectors: both ends of the disk (MBR or protective MBR, both GPT headers and entry arrays, the
areas libparted clears when it creates a new label, boot-loader gaps), every EBR of the old and the new
msdos table, and the old GPT's backup wherever its header says it is — never a sector inside a partition
the plan keeps, so restoring cannot roll back data written since.

The file is text: a header, the ``[sfdisk]`` dump, then each run of sectors as zlib-compressed base64
with its SHA-256. Pure Python over files and block devices; no libparted.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import os
import stat
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from diskplan.backend.gptcheck import check_gpt
from diskplan.backend.rawtable import mbr_entries, parse_gpt_entries, parse_gpt_header
from diskplan.model.extent import Extent

FORMAT = 1
MARGIN_BYTES = 1 << 20  # saved at each end of the disk: covers every label's metadata and boot gaps
EXTENDED_IDS = (0x05, 0x0F, 0x85)
GPT_ATTRS = {0: "RequiredPartition", 1: "NoBlockIOProtocol", 2: "LegacyBIOSBootable"}


class BackupError(Exception):
    """The backup could not be taken, read or put back: one line for the user."""


@dataclass(frozen=True)
class Chunk:
    start: int  # first LBA
    data: bytes  # whole sectors

    def extent(self, sector_size: int) -> Extent:
        return Extent(self.start, self.start + len(self.data) // sector_size - 1)


@dataclass(frozen=True)
class TableBackup:
    target: str
    sectors: int
    sector_size: int
    label: str  # "gpt", "dos", or "none"
    dump: str  # sfdisk-compatible dump of the old table ("" when there was none)
    chunks: tuple[Chunk, ...]
    model: str = ""
    created: str = ""

    @property
    def extents(self) -> tuple[Extent, ...]:
        return tuple(c.extent(self.sector_size) for c in self.chunks)

    @property
    def saved_sectors(self) -> int:
        return sum(len(c.data) for c in self.chunks) // self.sector_size


# --- reading raw sectors ----------------------------------------------------------------------------


def _open(path: str, write: bool = False) -> int:
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_CLOEXEC
    if write and stat.S_ISBLK(os.stat(path).st_mode):
        flags |= os.O_EXCL  # the kernel refuses while the disk is mounted or held
    return os.open(path, flags)


def _pread(fd: int, lba: int, count: int, sector_size: int) -> bytes:
    want = count * sector_size
    out = b""
    while len(out) < want:
        got = os.pread(fd, want - len(out), lba * sector_size + len(out))
        if not got:
            raise BackupError(f"short read at sector {lba + len(out) // sector_size}: the device ended early")
        out += got
    return out


def read_sectors(path: str, lba: int, count: int, sector_size: int) -> bytes:
    fd = _open(path)
    try:
        return _pread(fd, lba, count, sector_size)
    finally:
        os.close(fd)


# --- which sectors hold the old table ---------------------------------------------------------------


def _ebr_chain(fd: int, ext_start: int, sector_size: int, sectors: int) -> list[tuple[int, bytes]]:
    """(LBA, sector) of every EBR, following the links; stops on a loop, a bad link or 256 EBRs."""
    out: list[tuple[int, bytes]] = []
    ebr, seen = ext_start, set()
    while ebr not in seen and len(seen) < 256 and 0 < ebr < sectors:
        seen.add(ebr)
        raw = _pread(fd, ebr, 1, sector_size)
        out.append((ebr, raw))
        links = mbr_entries(raw)
        if not links or not links[1].type_id or not links[1].start:
            break
        ebr = ext_start + links[1].start
    return out


def _gpt_header_extents(fd: int, lba: int, sector_size: int, sectors: int) -> list[Extent]:
    """The header at ``lba`` and the entry array it points to (when its fields are sane)."""
    if not 0 < lba < sectors:
        return []
    out = [Extent(lba, lba)]
    h = parse_gpt_header(_pread(fd, lba, 1, sector_size), lba)
    if h.problem == "no GPT signature":
        return out
    count = -(-(h.entry_count * h.entry_size) // sector_size)
    if 0 < count <= 4096 and h.entries_lba > 0 and h.entries_lba + count <= sectors:
        out.append(Extent(h.entries_lba, h.entries_lba + count - 1))
    return out


def old_table_extents(path: str, sector_size: int, sectors: int) -> list[Extent]:
    """Where the table now on ``path`` lives: MBR, EBRs, both GPT headers and entry arrays."""
    fd = _open(path)
    try:
        out = [Extent(0, 0)]
        mbr = _pread(fd, 0, 1, sector_size)
        for e in mbr_entries(mbr):
            if e.type_id in EXTENDED_IDS and e.size:
                out += [Extent(lba, lba) for lba, _ in _ebr_chain(fd, e.start, sector_size, sectors)]
        if sectors > 2:
            primary = _gpt_header_extents(fd, 1, sector_size, sectors)
            out += primary
            h = parse_gpt_header(_pread(fd, 1, 1, sector_size), 1)
            if h.problem != "no GPT signature" and 0 < h.backup < sectors:
                out += _gpt_header_extents(fd, h.backup, sector_size, sectors)
            out += _gpt_header_extents(fd, sectors - 1, sector_size, sectors)
        return out
    finally:
        os.close(fd)


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


def partition_node(device: str, number: int) -> str:
    """sfdisk's names: /dev/sda1, /dev/loop0p1, /dev/nvme0n1p1, disk.img1."""
    return f"{device}p{number}" if device[-1:].isdigit() else f"{device}{number}"


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
        if e.name:
            fields.append(f'name="{e.name}"')
        attrs = int.from_bytes(raw[(e.number - 1) * h.entry_size + 48 : (e.number - 1) * h.entry_size + 56], "little")
        if attrs:
            fields.append(f'attrs="{_gpt_attrs(attrs)}"')
        lines.append(f"{partition_node(device, e.number)} : {', '.join(fields)}")
    return "\n".join(lines) + "\n"


def _dump_dos(fd: int, device: str, sector_size: int, sectors: int, mbr: bytes) -> str:
    lines = [
        "label: dos",
        f"label-id: 0x{int.from_bytes(mbr[440:444], 'little'):08x}",
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
            for lba, raw in _ebr_chain(fd, e.start, sector_size, sectors):
                first = mbr_entries(raw)[0] if mbr_entries(raw) else None
                if first is not None and first.type_id and first.size:
                    lines.append(line(number, lba + first.start, first.size, first.type_id, first.boot))
                    number += 1
    return "\n".join(lines) + "\n"


def sfdisk_dump(path: str, sector_size: int, sectors: int, device: str | None = None) -> tuple[str, str]:
    """(label, dump) of the table on ``path`` as ``sfdisk --dump`` writes it; ("none", "") without one."""
    fd = _open(path)
    try:
        mbr = _pread(fd, 0, 1, sector_size)
        entries = mbr_entries(mbr)
        name = device or path
        if entries and any(e.type_id == 0xEE for e in entries):
            dump = _dump_gpt(path, name, sector_size, sectors)
            return ("gpt", dump) if dump else ("none", "")
        if entries:
            return "dos", _dump_dos(fd, name, sector_size, sectors, mbr)
        dump = _dump_gpt(path, name, sector_size, sectors)  # a GPT whose protective MBR is gone
        return ("gpt", dump) if dump else ("none", "")
    finally:
        os.close(fd)


# --- taking, saving, loading ------------------------------------------------------------------------


def capture(path: str, sector_size: int, sectors: int, extents: Iterable[Extent], *, model: str = "") -> TableBackup:
    """Read the sectors in ``extents`` and the old table's dump from ``path``."""
    try:
        label, dump = sfdisk_dump(path, sector_size, sectors)
        fd = _open(path)
        try:
            chunks = tuple(Chunk(e.start, _pread(fd, e.start, e.size, sector_size)) for e in merge(extents))
        finally:
            os.close(fd)
    except OSError as exc:
        raise BackupError(f"could not read {path} for the backup: {exc.strerror or exc}") from exc
    created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return TableBackup(path, sectors, sector_size, label, dump, chunks, model, created)


def render(b: TableBackup) -> str:
    out = [
        f"# diskplan table backup, format {FORMAT}. Put it back with: diskplan restore THIS-FILE {b.target} --yes",
        "# The [sfdisk] section is the old table for sfdisk; [sectors] are raw copies of the table sectors.",
        "[backup]",
        f"format: {FORMAT}",
        f"target: {b.target}",
        f"model: {b.model}",
        f"sectors: {b.sectors}",
        f"sector-size: {b.sector_size}",
        f"label: {b.label}",
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
    return "\n".join(out) + "\n"


def save(b: TableBackup, path: str) -> str:
    """Write the backup to ``path`` (created, never overwritten), synced to disk; returns its absolute path."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = render(b).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError as exc:
        raise BackupError(f"{path} already exists; diskplan never overwrites a backup") from exc
    except OSError as exc:
        raise BackupError(f"cannot create the backup {path}: {exc.strerror}") from exc
    try:
        view = memoryview(text)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        raise BackupError(f"cannot write the backup {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dfd)  # the file's name is durable too
    finally:
        os.close(dfd)
    if load(path) != b:
        raise BackupError(f"the backup {path} does not read back as written")
    return path


def parse(text: str) -> TableBackup:
    head: dict[str, str] = {}
    dump: list[str] = []
    chunks: list[Chunk] = []
    section, pending, body = "", None, []

    def close_chunk() -> None:
        if pending is None:
            return
        start, count, digest = pending
        try:
            data = zlib.decompress(base64.b64decode("".join(body), validate=True))
        except (ValueError, zlib.error) as exc:
            raise BackupError(f"the sectors at {start} are damaged in the backup") from exc
        if hashlib.sha256(data).hexdigest() != digest or len(data) != count * int(head.get("sector-size", "0")):
            raise BackupError(f"the sectors at {start} fail their checksum: the backup is damaged")
        chunks.append(Chunk(start, data))

    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            close_chunk()
            pending, body = None, []
            section = line[1:-1]
            if section.startswith("sectors "):
                try:
                    where, digest = section[len("sectors ") :].split(" sha256=")
                    start, count = (int(x) for x in where.split("+"))
                except ValueError as exc:
                    raise BackupError(f"not a diskplan backup line: {line}") from exc
                pending = (start, count, digest)
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
        if int(head["format"]) != FORMAT:
            raise BackupError(f"backup format {head['format']} is not one this diskplan reads ({FORMAT})")
        return TableBackup(
            target=head["target"],
            sectors=int(head["sectors"]),
            sector_size=int(head["sector-size"]),
            label=head["label"],
            dump="\n".join(dump) + "\n" if dump else "",
            chunks=tuple(chunks),
            model=head.get("model", ""),
            created=head.get("created", ""),
        )
    except (KeyError, ValueError) as exc:
        raise BackupError(f"not a diskplan backup (missing or bad {exc})") from exc


def load(path: str) -> TableBackup:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise BackupError(f"cannot read the backup {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    if not text.startswith("# diskplan table backup"):
        raise BackupError(f"{path} is not a diskplan backup")
    return parse(text)


def default_path(target: str, when: datetime.datetime | None = None) -> str:
    """$XDG_STATE_HOME/diskplan/backups/<disk>-<UTC time>.dpbackup (off the disk being changed, as long
    as the home directory is not on it)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    stamp = (when or datetime.datetime.now(datetime.UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    name = os.path.basename(os.path.normpath(target)) or "disk"
    return os.path.join(state, "diskplan", "backups", f"{name}-{stamp}.dpbackup")


# --- comparing and putting back ---------------------------------------------------------------------


def changed_extents(b: TableBackup, path: str) -> list[Extent]:
    """Saved sectors whose bytes on ``path`` now differ from the backup (empty: the disk is as it was)."""
    fd = _open(path)
    try:
        out = []
        for c in b.chunks:
            now = _pread(fd, c.start, len(c.data) // b.sector_size, b.sector_size)
            if now != c.data:
                ss = b.sector_size
                bad = [i for i in range(0, len(c.data), ss) if now[i : i + ss] != c.data[i : i + ss]]
                out += [Extent(c.start + i // ss, c.start + i // ss) for i in bad]
        return merge(out)
    finally:
        os.close(fd)


def device_size(path: str) -> int:
    fd = _open(path)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def write_sectors(
    path: str,
    writes: Iterable[tuple[int, bytes]],
    sector_size: int,
    *,
    each: Callable[[int], None] | None = None,
    after_first: Callable[[], None] | None = None,
) -> None:
    """Write each (LBA, whole sectors) to ``path`` (exclusively, for a block device: the kernel refuses
    while it is mounted or held), fsync, then drop those pages from the cache so a read-back reaches the
    device. ``each(n)`` after the n-th run; ``after_first`` (tests: a fault) after the first."""
    try:
        fd = _open(path, write=True)
    except OSError as exc:
        raise BackupError(f"cannot open {path} for writing: {exc.strerror}") from exc
    try:
        for i, (lba, data) in enumerate(writes):
            if len(data) % sector_size:
                raise BackupError(f"{len(data)} bytes for LBA {lba} are not whole {sector_size} B sectors")
            view, offset = memoryview(data), lba * sector_size
            while view:
                n = os.pwrite(fd, view, offset)
                view, offset = view[n:], offset + n
            if each:
                each(i + 1)
            if i == 0 and after_first:
                after_first()
        os.fsync(fd)
        with contextlib.suppress(OSError):  # only a cache hint
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError as exc:
        raise BackupError(f"writing {path} failed: {exc.strerror}") from exc
    finally:
        os.close(fd)


def put_back(b: TableBackup, path: str, progress: Callable[[int, int], None] | None = None) -> None:
    """Write every saved sector back to ``path``, sync, and check the bytes read back equal the backup.
    Refuses a device of another size or sector size: the backup's sectors would land elsewhere."""
    try:
        size = device_size(path)
    except OSError as exc:
        raise BackupError(f"cannot open {path}: {exc.strerror}") from exc
    if size != b.sectors * b.sector_size:
        raise BackupError(
            f"{path} has {size} bytes; the backup is of a disk of {b.sectors} sectors of {b.sector_size} B "
            f"({b.sectors * b.sector_size} bytes): refusing to write it elsewhere"
        )
    total = len(b.chunks)
    write_sectors(path, [(c.start, c.data) for c in b.chunks], b.sector_size,
                  each=(lambda done: progress(done, total)) if progress else None)
    bad = changed_extents(b, path)
    if bad:
        where = ", ".join(f"{e.start}..{e.end}" for e in bad[:5])
        raise BackupError(f"after restoring, sectors {where} of {path} still differ from the backup")
