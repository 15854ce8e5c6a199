"""A drag step on a 20 TB disk with 128 partitions costs about what it costs on 1 GB with 1 partition:
moves and resizes replace one slot and bisect, they never rescan or re-sort the table."""

from __future__ import annotations

from collections.abc import Callable

from diskplan.model.geometry import Geometry
from diskplan.model.plan import Edge, Plan
from diskplan.model.table import new_table
from helpers.costs import calls

STEPS = 400


def planned(sectors: int, count: int) -> Plan:
    geom = Geometry(sectors)
    plan = Plan.open(geom, new_table("gpt", geom))
    span = (plan.table.last_usable - 2048) // count
    for i in range(count):
        out = plan.propose(2048 + i * span, span - 2048 * 16)  # 16 free grains after each partition
        assert out.ok, out.message
        plan = out.plan
    assert len(plan.live) == count
    return plan


def keyboard(plan: Plan, number: int) -> Callable[[], None]:
    def run() -> None:
        p = plan
        for i in range(STEPS):
            out = p.move(number, 1 if i % 2 == 0 else -1)
            assert out.changed
            p = out.plan

    return run


def drag(plan: Plan, number: int) -> Callable[[], None]:
    start = plan.partition(number).start  # type: ignore[union-attr]
    end = plan.partition(number).end  # type: ignore[union-attr]

    def run() -> None:
        for i in range(STEPS):
            plan.move_to(number, start + (i % 9) * 1500)
            plan.resize_to(number, Edge.END, end + (i % 5) * 3000)

    return run


def test_a_step_does_the_same_work_on_20_tb_with_128_partitions() -> None:
    small = planned(10**9 // 512, 1)  # 1 GB
    big = planned(20 * 10**12 // 512, 128)  # 20 TB
    middle = 64
    for make in (keyboard, drag):
        c_small, c_big = calls(make(small, 1)), calls(make(big, middle))
        # Bisecting 128 slots costs a few calls more per step; a rescan or a sort would cost 128 times the work.
        per_step = (c_big - c_small) / STEPS
        assert per_step <= 20, f"{make.__name__}: {c_big} calls vs {c_small} ({per_step:.1f} more per step)"
