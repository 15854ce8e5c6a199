"""Relative plans: one plan file for a fleet of disks of different sizes, resolved on each disk.

A partition of a relative plan may leave its start to snapping (the next grain boundary after the partition
before it in the file, as sfdisk places a line without ``start=``) and give its size as

- an amount (``"512MiB"``, ``204800``): exactly that many sectors;
- ``"N%"``: N percent of the disk's *usable space*, rounded down to whole grains. The usable space runs from
  the first grain boundary of the usable area (1 MiB) to the last one before its end (GPT: before the backup
  table). That is parted's percent unit, made exact: on a GPT disk ``parted -a optimal mkpart 0% 50%`` and a
  first partition of ``"50%"`` are the same sectors, and ``50%`` + ``50%`` fill the disk;
- ``"rest"``: what the other partitions leave, up to the next partition with a fixed start or the end of the
  usable space; the partitions after it keep their sizes (``root: rest, swap: 4GiB`` puts swap at the end).

Every start lands on the grain and every end before one, so the last partition ends on the last grain
boundary, as parted's ``100%`` and sfdisk's default do. A plan that cannot fit any disk (over 100%, two
``rest``, 100% beside a fixed size) is refused when read; one that does not fit this disk, when resolved.

An amount written in bytes (``"512MiB"``, a start of ``"1GiB"``) is kept as written and counted in each
disk's own sectors (``in_sectors_of``), so a plan that gives no sector size and counts no sectors resolves
on a 512-byte and a 4096-byte-sector disk alike; a count of sectors (``204800``, ``"2048s"``) ties the plan
to one sector size (``counted``).
"""

from __future__ import annotations

import re
from fractions import Fraction

from diskplan.model.extent import Partition, Role
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain
from diskplan.model.sizes import parse_lba, parse_size
from diskplan.model.units import human_bytes
from diskplan.model.value import replace, value

_PERCENT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*", re.ASCII)


class RelativeError(ValueError):
    """The relative plan cannot be resolved (on any disk, or on this one): one line saying why."""


@value
class Size:
    """What one partition asks for: a fixed number of sectors, a percentage of the usable space, or the rest."""

    sectors: int | None = None
    percent: Fraction | None = None
    rest: bool = False
    given: str = ""  # a fixed size as written in bytes ("512MiB"); ``sectors`` counts it in the plan's sectors

    @property
    def text(self) -> str:
        if self.rest:
            return "rest"
        if self.percent is not None:
            return f"{float(self.percent):g}%"
        return self.given or f"{self.sectors}s"


@value
class Want:
    """One partition of a relative plan: its number, type, name, flags and role (``part``; its extent is a
    placeholder), where it starts (None: left to snapping) and what size it asks for."""

    part: Partition
    where: str  # "partition entry 2": for messages
    start: int | None
    size: Size
    start_given: str = ""  # a start as written in bytes ("1GiB"); ``start`` counts it in the plan's sectors

    @property
    def relative(self) -> bool:
        return self.start is None or self.size.sectors is None


def parse_share(text: str, where: str) -> Size | None:
    """``"rest"`` or ``"N%"`` as a Size; None when ``text`` is neither (an amount: the caller parses it)."""
    if text.strip().lower() == "rest":
        return Size(rest=True)
    m = _PERCENT.fullmatch(text)
    if m is None:
        return None
    value = Fraction(m.group(1))
    if not 0 < value <= 100:
        raise RelativeError(f"{where}: size {text.strip()} is not a share of the disk (more than 0%, at most 100%)")
    return Size(percent=value)


def counted(wants: tuple[Want, ...]) -> str | None:
    """The first start or size given as a count of sectors, which means another byte on a disk of another
    sector size (``"partition entry 2: size 204800s"``); None when every amount is in bytes, % or "rest"."""
    for w in wants:
        if w.start is not None and not w.start_given:
            return f"{w.where}: start {w.start}s"
        if w.size.sectors is not None and not w.size.given:
            return f"{w.where}: size {w.size.sectors}s"
    return None


def in_sectors_of(wants: tuple[Want, ...], sector_size: int) -> tuple[Want, ...]:
    """The amounts written in bytes counted in sectors of ``sector_size``: sizes rounded up, starts to the
    nearest sector, as everywhere (model.sizes). Raises RelativeError."""
    geom = Geometry(1, sector_size, sector_size)
    out = []
    for w in wants:
        try:
            if w.size.given:
                w = replace(w, size=replace(w.size, sectors=parse_size(w.size.given, geom).sectors))
            if w.start_given:
                w = replace(w, start=parse_lba(w.start_given, geom).sectors)
        except ValueError as exc:  # SizeError: it was read once already, so this is not expected
            raise RelativeError(f"{w.where}: {exc}") from exc
        out.append(w)
    return tuple(out)


def check(wants: tuple[Want, ...]) -> None:
    """What no disk can resolve: more than 100% in all, two ``rest``, 100% with something beside it."""
    rests = [w for w in wants if w.size.rest]
    if len(rests) > 1:
        raise RelativeError(f"two partitions ask for the rest ({rests[0].where} and {rests[1].where}): "
                            "only one can have what the others leave")
    total = sum((w.size.percent for w in wants if w.size.percent is not None), Fraction(0))
    if total > 100:
        raise RelativeError(f"the percentages add up to {float(total):g}%, over 100% of the disk")
    others = [w for w in wants if w.size.percent is None]
    if total == 100 and others:
        raise RelativeError(f"the percentages add up to 100%, which leaves nothing for {others[0].where} "
                            f"(size {others[0].size.text}) on any disk")
    logical = next((w for w in wants if w.part.role is not Role.PRIMARY), None)
    if logical is not None:
        raise RelativeError(f"{logical.where}: a relative plan holds primary partitions only (this one is "
                            f"{logical.part.role.value}): give every partition a start and a size")


