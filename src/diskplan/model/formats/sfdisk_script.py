"""sfdisk's input, read as sfdisk reads it (``man sfdisk``, INPUT FORMATS; libfdisk's script.c) and placed on a
disk as sfdisk places it (libfdisk's gpt.c and dos.c add_partition).

Both formats: named fields with or without the ``/dev/sdX1 :`` prefix (``start=2048, size=1MiB, type=L``,
case-insensitive keys, ``Id=`` for ``type=``) and unnamed fields (``2048,204800,L,*`` separated by commas,
semicolons or blanks, ``-`` or nothing for a default). Numbers are C numbers (``0x800``, ``010`` octal); a
suffix (``K``, ``MiB``, ``GB``, ``1.5G``) makes them bytes. A ``+`` or ``-`` before a number is read and, as
sfdisk does for a new partition, does not change it; ``+`` alone is "as much as possible". Types are
tried as sfdisk tries them in scripts: alias (``linux``), shortcut (``L``; the deprecated ``E`` is 0x05), a
libfdisk name (``"Linux /usr (x86)"``, case and punctuation ignored), then a hex id or a GUID.

What a line leaves out is decided on the disk: :func:`place` gives every partition its number, start and end
from the disk's size and sfdisk's alignment grain (1 MiB, or the optimal I/O size when larger).
"""

from __future__ import annotations

import re

from diskplan.model import ptypes
from diskplan.model.extent import Partition, Role, State
from diskplan.model.labels import EXTENDED_IDS
from diskplan.model.value import field, replace, value

HEADERS = ("label", "unit", "label-id", "device", "grain", "first-lba", "last-lba", "table-length", "sector-size")
MAX_NUMBER = (1 << 64) - 1
_SUFFIXES = "KMGTPEZY"
_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)(?:\.([0-9]+))?([KMGTPEZYkmgtpezy](?:iB|ib|B|b)?)?")
# libfdisk's shortcuts and aliases (dos.c and gpt.c's parttype_cuts): (shortcut, alias, dos id, gpt GUID)
_CUTS = (
    ("L", "linux", 0x83, ptypes.LINUX_FS_GUID),
    ("S", "swap", 0x82, "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"),
    ("E", "extended", 0x05, None),  # deprecated shortcut (0x0e is "e"), still read in scripts
    ("Ex", "extended", 0x05, None),
    ("H", "home", None, "933AC7E1-2EB4-4F13-B844-0E14E2AEF915"),
    ("U", "uefi", 0xEF, "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"),
    ("R", "raid", 0xFD, "A19D880F-05FC-4D3B-A006-743F0F84911E"),
    ("V", "lvm", 0x8E, "E6D6D379-F507-44C2-A23C-238F2A3DF928"),
    ("X", "linuxex", 0x85, None),
)
LINUX_GUID = ptypes.LINUX_FS_GUID
_GUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


class ScriptError(ValueError):
    """What sfdisk refuses: ``str(exc)`` says where and why."""


@value
class Amount:
    """A start or a size as written: sectors, or bytes (``in_bytes``) that the disk's sector size divides."""

    value: int
    in_bytes: bool = False

    def sectors(self, sector_size: int) -> int:
        return self.value // sector_size if self.in_bytes else self.value


@value
class Line:
    """One partition line; None is sfdisk's default (the next free aligned start, as much as possible)."""

    lineno: int
    number: int | None = None
    start: Amount | None = None
    size: Amount | None = None
    type: str | None = None  # canonical code: a GUID or "0x83"
    bootable: bool = False
    name: str = ""
    attrs: str = ""
    uuid: str = ""

    @property
    def fixed(self) -> bool:
        """Everything given in sectors, as ``sfdisk --dump`` writes it: no disk needed to place it."""
        return (self.number is not None and self.start is not None and self.size is not None
                and not self.start.in_bytes and not self.size.in_bytes)


@value
class Script:
    header: dict[str, str]
    lines: tuple[Line, ...]
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        """"gpt" or "dos" (sfdisk's default when the script names none)."""
        return self.header.get("label", "dos")


# --- reading ----------------------------------------------------------------------------------------------


