"""What a data move (backend.move.engine) and a resize by the filesystem's tool (backend.move.resize) both
show before the user is asked: the target, how to confirm it, the disk as read and the partition's entry."""

from __future__ import annotations

from diskplan.backend.move.moveentry import Entry
from diskplan.backend.write.steps import ConfirmedByName
from diskplan.model.value import value


@value
class PartitionProposal(ConfirmedByName):
    """The fields a ``MoveProposal`` and a ``ResizeProposal`` share, first in both (positional order kept)."""

    target: str
    kind: str  # "block" or "file"
    model: str
    sectors: int
    sector_size: int
    number: int
    entry: Entry | None
