"""A drag step on a 20 TB disk with 128 partitions costs about what it costs on 1 GB with 1 partition:
moves and resizes replace one slot and bisect, they never rescan or re-sort the table."""

from __future__ import annotations

import contextlib
import json
import resource
import signal
from collections.abc import Callable, Iterator

import pytest

from diskplan.model.formats.planfile import PlanFileError, load_plan
from diskplan.model.geometry import Geometry
from diskplan.model.plan.plan import Edge, Plan
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


# --- plan files of many entries (issue 25: validation was quadratic, 200,000 entries took over 11 minutes) --


def _plan_text(label: str, entries: list[dict[str, object]]) -> str:
    return json.dumps({"label": label, "partitions": entries}, separators=(",", ":"))


def test_a_gpt_plan_of_200000_entries_is_refused_before_its_entries_are_read() -> None:
    text = _plan_text("gpt", [{"start": 2048 + i * 8, "size": 8} for i in range(200_000)])
    said: list[str] = []

    def load() -> None:
        with pytest.raises(PlanFileError) as caught:
            load_plan(text)
        said.append(str(caught.value))

    work = calls(load)
    assert said == ["the plan is not a valid table: GPT partition numbers go from 1 to 128 (the plan has 200000 "
                    "entries)"]
    assert work < 5_000, work  # reading every entry costs over 40 calls each: millions


@contextlib.contextmanager
def cpu_bound(seconds: int) -> Iterator[None]:
    """Fails the test after ``seconds`` of this process's CPU time (not the wall clock: the machine may be
    busy), far more than linear work takes, far less than quadratic work on the same plan."""
    def over(signum: int, frame: object) -> None:
        raise AssertionError(f"still working after {seconds} s of CPU: not linear")

    old = signal.signal(signal.SIGXCPU, over)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    used = int(resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime)
    resource.setrlimit(resource.RLIMIT_CPU, (used + seconds, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        signal.signal(signal.SIGXCPU, old)


def test_msdos_plans_of_100000_entries_are_checked_in_n_log_n() -> None:
    """100,000 logical partitions left unnumbered (each was numbered by a search from 5 again), then the
    same number and start given to all (each duplicate was counted over the whole list, each clash said):
    seconds now, tens of minutes before. Problems of one kind are said five at a time, then counted."""
    n = 100_000
    extended = {"start": 2048, "end": 2048 + n * 8 + 100, "role": "extended"}
    with cpu_bound(60):
        spec = load_plan(_plan_text("msdos", [extended, *({"start": 2049 + i * 8, "size": 7, "role": "logical"}
                                                           for i in range(n))]))
        assert [p.number for p in spec.partitions[-2:]] == [n + 3, n + 4]
        with pytest.raises(PlanFileError) as caught:
            load_plan(_plan_text("msdos", [extended, *({"number": 5, "start": 2049, "size": 7, "role": "logical"}
                                                       for _ in range(n))]))
    said = str(caught.value)
    assert len(said) < 2_000, said[:300]
    assert "two partitions are numbered 5" in said and f"and {n - 6} more like it" in said
    assert "msdos numbers logical partitions 5, 6, … without gaps" in said