def _number(token: str, where: str, what: str) -> Amount:
    """util-linux's parse_size: a C integer, optionally a fraction and a suffix (then bytes)."""
    m = _NUMBER.fullmatch(token)
    if m is None:
        raise ScriptError(f"{where}: {what} {token[:30]!r} is not a number (sectors, or bytes with KiB, MiB...)")
    digits, frac, suffix = m.groups()
    value = int(digits, 0) if not digits.startswith("0") or digits[:2].lower() == "0x" else int(digits, 8)
    if frac and not suffix:
        raise ScriptError(f"{where}: {what} {token!r}: a fraction needs a unit (1.5GiB)")
    if not suffix:
        if value > MAX_NUMBER:
            raise ScriptError(f"{where}: {what} {token[:24]} is past 2^64-1")
        return Amount(value)
    base = 1000 if suffix[1:].upper() == "B" else 1024
    scale = base ** (_SUFFIXES.index(suffix[0].upper()) + 1)
    total = value * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
    if total > MAX_NUMBER:
        raise ScriptError(f"{where}: {what} {token[:24]} is past 2^64-1")
    return Amount(total, in_bytes=True)


def _blank(ch: str) -> bool:
    return ch in " \t"


class _Cursor:
    """libfdisk's tokenizer over one line (next_token, is_default_value)."""

    def __init__(self, text: str, where: str) -> None:
        self.s, self.pos, self.where = text, 0, where

    def skip_blank(self) -> None:
        while self.pos < len(self.s) and _blank(self.s[self.pos]):
            self.pos += 1

    def peek(self) -> str:
        return self.s[self.pos] if self.pos < len(self.s) else ""

    def at_end(self) -> bool:
        return self.pos >= len(self.s)

    def is_default(self) -> bool:
        """``-``, nothing, or a lone separator: the field's default (consumed)."""
        p = self.pos
        while p < len(self.s) and _blank(self.s[p]):
            p += 1
        blank = False
        if self.s[p : p + 1] == "-":
            x = p = p + 1
            while p < len(self.s) and _blank(self.s[p]):
                p += 1
            blank = x < p
        if self.s[p : p + 1] in (",", ";"):
            self.pos = p + 1
            return True
        if p >= len(self.s) or blank:
            self.pos = p
            return True
        return False

    def token(self, what: str) -> str:
        s, p = self.s, self.pos
        begin = end = None
        quoted = False
        while p < len(s):
            ch = s[p]
            if begin is None:
                if _blank(ch):
                    p += 1
                    continue
                begin = p + 1 if ch == '"' else p
            if ch == '"':
                quoted = not quoted
            if not quoted:
                if _blank(ch) or ch in ',;"':
                    end = p
                elif p + 1 == len(s):
                    end = p + 1
                if begin is not None and end is not None:
                    break
            p += 1
        if begin is None or end is None:
            raise ScriptError(f"{self.where}: the quote opened in {what} is not closed" if quoted else
                              f"{self.where}: {what} has no value")
        q = end + 1 if s[end : end + 1] == '"' else end
        terminated = False
        if q < len(s) and _blank(s[q]):
            while q < len(s) and _blank(s[q]):
                q += 1
            terminated = True
        if s[q : q + 1] in (",", ";") and q < len(s):
            q += 1
            terminated = True
        elif q >= len(s):
            terminated = True
        if not terminated:
            raise ScriptError(f"{self.where}: cannot read {s[self.pos:self.pos + 40]!r} ({what} runs into the next "
                              "field)")
        while q < len(s) and _blank(s[q]):
            q += 1
        self.pos = q
        return s[begin:end]


def parse_type(label: str, text: str, where: str) -> str:
    """A type as sfdisk reads one in a script: alias, shortcut, libfdisk name, then hex id or GUID."""
    gpt = label == "gpt"
    for short, alias, mbr, guid in _CUTS:
        if text in (alias, short):
            code = guid if gpt else (f"0x{mbr:02x}" if mbr is not None else None)
            if code is not None:
                return code
    named = ptypes.by_name("gpt" if gpt else "msdos", text)
    if named is not None:
        return named
    if gpt:
        if _GUID.fullmatch(text):
            return text.upper()
        raise ScriptError(f"{where}: {text[:40]!r} is not a GPT type sfdisk knows (a GUID, L S H U R V, an alias "
                          "such as linux, or a name such as \"Linux /usr (x86)\")")
    if re.fullmatch(r"(0[xX])?[0-9A-Fa-f]+", text) and int(text, 16) <= 0xFF:
        return f"0x{int(text, 16):02x}"  # 0x00 (an empty slot) is refused by parse unless sfdisk skips the line
    raise ScriptError(f"{where}: {text[:40]!r} is not an MBR type (a hex id 1..ff, L S Ex U R V X, an alias such as "
                      "linux, or a name such as \"W95 FAT32\")")


