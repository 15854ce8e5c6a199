"""What a disk is made of: logical sectors, physical blocks and the I/O hints the kernel gives.

All sizes are in bytes except ``sectors`` (the device size in logical sectors). ``physical`` is what
the device reports or what the user says it really is (SSDs that report 512/512 often have 4 KiB pages);
``user_grains`` are boundaries the kernel cannot know: an SSD erase block, a RAID or LVM stripe.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Geometry:
    sectors: int
    logical: int = 512
    physical: int = 512
    alignment_offset: int = 0
    min_io: int = 0
    optimal_io: int = 0
    user_grains: tuple[int, ...] = ()
    # Facts shown to the user; they do not change any arithmetic.
    path: str = ""
    model: str = ""
    rotational: bool | None = None
    scheduler: str | None = None
    discard_granularity: int = 0
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.logical <= 0 or self.logical & (self.logical - 1):
            raise ValueError(f"logical sector size must be a power of two, not {self.logical}")
        if self.physical < self.logical or self.physical % self.logical:
            raise ValueError(
                f"physical block size {self.physical} must be a multiple of the logical sector size "
                f"{self.logical}"
            )
        if self.sectors < 0:
            raise ValueError("a disk cannot have a negative size")
        for g in self.user_grains:
            if g <= 0 or g % self.logical:
                raise ValueError(f"grain {g} B is not a positive multiple of the {self.logical} B sector")

    @property
    def size_bytes(self) -> int:
        return self.sectors * self.logical

    @property
    def sectors_per_physical(self) -> int:
        return self.physical // self.logical

    @property
    def offset_sectors(self) -> int:
        """The alignment offset in logical sectors, reduced into one physical block."""
        return (self.alignment_offset % self.physical) // self.logical

    @property
    def last_lba(self) -> int:
        return self.sectors - 1

    def with_overrides(
        self,
        *,
        physical: int | None = None,
        alignment_offset: int | None = None,
        optimal_io: int | None = None,
        min_io: int | None = None,
        grains: tuple[int, ...] | None = None,
    ) -> Geometry:
        """The same disk with what the user knows better than the firmware."""
        changes: dict[str, object] = {}
        if physical is not None:
            changes["physical"] = physical
        if alignment_offset is not None:
            changes["alignment_offset"] = alignment_offset
        if optimal_io is not None:
            changes["optimal_io"] = optimal_io
        if min_io is not None:
            changes["min_io"] = min_io
        if grains is not None:
            changes["user_grains"] = tuple(grains)
        return replace(self, **changes)  # type: ignore[arg-type]

    def lba_to_bytes(self, lba: int) -> int:
        return lba * self.logical

    def physical_block_of(self, lba: int) -> int:
        """Index of the physical block holding ``lba``, counted from the alignment offset."""
        return (lba * self.logical - self.alignment_offset % self.physical) // self.physical
