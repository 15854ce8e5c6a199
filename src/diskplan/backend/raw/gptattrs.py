"""GPT attribute bits read from the raw entries: libparted 3.5 reports bits 0 and 2 only, not bit 1, the
type-specific bits 48-62 or bit 63 (what Microsoft calls "do not automount"; the Discoverable Partitions
Specification's no-auto, read-only and grow-fs flags live there too)."""

from __future__ import annotations

from diskplan.backend.raw.gptcheck import GptState, check_gpt
from diskplan.backend.raw.rawtable import GptEntry
from diskplan.model.disk import Disk
from diskplan.model.labels import gpt_attribute_flags
from diskplan.model.table import Table
from diskplan.model.value import replace


def raw_entries(table: Table, gpt: GptState | None) -> dict[int, GptEntry]:
    """Partition number -> its raw entry in the good GPT copy, for each partition of ``table`` (libparted's
    reading of a GPT) whose entry matches it (the same number and ends)."""
    good = gpt.good if gpt is not None else None
    if table.label != "gpt" or good is None:
        return {}
    ends = {p.number: (p.start, p.end) for p in table.partitions}
    return {e.number: e for e in good.entries if ends.get(e.number) == (e.first, e.last)}


def with_raw_attributes(table: Table, gpt: GptState | None) -> Table:
    """``table`` with each partition's named attribute bits (0, 1, 2, 48-63) from its raw entry; a partition
    whose entry does not match (another number, other ends) is left as libparted read it."""
    entries = raw_entries(table, gpt)
    if not entries:
        return table
    parts = []
    for p in table.partitions:
        e = entries.get(p.number)
        high = gpt_attribute_flags(e.attributes) if e is not None else ()
        parts.append(replace(p, flags=tuple(sorted({*p.flags, *high}))) if high else p)
    return replace(table, partitions=tuple(parts))


def partition_guids(disk: Disk) -> dict[int, str]:
    """Number -> unique GUID (upper case) of each partition of ``disk``'s table: on GPT from the raw entries
    (libparted does not report it; a partition whose entry does not match is left out), "" on msdos."""
    if disk.table.label != "gpt":
        return {p.number: "" for p in disk.table.partitions}
    gpt = check_gpt(disk.source, disk.geometry.logical, disk.geometry.sectors) if disk.source else None
    return {n: e.part_guid.upper() for n, e in raw_entries(disk.table, gpt).items()}
