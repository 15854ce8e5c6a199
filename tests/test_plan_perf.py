"""A drag step on a 20 TB disk with 128 partitions costs about what it costs on 1 GB with 1 partition:
moves and resizes replace one slot and bisect, they never rescan or re-sort the table."""

from __future__ import annotations

import time
from collections.abc import Callable

from diskplan.model.geometry import Geometry
from diskplan.model.plan import Edge, Plan
from diskplan.model.table import new_table

TARGET_RATIO = 1.2
ROUNDS, STEPS = 15, 400


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


def best_of(small: Callable[[], None], big: Callable[[], None]) -> tuple[float, float]:
    """Fastest of interleaved rounds: other load on the machine slows some rounds, never speeds one up."""
    times: dict[str, list[float]] = {"small": [], "big": []}
    for _ in range(ROUNDS):
        for name, fn in (("small", small), ("big", big)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return min(times["small"]) / STEPS, min(times["big"]) / STEPS


def test_a_step_costs_the_same_on_20_tb_with_128_partitions() -> None:
    small = planned(10**9 // 512, 1)  # 1 GB
    big = planned(20 * 10**12 // 512, 128)  # 20 TB
    middle = 64
    for make in (keyboard, drag):
        # Other work on a shared machine can still skew one measurement; a real regression (a rescan or a
        # sort per step: 128 times the work) fails every attempt.
        for _attempt in range(3):
            t_small, t_big = best_of(make(small, 1), make(big, middle))
            if t_big / t_small <= TARGET_RATIO:
                break
        assert t_big / t_small <= TARGET_RATIO, f"{make.__name__}: {t_big * 1e6:.1f} µs vs {t_small * 1e6:.1f} µs"
        assert t_big < 500e-6, f"{make.__name__}: {t_big * 1e6:.0f} µs per step is not interactive"
