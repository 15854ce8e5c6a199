"""What each partitioning tool would say about a partition: the exact texts of ``parted align-check``,
``parted print``, ``fdisk -l`` and ``sgdisk -v``, computed by the rules those tools apply
(shared/design/alignment-rules.md) so a user can match our verdict with what they see in theirs.

The tools judge what the device *reports*: pass the geometry as read, before ``--physical-block`` and the
other overrides (those are the user's knowledge, which no tool has).
"""

from __future__ import annotations

from math import log2

from diskplan.model.extent import Partition
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, libparted_minimum, libparted_optimum
from diskplan.model.table import Table
from diskplan.model.value import value

# gptfdisk (gpt.h): its default alignment in 512-byte sectors, and the alignment it forces on disks of at
# least this many sectors (about 300 GB: such disks are likely Advanced Format).
GDISK_DEFAULT_ALIGNMENT = 2048
GDISK_MIN_AF_ALIGNMENT = 8
GDISK_SMALLEST_ADVANCED_FORMAT = 585937500

# libparted's PED_UNIT_COMPACT picks the largest SI unit that leaves at least 10 of it.
_PARTED_UNITS = (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3))
_DBL_EPSILON = 2.0**-52


def parted_compact(nbytes: int) -> str:
    """libparted's ``ped_unit_format_custom_byte`` in the default unit: 17408 -> '17.4kB',
    1048576 -> '1049kB' (three significant digits, SI units, no space)."""
    name, size = next(((n, s) for n, s in _PARTED_UNITS if nbytes >= 10 * s), ("B", 1))
    d = nbytes / size * (1.0 + _DBL_EPSILON)  # libparted nudges up so that 100.5 is not printed as 100
    w = d + (0.005 if d < 10 else 0.05 if d < 100 else 0.5)
    places = 2 if w < 10 else 1 if w < 100 else 0
    return f"{d:.{places}f}{name}"


@value
class AlignCheck:
    """``parted DEV align-check opt|min N``: with ``-s`` it prints nothing and answers with its exit status
    (0 aligned, 1 not); without ``-s`` it prints ``text`` and exits 0 either way."""

    kind: str  # "opt" or "min"
    number: int
    start: int
    grain: Grain

    @property
    def aligned(self) -> bool:
        return self.grain.is_aligned(self.start)

    @property
    def script_status(self) -> int:
        return 0 if self.aligned else 1

    @property
    def text(self) -> str:
        if self.aligned:
            return f"{self.number} aligned"
        return f"{self.number} not aligned: {self.start}s % {self.grain.sectors}s != {self.grain.offset}s"

    def command(self, target: str) -> str:
        return f"parted {target} align-check {self.kind} {self.number}"


def fdisk_warning(geom: Geometry, p: Partition) -> str | None:
    """What ``fdisk -l`` prints under the table for ``p`` (libfdisk ``fdisk_lba_is_phy_aligned``: the
    granularity is max(physical, minimum I/O), shifted by the alignment offset), or None."""
    granularity = max(geom.physical, geom.min_io)
    offset = (p.start * geom.logical) % granularity
    if (granularity + geom.alignment_offset - offset) % granularity == 0:
        return None
    return f"Partition {p.number} does not start on physical sector boundary."