# libfdisk's names of GPT attribute bits (gpt.c), matched as it matches them: case-sensitive, as a prefix of
# the item; "RequiredPartiton" is the misspelling older libfdisk wrote in dumps, still read.
_ATTR_NAMES = (("RequiredPartition", 0), ("RequiredPartiton", 0), ("LegacyBIOSBootable", 2),
               ("NoBlockIOProtocol", 1))
_BIT_ITEM = re.compile(r"(GUID:)?[0-9]")  # a bit number, bare or after GUID: (ASCII digits only)
_C_UINT = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*")


def attribute_bits(text: str, where: str) -> int:
    """A GPT ``attrs=`` value as libfdisk reads it (gpt_entry_attrs_from_string): items separated by commas
    and/or blanks, each a name (RequiredPartition, NoBlockIOProtocol, LegacyBIOSBootable, or the old
    RequiredPartiton), ``GUID:N`` for N in 48..63, or a bare C number (``48``, ``0x30``) in 48..63 or, as
    util-linux's development tree reads them (2.38 to 2.42 refuse these), 0..2. The 64 bits they set."""
    bits, p = 0, 0
    while p < len(text):
        while p < len(text) and _blank(text[p]):
            p += 1
        if p == len(text):
            break
        item, bit = text[p:], -1
        name = next(((n, b) for n, b in _ATTR_NAMES if item.startswith(n)), None)
        if name is not None:
            bit, p = name[1], p + len(name[0])
        elif _BIT_ITEM.match(item):
            guid = item.startswith("GUID:")
            at = p + 5 if guid else p
            end = at
            while end < len(text) and text[end] != "," and not _blank(text[end]):
                end += 1
            m = _C_UINT.fullmatch(text[at:end])
            n = int(m.group(), 0 if not m.group().startswith("0") or m.group()[:2].lower() == "0x" else 8) if m else -1
            if 48 <= n <= 63 or (not guid and 0 <= n <= 2):
                bit, p = n, end
        if bit < 0:
            raise ScriptError(f"{where}: unsupported GPT attribute bit {item.split(',')[0].split()[0][:30]!r}, as "
                              "sfdisk says (names: RequiredPartition, NoBlockIOProtocol, LegacyBIOSBootable; bits "
                              "0-2 and 48-63, bare or as GUID:N)")
        if p < len(text) and text[p] != "," and not _blank(text[p]):
            raise ScriptError(f"{where}: cannot read the GPT attributes {text[:60]!r}, as sfdisk cannot")
        bits |= 1 << bit
        while p < len(text) and _blank(text[p]):
            p += 1
        if p < len(text) and text[p] == ",":
            p += 1
    return bits


def guid(text: str, where: str) -> str:
    """A GUID as sfdisk takes one (GPT's label-id:, uuid=), upper case."""
    if _GUID.fullmatch(text) is None:
        raise ScriptError(f"{where}: {text[:40]!r} is not a GUID (8-4-4-4-12 hex digits)")
    return text.upper()


def line_guids(script: Script) -> dict[int, str]:
    """Line number -> the unique GUID the line names (uuid=), for the lines that name one."""
    return {line.lineno: guid(line.uuid, f"line {line.lineno}: uuid") for line in script.lines if line.uuid}


def label_id(label: str, text: str) -> str:
    """``label-id:`` as libfdisk's new label reads it: a GUID on GPT; on msdos the disk signature (strtoul
    base 16: hex digits with or without 0x, whatever follows them ignored, kept to 32 bits), as "0x1234abcd",
    or "" when it holds no hex digit or is past strtoul's range (sfdisk then makes up a random one, as
    libparted does)."""
    if label == "gpt":
        return guid(text, "header label-id")
    m = re.match(r"[ \t]*([+-]?)(?:0[xX](?=[0-9A-Fa-f]))?([0-9A-Fa-f]+)", text)
    if m is None or int(m[2], 16) >> 64:
        return ""
    value = int(m[2], 16) * (-1 if m[1] == "-" else 1)
    return f"0x{value & 0xFFFFFFFF:08x}"


