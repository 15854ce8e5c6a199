"""A partition table as the planner sees it: label, usable area, metadata regions and partitions."""

from __future__ import annotations

from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.value import field, replace, value

GPT_ENTRY_BYTES = 128 * 128  # 128 entries of 128 bytes: what parted, sgdisk and sfdisk write
MBR_LIMIT_SECTORS = 2**32  # MBR's 32-bit LBA fields: 2 TiB with 512-byte sectors


@value
class Region:
    """A run of sectors that is not a partition: table metadata or free space."""

    kind: str  # "pmbr", "gpt-header", "gpt-entries", "mbr", "ebr", "metadata", "free"
    extent: Extent
    label: str = ""


@value
class Table:
    """A partition table: its label, its usable range and its partitions."""
    label: str | None  # "gpt", "msdos", another libparted label name, or None (no table)
    first_usable: int
    last_usable: int
    partitions: tuple[Partition, ...] = ()
    metadata: tuple[Region, ...] = ()
    max_partitions: int = 128
    read_only: str = ""  # why the planner must not write this table; empty when writable
    notes: tuple[str, ...] = field(default=())
    # msdos: the EBR sector of logical partitions 5, 6, ... as the raw chain has them (libparted's "ebr"
    # regions only guess where they are); empty when not read. A logical data move keeps them occupied.
    ebrs: tuple[int, ...] = ()
    # What a plan file names that libparted makes up, written over it after the commit: a GPT's usable area
    # (``first_usable``/``last_usable`` as the plan's first_lba/last_lba say; backend.raw.gptpatch) and the disk
    # id an sfdisk script's label-id: names (GPT: the disk GUID; msdos: the disk signature, "0x1234abcd";
    # backend.raw.mbrid). False and "" for a table read from a disk and for a plan naming none.
    usable_named: bool = field(default=False, compare=False)
    disk_id: str = field(default="", compare=False)

    @property
    def usable(self) -> Extent:
        return Extent(self.first_usable, self.last_usable)

    @property
    def live(self) -> tuple[Partition, ...]:
        """Partitions that will exist once the plan is written (not the ones marked for deletion)."""
        return tuple(p for p in self.partitions if p.state is not State.DELETE)

    def by_number(self, number: int) -> Partition | None:
        return next((p for p in self.partitions if p.number == number), None)

    def with_partitions(self, partitions: tuple[Partition, ...]) -> Table:
        return replace(self, partitions=tuple(sorted(partitions, key=lambda p: (p.start, p.number))))

    def free_regions(self, min_sectors: int = 1) -> list[Extent]:
        """Gaps in the usable area not covered by a live partition (logical partitions sit inside
        their extended one, so the extended partition's free interior is reported too)."""
        return free_between(self.usable, [p for p in self.live if p.role is not Role.LOGICAL], min_sectors)


def free_between(area: Extent, parts: list[Partition], min_sectors: int = 1) -> list[Extent]:
    gaps: list[Extent] = []
    cursor = area.start
    for p in sorted(parts, key=lambda p: p.start):
        if p.start > cursor and p.start - cursor >= min_sectors:
            gaps.append(Extent(cursor, min(p.start - 1, area.end)))
        cursor = max(cursor, p.end + 1)
        if cursor > area.end:
            break
    if cursor <= area.end and area.end - cursor + 1 >= min_sectors:
        gaps.append(Extent(cursor, area.end))
    return [g for g in gaps if g.size >= min_sectors]


def gpt_entry_sectors(geom: Geometry) -> int:
    return -(-GPT_ENTRY_BYTES // geom.logical)


def label_sectors(label: str, geom: Geometry) -> int:
    """The fewest sectors a disk needs for an empty ``label``: a GPT's protective MBR, two headers, two copies
    of its entries and two usable sectors (libparted writes one, then reads that disk back as having no
    table: 69 sectors of 512 B is its least); an MBR's own sector and one more."""
    return 2 * gpt_entry_sectors(geom) + 5 if label == "gpt" else 2


def new_table(label: str, geom: Geometry) -> Table:
    """An empty table of ``label`` as parted would create it on ``geom``."""
    if label == "gpt":
        entries = gpt_entry_sectors(geom)
        first, last = 2 + entries, geom.sectors - 2 - entries
        meta = (
            Region("pmbr", Extent(0, 0), "protective MBR"),
            Region("gpt-header", Extent(1, 1), "GPT header"),
            Region("gpt-entries", Extent(2, first - 1), "GPT entries"),
            Region("gpt-entries", Extent(last + 1, geom.sectors - 2), "backup GPT entries"),
            Region("gpt-header", Extent(geom.sectors - 1, geom.sectors - 1), "backup GPT header"),
        )
        return Table("gpt", first, last, (), meta, 128)
    if label == "msdos":
        last = min(geom.sectors, MBR_LIMIT_SECTORS) - 1
        return Table("msdos", 1, last, (), (Region("mbr", Extent(0, 0), "MBR"),), 4)
    raise ValueError(f"diskplan can create gpt or msdos labels, not {label!r}")


def no_table(geom: Geometry) -> Table:
    return Table(None, 0, geom.sectors - 1)
