"""libparted's rows (backend.parted.pedread.read_rows) made into the model's Disk: the partitions in disk order,
the GPT's usable range and every partition's type from the raw table (libparted 3.5 reports neither), the
table's metadata regions. Pure Python over the model and the raw parsers, run where the model is imported
anyway: in the parent of the reading child, which imports none of it (pedread's docstring says why)."""

from __future__ import annotations

from diskplan.backend.raw.gptcheck import GptState, check_gpt
from diskplan.backend.raw.rawtable import mbr_layout
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.table import MBR_LIMIT_SECTORS, Region, Table, gpt_entry_sectors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from diskplan.backend.parted.pedread import Rows

WRITABLE_LABELS = ("gpt", "msdos")


def disk_from_rows(path: str, rows: Rows) -> Disk:
    """The Disk that ``rows`` (libparted's read of ``path``) describe."""
    geom = Geometry(sectors=rows["sectors"], logical=rows["logical"], physical=rows["physical"], path=path,
                    model=rows["model"])
    label = rows["label"]
    if label is None:  # no table, or a filesystem on the whole device
        return Disk(geom, Table(None, 0, geom.sectors - 1), path, filesystem=rows["filesystem"],
                    messages=tuple(rows["messages"]))
    gpt = check_gpt(path, geom.logical, geom.sectors) if label == "gpt" else None
    if label == "gpt":
        first, last = _gpt_usable(gpt, geom)
    elif label == "msdos":
        first, last = 1, min(geom.sectors, MBR_LIMIT_SECTORS) - 1
    else:
        first, last = 0, geom.sectors - 1
    types = raw_types(path, label, geom.logical, gpt)
    parts = tuple(sorted(
        (Partition(number=num, start=start, end=end, type=types.get(num, ""), name=name, flags=flags,
                   role=Role(role), state=State.EXISTING, fs=fs)
         for num, start, end, role, name, flags, fs in rows["partitions"]),
        key=lambda p: (p.start, p.number)))
    read_only = ""
    if label not in WRITABLE_LABELS:
        read_only = f"diskplan writes gpt and msdos tables; this one is {label}"
    max_parts = 4
    if label == "gpt":
        good = gpt.good if gpt else None
        max_parts = good.header.entry_count if good and good.header else 128
    table = Table(
        label=label,
        first_usable=first,
        last_usable=last,
        partitions=parts,
        metadata=_regions(rows["metadata"], label, geom, first, last),
        max_partitions=max_parts,  # maxSupportedPartitionCount aborts in 3.5
        read_only=read_only,
    )
    return Disk(geom, table, path, messages=tuple(rows["messages"]))


def raw_types(path: str, label: str, sector: int, gpt: GptState | None) -> dict[int, str]:
    """Type GUIDs and MBR ids straight from the table: libparted 3.5 cannot report them."""
    try:
        if label == "gpt":
            good = gpt.good if gpt else None
            return {e.number: e.type_guid for e in good.entries} if good else {}
        if label == "msdos":
            layout = mbr_layout(path, sector, 1 << 62)
            if layout is None:
                return {}
            return {p.number: f"0x{p.type_id:02x}" for p in (*layout.primaries, *layout.logicals)}
    except OSError:
        pass
    return {}


def _gpt_usable(gpt: GptState | None, geom: Geometry) -> tuple[int, int]:
    """First and last usable LBA from the good GPT header (libparted does not expose them)."""
    good = gpt.good if gpt else None
    if good is not None and good.header is not None and 0 < good.header.first_usable <= good.header.last_usable:
        return good.header.first_usable, good.header.last_usable
    entries = gpt_entry_sectors(geom)
    return 2 + entries, geom.sectors - 2 - entries


def _regions(metadata: list[tuple[int, int, bool]], label: str, geom: Geometry, first: int,
             last: int) -> tuple[Region, ...]:
    n = geom.sectors
    if label == "gpt":
        regions = [
            Region("pmbr", Extent(0, 0), "protective MBR"),
            Region("gpt-header", Extent(1, 1), "GPT header"),
        ]
        if first > 2:
            regions.append(Region("gpt-entries", Extent(2, first - 1), "GPT entries"))
        if last + 1 <= n - 2:
            regions.append(Region("gpt-entries", Extent(last + 1, n - 2), "backup GPT entries"))
        regions.append(Region("gpt-header", Extent(n - 1, n - 1), "backup GPT header"))
        return tuple(regions)
    regions = []
    for start, end, inside_ext in metadata:
        if label == "msdos" and start == 0:
            regions.append(Region("mbr", Extent(0, 0), "MBR"))
            if end > 0:
                regions.append(Region("metadata", Extent(1, end), "gap before the first partition"))
        elif label == "msdos" and not inside_ext and end == n - 1:
            # libparted keeps the disk's last partial track as metadata, but parted prints it as free
            # space and a partition may use it (issue 26): it is not the table's.
            continue
        else:
            kind = "ebr" if inside_ext else "metadata"
            regions.append(Region(kind, Extent(start, end), "EBR" if inside_ext else "metadata"))
    return tuple(regions)
