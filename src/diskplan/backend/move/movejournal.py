"""The journal of a data move: what lets ``diskplan resume`` finish a move from any crash point.

One text file in the moves directory (``moves_dir``: /var/lib/diskplan/moves for root, whatever HOME or
XDG_STATE_HOME the caller has, so ``sudo`` and ``sudo -i`` find the same journals), named after the table backup
taken for the same move (``<backup name>.dpmove``), append-only, fsynced after every append:

    # diskplan move journal, format 1 ...
    header {"target": ..., "start": S, "to": T, "length": L, "chunk": C, ...}  *crc
    copy                                                                      *crc
    R 0 <CRC-32 of chunk 0's source> [<CRC-32 of the old bytes saved>]       *crc
    W 0                                                                       *crc
    R 1 ...
    verified / table / done                                                   *crc
    (or rollback / undone: backend.move.moveundo put it back at its old place)     *crc

Each chunk's source checksum is recorded in its ``R`` line just before the chunk is written, not all in the
header: putting them in the header would need a whole extra read of the partition before the first byte
moves, and gives no more safety (a checksum is durable before its chunk's destination is touched either way).

Every line carries the CRC-32 of its text: a line torn by a crash (only ever the last one) fails it and
is ignored — it was not fsynced, so nothing was written after it. A bad line anywhere else means the
journal is damaged: resume refuses rather than guess.

The old bytes a chunk's own write overwrites (small shifts only, see model.plan.move) go to ``<journal>.slot``:
two halves used alternately (chunk k in half k % 2), so saving chunk k+1's bytes never touches chunk k's
while chunk k may still be redone. Each save is fsynced before the record that names its digest, and the slot's
directory when the slot is created (its name must survive a power cut as well as its bytes). A rollback's reverse
copy (backend.move.reverse) saves whole chunks there too.
"""

from __future__ import annotations

import json
import os
import stat
import zlib

from diskplan.backend.faults import fault
from diskplan.backend.move.diskmark import DiskMark, disk_mark
from diskplan.backend.write.backup import default_dir, state_dir
from diskplan.model.plan.move import Read, Written
from diskplan.model.value import asdict, value

FORMAT = 1
# "copy": the first chunk may be written from now on (journals whose header says ``copy_mark``); then, after the
# copy, in order; or a rollback begun, ended
MARKS = ("copy", "verified", "table", "done", "rollback", "undone")
ENDED = ("done", "undone")


class JournalDamaged(Exception):
    """The journal cannot be trusted: one line for the user."""


@value
class Header:
    """What the move is, and enough to recognise its disk and partition again."""

    target: str
    size: int  # bytes of the whole disk or image
    sector_size: int
    label: str  # "gpt" or "msdos"
    number: int
    guid: str  # GPT unique partition GUID ("" on msdos)
    start: int
    to: int
    length: int
    chunk: int
    backup: str  # the table backup taken before the move
    fs: str = ""  # what blkid saw before the move: type, UUID, label
    fs_uuid: str = ""
    fs_label: str = ""
    created: str = ""
    ptype: str = ""  # the entry's type before it was hidden (backend.move.moveentry); "": never hidden
    # a logical msdos partition (model.plan.ebrmove; all 0 otherwise): its EBR before and after, the free sector
    # its hidden entry is parked on, the extended partition's end afterwards
    ebr: int = 0
    new_ebr: int = 0
    park: int = 0
    ext_end: int = 0
    # the rest plan (backend.move.planrest) the apply running this move as one of its steps saved: a rollback
    # makes it start from the table it leaves ("": a move of its own)
    rest: str = ""
    # the disk's identity when the move began (backend.move.diskmark): a journal is matched to a disk by these,
    # not by its path ("": a journal written before they were recorded, matched by path and size)
    table_id: str = ""
    serial: str = ""
    # the journal is marked "copy" before the first chunk is written: without that mark no byte of the
    # partition moved (False: an older journal, where only the records tell)
    copy_mark: bool = False

    @property
    def end(self) -> int:
        return self.start + self.length - 1