def gdisk_alignment(geom: Geometry, table: Table) -> int:
    """gptfdisk's ``ComputeAlignment``: the largest power of two up to 1 MiB (in sectors) that divides
    every partition's start, raised to 8 on disks of about 300 GB or more. ``gdisk -l`` prints it as
    "Partitions will be aligned on N-sector boundaries"."""
    exponent = int(log2(max(1, GDISK_DEFAULT_ALIGNMENT * 512 // geom.logical)))
    align = 1 << exponent
    for p in table.partitions:
        while p.start % (1 << exponent):
            exponent -= 1
        align = 1 << exponent
    if align < GDISK_MIN_AF_ALIGNMENT and geom.sectors >= GDISK_SMALLEST_ADVANCED_FORMAT:
        align = GDISK_MIN_AF_ALIGNMENT
    return align


def sgdisk_boundary(geom: Geometry, table: Table) -> int | None:
    """The boundary ``sgdisk -v`` tests every partition against: max(physical / logical, the alignment gdisk
    computed); None: not GPT (gdisk would convert it in memory first)."""
    if table.label != "gpt":
        return None
    return max(geom.physical // geom.logical, gdisk_alignment(geom, table))


def sgdisk_cautions(p: Partition, test: int | None) -> tuple[str, ...]:
    """What ``sgdisk -v`` (gdisk's ``v``) says about ``p``'s boundaries, tested against ``test``
    (``sgdisk_boundary``). Each caution is one line here; gdisk wraps it after "This may"."""
    if test is None:
        return ()
    out = []
    if p.start % test:
        out.append(f"Caution: Partition {p.number} doesn't begin on a {test}-sector boundary. This may "
                   "result in degraded performance on some modern (2009 and later) hard disks.")
    if (p.end + 1) % test:
        out.append(f"Caution: Partition {p.number} doesn't end on a {test}-sector boundary. This may "
                   "result in problems with some disk encryption tools.")
    return tuple(out)


@value
class ToolSay:
    """Everything the tools say about one partition."""

    number: int
    opt: AlignCheck
    minimum: AlignCheck
    parted_start: str  # ``parted print``'s Start column
    parted_end: str
    fdisk: str | None
    sgdisk: tuple[str, ...]
    sgdisk_boundary: int | None  # the boundary sgdisk -v tests; None: not GPT, gdisk would convert it first

    def lines(self, target: str) -> list[str]:
        """The block ``diskplan check`` prints and the planner's explain panel shows."""
        out = [
            f"{self.opt.command(target)}: {self.opt.text} (with -s: exit {self.opt.script_status}, no output)",
            f"{self.minimum.command(target)}: {self.minimum.text} (with -s: exit {self.minimum.script_status})",
            f"parted {target} print: Start {self.parted_start}, End {self.parted_end}",
            f"fdisk -l {target}: {self.fdisk or 'no warning for this partition'}",
        ]
        if self.sgdisk_boundary is None:
            out.append("sgdisk -v: not a GPT disk (gdisk would convert it in memory first)")
        else:
            out.extend(f"sgdisk -v {target}: {c}" for c in self.sgdisk)
            if not self.sgdisk:
                out.append(f"sgdisk -v {target}: no caution (tested against {self.sgdisk_boundary}-sector boundaries)")
        return out

    def as_json(self) -> dict[str, object]:
        return {
            "parted_align_check_opt": {"aligned": self.opt.aligned, "script_exit": self.opt.script_status,
                                       "text": self.opt.text},
            "parted_align_check_min": {"aligned": self.minimum.aligned, "script_exit": self.minimum.script_status,
                                       "text": self.minimum.text},
            "parted_print_start": self.parted_start,
            "parted_print_end": self.parted_end,
            "fdisk_warning": self.fdisk,
            "sgdisk_verify": list(self.sgdisk) if self.sgdisk_boundary is not None else None,
            "sgdisk_boundary": self.sgdisk_boundary,
        }


def tool_say(geom: Geometry, table: Table, p: Partition) -> ToolSay:
    """``geom``: the geometry the device reports (no user overrides)."""
    return _tool_say(geom, p, sgdisk_boundary(geom, table), libparted_optimum(geom), libparted_minimum(geom))


def _tool_say(geom: Geometry, p: Partition, boundary: int | None, opt: Grain, minimum: Grain) -> ToolSay:
    return ToolSay(
        number=p.number,
        opt=AlignCheck("opt", p.number, p.start, opt),
        minimum=AlignCheck("min", p.number, p.start, minimum),
        parted_start=parted_compact(p.start * geom.logical),
        parted_end=parted_compact((p.end + 1) * geom.logical - 1),
        fdisk=fdisk_warning(geom, p),
        sgdisk=sgdisk_cautions(p, boundary),
        sgdisk_boundary=boundary,
    )


def tools_say(geom: Geometry, table: Table) -> dict[int, ToolSay]:
    """Every partition's: gdisk's alignment, which looks at every start, and libparted's two grains are computed
    once for them all, not once a partition."""
    boundary, opt, minimum = sgdisk_boundary(geom, table), libparted_optimum(geom), libparted_minimum(geom)
    return {p.number: _tool_say(geom, p, boundary, opt, minimum) for p in table.partitions}
