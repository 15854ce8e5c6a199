"""Partition types by name: GPT type GUIDs, MBR ids, and how libparted 3.5 expresses each one.

libparted 3.5 (Debian 12) cannot set a type GUID or MBR id directly (pyparted needs parted > 3.5 for
that); it derives them from a flag or a filesystem type. ``flag``/``fs`` say which one yields the type.
Any other GPT type (by GUID, libfdisk name or alias) is written into the raw entries right after
libparted's commit (backend.raw.gptpatch).
"""

from __future__ import annotations

import functools

from diskplan.model.typenames import GPT_NAMES, MBR_NAMES
from diskplan.model.value import value


@value
class PartType:
    """A partition type: its name, its GPT GUID and MBR id where it has them, and libparted's flag for it."""
    name: str
    gpt: str | None  # type GUID, upper case
    mbr: int | None  # MBR system id
    flag: str | None = None  # libparted flag that selects this type
    fs: str | None = None  # libparted filesystem type that selects it


LINUX_FS_GUID = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"  # the type most partitions carry: named once, here

TYPES: tuple[PartType, ...] = (
    PartType("Linux filesystem", LINUX_FS_GUID, 0x83, None, "ext2"),
    PartType("EFI system", "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", 0xEF, "esp"),
    PartType("Linux swap", "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F", 0x82, "swap", "linux-swap(v1)"),
    PartType("Linux LVM", "E6D6D379-F507-44C2-A23C-238F2A3DF928", 0x8E, "lvm"),
    PartType("Linux RAID", "A19D880F-05FC-4D3B-A006-743F0F84911E", 0xFD, "raid"),
    PartType("Linux home", "933AC7E1-2EB4-4F13-B844-0E14E2AEF915", None, "linux-home"),
    PartType("BIOS boot", "21686148-6449-6E6F-744E-656564454649", None, "bios_grub"),
    PartType("Microsoft basic data", "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7", 0x07, "msftdata", "ntfs"),
    PartType("Microsoft reserved", "E3C9E316-0B5C-4DB8-817D-F92DF00215AE", None, "msftres"),
    PartType("W95 FAT32 (LBA)", None, 0x0C, "lba", "fat32"),
    PartType("Extended", None, 0x05),
    PartType("Extended (LBA)", None, 0x0F),
)

DEFAULT = TYPES[0]


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@functools.lru_cache(maxsize=1024)  # a table names the same few types again and again
def lookup(text: str) -> PartType | None:
    """Find a type by name ("linux swap", "esp"-like short names), GUID, or MBR id ("0x82", "82")."""
    key = _norm(text)
    for t in TYPES:
        if key in (_norm(t.name), _norm(t.gpt or "-"), _norm(t.flag or "-")):
            return t
    try:
        code = int(text, 16)
    except ValueError:
        return None
    return next((t for t in TYPES if t.mbr == code), None)


def known_name(type_code: str) -> str | None:
    """libfdisk's name for a type GUID or an MBR id ("0x83"), from the complete list (model.typenames)."""
    if type_code[:2].lower() == "0x":
        try:
            return MBR_NAMES.get(int(type_code, 16))
        except ValueError:
            return None
    return GPT_NAMES.get(type_code.upper())


def by_name(label: str, text: str) -> str | None:
    """The GPT GUID or MBR id (as "0x83") that libfdisk names ``text``, matched as libfdisk matches names:
    ignoring case and everything but letters and digits ("linux usr-x86" is "Linux /usr (x86)")."""
    key = _norm(text)
    if not key:
        return None
    if label == "gpt":
        return next((g for g, name in GPT_NAMES.items() if _norm(name) == key), None)
    return next((f"0x{c:02x}" for c, name in MBR_NAMES.items() if _norm(name) == key), None)


# GPT types by the short identifiers people write in scripts: sfdisk's aliases (libfdisk's parttype_cuts)
# and the Discoverable Partitions Specification's / systemd-repart's (root-ARCH, usr-ARCH, -verity, -verity-sig
# and these), each mapped to libfdisk's name for the type.
_GPT_ALIASES = {
    "linux": "Linux filesystem", "linux-generic": "Linux filesystem", "uefi": "EFI System", "esp": "EFI System",
    "xbootldr": "Linux extended boot", "swap": "Linux swap", "home": "Linux home", "srv": "Linux server data",
    "var": "Linux variable data", "tmp": "Linux temporary data", "user-home": "Linux user's home",
}
# compiled at its first use (re caches it), not at import: check never uses it (~0.1 ms a command)
_DPS = r"(root|usr)-([a-z0-9-]+?)(-verity(-sig)?)?"
_DPS_ARCH = {"mips-le": "mips-32-le", "mips64-le": "mips-64-le", "parisc": "hppa/parisc"}  # systemd vs libfdisk


def alias_type(text: str) -> str | None:
    """The GPT GUID of an alias ("uefi", "xbootldr", "root-x86-64", "usr-arm64-verity-sig"), or None."""
    import re  # here: a check imports this module and never types a type (re costs it ~1.5 ms)

    key = text.strip().lower()
    name = _GPT_ALIASES.get(key)
    m = re.fullmatch(_DPS, key) if name is None else None
    if m is not None:
        kind, arch, verity, sig = m.groups()
        name = ("Linux root" if kind == "root" else "Linux /usr") + (" verity sign." if sig else " verity" if verity
                                                                      else "") + f" ({_DPS_ARCH.get(arch, arch)})"
    return by_name("gpt", name) if name else None


def describe(type_code: str) -> str:
    """A readable name for a GUID or "0x83" (ours, else libfdisk's), or the code itself."""
    t = lookup(type_code) if type_code else None
    return t.name if t else (known_name(type_code) if type_code else None) or type_code
