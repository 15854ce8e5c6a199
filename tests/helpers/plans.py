"""Plans for the tests: made by hand on a 1 GiB disk (``plan_on``, ``existing``) with the two ways a step ends
(``ok``, ``refused``), and Hypothesis strategies for any valid plan file's content (GPT or MBR with logicals)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from diskplan.model import labels, ptypes
from diskplan.model.extent import Partition, Role, State
from diskplan.model.formats.planfile import PlanSpec
from diskplan.model.geometry import Geometry
from diskplan.model.grain import SnapTarget
from diskplan.model.plan.plan import Outcome, Plan
from diskplan.model.table import new_table

LINUX = ptypes.LINUX_FS_GUID
GIB = Geometry(2**21)  # 1 GiB of 512-byte sectors: GPT usable 34..2097118


def plan_on(geom: Geometry = GIB, *parts: Partition, label: str = "gpt",
            target: SnapTarget = SnapTarget.OPTIMAL) -> Plan:
    return Plan.open(geom, new_table(label, geom).with_partitions(parts), target)


def existing(number: int, start: int, end: int, **kw: Any) -> Partition:
    return Partition(number, start, end, kw.pop("type", LINUX), state=State.EXISTING, **kw)


def ok(outcome: Outcome) -> Plan:
    assert outcome.ok, outcome.message
    return outcome.plan


def refused(outcome: Outcome, *words: str) -> None:
    assert not outcome.ok
    assert outcome.plan is outcome.before
    for w in words:
        assert w in outcome.message, outcome.message


GPT_TYPES = [t.gpt for t in ptypes.TYPES if t.gpt] + ["3B8F8425-20E0-4F3B-907F-1A25A76F98E8"]  # + /srv
MBR_TYPES = [f"0x{t.mbr:02x}" for t in ptypes.TYPES if t.mbr is not None and not labels.is_extended_type(
    f"0x{t.mbr:02x}")] + ["0xa5", "0x1c"]


def _name_ok(name: str) -> bool:
    return "\0" not in name and len(name) <= 36 and all(ord(c) <= 0xFFFF for c in name)


@st.composite
def specs(draw: st.DrawFn) -> PlanSpec:
    label = draw(st.sampled_from(["gpt", "msdos"]))
    ss = draw(st.sampled_from([512, 4096]))
    sectors = draw(st.integers(10_000, 2**34))
    table = new_table(label, Geometry(sectors, ss, ss))
    lo, hi = table.first_usable, table.last_usable
    count = draw(st.integers(0, 8))
    cuts = sorted(draw(st.lists(st.integers(lo, hi), min_size=2 * count, max_size=2 * count, unique=True)))
    extents = list(zip(cuts[::2], cuts[1::2], strict=True))
    parts: list[Partition] = []
    if label == "gpt":
        numbers = draw(st.lists(st.integers(1, 128), min_size=len(extents), max_size=len(extents), unique=True))
        for n, (a, b) in zip(numbers, extents, strict=True):
            name = draw(st.text(max_size=12).filter(_name_ok))
            flags = draw(st.lists(st.sampled_from(labels.attribute_flags("gpt")), max_size=3, unique=True))
            parts.append(Partition(n, a, b, draw(st.sampled_from(GPT_TYPES)), name, tuple(sorted(flags)),
                                   Role.PRIMARY, State.PROPOSED))
    else:
        tops = extents[:4]
        ext_at = draw(st.one_of(st.none(), st.integers(0, len(tops) - 1))) if tops else None
        numbers = draw(st.permutations([1, 2, 3, 4]))
        for k, (a, b) in enumerate(tops):
            if k == ext_at and b - a >= 64:
                parts.append(Partition(numbers[k], a, b, draw(st.sampled_from(["0x05", "0x0f", "0x85"])),
                                       role=Role.EXTENDED, state=State.PROPOSED))
                inner = sorted(draw(st.lists(st.integers(a + 1, b), min_size=2, max_size=6, unique=True)))
                logical = 5
                prev_end = a
                for x, y in zip(inner[::2], inner[1::2], strict=False):
                    if x > prev_end + 1:
                        parts.append(Partition(logical, x, y, draw(st.sampled_from(MBR_TYPES)),
                                               role=Role.LOGICAL, state=State.PROPOSED))
                        logical += 1
                        prev_end = y
                continue
            # msdos marks one partition active at most (operations.validate)
            boot = draw(st.booleans()) and not any("boot" in q.flags for q in parts)
            parts.append(Partition(numbers[k], a, b, draw(st.sampled_from(MBR_TYPES)), "", ("boot",) if boot else (),
                                   Role.PRIMARY, State.PROPOSED))
    gpt = label == "gpt"
    return PlanSpec(label, ss, tuple(sorted(parts, key=lambda p: p.number)), sectors,
                    lo if gpt else None, hi if gpt else None)
