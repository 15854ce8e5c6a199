"""What a step of a plan gives back: the plan after it and what it said (``Outcome``), and for moves and
resizes where snapping put the partition (``Snap``); the edges a resize moves (``Edge``)."""

from __future__ import annotations

from enum import Enum
from typing import Generic, NamedTuple, TypeVar

from diskplan.model.extent import Extent
from diskplan.model.grain import Grain
from diskplan.model.units import human_bytes
from diskplan.model.value import value

P = TypeVar("P")  # the plan's class (model.plan.plan.Plan)


class Edge(Enum):
    START = "start"
    END = "end"


class Span(NamedTuple):
    """Sectors a step asked for: unlike an Extent, it may run backwards or off the disk (a wild drag)."""

    start: int
    end: int


@value
class Snap:
    """Where a step asked a partition to be, and where snapping put it (both in sectors)."""

    requested: Span
    snapped: Extent
    grain: Grain
    sector_size: int
    notes: tuple[str, ...] = ()  # "stopped against partition 3", "size rounded to whole grains"

    @property
    def start_shift(self) -> int:
        return self.snapped.start - self.requested.start

    @property
    def end_shift(self) -> int:
        return self.snapped.end - self.requested.end

    def _lba(self, lba: int) -> str:
        nbytes = lba * self.sector_size
        return f"{lba}s ({nbytes:,} B = {human_bytes(nbytes)})"

    def describe(self, edge: Edge | None = None) -> str:
        """"start 2050s (1,049,600 B = 1 MiB) -> 2048s (1,048,576 B = 1 MiB)" for ``edge``, or both edges
        and the size when ``edge`` is None (a move, a new partition)."""
        parts = []
        for e in (Edge.START, Edge.END) if edge is None else (edge,):
            req = self.requested.start if e is Edge.START else self.requested.end
            got = self.snapped.start if e is Edge.START else self.snapped.end
            text = f"{e.value} {self._lba(req)}"
            parts.append(text + (f" -> {self._lba(got)}" if got != req else " (on the grain)"))
        if edge is None:
            size = self.snapped.size
            parts.append(f"size {size}s = {size * self.sector_size:,} B ({human_bytes(size * self.sector_size)})")
        return "; ".join(parts + list(self.notes))


@value
class Outcome(Generic[P]):
    """What a step did: the plan after it (``P``: the plan's class; ``plan.Outcome`` names it for ``Plan``)."""

    before: P
    plan: P  # the plan after the step: ``before`` itself when refused or when nothing changed
    ok: bool  # False: refused, ``message`` says why
    message: str
    snap: Snap | None = None
    number: int | None = None  # the partition the step concerned (a new partition's number)

    @property
    def changed(self) -> bool:
        return self.plan is not self.before


class Refused(Exception):
    """A step refused, with the reason (turned into a refused ``Outcome`` by the step that raised it)."""


REPAIR_PENDING = ("the GPT repair is pending: commit it first (the disk is then read again and can be planned "
                  "on), or undo it")