def _start_or_size(cur: _Cursor, what: str) -> Amount | None:
    """A start= or size= value; None for the default, and for "+" alone (as much as possible: the default)."""
    if cur.is_default():
        return None
    tok = cur.token(what)
    if tok == "+":
        return None
    if tok[:1] in "+-":  # a sign moves or resizes an existing partition (-N); a new one takes the number
        tok = tok[1:].lstrip(" \t")
    return _number(tok, cur.where, what)


def _unhex(value: str) -> str:
    """sfdisk's unhexmangle: \\xNN escapes are bytes (names are written so)."""
    out = bytearray()
    i = 0
    while i < len(value):
        if value[i] == "\\" and value[i + 1 : i + 2] == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", value[i + 2 : i + 4]):
            out.append(int(value[i + 2 : i + 4], 16))
            i += 4
        else:
            out += value[i].encode()
            i += 1
    return out.decode("utf-8", "replace")


def _device_number(device: str) -> int | None:
    m = re.search(r"[0-9]+$", device.rstrip(" \t"))
    if m is None:
        return None
    if len(m.group()) > 10 or int(m.group()) < 1 or int(m.group()) > 2**31 - 1:
        raise ScriptError(f"cannot tell a partition number from {device[:40]!r}")
    return int(m.group())


def _named(label: str, text: str, lineno: int) -> Line:
    where = f"line {lineno}"
    colon, eq = text.find(":"), text.find("=")
    number = None
    if colon >= 0 and (eq < 0 or colon < eq):
        try:
            number = _device_number(text[:colon])
        except ScriptError as exc:
            raise ScriptError(f"{where}: {exc}") from None
        text = text[colon + 1 :]
    cur = _Cursor(text, where)
    values: dict[str, object] = {}
    amounts: dict[str, Amount | None] = {}  # start= and size=
    while True:
        cur.skip_blank()
        if cur.at_end():
            break
        rest = cur.s[cur.pos :]
        low = rest.lower()
        key = next((k for k in ("start=", "size=", "attrs=", "uuid=", "name=", "type=", "id=") if low.startswith(k)),
                   None)
        if key is None and low.startswith("bootable"):
            if cur.token("bootable").lower() != "bootable":
                raise ScriptError(f"{where}: 'bootable' takes no value")
            values["bootable"] = True
            continue
        if key is None:
            shown = rest.split(",")[0].strip()[:30]
            raise ScriptError(f"{where}: unknown field {shown!r}: sfdisk refuses it (fields: start, size, type, "
                              "name, attrs, uuid, bootable)")
        cur.pos += len(key)
        name = "type" if key == "id=" else key[:-1]
        if name in ("start", "size"):
            amounts[name] = _start_or_size(cur, f"{name}=")
        else:
            values[name] = cur.token(f"{name}=")
    ptype = values.get("type")
    return Line(
        lineno, number, amounts.get("start"), amounts.get("size"),
        parse_type(label, str(ptype), where) if ptype is not None else None,
        bool(values.get("bootable")), _unhex(str(values.get("name", ""))), str(values.get("attrs", "")),
        str(values.get("uuid", "")))


def _unnamed(label: str, text: str, lineno: int) -> Line:
    where = f"line {lineno}"
    cur = _Cursor(text, where)
    start = size = None
    ptype: str | None = None
    bootable = False
    item = -1
    while not cur.at_end():
        cur.skip_blank()
        item += 1
        begin = cur.pos
        if item == 0:
            start = _start_or_size(cur, "the start")
        elif item == 1:
            size = _start_or_size(cur, "the size")
        elif item == 2:
            if cur.peek() in (",", ";") and cur.peek():
                pass
            elif not cur.is_default():
                ptype = parse_type(label, cur.token("the type"), where)
        elif item == 3 and cur.peek() not in (",", ";"):
            tok = cur.token("the bootable mark")
            if tok not in ("*", "-", "+"):
                raise ScriptError(f"{where}: the fourth field is * (bootable) or -, not {tok[:20]!r}")
            bootable = tok != "-"
        if cur.pos == begin:
            cur.pos += 1
    return Line(lineno, None, start, size, ptype, bootable)


