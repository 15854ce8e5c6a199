"""Sizes and positions as people type them, turned into logical sectors, saying which units were used.

MiB and MB differ by 4.9 % (and GiB and GB by 7.4 %); tools disagree about what a bare "M" means (fdisk:
MiB, parted: MB), so a bare "M", "G" or a number without a unit is refused and every answer names its unit
family. Accepted:

- ``2048s``                          sectors (whole numbers only)
- ``4096B``                          bytes
- ``512KiB 100MiB 1.5GiB 1TiB``      IEC, binary: 1 KiB = 1024 B
- ``4kB 100MB 2GB 1TB``              SI, decimal: 1 kB = 1000 B (what disk vendors and parted's default use)
- ``50%``                            of the free region the partition goes into
- ``+100MiB``                        counted from the start (fdisk's notation); for a size this is the same
                                     amount, for a position it is relative to the region's start

Digits may be grouped by thousands (``2,048s``, ``1_000_000B``). Byte amounts that are not whole sectors
are rounded, and the explanation says so (``SizeInput.exact`` is False): a *size* up (a partition never gets
less than was asked), a *position* to the nearest sector boundary (``17.4kB`` is how 17,408 B = LBA 34 is
shown, so it means LBA 34, not the sector holding byte 17,400). Arithmetic is exact (fractions).

This is the one parser for sizes and positions: the partition dialog and plan files (``parse_size``,
``parse_lba``), go-to (``parse_position``: also ``#2``, ``end``, and a bare number is an LBA, as the help
says) and the command line's device options (``parse_option``: bytes, and a bare number is bytes, as in
``--physical-block 4096``). A text with a unit means the same amount everywhere, or is refused everywhere.
"""

from __future__ import annotations

import re
from enum import Enum
from fractions import Fraction

from diskplan.model.extent import Extent
from diskplan.model.geometry import Geometry
from diskplan.model.table import Table
from diskplan.model.value import replace, value


class SizeError(ValueError):
    """The text is not a size diskplan accepts: ``str(exc)`` says why and what to type instead."""


class UnitFamily(Enum):
    SECTORS = "sectors"
    BYTES = "bytes"
    IEC = "IEC (binary, powers of 1024)"
    SI = "SI (decimal, powers of 1000)"
    PERCENT = "percent of the free region"


# unit (lower case) -> canonical spelling, family, bytes per unit (None: sectors or percent)
_UNITS: dict[str, tuple[str, UnitFamily, int | None]] = {
    "s": ("s", UnitFamily.SECTORS, None),
    "b": ("B", UnitFamily.BYTES, 1),
    "kib": ("KiB", UnitFamily.IEC, 1024),
    "mib": ("MiB", UnitFamily.IEC, 1024**2),
    "gib": ("GiB", UnitFamily.IEC, 1024**3),
    "tib": ("TiB", UnitFamily.IEC, 1024**4),
    "pib": ("PiB", UnitFamily.IEC, 1024**5),
    "kb": ("kB", UnitFamily.SI, 10**3),
    "mb": ("MB", UnitFamily.SI, 10**6),
    "gb": ("GB", UnitFamily.SI, 10**9),
    "tb": ("TB", UnitFamily.SI, 10**12),
    "pb": ("PB", UnitFamily.SI, 10**15),
    "%": ("%", UnitFamily.PERCENT, None),
}
# The other family's unit of the same name, to say what the user did *not* get.
_TWIN = {"KiB": "kB", "MiB": "MB", "GiB": "GB", "TiB": "TB", "PiB": "PB"}
_TWIN.update({v: k for k, v in _TWIN.items()})
_AMBIGUOUS = {"k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti", "p": "Pi"}
_SYNTAX = re.compile(r"^\s*([+-]?)\s*(\d{1,3}(?:[,_]\d{3})+|\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z%]*)\s*$", re.ASCII)
MAX_TEXT = 64


@value
class SizeInput:
    text: str  # what was typed
    sectors: int  # the amount (parse_size) or the LBA (parse_lba), in logical sectors
    family: UnitFamily
    unit: str  # canonical unit: "s", "B", "MiB", "MB", "%"
    nbytes: int  # sectors × sector size
    exact: bool  # False when a byte amount was rounded up to whole sectors
    relative: bool  # written with "+"
    explanation: str  # e.g. "100 MB = 100,000,000 B (SI, decimal) = 195,313 sectors of 512 B (rounded up)"