def _line(text: str) -> bytes:
    return f"{text} *{zlib.crc32(text.encode()) & 0xFFFFFFFF:08x}\n".encode()


def _unline(raw: bytes) -> str | None:
    """The text of a whole, intact line; None when torn or damaged."""
    if not raw.endswith(b"\n"):
        return None
    try:
        text, crc = raw[:-1].decode().rsplit(" *", 1)
        ok = int(crc, 16) == zlib.crc32(text.encode()) & 0xFFFFFFFF
    except (UnicodeDecodeError, ValueError):
        return None
    return text if ok else None


def _sync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """An open journal: ``append`` records (one write, one fsync), ``save``/``saved`` the slot."""

    def __init__(self, path: str, header: Header, records: list[Read | Written], marks: list[str]) -> None:
        self.path = path
        self.header = header
        self.records = records
        self.marks = marks
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._slot = -1
        self._trimmed = False

    @classmethod
    def create(cls, path: str, header: Header) -> Journal:
        path = os.path.abspath(path)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            head = f"# diskplan move journal, format {FORMAT}. Finish the move with: diskplan resume {header.target}\n"
            os.write(fd, head.encode() + _line("header " + json.dumps(asdict(header), sort_keys=True)))
            os.fsync(fd)
        finally:
            os.close(fd)
        _sync_dir(path)
        return cls(path, header, [], [])

    @classmethod
    def open(cls, path: str) -> Journal:
        header, records, marks = read(path)
        return cls(os.path.abspath(path), header, records, marks)

    def close(self) -> None:
        for fd in (self._fd, self._slot):
            if fd >= 0:
                os.close(fd)
        self._fd = self._slot = -1

    def append(self, *items: Read | Written | str) -> None:
        """Write the records as one append and fsync: durable before the caller writes any data."""
        if not self._trimmed:
            _drop_torn_tail(self.path)
            self._trimmed = True
        data = b"".join(_line(_render(i)) for i in items)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        fault("record")
        os.fsync(self._fd)
        for i in items:
            if isinstance(i, str):
                self.marks.append(i)
            else:
                self.records.append(i)

    @property
    def slot_path(self) -> str:
        return self.path + ".slot"

    def _slot_fd(self) -> int:
        if self._slot < 0:
            new = not os.path.lexists(self.slot_path)
            self._slot = os.open(self.slot_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            if new:  # its name durable too (an fsync of the file need not make it so): a record relies on its bytes
                _sync_dir(self.slot_path)
        return self._slot

    def save(self, index: int, data: bytes | memoryview) -> None:
        """Old bytes of chunk ``index``, synced (half ``index % 2`` of the slot file)."""
        fd, at = self._slot_fd(), (index % 2) * self.header.chunk * self.header.sector_size
        view, off = memoryview(data), at
        while view:
            n = os.pwrite(fd, view, off)
            view, off = view[n:], off + n
        os.fsync(fd)

    def saved(self, index: int, nbytes: int) -> bytes:
        fd, at = self._slot_fd(), (index % 2) * self.header.chunk * self.header.sector_size
        return os.pread(fd, nbytes, at)


def _render(item: Read | Written | str) -> str:
    if isinstance(item, Read):
        return f"R {item.index} {item.digest}" + (f" {item.saved}" if item.saved else "")
    if isinstance(item, Written):
        return f"W {item.index}"
    if item not in MARKS:
        raise ValueError(item)
    return item


def _parse(text: str) -> Read | Written | str:
    word, *rest = text.split(" ")
    if word == "R" and len(rest) in (2, 3):
        return Read(int(rest[0]), rest[1], rest[2] if len(rest) == 3 else "")
    if word == "W" and len(rest) == 1:
        return Written(int(rest[0]))
    if word in MARKS and not rest:
        return word
    raise ValueError(text)


MOVES_DIR = "/var/lib/diskplan/moves"
MOVES_ENV = "DISKPLAN_MOVES_DIR"  # another directory (the tests, the served demos: each their own)
HEAD_LIMIT = 64 << 10  # the comment and header lines of any journal fit in this
LINE_LIMIT = 128  # no record line is longer (an R line: index, two CRCs, its own CRC)


def moves_dir() -> str:
    """Where journals are made: $DISKPLAN_MOVES_DIR, else /var/lib/diskplan/moves for root (one place every
    root process finds, whatever its environment), else the user's own state directory (an image file of
    one's own needs no root, and cannot write /var/lib)."""
    if os.environ.get(MOVES_ENV):
        return os.path.abspath(os.environ[MOVES_ENV])
    if os.geteuid() == 0:
        return MOVES_DIR
    return os.path.join(state_dir(), "diskplan", "moves")


def _search_dirs() -> list[str]:
    """Where unfinished journals may be: the moves directory, and (journals of earlier versions, made beside
    the table backups) the caller's backup directory."""
    out = [moves_dir()]
    if not os.environ.get(MOVES_ENV):
        out.append(default_dir())
    return list(dict.fromkeys(out))


def _bytes(path: str) -> bytes:
    """The journal's bytes, read only from a regular file (a FIFO or a device is refused, never waited on
    or read without end) and only up to what its own header says a journal of that move can hold."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise JournalDamaged(f"cannot read the move journal {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JournalDamaged(f"{path} is not a move journal (not a regular file)")
        head = os.pread(fd, HEAD_LIMIT, 0)
        limit = _limit(head)
        if limit is None or st.st_size > limit:
            raise JournalDamaged(f"{path} is not a diskplan move journal (no header, or longer than its move "
                                 "could make it)")
        data = head
        while len(data) < min(st.st_size, limit):
            more = os.pread(fd, limit - len(data), len(data))
            if not more:
                break
            data += more
        return data[:limit]
    except OSError as exc:
        raise JournalDamaged(f"cannot read the move journal {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _limit(head: bytes) -> int | None:
    """The most bytes a journal with this beginning can hold: two records per chunk, the marks, the header."""
    lines = head.split(b"\n", 2)
    if len(lines) < 3 or not lines[0].startswith(b"# diskplan move journal"):
        return None
    text = _unline(lines[1] + b"\n")
    if text is None or not text.startswith("header "):
        return None
    try:
        h = json.loads(text[len("header ") :])
        chunks = -(-int(h["length"]) // max(1, int(h["chunk"])))
    except (ValueError, KeyError, TypeError):
        return None
    return len(lines[0]) + len(lines[1]) + 2 + (2 * chunks + len(MARKS) + 2) * LINE_LIMIT


def read(path: str) -> tuple[Header, list[Read | Written], list[str]]:
    lines = _bytes(path).splitlines(keepends=True)
    if not lines or not lines[0].startswith(b"# diskplan move journal"):
        raise JournalDamaged(f"{path} is not a diskplan move journal")
    body = lines[1:]
    texts: list[str] = []
    for i, raw in enumerate(body):
        text = _unline(raw)
        if text is None:
            if i == len(body) - 1:
                break  # torn by a crash before its fsync: nothing was written after it
            raise JournalDamaged(f"line {i + 2} of the move journal {path} is damaged")
        texts.append(text)
    if not texts or not texts[0].startswith("header "):
        raise JournalDamaged(f"the move journal {path} has no header")
    try:
        header = _header(texts[0])
        items = [_parse(t) for t in texts[1:]]
    except (TypeError, ValueError) as exc:
        raise JournalDamaged(f"the move journal {path} has a record diskplan cannot read: {exc}") from exc
    records = [i for i in items if not isinstance(i, str)]
    marks = [i for i in items if isinstance(i, str)]
    return header, records, marks


SECTOR_SIZES = (512, 1024, 2048, 4096)


def _header(text: str) -> Header:
    """The header line's text as a Header; raises TypeError or ValueError, also for a field of the wrong type or
    a size no move can have (its CRC only says the line is whole, not that diskplan wrote it: ``--journal`` can
    name any file), which would otherwise fail as an internal error wherever it is first used."""
    h = Header(**json.loads(text[len("header ") :]))
    for name, kind in Header.__annotations__.items():  # the fields, as strings (annotations are not evaluated)
        want = {"int": int, "str": str, "bool": bool}[kind]
        got = getattr(h, name)
        if not isinstance(got, want) or (want is int and isinstance(got, bool)):
            raise ValueError(f"the header's {name} is {got!r}, not {'an' if want is int else 'a'} {kind}")
    if h.sector_size not in SECTOR_SIZES or min(h.chunk, h.length, h.number, h.size) <= 0 or min(h.start, h.to) < 0:
        raise ValueError(f"the header's sizes are not those of a move (sector size {h.sector_size}, chunk {h.chunk}, "
                         f"length {h.length}, number {h.number}, disk {h.size} B, {h.start} -> {h.to})")
    return h


def damaged_header(path: str) -> Header | None:
    """The intact header of a journal whose later lines are damaged (``read`` refuses it); None when the header
    itself cannot be read either. Such a journal still says which disk has a move that may be unfinished."""
    try:
        lines = _bytes(path).split(b"\n", 2)
        text = _unline(lines[1] + b"\n") if len(lines) > 2 else None
        return _header(text) if text is not None and text.startswith("header ") else None
    except (JournalDamaged, TypeError, ValueError):
        return None


def _drop_torn_tail(path: str) -> None:
    """Before the first append of a resume: cut a last line a crash tore (``read`` ignores it), synced, so
    the next record starts on a line of its own instead of being glued to the torn one and ignored with it."""
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    if len(lines) > 1 and _unline(lines[-1]) is None:
        os.truncate(path, sum(len(line) for line in lines[:-1]))
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def journal_path(backup: str) -> str:
    """The journal of a move, in the moves directory, named after the table backup taken for it."""
    stem = backup[: -len(".dpbackup")] if backup.endswith(".dpbackup") else backup
    return os.path.join(moves_dir(), os.path.basename(stem) + ".dpmove")


def belongs(header: Header, target: str, mark: DiskMark) -> bool:
    """Is the journal with ``header`` about the disk at ``target`` whose mark is ``mark``? By the disk's
    identity: its table identifier, size and serial; its path counts only for a disk with nothing else to
    tell it by (and for journals that recorded no identity)."""
    if header.size != mark.size or header.table_id not in ("", mark.table_id):
        return False
    if header.serial and mark.serial and header.serial != mark.serial:
        return False
    if not header.table_id or mark.weak:
        return os.path.realpath(header.target) == os.path.realpath(target)
    return True


def unfinished(target: str, size: int) -> list[str]:
    """Journals of moves on the disk at ``target`` (``size`` bytes; matched by ``belongs``) not yet marked
    done or undone (or damaged past their header: ``damaged_header``), newest first, wherever the disk's path
    was when they were written."""
    try:
        mark = disk_mark(target, size)
    except OSError:
        return []
    found: list[tuple[str, str]] = []
    for directory in _search_dirs():
        try:
            names = [n for n in os.listdir(directory) if n.endswith(".dpmove")]
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            try:
                header, _, marks = read(path)
            except JournalDamaged:
                # Damaged after its header: whether its move ended cannot be told, so it counts as unfinished
                # (resume says what is damaged; every other write refuses the half-moved bytes meanwhile).
                damaged = damaged_header(path)
                if damaged is None:
                    continue
                header, marks = damaged, []
            if belongs(header, target, mark) and not set(ENDED) & set(marks):
                found.append((header.created or name, path))
    return [p for _, p in sorted(found, reverse=True)]
