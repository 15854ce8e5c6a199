"""Hybrid MBRs: a GPT disk whose sector 0 lists real partitions beside the protective 0xEE entry.
Both views are shown: the GPT as the table, the MBR as a read-only second view."""

from __future__ import annotations

from diskplan.backend.raw.rawtable import PROTECTIVE_ID, MbrLayout
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.table import MBR_LIMIT_SECTORS, Region, Table

MBR_VIEW_NOTE = "the MBR half of a hybrid MBR (shown beside the GPT; diskplan does not write it)"


def mbr_view(layout: MbrLayout, sectors: int) -> Table:
    parts = tuple(
        Partition(
            number=p.number,
            start=p.start,
            end=p.end,
            type=f"0x{p.type_id:02x}",
            name="GPT protective" if p.type_id == PROTECTIVE_ID else "",
            flags=("boot",) if p.boot else (),
            role=Role.PRIMARY,
            state=State.EXISTING,
        )
        for p in layout.primaries
    )
    return Table(
        label="msdos",
        first_usable=1,
        last_usable=max(1, min(sectors, MBR_LIMIT_SECTORS) - 1),
        partitions=tuple(sorted(parts, key=lambda p: (p.start, p.number))),
        metadata=(Region("mbr", Extent(0, 0), "hybrid MBR"),),
        max_partitions=4,
        read_only=MBR_VIEW_NOTE,
    )


def describe_views(layout: MbrLayout, gpt: tuple[Partition, ...]) -> list[str]:
    """One line per MBR entry: which GPT partition covers the same sectors (the point of a hybrid)."""
    lines = []
    for p in layout.primaries:
        what = f"MBR {p.number}: type 0x{p.type_id:02x}, sectors {p.start}..{p.end}"
        if p.type_id == PROTECTIVE_ID:
            lines.append(f"{what}: the protective entry (covers the GPT itself)")
            continue
        same = next((g for g in gpt if (g.start, g.end) == (p.start, p.end)), None)
        if same is not None:
            lines.append(f"{what} = GPT partition {same.number} {same.name!r}".rstrip())
            continue
        touching = [g.number for g in gpt if g.start <= p.end and p.start <= g.end]
        if touching:
            lines.append(f"{what}: overlaps GPT partition(s) {touching} but does not match any exactly")
        else:
            lines.append(f"{what}: no GPT partition covers these sectors")
    return lines
