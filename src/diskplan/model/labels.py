"""What a gpt or msdos label lets a partition carry: its type code, name, flags and number.

Type codes are canonical so plans compare equal whatever the user typed: a GPT type is its GUID in upper
case, an MBR type is "0x" and two lower-case hex digits. Flags here are *attributes*, not types: on GPT
libparted 3.5 reports many types as flags ("esp", "lvm", "swap"...); those are folded into the type, and only
real attribute bits stay flags (named as libparted names them, so backend.parted.libparted can set them):

=================  ==========================================  =====================
flag               meaning                                     sfdisk ``attrs=``
=================  ==========================================  =====================
gpt ``hidden``     bit 0 "required partition" (libparted's     RequiredPartition
                   name for it)
gpt ``no_block_io``bit 1                                        NoBlockIOProtocol
gpt ``legacy_boot``bit 2, legacy BIOS bootable                  LegacyBIOSBootable
gpt ``no_automount``bit 63 (Microsoft: do not mount)            GUID:63
gpt ``guid:N``     type-specific bit N, 48 <= N <= 62           GUID:N
msdos ``boot``     the active (bootable) mark                   bootable
=================  ==========================================  =====================
"""

from __future__ import annotations

from diskplan.model import ptypes
from diskplan.model.extent import Role

WRITTEN_LABELS = ("gpt", "msdos")  # the partition-table labels diskplan plans and writes
GPT_NAME_UNITS = 36  # UTF-16 code units in a GPT entry's name
EXTENDED_IDS = (0x05, 0x0F, 0x85)
DEFAULT_EXTENDED = "0x0f"  # what parted writes (LBA extended); fdisk writes 0x05
FIRST_LOGICAL = 5
MSDOS_PRIMARIES = 4


def partition_node(device: str, number: int) -> str:
    """The kernel's (and sfdisk's) name for partition ``number`` of ``device``: /dev/sda1, /dev/loop0p1,
    /dev/nvme0n1p1, disk.img1 (a name ending in a digit takes a "p" before the number)."""
    return f"{device}p{number}" if device[-1:].isdigit() else f"{device}{number}"

GPT_ATTRIBUTES: dict[str, str] = {
    "hidden": "RequiredPartition",
    "no_block_io": "NoBlockIOProtocol",
    "legacy_boot": "LegacyBIOSBootable",
    "no_automount": "GUID:63",
    **{f"guid:{n}": f"GUID:{n}" for n in range(48, 63)},
}
MSDOS_FLAGS = ("boot",)
# compiled at its first use (re caches it), not at import: check never uses it (~0.2 ms a command)
_GUID = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"


class LabelError(ValueError):
    """Something the label cannot hold: ``str(exc)`` says what and why."""


def check_label(label: str | None) -> str:
    if label == "dos":  # sfdisk's name for it
        return "msdos"
    if label not in WRITTEN_LABELS:
        raise LabelError(f"diskplan plans gpt and msdos tables, not {label or 'a disk without a table'}")
    return label


_ATTRIBUTE_BITS = {"hidden": 0, "no_block_io": 1, "legacy_boot": 2, "no_automount": 63,
                   **{f"guid:{n}": n for n in range(48, 63)}}


# The attribute bits a plan says (0, 1, 2, 48-63): a write sets exactly these and keeps the others (3-47,
# reserved by the UEFI specification) as they are.
GPT_PLANNED_BITS = sum(1 << n for n in _ATTRIBUTE_BITS.values())


def gpt_attribute_flags(bits: int, lowest: int = 0) -> tuple[str, ...]:
    """The flags of a GPT entry's attribute bits (only bits from ``lowest`` up), sorted."""
    if not bits >> lowest:  # most entries: none (a check reads 128 of them)
        return ()
    return tuple(sorted(f for f, n in _ATTRIBUTE_BITS.items() if n >= lowest and bits >> n & 1))


def gpt_attribute_bits(flags: tuple[str, ...] | list[str]) -> int:
    """The attribute bits ``flags`` name (other words, such as libparted's type flags, are ignored)."""
    return sum(1 << _ATTRIBUTE_BITS[f] for f in set(flags) if f in _ATTRIBUTE_BITS)


def with_planned_bits(bits: int, flags: tuple[str, ...] | list[str]) -> int:
    """An entry's 64 attribute ``bits`` with the ones a plan says (0, 1, 2, 48-63) as ``flags`` name them,
    the others (3-47) kept: what a write puts in the entry."""
    return bits & ~GPT_PLANNED_BITS | gpt_attribute_bits(flags)


