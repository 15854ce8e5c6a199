"""What a disk is made of: logical sectors, physical blocks and the I/O hints the kernel gives.

All sizes are in bytes except ``sectors`` (the device size in logical sectors). ``physical`` is what
the device reports or what the user says it really is (SSDs that report 512/512 often have 4 KiB pages);
``user_grains`` are boundaries the kernel cannot know: an SSD erase block, a RAID or LVM stripe.

Flash: a device that is not rotational (sysfs ``queue/rotational`` = 0) or that the user marks with
``--ssd`` is judged against a page of at least ``FLASH_PAGE`` bytes, whatever physical size it reports:
an SSD that reported 512/512 wrote 4 KiB direct I/O 19x slower from sector 34 than from 2048.
"""

from __future__ import annotations

from diskplan.model.value import field, replace, value

# The smallest flash page we assume on an SSD that reports less: an assumption about flash, not a fact
# the device gives (``--physical-block 16384`` says the page is larger).
FLASH_PAGE = 4096


@value
class Geometry:
    """What a disk reports about itself (sizes in bytes, count in logical sectors) and what is known of it."""
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
    serial: str = ""
    rotational: bool | None = None
    scheduler: str | None = None
    schedulers: tuple[str, ...] = ()  # the ones the kernel offers (sysfs queue/scheduler)
    discard_granularity: int = 0
    # The user said --ssd (flash, whatever sysfs says: images, lying firmware) or --no-ssd (not flash,
    # although sysfs says rotational 0: a virtual disk on a spinning array); None: sysfs decides.
    ssd: bool | None = None
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
    def flash(self) -> bool:
        return self.ssd if self.ssd is not None else self.rotational is False

    @property
    def page(self) -> int:
        """The write unit a start is judged against: the physical block, or on flash at least a 4 KiB page."""
        if self.flash and FLASH_PAGE % self.logical == 0:
            return max(self.physical, FLASH_PAGE)
        return self.physical

    @property
    def sectors_per_page(self) -> int:
        return self.page // self.logical

    def page_rule(self) -> str:
        """Which rule sets ``page``, and why, in one line (the facts panel, ``check``)."""
        why = "--ssd" if self.ssd else "sysfs queue/rotational = 0"
        if self.flash and self.page > self.physical:
            return (f"flash ({why}): judged against an assumed {self.page} B page, not the reported "
                    f"{self.physical} B block; --physical-block SIZE sets a larger page, --no-ssd none")
        if self.ssd is False:
            return f"not flash (--no-ssd): judged against the reported {self.physical} B physical block"
        if self.flash:
            return f"flash ({why}): judged against the {self.page} B physical block"
        if self.rotational:
            return f"hard disk (sysfs queue/rotational = 1): judged against the {self.physical} B physical block"
        return (f"not known to be flash: judged against the reported {self.physical} B physical block; "
                "say --ssd for an SSD")

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
        ssd: bool | None = None,
    ) -> Geometry:
        """The same disk with what the user knows better than the firmware."""
        return replace(
            self,
            physical=self.physical if physical is None else physical,
            alignment_offset=self.alignment_offset if alignment_offset is None else alignment_offset,
            optimal_io=self.optimal_io if optimal_io is None else optimal_io,
            min_io=self.min_io if min_io is None else min_io,
            user_grains=self.user_grains if grains is None else tuple(grains),
            ssd=self.ssd if ssd is None else ssd,
        )

    def physical_block_of(self, lba: int) -> int:
        """Index of the physical block holding ``lba``, counted from the alignment offset."""
        return (lba * self.logical - self.alignment_offset % self.physical) // self.physical

    def page_of(self, lba: int) -> int:
        """Index of the page (see ``page``) holding ``lba``, counted from the alignment offset."""
        return (lba * self.logical - self.alignment_offset % self.page) // self.page