def parse(text: str) -> Script:
    """Every line sfdisk would read. Raises ScriptError where sfdisk stops."""
    header: dict[str, str] = {}
    lines: list[Line] = []
    notes: list[str] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        s = raw.removesuffix("\r").lstrip(" \t")
        if not s or s.startswith("#"):
            continue
        where = f"line {lineno}"
        if not lines and _is_header(s):
            name, _, value = s.partition(":")
            name, value = name.strip(" \t"), value.strip(" \t")
            if not name or not value:
                raise ScriptError(f"{where}: header {s[:40]!r} has no value")
            if name not in HEADERS:
                notes.append(f"{where}: unknown header {name[:30]!r} ignored, as sfdisk ignores it")
                continue
            if name == "label" and value not in ("gpt", "dos", "mbr"):
                raise ScriptError(f"{where}: label {value[:20]!r}: diskplan plans gpt and dos tables")
            if name == "unit" and value != "sectors":
                raise ScriptError(f"{where}: unit {value[:20]!r}: sfdisk knows only unit: sectors")
            header[name] = "dos" if value == "mbr" else value
            continue
        label = header.get("label", "dos")
        line = _named(label, s, lineno) if "=" in s else _unnamed(label, s, lineno)
        if line.start == line.size == Amount(0):  # an old sfdisk's dump of an empty slot (Id= 0): sfdisk skips it
            notes.append(f"{where}: start=0, size=0 ignored, as sfdisk ignores it (\"Ignoring partition.\")")
            continue
        if line.type == "0x00":
            raise ScriptError(f"{where}: type 0x00 marks an empty MBR entry: a partition needs a type from 0x01 to "
                              "0xff")
        if line.bootable and label == "gpt":
            notes.append(f"{where}: bootable ignored, as sfdisk ignores it on GPT (no entry has a boot flag; BIOS "
                         "boot code looks for attrs=LegacyBIOSBootable)")
            line = replace(line, bootable=False)
        lines.append(line)
    return Script(header, tuple(lines), tuple(notes))


def _is_header(s: str) -> bool:
    """libfdisk's is_header_line: a colon after the first character, something after it, and no '='."""
    colon = s.find(":")
    return colon > 0 and colon + 1 < len(s) and "=" not in s


# --- placing ----------------------------------------------------------------------------------------------


