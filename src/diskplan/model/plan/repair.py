"""Repairs the reader can offer for a damaged table, as data the plan layer turns into an operation.

Nothing here writes: a repair is a list of (LBA, bytes) the commit would put on the disk, computed from
the good copy of the table, plus the words to show the user. The commit writes exactly these bytes (not
a libparted commit of the good table: libparted 3.5 leaves a damaged entry array as it is, cannot read a
GPT whose primary header is gone, and would give new GUIDs to partitions it re-creates).

A repair is planned on its own (``Plan.repair``): the table it rebuilds is the one on the disk, and the
plan starts again from the repaired table once it is written and read back.
"""

from __future__ import annotations

from diskplan.model.extent import Extent
from diskplan.model.value import field, value

PROTECTIVE_MBR = "protective MBR"


@value
class GptRepair:
    """Rebuilding a damaged GPT copy (or a lost protective MBR) from the good copy: where it goes."""
    good: str  # "primary" or "backup": the copy that passed every check and is shown
    rewrite: str  # the copy the repair rebuilds from it, or PROTECTIVE_MBR
    header_lba: int  # where the rebuilt header goes
    entries_lba: int  # where its partition entry array goes
    entries_sectors: int
    reason: str  # why the rewritten copy is bad, one line
    writes: tuple[tuple[int, bytes], ...] = field(default=(), repr=False, compare=False)  # (LBA, bytes)
    # A grown disk (what ``sgdisk -e`` does): the backup GPT moves from ``moved_from`` to the last LBA and
    # the last usable LBA grows from ``grown[0]`` to ``grown[1]``; 0 and (0, 0) for a rebuild.
    moved_from: int = 0
    grown: tuple[int, int] = (0, 0)

    @property
    def summary(self) -> str:
        if self.moved_from:
            last = self.entries_lba + self.entries_sectors - 1
            return (f"move the backup GPT to the end of the disk: header from LBA {self.moved_from} to "
                    f"{self.header_lba}, entries to LBA {self.entries_lba}..{last}; "
                    f"the last usable LBA grows from {self.grown[0]} to {self.grown[1]} (what `sgdisk -e` does)")
        if self.rewrite == PROTECTIVE_MBR:
            return "write a protective MBR at LBA 0 (one 0xEE entry from LBA 1 over the disk; boot code kept)"
        last = self.entries_lba + self.entries_sectors - 1
        return (
            f"rewrite the {self.rewrite} GPT from the {self.good} copy: header at LBA {self.header_lba}, "
            f"entries at LBA {self.entries_lba}..{last}"
        )

    def same_writes(self, other: GptRepair) -> bool:
        """Whether ``other`` writes exactly the same bytes to the same sectors (``==`` ignores the bytes)."""
        return self == other and self.writes == other.writes

    def runs(self, sector_size: int) -> tuple[tuple[Extent, str], ...]:
        """Every write as (the sectors it covers, what goes there), in LBA order."""
        out = []
        for lba, data in sorted(self.writes, key=lambda w: w[0]):
            where = Extent(lba, lba + max(1, -(-len(data) // sector_size)) - 1)
            if self.moved_from:
                what = self._moved_run(lba)
            elif self.rewrite == PROTECTIVE_MBR:
                what = "protective MBR (one 0xEE entry; boot code and disk signature kept)"
            elif lba == self.header_lba:
                what = f"{self.rewrite} GPT header, rebuilt from the {self.good} header"
            elif lba == self.entries_lba:
                what = f"{self.rewrite} GPT entry array, copied from the {self.good} copy"
            else:
                what = f"{self.rewrite} GPT"
            out.append((where, what))
        return tuple(out)

    def _moved_run(self, lba: int) -> str:
        if lba == 0:
            return "protective MBR: its 0xEE entry covers the grown disk (boot code kept)"
        if lba == 1:
            return f"primary GPT header: backup at LBA {self.header_lba}, last usable LBA {self.grown[1]}"
        if lba == self.header_lba:
            return "backup GPT header at the disk's last LBA"
        if lba == self.entries_lba:
            return "backup GPT entry array, copied from the primary copy"
        return "the old backup GPT header, erased (no stale copy is left behind)"

    def extents(self, sector_size: int) -> tuple[Extent, ...]:
        return tuple(e for e, _ in self.runs(sector_size))

    def sectors_written(self, sector_size: int) -> int:
        return sum(e.size for e in self.extents(sector_size))
