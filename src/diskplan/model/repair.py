"""Repairs the reader can offer for a damaged table, as data the plan layer turns into an operation.

Nothing here writes: a repair is a list of (LBA, bytes) the commit would put on the disk, computed from
the good copy of the table, plus the words to show the user. A libparted commit of a GPT rewrites both
copies anyway, so a plan that changes partitions repairs the table too; this is for "repair only".
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROTECTIVE_MBR = "protective MBR"


@dataclass(frozen=True)
class GptRepair:
    good: str  # "primary" or "backup": the copy that passed every check and is shown
    rewrite: str  # the copy the repair rebuilds from it, or PROTECTIVE_MBR
    header_lba: int  # where the rebuilt header goes
    entries_lba: int  # where its partition entry array goes
    entries_sectors: int
    reason: str  # why the rewritten copy is bad, one line
    writes: tuple[tuple[int, bytes], ...] = field(default=(), repr=False, compare=False)  # (LBA, bytes)

    @property
    def summary(self) -> str:
        if self.rewrite == PROTECTIVE_MBR:
            return "write a protective MBR at LBA 0 (one 0xEE entry from LBA 1 over the disk; boot code kept)"
        last = self.entries_lba + self.entries_sectors - 1
        return (
            f"rewrite the {self.rewrite} GPT from the {self.good} copy: header at LBA {self.header_lba}, "
            f"entries at LBA {self.entries_lba}..{last}"
        )

    @property
    def sectors_written(self) -> int:
        return sum(-(-len(data) // 512) for _, data in self.writes)
