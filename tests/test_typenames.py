"""Partition type names from a complete list: every type sfdisk (libfdisk) knows, under its own name, and
a type diskplan cannot write still shown by name, not as a raw GUID."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from conftest import need_tool, run
from diskplan.model import labels, ptypes
from diskplan.model.typenames import GPT_NAMES, MBR_NAMES


def _sfdisk_types(label: str) -> dict[str, str]:
    out = run(need_tool("sfdisk"), "--label", label, "-T")
    rows = (re.match(r"^\s*([0-9A-Fa-f-]+)\s{2,}(.+?)\s*$", line) for line in out.splitlines()[2:])
    return {m.group(1).upper(): m.group(2) for m in rows if m}


def test_every_gpt_type_sfdisk_knows_is_ours_with_its_name() -> None:
    theirs = _sfdisk_types("gpt")
    assert len(theirs) > 150  # the parse read the whole list
    missing = {g: n for g, n in theirs.items() if GPT_NAMES.get(g) != n}
    assert not missing
    # and every one is shown by that name wherever diskplan names a type (unless ours has a shorter one)
    for guid, name in theirs.items():
        assert ptypes.describe(guid) in (name, getattr(ptypes.lookup(guid), "name", None)), guid


def test_every_mbr_type_sfdisk_knows_is_ours_with_its_name() -> None:
    theirs = {f"0x{int(k, 16):02x}": n for k, n in _sfdisk_types("dos").items()}
    assert len(theirs) > 90
    assert {k: n for k, n in theirs.items() if MBR_NAMES.get(int(k, 16)) != n} == {}


def test_a_discoverable_partitions_type_is_named_and_typed_by_name() -> None:
    root_x86_64 = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"
    assert ptypes.describe(root_x86_64) == "Linux root (x86-64)"
    assert ptypes.describe(root_x86_64.lower()) == "Linux root (x86-64)"
    # names as libfdisk matches them: any case, only letters and digits count
    assert labels.type_code("gpt", "Linux /usr (x86)") == "75250D76-8CC6-458E-BD66-BD47CC81A812"
    assert labels.type_code("gpt", "linux usr-x86") == "75250D76-8CC6-458E-BD66-BD47CC81A812"
    assert labels.type_code("msdos", "W95 FAT16 (LBA)") == "0x0e"
    assert labels.type_code("msdos", "83") == "0x83"  # an id stays an id
    assert ptypes.describe("0x0e") == "W95 FAT16 (LBA)"
    assert ptypes.describe("01234567-89AB-CDEF-0123-456789ABCDEF") == "01234567-89AB-CDEF-0123-456789ABCDEF"


SYSTEMD_ARCHES = ("alpha", "arc", "arm", "arm64", "ia64", "loongarch64", "mips-le", "mips64-le", "parisc", "ppc",
                  "ppc64", "ppc64-le", "riscv32", "riscv64", "s390", "s390x", "tilegx", "x86", "x86-64")


def test_every_discoverable_partitions_identifier_names_its_type() -> None:
    """systemd-repart's and the specification's identifiers (root-ARCH, usr-ARCH, -verity, -verity-sig) and
    sfdisk's aliases are accepted wherever a type is typed: 114 root and /usr types, each its own GUID."""
    found = {f"{kind}-{arch}{suffix}": labels.type_code("gpt", f"{kind}-{arch}{suffix}")
             for kind in ("root", "usr") for arch in SYSTEMD_ARCHES for suffix in ("", "-verity", "-verity-sig")}
    assert len(set(found.values())) == len(found) == 114
    dps = {g for g, n in GPT_NAMES.items() if n.startswith(("Linux root", "Linux /usr"))}
    assert set(found.values()) == dps
    assert ptypes.describe(found["usr-parisc-verity-sig"]) == "Linux /usr verity sign. (HPPA/PARISC)"
    aliases = {"linux": "Linux filesystem", "uefi": "EFI System", "xbootldr": "Linux extended boot",
               "home": "Linux home", "srv": "Linux server data", "var": "Linux variable data",
               "tmp": "Linux temporary data", "user-home": "Linux user's home", "linux-generic": "Linux filesystem"}
    assert {a: GPT_NAMES[labels.type_code("gpt", a)] for a in aliases} == aliases


@given(st.sets(st.sampled_from(sorted(labels.GPT_ATTRIBUTES))), st.integers(0, (1 << 64) - 1))
def test_attribute_flags_and_bits_say_the_same_and_the_reserved_bits_are_not_planned(flags: set[str],
                                                                                       other: int) -> None:
    bits = labels.gpt_attribute_bits(sorted(flags))
    assert labels.gpt_attribute_flags(bits) == tuple(sorted(flags))
    assert bits & ~labels.GPT_PLANNED_BITS == 0
    written = labels.with_planned_bits(other, sorted(flags))  # what a write puts over an entry's ``other`` bits
    reserved = ((1 << 45) - 1) << 3  # bits 3-47: kept as they are
    assert labels.gpt_attribute_flags(written) == tuple(sorted(flags))
    assert written & reserved == other & reserved