def _whole(grain: Grain, sectors: int) -> int:
    """The sectors a partition of ``sectors`` takes up to the next grain boundary, when it starts on one."""
    return -(-sectors // grain.sectors) * grain.sectors


def minimum_usable(wants: tuple[Want, ...], grain: Grain) -> int | None:
    """Usable space (sectors, whole grains) on which the plan surely resolves; None when a fixed start makes
    it depend on more than the size. Enough: every percentage gets one grain, the rest two (its end goes
    down to a boundary), fixed sizes up to the next boundary; the percentages take their share of the rest."""
    if any(w.start is not None for w in wants):
        return None
    g = grain.sectors
    fixed = sum(_whole(grain, w.size.sectors) for w in wants if w.size.sectors is not None)
    fixed += 2 * g if any(w.size.rest for w in wants) else 0
    shares = [w.size.percent for w in wants if w.size.percent is not None]
    total = sum(shares, Fraction(0))
    need = [Fraction(g)]
    if fixed:
        need.append(fixed / (1 - total / 100))  # check() refused total == 100 beside a fixed size
    need += [Fraction(g) * 100 / p for p in shares]
    usable = max(need)
    return _whole(grain, -(-usable.numerator // usable.denominator))


def usable_space(grain: Grain, first_usable: int, last_usable: int) -> tuple[int, int]:
    """The grain-aligned part of a usable area: (first start, last end); empty when first > last."""
    return grain.align_up(first_usable), grain.align_down(last_usable + 1) - 1


def _sized(w: Want, grain: Grain, usable: int) -> int:
    """A fixed size, or a percentage of ``usable`` rounded down to whole grains (0: less than one)."""
    if w.size.sectors is not None:
        return w.size.sectors
    assert w.size.percent is not None
    return int(usable * w.size.percent / 100) // grain.sectors * grain.sectors


def resolve(wants: tuple[Want, ...], grain: Grain, first_usable: int, last_usable: int,
            sector_size: int) -> tuple[tuple[Partition, ...], tuple[str, ...]]:
    """Each partition placed on a disk whose usable area is ``first_usable..last_usable``, in the file's order,
    and one note per relative size or start saying what it became here. Raises RelativeError."""
    lo, hi = usable_space(grain, first_usable, last_usable)
    usable = hi - lo + 1
    if usable < grain.sectors:
        raise RelativeError(f"this disk has no whole grain ({grain.sectors} sectors) of usable space")
    sizes = [0 if w.size.rest else _sized(w, grain, usable) for w in wants]
    tiny = next((w for w, size in zip(wants, sizes, strict=True) if size == 0 and not w.size.rest), None)
    if tiny is not None:
        space = human_bytes(usable * sector_size)
        raise RelativeError(f"{tiny.where}: {tiny.size.text} of this disk's usable space ({space}) is "
                            f"less than one grain ({grain.sectors} sectors): the disk is too small for this plan"
                            + _at_least(wants, grain, first_usable, last_usable, sector_size))
    placed: list[Partition] = []
    notes = [f"relative plan resolved on this disk: usable space {lo}..{hi} ({usable} sectors, "
             f"{human_bytes(usable * sector_size)}), grain {grain.sectors} sectors"]
    cursor = lo
    for i, w in enumerate(wants):
        start = grain.align_up(cursor) if w.start is None else w.start
        if w.size.rest:
            end = _rest_end(wants, sizes, i, grain, hi)
            if end - start + 1 < grain.sectors:
                raise RelativeError(f"{w.where} (the rest) gets {max(0, end - start + 1)} sectors on this disk, "
                                    f"less than one grain: the disk is too small for this plan"
                                    + _at_least(wants, grain, first_usable, last_usable, sector_size))
        else:
            end = start + sizes[i] - 1
        if end > last_usable:
            raise RelativeError(f"{w.where} would end at sector {end}, past this disk's last usable sector "
                                f"({last_usable}): the disk is too small for this plan"
                                + _at_least(wants, grain, first_usable, last_usable, sector_size))
        p = replace(w.part, start=start, end=end)
        placed.append(p)
        if w.relative:
            size = end - start + 1
            said = f"size {w.size.text} → {size} sectors" if w.size.sectors is None else f"{size} sectors"
            where = f"start {start}" + (" (the next grain boundary)" if w.start is None else "")
            notes.append(f"partition {p.number}: {said} ({human_bytes(size * sector_size)}) on this disk, {where}")
        cursor = end + 1
    return tuple(placed), tuple(notes)


def _rest_end(wants: tuple[Want, ...], sizes: list[int], i: int, grain: Grain, hi: int) -> int:
    """The end of the rest: before the next fixed start, leaving the partitions between room to follow it."""
    tail: list[int] = []
    limit = hi
    for w, size in zip(wants[i + 1 :], sizes[i + 1 :], strict=True):
        if w.start is not None:
            limit = w.start - 1
            break
        tail.append(size)
    if not tail:
        return limit
    need = sum(_whole(grain, s) for s in tail[:-1]) + tail[-1]
    return grain.align_down(limit + 1 - need) - 1


def _at_least(wants: tuple[Want, ...], grain: Grain, first_usable: int, last_usable: int, sector_size: int) -> str:
    need = minimum_usable(wants, grain)
    if need is None:
        return ""
    lo, hi = usable_space(grain, first_usable, last_usable)
    return f" (it needs {need} sectors of usable space, {human_bytes(need * sector_size)}; this disk has {hi - lo + 1})"