def _number(text: str, bare: str = "") -> tuple[bool, Fraction, str, UnitFamily, int | None]:
    """(relative, value, canonical unit, family, bytes per unit); ``bare``: the unit of a number typed
    without one ("" refuses it: tools disagree about what it means)."""
    if len(text) > MAX_TEXT:
        raise SizeError(f"{text[:20]!r}… is too long to be a size")
    m = _SYNTAX.match(text)
    if not m:
        raise SizeError(
            f"not a size: {text.strip()!r}. Write a number and a unit: 2048s, 100MiB, 1.5GiB, 100MB or 50%"
        )
    sign, digits, unit = m.groups()
    digits = digits.replace(",", "").replace("_", "")
    unit = unit or bare
    if sign == "-":
        raise SizeError(f"{text.strip()!r}: negative sizes are not accepted; give the size itself")
    key = unit.lower()
    if not unit:
        raise SizeError(
            f"{digits!r} has no unit, and tools disagree about what a bare number means: write {digits}s for "
            f"sectors, {digits}B for bytes, or use MiB (binary) / MB (decimal)"
        )
    if key in _AMBIGUOUS:
        iec = _AMBIGUOUS[key] + "B"
        si = ("k" if key == "k" else key.upper()) + "B"
        raise SizeError(
            f"{digits}{unit} is ambiguous (fdisk reads it as {iec}, parted as {si}): write {digits}{iec} "
            f"(binary, powers of 1024) or {digits}{si} (decimal, powers of 1000)"
        )
    if key not in _UNITS:
        raise SizeError(f"unknown unit {unit!r} in {text.strip()!r}: use s, B, KiB, MiB, GiB, TiB, kB, MB, GB, TB or %")
    canonical, family, per = _UNITS[key]
    return sign == "+", Fraction(digits), canonical, family, per


def _grouped(n: int | Fraction) -> str:
    if isinstance(n, Fraction) and n.denominator != 1:
        return f"{float(n):,.6f}".rstrip("0").rstrip(".")
    return f"{int(n):,}"


