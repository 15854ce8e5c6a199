"""The planner's stack panel and facts rows judge a layer's data start as the findings do: counted from the
device's alignment offset (model.findings.stackfindings.offset_mod, the one home of that sum). On a drive with an
offset the panel once took the plain remainder and called an aligned pe_start misaligned."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.model.disk import Disk
from diskplan.model.extent import Partition
from diskplan.model.findings.codes import NOTICE
from diskplan.model.findings.stackfindings import judged
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.stack import Layer
from diskplan.model.table import new_table
from diskplan.ui.explain import stack_rows, stack_walk

# A 512e drive with the "WinXP jumper": LBA 7 (3,584 B) is where its physical blocks begin.
JUMPER = Geometry(sectors=10**7, physical=4096, alignment_offset=3584)
PV = Layer("lvm2-pv", 1 << 20, fix="pvcreate --dataalignment 1m")


def _disk(geom: Geometry, start: int, layer: Layer) -> Disk:
    table = new_table("gpt", geom).with_partitions((Partition(1, start, start + 100_000),))
    return Disk(geom, table, stacks=((1, (layer,)),))


def test_an_aligned_pe_start_on_a_drive_with_an_offset_is_shown_aligned() -> None:
    grain = optimal_grain(JUMPER)
    start = grain.align_up(34)  # the grain's first boundary: LBA 2048 + 7
    assert start == 2055
    found = [f for _, fs in judged(JUMPER, start, (PV,), grain, 1) for f in fs]
    assert found == []  # the findings: extent 0 at byte 2,100,736 is on a physical block and on the grain
    walk = stack_walk(JUMPER, start, (PV,), grain)
    line = next(x for x in walk if x.text.startswith("LVM2 physical volume: data at byte"))
    assert line.style == "good", line
    assert "(2,100,736 − 3584 B alignment offset) mod 4,096 = 0" in line.text
    rows = dict(stack_rows(_disk(JUMPER, start, PV), grain))
    assert "(2,100,736 − 3584 B alignment offset) mod 4,096 = 0" in rows["Inside #1"]
    assert "mod 4096 = 3584" not in rows["Inside #1"]


@settings(max_examples=80, deadline=None)
@given(offset=st.sampled_from([0, 512, 3584, 1024]), start=st.integers(34, 9000),
       pe=st.integers(0, 2048).map(lambda k: k * 512))
def test_the_panel_s_verdict_is_the_findings_verdict(offset: int, start: int, pe: int) -> None:
    geom = Geometry(sectors=10**7, physical=4096, alignment_offset=offset)
    grain = optimal_grain(geom)
    layer = Layer("lvm2-pv", pe or 512)
    found = [f for _, fs in judged(geom, start, (layer,), grain, 1) for f in fs]
    want = "good" if not found else ("notice" if all(f.severity == NOTICE for f in found) else "warning")
    line = next(x for x in stack_walk(geom, start, (layer,), grain) if "data at byte" in x.text)
    assert line.style == want, (line, [f.message for f in found])