@value
class Disk:
    """What sfdisk knows of the disk when it places partitions."""

    sectors: int
    sector_size: int = 512
    physical: int = 512
    io_size: int = 0  # optimal I/O size, else minimum I/O size (bytes), else 0
    first_usable: int = 34  # GPT usable area; dos: 1..sectors-1
    last_usable: int = 0

    @property
    def grain(self) -> int:
        """libfdisk's alignment grain in sectors: 1 MiB or the I/O size when larger; one physical block on a
        disk of at most four grains."""
        grain = max(self.io_size, 1 << 20)
        if self.sectors <= grain * 4 // self.sector_size:
            grain = self.physical
        return max(1, grain // self.sector_size)

    @property
    def first_lba(self) -> int:
        """dos: where the first partition starts by default (1 MiB, or the I/O size when larger)."""
        res = max(self.io_size if self.io_size > (1 << 20) else 0, 1 << 20) // self.sector_size
        return self.physical // self.sector_size if self.sectors <= res * 4 else res


class _Align:
    def __init__(self, grain: int, first_lba: int) -> None:
        self.g, self.first = grain, first_lba

    def lba(self, lba: int, direction: str) -> int:
        g = self.g
        if lba % g == 0:
            return lba
        if lba < self.first:
            return self.first
        if direction == "up":
            return (lba + g) // g * g
        if direction == "down":
            return lba // g * g
        return (lba + g // 2) // g * g

    def in_range(self, lba: int, start: int, stop: int) -> int:
        g = self.g
        if start + g <= stop:
            start, stop = self.lba(start, "up"), self.lba(stop, "down")
        if start + g > stop:
            return lba
        return min(max(self.lba(lba, "nearest"), start), stop)


@value
class Placement:
    """Each line's partition (number, start, end, type code and role; names and flags are the caller's), and
    what sfdisk would say about the script without refusing it."""

    partitions: tuple[tuple[Line, Partition], ...]
    notes: tuple[str, ...] = ()


def place(script: Script, disk: Disk) -> Placement:
    """Where sfdisk would put each line's partition on a blank ``disk``. Raises ScriptError as sfdisk fails."""
    if script.label == "gpt":
        return Placement(tuple(_place_gpt(script, disk)))
    return _Dos(disk).run(script)


class _Gpt:
    """libfdisk's gpt.c free-space search, over the entries in their order (bugs included: sfdisk is the
    referee, and a script it places oddly must be placed the same way or refused as it refuses it)."""

    def __init__(self, first: int, last: int) -> None:
        self.fu, self.lu = first, last
        self.entries: dict[int, Partition] = {}

    def _ordered(self) -> list[Partition]:
        return [self.entries[n] for n in sorted(self.entries)]

    def first_available(self, start: int) -> int:
        first = max(start, self.fu)
        moved = True
        while moved:
            moved = False
            for e in self._ordered():
                if e.start <= first <= e.end:
                    first, moved = e.end + 1, True
        return 0 if first > self.lu else first

    def last_free(self, start: int) -> int:
        nearest = self.lu
        for e in self._ordered():
            if nearest > e.start > start:
                nearest = e.start - 1
        return nearest

    def first_in_largest(self) -> int:
        start, best, best_size = 0, 0, 0
        while True:
            first = self.first_available(start)
            if first == 0:
                return best
            last = self.last_free(first)
            if last - first + 1 > best_size:
                best, best_size = first, last - first + 1
            start = last + 1


def _place_gpt(script: Script, disk: Disk) -> list[tuple[Line, Partition]]:
    # sfdisk writes a new GPT whose usable area starts at the first aligned LBA (2048), not at 34
    first = int(script.header.get("first-lba", max(disk.first_usable, disk.first_lba)))
    last = int(script.header.get("last-lba", disk.last_usable))
    al = _Align(disk.grain, first)
    gpt = _Gpt(first, last)
    out: list[tuple[Line, Partition]] = []
    ss = disk.sector_size
    for line in script.lines:
        where = f"line {line.lineno}"
        number = line.number if line.number is not None else next(n for n in range(1, 10**6) if n not in gpt.entries)
        if number in gpt.entries:
            raise ScriptError(f"{where}: partition {number} is already defined")
        if gpt.first_available(first) == 0:
            raise ScriptError(f"{where}: no free sectors available for partition {number}")
        dflt_f = gpt.first_in_largest()
        dflt_l = gpt.last_free(dflt_f)
        if line.start is None and dflt_l - dflt_f + 1 < disk.grain:
            raise ScriptError(f"{where}: not enough free sectors for partition {number}")
        dflt_f = al.in_range(dflt_f, dflt_f, dflt_l)
        if line.start is None:
            user_f = dflt_f
        else:
            user_f = line.start.sectors(ss)
            if gpt.first_available(user_f) != user_f:
                raise ScriptError(f"{where}: sector {user_f} is already used (or outside {first}..{last})")
        max_l = gpt.last_free(user_f)
        dflt_l = max_l
        if max_l == last:
            dflt_l = al.in_range(max_l, user_f, max_l) - 1
        if line.size is None:
            user_l = dflt_l
        else:
            user_l = user_f + line.size.sectors(ss) - 1
            if (user_l != dflt_l and line.size.in_bytes and disk.grain > 1
                    and user_l - user_f > disk.grain):
                user_l = al.in_range(user_l, user_f, dflt_l)
                if user_l > user_f:
                    user_l -= 1
        if user_f > user_l:
            raise ScriptError(f"{where}: could not create partition {number} (size 0)")
        if user_l > last:
            raise ScriptError(f"{where}: the last usable GPT sector is {last}, but {user_l} is requested")
        part = Partition(number, user_f, user_l, line.type or LINUX_GUID, state=State.PROPOSED)
        clash = next((e for e in gpt.entries.values() if e.start <= part.end and part.start <= e.end), None)
        if clash is not None:  # libfdisk places it so, and sfdisk then refuses to write the table
            raise ScriptError(f"{where}: sfdisk places partition {number} at {user_f}..{user_l}, over partition "
                              f"{clash.number}, and then refuses to write the table")
        gpt.entries[number] = part
        out.append((line, part))
    return out


class _Dos:
    """libfdisk's dos.c, as far as a script on a blank disk reaches it: primaries 1-4, one extended partition,
    logical partitions each behind its EBR (``first_lba`` sectors before it)."""

    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        self.first_lba = disk.first_lba
        self.grain = disk.grain
        self.al = _Align(self.grain, self.first_lba)
        self.prim: dict[int, Partition] = {}  # number -> partition (1..4)
        self.logi: list[tuple[int, Partition]] = []  # (EBR offset, partition), numbers 5...
        self.ext: Partition | None = None

    # used areas as libfdisk sees them: a logical partition begins first_lba sectors early (its EBR)
    def _areas(self, logical: bool) -> list[tuple[int, int]]:
        out = [] if logical else [(p.start, p.end) for p in self.prim.values()]
        for offset, p in self.logi:
            out.append((p.start - self.first_lba if offset else p.start, p.end))
        return out

    def _lower_first_lba(self) -> None:
        self.first_lba, self.al = 1, _Align(self.grain, 1)

    def _ranges(self, logical: bool) -> tuple[int, int]:
        if logical:
            assert self.ext is not None
            return self.ext.start + self.first_lba, self.ext.end
        return self.first_lba, min(self.disk.sectors - 1, 2**32 - 1)

    def _first_free(self, logical: bool, start: int, end: int) -> int | None:
        first = start
        moved = True
        while moved:
            moved = False
            for a, b in self._areas(logical):
                if a <= first <= b:
                    first = b + 1 + (self.first_lba if logical else 0)
                    moved = True
                    if first > end:
                        return None
        return first

    def _last_free_in_range(self, logical: bool, begin: int, end: int) -> int | None:
        last = end
        moved = True
        while moved:
            moved = False
            for a, b in self._areas(logical):
                if a <= last <= b:
                    last = a - 1
                    moved = True
                    if last < begin:
                        return None
        return last

    def _last_free(self, logical: bool, begin: int, stop: int) -> int | None:
        last = stop
        for a, b in self._areas(logical):
            if begin <= a <= last or begin <= b <= last:
                last = a - 1
            if last < begin:
                return None
        return stop if last == begin else last

    def run(self, script: Script) -> Placement:
        out: list[tuple[Line, Partition]] = []
        for i, line in enumerate(script.lines):
            if len(self.prim) == 4 and self.ext is None:  # sfdisk: "All partitions used.", and it stops reading
                rest = len(script.lines) - i
                return Placement(tuple(out), (f"line {line.lineno}: all four primary partitions are used, so sfdisk "
                                              f"stops reading there: {rest} more line{'s' if rest > 1 else ''} "
                                              "ignored, as sfdisk ignores them",))
            out.append((line, self._add(line)))
        return Placement(tuple(out))

    def _add(self, line: Line) -> Partition:
        where = f"line {line.lineno}"
        ss = self.disk.sector_size
        code = line.type or "0x83"
        start = line.start.sectors(ss) if line.start is not None else None
        n = line.number
        ext = self.ext
        if start is not None and ext is not None and ext.start <= start <= ext.end:
            if n is not None and n <= 4:
                raise ScriptError(f"{where}: partition {n} starts inside the extended partition")
            return self._logical(line, where, code)
        if start is not None and ext is not None:
            if n is not None and n > 4:
                raise ScriptError(f"{where}: logical partition {n} starts outside the extended partition")
            return self._primary(line, where, code)
        if n is not None and n <= 4:
            return self._primary(line, where, code)
        if n is not None:
            if ext is None:
                raise ScriptError(f"{where}: partition {n} is logical, but there is no extended partition")
            return self._logical(line, where, code)
        first, free_primary, free_sectors = self.first_lba, 0, False
        for i in range(1, 5):
            p = self.prim.get(i)
            if p is None:
                free_primary += 1
                continue
            if first + self.grain <= p.start:
                free_sectors = True
            first = p.start + p.size
        if first + self.grain - 1 <= self.disk.sectors - 1:
            free_sectors = True
        if free_primary and free_sectors:
            return self._primary(line, where, code)
        if ext is not None:
            return self._logical(line, where, code)
        raise ScriptError(f"{where}: all primary partitions are in use (or all the space for them): "
                          "make one extended to hold more")

    def _primary(self, line: Line, where: str, code: str) -> Partition:
        n = line.number
        if n is None:
            n = next((i for i in range(1, 5) if i not in self.prim), None)
            if n is None:
                raise ScriptError(f"{where}: all primary partitions have been defined already")
        elif n in self.prim:
            raise ScriptError(f"{where}: partition {n} is already defined")
        if int(code, 16) in EXTENDED_IDS and self.ext is not None:
            raise ScriptError(f"{where}: an extended partition already exists")
        part = self._add_partition(line, where, n, code, logical=False)
        self.prim[n] = part
        if int(code, 16) in EXTENDED_IDS:
            self.ext = part
        return part

    def _logical(self, line: Line, where: str, code: str) -> Partition:
        n = 5 + len(self.logi)
        if line.number is not None and line.number != n:
            raise ScriptError(f"{where}: the next logical partition is {n}, not {line.number}")
        return self._add_partition(line, where, n, code, logical=True)

    def _add_partition(self, line: Line, where: str, n: int, code: str, *, logical: bool) -> Partition:
        ss = self.disk.sector_size
        lo, hi = self._ranges(logical)
        limit = self._last_free_in_range(logical, lo, hi)
        if limit is None:
            raise ScriptError(f"{where}: no free sectors available for partition {n}")
        start_given = line.start.sectors(ss) if line.start is not None else None
        if start_given is not None and (self.ext.start if logical and self.ext else 1) <= start_given < lo:
            self._lower_first_lba()  # a script may start a partition before first_lba: libfdisk lowers it
            lo, hi = self._ranges(logical)
        # libfdisk's loop, step for step: the first free sector (aligned, for the default) from the range's
        # start; a start asked for that is taken moves on to the next free sector, as sfdisk does
        start, read = lo, False
        while True:
            temp = start
            dflt = self._first_free(logical, start, hi)
            if dflt is None:
                raise ScriptError(f"{where}: no free sectors available for partition {n}")
            start = dflt
            if (logical and start_given is not None and self.first_lba > 1
                    and temp == start - self.first_lba):
                self._lower_first_lba()
                start = start_given
            while True:
                aligned = self.al.in_range(dflt, dflt, limit)
                nxt = self._first_free(logical, aligned, hi)
                dflt = nxt if nxt is not None else aligned
                if not (dflt != aligned and aligned < dflt < limit):
                    break
            if dflt >= limit:
                dflt = start
            if start > limit:
                break
            if start >= temp + 1 and read:  # "Sector N is already allocated"
                temp, read = start, False
                if start_given is not None:
                    break
            if not read and start == temp:
                if start_given is None:
                    start = dflt
                else:
                    if not temp <= start_given <= limit:
                        raise ScriptError(f"{where}: start sector {start_given} out of range ({temp}..{limit})")
                    start = start_given
                read = True
            if line.size is not None:
                last = self._last_free(logical, start, limit)
                if last is None:
                    raise ScriptError(f"{where}: no free sectors available for partition {n}")
                need = line.size.sectors(ss)
                if last - start + 1 < need:
                    if start_given is not None and start_given <= last:
                        raise ScriptError(f"{where}: no free sectors available for partition {n} "
                                          f"({need} sectors from {start})")
                    start = last + 1
                    if start != temp or not read:
                        continue
                    break
            if start == temp and read:
                break
        offset = 0
        if logical:
            assert self.ext is not None
            offset = self.ext.start if n == 5 else start - self.first_lba
            if n > 5 and offset == self.ext.start:
                offset += 1
                if self.first_lba == 1:
                    start += 1
        stop_free = self._last_free(logical, start, limit)
        if stop_free is None:
            raise ScriptError(f"{where}: no free sectors available for partition {n}")
        limit = stop_free
        isrel = False
        if line.size is None:
            stop = limit
        else:
            stop = start + line.size.sectors(ss)
            isrel = line.size.in_bytes
            if (not isrel or self.grain <= 1) and stop > start:
                stop -= 1
        stop = min(stop, limit)
        if isrel and stop - start < self.grain:
            isrel = False
        if stop < limit and isrel and self.grain > 1:
            stop = self.al.in_range(stop, start, limit)
            if stop > start:
                stop -= 1
            stop = min(stop, limit)
        if stop < start:  # sfdisk writes it anyway, with a size that wraps around 2^32: refused here
            raise ScriptError(f"{where}: no room for partition {n} ({start}..{stop}): sfdisk would write a "
                              "partition no tool can read back")
        role = Role.LOGICAL if logical else (Role.EXTENDED if int(code, 16) in EXTENDED_IDS else Role.PRIMARY)
        part = Partition(n, start, stop, code, role=role, state=State.PROPOSED)
        if logical:
            self.logi.append((offset, part))
        return part

