"""A plan as systemd-repart.d definitions (``repart.d(5)``): one ``NN-name.conf`` per partition, where the plan
fits repart's model, and otherwise the exact reason it does not.

repart's model: GPT only; it numbers and places new partitions itself, in the order of the file names, from
the first usable sector (1 MiB on a new table) on, each on a 4 KiB boundary (systemd 252; not 1 MiB). What it
can be told per partition: Type=, Label=, Flags= (attribute bits), a size (SizeMinBytes=/SizeMaxBytes=,
multiples of 4096), a share of the space (Weight=) and the free space after it (PaddingMinBytes=/
PaddingMaxBytes=, or PaddingWeight=). So a plan fits when its partitions are numbered in the order they lie,
the first one starts at 1 MiB, and every size and gap is whole 4 KiB; a relative plan fits when its
percentages are not mixed with fixed sizes (Weight= shares what fixed sizes leave, while a plan's percent
is of the whole usable space) and no partition has a fixed start.
"""

from __future__ import annotations

import re
from fractions import Fraction

from diskplan.model import labels, ptypes
from diskplan.model.extent import Partition
from diskplan.model.formats.planfile import PlanFileError, PlanSpec
from diskplan.model.plan import relplan

ALIGN = 4096  # bytes: repart's sizes and paddings are multiples of this, and its partitions start on it
MiB = 1 << 20
WEIGHT_PER_PERCENT = 1000  # Weight= is an integer up to 1000000: 100% is 100000, 0.001% still expressible


class RepartError(PlanFileError):
    """The plan does not fit repart's model: ``str(exc)`` says exactly why."""

    def __init__(self, why: str) -> None:
        super().__init__(f"systemd-repart cannot express this plan: {why}")


def _slug(p: Partition) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", (p.name or ptypes.describe(p.type)).lower()).strip("-")
    return text[:40] or "partition"


def _label(p: Partition) -> list[str]:
    if not p.name:
        return ["# no name in the plan: repart names the partition after its type"]
    if not p.name.isprintable():
        raise RepartError(f"partition {p.number}'s name {p.name!r} holds a control character, which a "
                          ".conf line cannot carry")
    return [f"Label={p.name.replace('%', '%%')}"]  # % starts a specifier in repart.d


def _entry(p: Partition, index: int, count: int, settings: list[str]) -> tuple[str, str]:
    lines = [f"# diskplan plan: partition {p.number} ({index} of {count}); repart reads these files in name order",
             "[Partition]", f"Type={p.type.lower()}", f"# {ptypes.describe(p.type)}", *_label(p)]
    bits = labels.gpt_attribute_bits(p.flags)
    if bits:
        lines.append(f"Flags=0x{bits:016x}")
    return f"{index:02d}-{_slug(p)}.conf", "\n".join([*lines, *settings]) + "\n"


def _bytes(sectors: int, ss: int, what: str) -> int:
    n = sectors * ss
    if n % ALIGN:
        raise RepartError(f"{what} is {n} bytes, not a whole number of 4 KiB: repart sizes and places in 4 KiB")
    return n


def _fixed_size(n: int) -> list[str]:
    return [f"SizeMinBytes={n}", f"SizeMaxBytes={n}"]


def _padding(n: int) -> list[str]:
    return [f"PaddingMinBytes={n}", f"PaddingMaxBytes={n}"] if n else []


def _check_numbers(parts: list[Partition]) -> None:
    for i, p in enumerate(parts, 1):
        if p.number != i:
            raise RepartError(f"partition {p.number} comes {i} in the order on the disk: repart numbers new "
                              "partitions in the order it creates them (1, 2, 3...)")


def repart_files(spec: PlanSpec) -> list[tuple[str, str]]:
    """(file name, content) per partition, in order. Raises RepartError (a PlanFileError) when the plan does not
    fit repart's model."""
    if spec.label != "gpt":
        raise RepartError(f"it is a {spec.label} plan, and repart writes GPT only")
    if spec.relative is not None:
        return _relative(spec, spec.relative)
    parts = sorted(spec.partitions, key=lambda p: p.start)
    if not parts:
        raise RepartError("the plan has no partitions, and repart needs a definition to do anything")
    _check_numbers(parts)
    ss = spec.sector_size
    first = MiB // ss
    if parts[0].start != first:
        raise RepartError(f"partition {parts[0].number} starts at sector {parts[0].start}; repart starts the first "
                          f"partition at 1 MiB (sector {first}) and has no setting for a gap before it")
    out = []
    for i, p in enumerate(parts):
        size = _bytes(p.size, ss, f"partition {p.number}'s size")
        gap = 0 if i + 1 == len(parts) else _bytes(parts[i + 1].start - p.end - 1, ss,
                                                   f"the gap after partition {p.number}")
        out.append(_entry(p, i + 1, len(parts), [*_fixed_size(size), *_padding(gap)]))
    return out


def _relative(spec: PlanSpec, wants: tuple[relplan.Want, ...]) -> list[tuple[str, str]]:
    fixed_start = next((w for w in wants if w.start is not None), None)
    if fixed_start is not None:
        raise RepartError(f"{fixed_start.where} starts at sector {fixed_start.start}, and repart places every "
                          "partition itself (there is no start setting)")
    _check_numbers([w.part for w in wants])
    shares = [w for w in wants if w.size.percent is not None]
    fixed = [w for w in wants if w.size.sectors is not None]
    if shares and fixed:
        raise RepartError(f"{shares[0].where} asks for {shares[0].size.text} of the disk's usable space, beside the "
                          f"fixed size of {fixed[0].where}; repart's Weight= shares out only what fixed sizes leave, "
                          "so every size would come out different (make the percentages fixed sizes, or drop the "
                          "fixed sizes)")
    total = sum((w.size.percent for w in shares if w.size.percent is not None), Fraction(0))
    ss = spec.sector_size
    out = []
    for i, w in enumerate(wants):
        last = i + 1 == len(wants)
        if w.size.rest:
            settings = [f"Weight={_weight(100 - total) if shares else 1000}"]
        elif w.size.percent is not None:
            settings = [f"Weight={_weight(w.size.percent)}"]
            if last and total < 100 and not any(x.size.rest for x in wants):
                settings += ["# the share the plan leaves free, after the last partition",
                             f"PaddingWeight={_weight(100 - total)}"]
        else:
            assert w.size.sectors is not None
            size = _bytes(w.size.sectors, ss, f"{w.where}'s size")
            # diskplan starts the next partition on the next MiB: the padding keeps repart's 4 KiB packing there
            pad = 0 if last else -(-size // MiB) * MiB - size
            settings = ["Weight=0", *_fixed_size(size), *_padding(pad)]
        out.append(_entry(w.part, i + 1, len(wants), settings))
    return out


def _weight(percent: Fraction) -> int:
    return round(percent * WEIGHT_PER_PERCENT)


def to_repart(spec: PlanSpec) -> str:
    """All the files on standard output, each after a ``# file: NAME`` line (``-o DIR`` writes them)."""
    return "\n".join(f"# file: {name}\n{text}" for name, text in repart_files(spec))
