"""Extents (runs of logical sectors, end inclusive as every partitioning tool prints them) and partitions."""

from __future__ import annotations

from enum import Enum

from diskplan.model.value import field, replace, value


@value(order=True)
class Extent:
    """A run of sectors, both ends included."""
    start: int
    end: int  # inclusive

    def __post_init__(self) -> None:
        if self.end < self.start - 1:
            raise ValueError(f"extent ends ({self.end}) before it starts ({self.start})")

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def contains(self, lba: int) -> bool:
        return self.start <= lba <= self.end

    def overlaps(self, other: Extent) -> bool:
        return self.start <= other.end and other.start <= self.end

    def intersection(self, other: Extent) -> Extent | None:
        lo, hi = max(self.start, other.start), min(self.end, other.end)
        return Extent(lo, hi) if lo <= hi else None

    def within(self, other: Extent) -> bool:
        return other.start <= self.start and self.end <= other.end


class Role(Enum):
    PRIMARY = "primary"
    EXTENDED = "extended"
    LOGICAL = "logical"


class State(Enum):
    EXISTING = "existing"  # on disk, holds data: never moved
    PROPOSED = "proposed"  # planned, not yet written
    DELETE = "delete"  # on disk, marked for deletion by the plan


@value
class Partition:
    """A partition as the table (or the plan) holds it; sectors, end included."""
    number: int
    start: int
    end: int  # inclusive
    type: str = ""  # GPT type GUID or name, MBR id as "0x83"
    name: str = ""
    flags: tuple[str, ...] = ()
    role: Role = Role.PRIMARY
    state: State = State.EXISTING
    fs: str = ""  # filesystem libparted or blkid saw, for display
    uuid: str = ""
    extra: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def extent(self) -> Extent:
        return Extent(self.start, self.end)

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    @property
    def is_container(self) -> bool:
        return self.role is Role.EXTENDED

    @property
    def moved_from(self) -> int | None:
        """A partition on the disk that the plan moves with its data: its start on the disk now."""
        at = dict(self.extra).get("moved_from")
        return int(at) if at is not None else None

    @property
    def resized_from(self) -> int | None:
        """A partition on the disk that the plan resizes with its filesystem: its sectors on the disk now."""
        size = dict(self.extra).get("resized_from")
        return int(size) if size is not None else None

    def moved(self, start: int, end: int) -> Partition:
        return replace(self, start=start, end=end)