def _to_sectors(
    text: str, geom: Geometry, region: Extent | None, *, what: str, bare: str = ""
) -> tuple[bool, int, str, UnitFamily, bool, str]:
    """``what``: "sizes" round up to whole sectors, "positions" to the nearest sector boundary."""
    relative, value, unit, family, per = _number(text, bare)
    shown = f"{_grouped(value)} {unit}" if unit != "%" else f"{_grouped(value)}%"
    ss = geom.logical
    if family is UnitFamily.SECTORS:
        if value.denominator != 1:
            raise SizeError(f"{text.strip()!r}: sectors are whole, not {float(value)}")
        return relative, int(value), unit, family, True, f"{_grouped(value)} sectors of {ss} B"
    if family is UnitFamily.PERCENT:
        if region is None:
            raise SizeError(f"{text.strip()!r}: a percentage needs a free region to be a percentage of")
        if value > 100:
            raise SizeError(f"{text.strip()!r}: more than 100% of the free region")
        exact_sectors = region.size * value / 100
        sectors = int(exact_sectors)  # a share of the region never exceeds it: round down
        note = (f"{shown} of the free region {region.start}s..{region.end}s ({region.size:,} sectors) = "
                f"{sectors:,} sectors")
        if exact_sectors != sectors:
            note += " (rounded down)"
        return relative, sectors, unit, family, exact_sectors == sectors, note
    assert per is not None
    nbytes = value * per
    if nbytes.denominator != 1:
        raise SizeError(f"{text.strip()!r} is not a whole number of bytes")
    exact_sectors = nbytes / ss
    if what == "positions":  # half a sector or more goes up (ties up), as a shown "17.4 kB" was rounded
        sectors, how = int(exact_sectors + Fraction(1, 2)), "to the nearest sector"
    else:
        sectors, how = -(-nbytes.numerator // ss), "up"  # never less than asked
    fam = {UnitFamily.IEC: "IEC, binary", UnitFamily.SI: "SI, decimal", UnitFamily.BYTES: "bytes"}[family]
    note = f"{shown} = {_grouped(nbytes)} B ({fam}) = {sectors:,} sectors of {ss} B"
    if exact_sectors != sectors:
        note += f" (rounded {how} from {_grouped(exact_sectors)}; {what} must be whole sectors)"
    twin = _TWIN.get(unit)
    if twin:
        twin_per = _UNITS[twin.lower()][2]
        assert twin_per is not None  # twins are units with a size
        other = value * twin_per
        note += f"; note {_grouped(value)} {twin} would be {_grouped(other)} B"
    return relative, sectors, unit, family, exact_sectors == sectors, note


def parse_size(text: str, geom: Geometry, *, region: Extent | None = None) -> SizeInput:
    """An amount of space in logical sectors: "2048s", "100MiB", "100MB", "50%" (of ``region``),
    "+100MiB" (fdisk's "from the start": the same amount). Raises SizeError when it is not one."""
    relative, sectors, unit, family, exact, note = _to_sectors(text, geom, region, what="sizes")
    if sectors <= 0:
        raise SizeError(f"{text.strip()!r}: a size must be more than zero")
    return SizeInput(text.strip(), sectors, family, unit, sectors * geom.logical, exact, relative, note)


def parse_lba(text: str, geom: Geometry, *, region: Extent | None = None, bare: str = "") -> SizeInput:
    """A position on the disk as an LBA: "2048s" (LBA 2048), "1MiB" (the sector at 1 MiB), "+1MiB" (1 MiB
    after ``region``'s start), "25%" (a quarter into ``region``). ``sectors`` holds the LBA."""
    relative, sectors, unit, family, exact, note = _to_sectors(text, geom, region, what="positions", bare=bare)
    if family is UnitFamily.PERCENT or relative:
        if region is None:
            raise SizeError(f"{text.strip()!r}: a relative position needs a region to start from")
        sectors += region.start
        note += f"; from {region.start}s: LBA {sectors:,}"
    return SizeInput(text.strip(), sectors, family, unit, sectors * geom.logical, exact, relative, note)


def format_size(sectors: int, geom: Geometry, unit: str) -> str:
    """``sectors`` written in ``unit`` so that parse_size gives them back ("204800s" -> "100MiB")."""
    key = unit.lower()
    if key not in _UNITS or key == "%":
        raise ValueError(f"cannot write a size in {unit!r}")
    canonical, family, per = _UNITS[key]
    if family is UnitFamily.SECTORS:
        return f"{sectors}s"
    assert per is not None
    value = Fraction(sectors * geom.logical, per)
    if value.denominator == 1:
        return f"{value.numerator}{canonical}"
    # Enough decimals that rounding up to whole sectors lands on ``sectors`` again.
    for places in range(1, 30):
        text = f"{float(value):.{places}f}".rstrip("0").rstrip(".")
        back = Fraction(text) * per
        if back.denominator == 1 and -(-back.numerator // geom.logical) == sectors:
            return f"{text}{canonical}"
    return f"{sectors}s"


def parse_position(text: str, geom: Geometry, table: Table | None = None) -> SizeInput:
    """Where to go on the disk (go-to): a position as ``parse_lba`` reads it (a bare number is an LBA,
    a percentage is of the whole disk), or "#2"/"p2" (partition 2's start), or "end". Raises SizeError."""
    s = text.strip().lower()
    if not s:
        raise SizeError("type an LBA, a size or #N")
    if s in ("end", "last"):
        return SizeInput(text.strip(), geom.last_lba, UnitFamily.SECTORS, "s", geom.last_lba * geom.logical, True,
                         False, f"the last sector: LBA {geom.last_lba:,}")
    if s[0] in "#p" and s[1:].isdigit():
        number = int(s[1:])
        part = table.by_number(number) if table else None
        if part is None:
            raise SizeError(f"there is no partition {number}")
        return SizeInput(text.strip(), part.start, UnitFamily.SECTORS, "s", part.start * geom.logical, True, False,
                         f"partition {number} starts at LBA {part.start:,}")
    got = parse_lba(text, geom, region=Extent(0, geom.sectors - 1), bare="s")
    if got.family is UnitFamily.PERCENT and got.sectors > geom.last_lba:  # 100%: the last sector
        return replace(got, sectors=geom.last_lba, nbytes=geom.last_lba * geom.logical)
    if got.sectors > geom.last_lba:
        raise SizeError(f"the disk ends at LBA {geom.last_lba:,}")
    return got


@value
class Amount:
    """A device property typed on the command line (``--grain 3MiB``, ``--physical-block 4096``), kept
    until the disk's sector size is known (``3s``)."""

    text: str
    value: Fraction
    unit: str
    per: int | None  # bytes per unit; None: sectors

    def nbytes(self, sector_size: int) -> int:
        total = self.value * (self.per if self.per is not None else sector_size)
        if total.denominator != 1:
            raise SizeError(f"{self.text!r} is not a whole number of bytes")
        return total.numerator


def parse_option(text: str) -> Amount:
    """A command-line size: the units of ``parse_size`` (a bare number is bytes); no percentages, no
    "+", since a device property is not part of a free region. Raises SizeError."""
    relative, value, unit, family, per = _number(text, bare="B")
    if family is UnitFamily.PERCENT or relative:
        raise SizeError(f"{text.strip()!r}: a device property is an amount of bytes or sectors (4096, 4KiB, 8s)")
    if family is UnitFamily.SECTORS and value.denominator != 1:
        raise SizeError(f"{text.strip()!r}: sectors are whole, not {float(value)}")
    got = Amount(text.strip(), value, unit, per)
    if per is not None:
        got.nbytes(1)  # refuse a fraction of a byte now
    return got
