"""GPT attribute bits libparted 3.5 does not report, read from the raw entries: the type-specific bits 48-62
and bit 63 (what Microsoft calls "do not automount"; the Discoverable Partitions Specification's no-auto and
read-only and grow-fs flags live there too)."""

from __future__ import annotations

from dataclasses import replace

from diskplan.backend.gptcheck import GptState
from diskplan.model.labels import gpt_attribute_flags
from diskplan.model.table import Table

HIGH_BITS = 48


def with_raw_attributes(table: Table, gpt: GptState | None) -> Table:
    """``table`` (libparted's reading of a GPT) with each partition's bits 48-63 from its raw entry; a partition
    whose entry does not match (another number, other ends) is left as libparted read it."""
    good = gpt.good if gpt is not None else None
    if table.label != "gpt" or good is None:
        return table
    entries = {e.number: e for e in good.entries}
    parts = []
    for p in table.partitions:
        e = entries.get(p.number)
        high = gpt_attribute_flags(e.attributes, HIGH_BITS) if e is not None and (e.first, e.last) == (p.start, p.end) \
            else ()
        parts.append(replace(p, flags=tuple(sorted({*p.flags, *high}))) if high else p)
    return replace(table, partitions=tuple(parts))
