"""A disk's layout alone, to copy onto another disk: ``export --layout-only`` and ``export --relative``.

An exported plan says which partitions are the disk's own (``keeps``) and which table it was made from
(``made_against``), so ``apply`` never mistakes another disk for this one. Copying a layout means the
opposite: the same partitions, new and empty, on a disk that is not this one. ``layout_only`` drops what
ties the plan to this disk (keeps, made_against, the disk's size and GPT usable area, which the other disk
has its own of); ``relative_layout`` also makes the sizes fit a disk of another size: every amount in bytes
(so a 4Kn disk takes it too), starts left to snapping where they were on the next grain boundary, and the
last partition "rest" (what the other partitions leave on that disk).
"""

from __future__ import annotations

from diskplan.model.extent import Role
from diskplan.model.formats.planfile import PlanFileError, PlanSpec
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.plan import relplan
from diskplan.model.value import replace

_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def layout_only(spec: PlanSpec) -> PlanSpec:
    """The plan's partitions as new ones, for any disk big enough: nothing that names this disk (nor the ids an
    sfdisk script gives it, ``label-id:`` and ``uuid=``: a copy has its own, and export's notes that they are
    not carried would only be noise)."""
    return replace(spec, keeps=(), made_against=None, sectors=None, first_lba=None, last_lba=None, label_id="",
                   guids=())


def in_bytes(amount: int) -> str:
    """``amount`` bytes in the largest binary unit that holds it whole ("512MiB"), else in bytes."""
    for unit, scale in _UNITS:
        if amount % scale == 0:
            return f"{amount // scale}{unit}"
    return f"{amount}B"


def relative_layout(spec: PlanSpec, geometry: Geometry) -> PlanSpec:
    """The plan's partitions as a relative plan (model.plan.relplan) that resolves on a disk of any size and sector
    size: the last one (by start) takes the rest. Raises PlanFileError for a layout a relative plan cannot
    hold (msdos logical partitions) or one with no partition."""
    parts = sorted(spec.partitions, key=lambda p: p.start)
    if not parts:
        raise PlanFileError("the disk has no partition: there is no layout to copy (--layout-only copies the "
                            "label alone)")
    odd = next((p for p in parts if p.role is not Role.PRIMARY), None)
    if odd is not None:
        raise PlanFileError(f"partition {odd.number} is {odd.role.value}, and a relative plan holds primary "
                            "partitions only: --layout-only copies the layout in exact sectors (onto a disk at "
                            "least as big)")
    grain = optimal_grain(geometry)
    ss = spec.sector_size
    wants = []
    cursor = None
    for i, p in enumerate(parts):
        snapped = grain.align_up(cursor if cursor is not None else spec.first_lba or 1)
        start_given = "" if p.start == snapped else in_bytes(p.start * ss)
        last = i == len(parts) - 1
        size = relplan.Size(rest=True) if last else relplan.Size(sectors=p.size, given=in_bytes(p.size * ss))
        wants.append(relplan.Want(p, f"partition entry {i + 1}", p.start if start_given else None, size,
                                  start_given))
        cursor = p.end + 1
    return replace(layout_only(spec), partitions=(), relative=tuple(wants), sector_size_given=False)