def attribute_flags(label: str) -> tuple[str, ...]:
    """The flags a user may set on a partition of ``label`` (the UI's choices)."""
    return tuple(GPT_ATTRIBUTES) if label == "gpt" else MSDOS_FLAGS


def plan_flags(label: str, flags: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Only the attribute flags of ``flags`` (libparted's type-flags dropped), sorted."""
    allowed = attribute_flags(label)
    return tuple(sorted({f for f in flags if f in allowed}))


def check_flags(label: str, flags: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    allowed = attribute_flags(label)
    bad = [f for f in flags if f not in allowed]
    if bad:
        raise LabelError(
            f"{label} partitions have no flag {', '.join(map(repr, bad))}; "
            f"flags are {', '.join(allowed[:4])}{', guid:48..guid:62' if label == 'gpt' else ''} "
            "(set types such as esp, swap or lvm as the type)"
        )
    return tuple(sorted(set(flags)))


def is_extended_type(code: str) -> bool:
    try:
        return int(code, 16) in EXTENDED_IDS
    except ValueError:
        return False


def default_type(label: str, role: Role = Role.PRIMARY) -> str:
    if role is Role.EXTENDED:
        return DEFAULT_EXTENDED
    t = ptypes.DEFAULT
    return (t.gpt or "") if label == "gpt" else f"0x{t.mbr:02x}"


def type_code(label: str, text: str) -> str:
    """The canonical type code for what the user typed: a name ("EFI system", "swap", "lvm"), a GPT GUID,
    or an MBR id ("0x83", "83"). Raises LabelError naming what would have been accepted."""
    import re  # here: a check imports this module and never types a type (re costs it ~1.5 ms)

    text = text.strip()
    known = ptypes.lookup(text) if text else None
    named = ptypes.by_name(label, text) if known is None else None
    if label == "gpt":
        if known is not None and known.gpt:
            return known.gpt
        if re.match(_GUID, text):
            return text.upper()
        if named:
            return named
        aliased = ptypes.alias_type(text)
        if aliased:
            return aliased
        raise LabelError(f"{text!r} is not a GPT partition type: give a type GUID, a name `sfdisk --label gpt -T` "
                         "lists (\"Linux root (x86-64)\", linux-root-x86-64), or an alias (uefi, root-x86-64)")
    if known is not None and known.mbr is not None:
        return f"0x{known.mbr:02x}"
    if named and not re.fullmatch(r"(0[xX])?[0-9A-Fa-f]{1,2}", text):  # "83" is an id before it is a name
        return named
    try:
        code = int(text.removeprefix("0x").removeprefix("0X"), 16)
    except ValueError:
        code = -1
    if 0 < code <= 0xFF:
        return f"0x{code:02x}"
    if code == 0:
        raise LabelError("type 0x00 marks an empty MBR entry: a partition needs a type from 0x01 to 0xff")
    names = ", ".join(t.name for t in ptypes.TYPES if t.mbr is not None)
    raise LabelError(f"{text!r} is not an MBR partition type: give an id from 0x01 to 0xff or one of {names}")


def check_name(label: str, name: str) -> str:
    if label == "msdos":
        if name:
            raise LabelError("msdos partitions have no names (GPT has them)")
        return name
    if len(name.encode("utf-16-le")) // 2 > GPT_NAME_UNITS:
        raise LabelError(f"a GPT partition name holds at most {GPT_NAME_UNITS} characters")
    if "\0" in name:
        raise LabelError("a partition name cannot contain a NUL character")
    if any(ord(ch) > 0xFFFF or 0xD800 <= ord(ch) <= 0xDFFF for ch in name):
        # libfdisk and libparted store names as UCS-2: sfdisk silently drops the whole name.
        raise LabelError("a GPT partition name holds characters up to U+FFFF only (no emoji or rarer scripts)")
    return name


def role_for_type(label: str, code: str, number: int) -> Role:
    """msdos: extended ids are containers, numbers from 5 are logical; GPT has only primaries."""
    if label != "msdos":
        return Role.PRIMARY
    if is_extended_type(code):
        return Role.EXTENDED
    return Role.LOGICAL if number >= FIRST_LOGICAL else Role.PRIMARY


def fold_type(label: str, code: str, flags: tuple[str, ...]) -> str:
    """A type code for a partition libparted described only by flags (no raw type read)."""
    if code:
        return code
    for f in flags:
        t = next((t for t in ptypes.TYPES if t.flag == f), None)
        if t is None:
            continue
        if label == "gpt":
            if t.gpt:
                return t.gpt
        elif t.mbr is not None:
            return f"0x{t.mbr:02x}"
    return ""
