"""Exercises: every demo opened as "fix this layout", solved in the planner and accepted, failed with a wrong
plan whose message names what is wrong (with the findings' arithmetic); the walk-through moves the cursor and
the zoom; a Hypothesis property ties the checker to the grain arithmetic, worked out here on its own."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from diskplan.model.findings import placement as F
from diskplan.model.grain import SnapTarget
from diskplan.model.plan.plan import Outcome, Plan
from diskplan.model.teach import demos
from diskplan.model.teach.exercise import GOALS, TOLERANCE, check
from diskplan.ui.app import PlannerApp
from diskplan.ui.panels import ViewsPanel
from helpers.pilot import demo, plan_of, propose, run, started, status_text

SIZE = (100, 30)


def _plan(name: str) -> Plan:
    d = demos.find(name).planned_disk()
    return Plan.open(d.geometry, d.table)


def test_every_demo_has_an_exercise_with_steps() -> None:
    assert set(GOALS) == set(demos.names())
    for goal in GOALS.values():
        assert goal.task and goal.steps
        # Each partition of the demo is either kept (data), recreated or dropped (expendable), when it has any.
        numbers = {p.number for p in demos.find(goal.demo).partitions}
        assert numbers == set(goal.keep) | set(goal.recreate) | set(goal.drop), goal.demo


# --- solving in the planner -----------------------------------------------------------------------


def _step(app: PlannerApp, outcome_of: Callable[[Plan], object]) -> None:
    out = outcome_of(plan_of(app))
    assert getattr(out, "ok", False), getattr(out, "message", out)
    assert app._step(out)  # type: ignore[arg-type]


async def _solve(name: str, pilot, app: PlannerApp) -> None:
    smap = app.sector_map
    if name == "ssd-gpt-34":
        smap.move_to(34)
        await pilot.press("x")
        plan = plan_of(app)
        propose(app, 2048, plan.table.last_usable - 2048 + 1)
    elif name == "dos-63":
        smap.move_to(63)
        await pilot.press("A")
    elif name in ("advanced-format", "4kn"):
        smap.move_to(34)
        await pilot.press("x")
    elif name == "stripe":
        smap.move_to(2048)
        await pilot.press("x")
        propose(app, 2048, 209715200)
    elif name == "lvm-whole-disk":
        _step(app, lambda p: p.new_label("gpt"))
        propose(app, 2048, plan_of(app).table.last_usable - 2048 + 1)
    elif name == "empty":
        _step(app, lambda p: p.new_label("gpt"))
        propose(app, 2048, 1 << 20)
        propose(app, 2048 + (1 << 20), plan_of(app).table.last_usable - 2048 - (1 << 20) + 1)
    await pilot.pause()


def _notes(app: PlannerApp) -> str:
    return " | ".join(str(n.message) + " " + str(n.title) for n in app._notifications)


def _exercise_run(name: str) -> None:
    @run
    async def go() -> None:
        app = PlannerApp(start=demo(name), exercise=True)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            facts = app.query_one(ViewsPanel).text("facts")
            assert "Exercise: fix this layout" in facts and GOALS[name].task[0] in facts
            await _solve(name, pilot, app)
            app.sector_map.focus()
            await pilot.press("k")
            assert app.verdict is not None and app.verdict.solved, app.verdict and app.verdict.lines()
            assert "Exercise solved" in _notes(app)
            facts = app.query_one(ViewsPanel).text("facts")
            assert "Solved." in facts
            measured = GOALS[name].measured
            if measured:  # tied back to the experiment's numbers
                assert measured in facts
            assert "\n Solved. Partition " in status_text(app)

    go()


def test_ssd_gpt_34_solved_by_recreating_partition_1_at_2048s() -> None:
    _exercise_run("ssd-gpt-34")


def test_dos_63_solved_by_realigning_with_the_data() -> None:
    _exercise_run("dos-63")


def test_advanced_format_solved_by_dropping_the_test_partition() -> None:
    _exercise_run("advanced-format")


def test_4kn_solved_by_dropping_the_34s_partition() -> None:
    _exercise_run("4kn")


def test_stripe_solved_by_recreating_partition_1_on_3_mib() -> None:
    _exercise_run("stripe")


def test_lvm_whole_disk_solved_with_a_gpt_and_a_partition_from_1_mib() -> None:
    _exercise_run("lvm-whole-disk")


def test_lvm_partition_accepted_unchanged() -> None:
    _exercise_run("lvm-partition")


def test_modern_accepted_unchanged() -> None:
    _exercise_run("modern")


def test_empty_solved_with_efi_and_root() -> None:
    _exercise_run("empty")


# --- failing with a wrong plan ------------------------------------------------------------------------


@run
async def test_a_wrong_plan_is_refused_naming_what_is_wrong() -> None:
    """dos-63 deleted and recreated at 2048s: aligned, but the data the goal keeps is lost."""
    app = PlannerApp(start=demo("dos-63"), exercise=True)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.focus()
        await pilot.press("k")  # as opened: the start's arithmetic from the finding
        assert app.verdict is not None and not app.verdict.solved
        facts = app.query_one(ViewsPanel).text("facts")
        assert "partition 1: starts 3584 B into a 4096 B flash page" in facts
        assert "32256 B mod 4096 = 3584" in facts  # the finding's own arithmetic
        assert "Not yet" in _notes(app)
        smap.move_to(63)
        await pilot.press("x")
        propose(app, 2048, 1875444102)
        assert app.verdict is not None and not app.verdict.solved  # judged again at each step, once checked
        assert "partition 1's data is lost" in app.query_one(ViewsPanel).text("facts")
        await pilot.press("k")
        assert app.verdict is not None and not app.verdict.solved
        text = "\n".join(app.verdict.lines())
        assert "partition 1's data is lost" in text and "A realigns it" in text
        assert "flash page" not in text  # the start itself is right now


def test_wrong_plans_name_the_size_and_the_grain() -> None:
    # stripe: partition 1 recreated at 6144s but only half as big
    plan = _plan("stripe").delete(1).plan
    plan = plan.propose(6144, 209715200 // 2).plan
    v = check(GOALS["stripe"], plan)
    text = "\n".join(v.lines())
    assert not v.solved and "partition 1 is 50 GiB, not about 100 GiB" in text
    assert "= -50.00%; the goal allows ±1%" in text
    # stripe left as it is: the 3 MiB grain's arithmetic
    text = "\n".join(check(GOALS["stripe"], _plan("stripe")).lines())
    assert "starts off the 3 MiB grain" in text and "1048576 B mod 3145728 = 1048576" in text
    # advanced-format with partition 2 deleted: data lost, and partition 1 still off its physical block
    text = "\n".join(check(GOALS["advanced-format"], _plan("advanced-format").delete(2).plan).lines())
    assert "partition 2's data is lost" in text and "17408 B mod 4096 = 1024" in text
    # empty with a label but nothing in it
    text = "\n".join(check(GOALS["empty"], _plan("empty").new_label("gpt").plan).lines())
    assert "no partition for root" in text and "no partition for the EFI system partition" in text
    # modern: a new label loses everything
    text = "\n".join(check(GOALS["modern"], _plan("modern").new_label("gpt").plan).lines())
    assert "partition 4's data is lost: the new gpt label replaces the whole table" in text


def test_the_solved_result_carries_each_start_s_arithmetic_and_the_experiment() -> None:
    plan = _plan("dos-63").realign(1).plan
    v = check(GOALS["dos-63"], plan)
    assert v.solved
    assert ("Partition 1 starts at 2,048s (moved with its data from 63s): 2,048 × 512 B = 1,048,576 B; "
            "1,048,576 mod 4,096 = 0; 1,048,576 mod 1,048,576 = 0.") in v.result
    assert F.MEASURED_DOS in v.result and "3,991 -> 4,989" in F.MEASURED_DOS


# --- the walk-through --------------------------------------------------------------------------------


@run
async def test_enter_walks_through_the_steps_moving_cursor_and_zoom() -> None:
    app = PlannerApp(start=demo("ssd-gpt-34"), exercise=True)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.focus()
        steps = GOALS["ssd-gpt-34"].steps
        await pilot.press("enter")
        await pilot.pause()
        assert smap.cursor_lba == steps[0].lba == 34 and smap.spc == 1
        assert "Step 1/4: Partition 1 starts at 34s" in status_text(app)
        await pilot.press("enter")
        await pilot.pause()
        assert smap.spc == smap.fit_spc  # step 2 shows the whole disk
        await pilot.press("enter", "enter")
        await pilot.pause()
        assert smap.cursor_lba == 2048 and smap.spc == 1
        assert "Step 4/4" in status_text(app)


@run
async def test_without_exercise_k_and_enter_do_nothing() -> None:
    app = PlannerApp(start=demo("ssd-gpt-34"))
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.focus()
        before = smap.cursor_lba
        await pilot.press("k", "enter")
        assert app.goal is None and app.verdict is None and smap.cursor_lba == before
        assert "Exercise" not in app.query_one(ViewsPanel).text("facts")


@run
async def test_the_demo_picker_opens_a_demo_as_an_exercise() -> None:
    from diskplan.ui.target import ModelSource

    app = PlannerApp(ModelSource(), ("demo", "modern"))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        assert app.goal is None
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("x")  # the highlighted one (the open demo, modern) as an exercise
        for _ in range(20):
            await pilot.pause(0.05)
            if app.goal is not None:
                break
        assert app.goal is GOALS["modern"]


# --- the checker's property ---------------------------------------------------------------------------

_STRIPE = _plan("stripe").set_target(SnapTarget.NONE).plan.delete(1).plan
_ORIGINAL = 209715200


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.integers(34, 2 * 6144 + 5), size=st.integers(_ORIGINAL - 3 * _ORIGINAL // 100, _ORIGINAL))
def test_stripe_checker_accepts_exactly_grain_starts_with_the_size_kept(start: int, size: int) -> None:
    """Partition 1 recreated anywhere (snapping off): accepted exactly when its start is a multiple of 6144
    (lcm of 1 MiB and the 192 KiB stripe, in 512 B sectors) and its size within 1% of the original."""
    out = _STRIPE.propose(start, size)
    assume(out.ok)
    p = out.plan.partition(1)
    assert p is not None and (p.start, p.size) == (start, size)
    v = check(GOALS["stripe"], out.plan)
    want = start % 6144 == 0 and abs(size - _ORIGINAL) <= _ORIGINAL * TOLERANCE
    assert v.solved == want, v.lines()
    if not want:
        assert any("partition 1" in point[0] for point in v.wrong)


@run
async def test_the_palette_opens_an_exercise_and_a_plain_demo_ends_it() -> None:
    from diskplan.ui.target import ModelSource

    app = PlannerApp(ModelSource(), ("demo", "modern"))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        commands = {c.title: c.callback for c in app.get_system_commands(app.screen)}
        assert "Check the exercise" not in commands
        commands["Exercise: stripe"]()
        for _ in range(40):
            await pilot.pause(0.05)
            if app.goal is not None:
                break
        assert app.goal is GOALS["stripe"] and app.target is not None and app.target.demo == "stripe"
        assert "Check the exercise" in {c.title for c in app.get_system_commands(app.screen)}
        commands["Demo: modern"]()
        for _ in range(40):
            await pilot.pause(0.05)
            if app.target is not None and app.target.demo == "modern":
                break
        assert app.goal is None


def test_exercise_needs_a_demo(capsys) -> None:
    from diskplan.cli.main import main

    assert main(["--exercise"]) == 2
    assert "--exercise opens a demo: give --demo NAME too" in capsys.readouterr().err


# --- on the real demo images, read back through libparted --------------------------------------------


def _solved_plan(name: str, plan: Plan) -> Plan:
    """The same solutions as the Pilot tests above, as plan steps."""
    def ok(out: Outcome) -> Plan:
        assert out.ok, out.message
        return out.plan

    if name == "ssd-gpt-34":
        plan = ok(plan.delete(1))
        return ok(plan.propose(2048, plan.table.last_usable - 2048 + 1))
    if name == "dos-63":
        return ok(plan.realign(1))
    if name in ("advanced-format", "4kn"):
        return ok(plan.delete(1))
    if name == "stripe":
        return ok(ok(plan.delete(1)).propose(2048, 209715200))
    if name == "lvm-whole-disk":
        plan = ok(plan.new_label("gpt"))
        return ok(plan.propose(2048, plan.table.last_usable - 2048 + 1))
    if name == "empty":
        plan = ok(ok(plan.new_label("gpt")).propose(2048, 1 << 20))
        return ok(plan.propose(2048 + (1 << 20), plan.table.last_usable - 2048 - (1 << 20) + 1))
    return plan


def test_each_exercise_is_solved_the_same_on_its_real_image(tmp_path) -> None:
    """The goals hold on the disks the planner really opens: libparted's read of each demo image (its usable
    area, its numbering), not only on the model's planned table."""
    import os

    import pytest

    from diskplan.backend.demo_image import DemoUnavailable, build, detach_loop
    from diskplan.backend.read.reader import read

    for s in demos.SCENARIOS:
        if s.needs_loop and os.geteuid() != 0:
            continue
        try:
            image = build(s, str(tmp_path))
        except DemoUnavailable as exc:
            pytest.skip(f"cannot build here: {exc}")
        try:
            disk = s.dress(read(image.device))
        finally:
            if image.loop:
                detach_loop(image.loop)
            os.remove(image.image)
        plan = Plan.open(disk.geometry, disk.table)
        assert check(GOALS[s.name], plan).solved == (s.name in ("lvm-partition", "lvm-raid5", "modern")), s.name
        v = check(GOALS[s.name], _solved_plan(s.name, plan))
        assert v.solved, (s.name, v.lines())


def test_the_numbers_the_goals_quote_are_the_demos_own() -> None:
    """Each number a goal or a step states, worked out from the scenario it is about."""
    def text(name: str) -> str:
        g = GOALS[name]
        return " ".join((*g.task, *(st.text for st in g.steps)))

    dos = demos.find("dos-63")
    end = dos.partitions[0].end
    assert f"{dos.sectors - 1 - end:,} sectors are free after it" in text("dos-63")
    assert f"fits {2048 - 63:,} sectors further right" in text("dos-63")
    assert f"ends at {end:,} and the disk has {dos.sectors:,} sectors" in text("dos-63")
    ssd = demos.find("ssd-gpt-34").partitions[0]
    assert f"of {ssd.size:,} sectors" in text("ssd-gpt-34")
    p1, p2 = demos.find("stripe").partitions
    assert f"follows {p2.start - p1.end - 1} sectors after its end" in text("stripe")
    assert f"{p2.start:,}s = {p2.start // 6144:,} × 6144" in text("stripe") and p2.start % 6144 == 0
    modern = demos.find("modern").partitions[1]
    assert f"{modern.start:,}s = {modern.start // 2048} × 2048" in text("modern") and modern.start % 2048 == 0
    kn = demos.find("4kn").partitions[0]
    assert f"34 × 4,096 B = {kn.start * 4096:,} B" in text("4kn")
    af = demos.find("advanced-format").partitions[0]
    assert f"({af.start}s..{af.end}s)" in text("advanced-format")
    lvm = demos.find("lvm-partition")
    assert lvm.pv is not None
    extent0 = lvm.partitions[0].start * 512 + lvm.pv.pe_start
    assert f"byte {extent0:,}" in text("lvm-partition")
    assert GOALS["lvm-partition"].steps[1].lba == extent0 // 512  # the walk-through stops on that sector


@run
async def test_at_80x25_each_step_is_read_whole_at_the_top_of_the_facts() -> None:
    """The status line cuts a step at 80 columns ("... = 1,875,444,164." without the room it leaves), and a
    cursor move used to switch the panel to the explanation: each step stays in the facts, whole, first."""
    app = PlannerApp(start=demo("dos-63"), exercise=True)
    async with app.run_test(size=(80, 25)) as pilot:
        smap = await started(app, pilot)
        smap.focus()
        steps = GOALS["dos-63"].steps
        for i, step in enumerate(steps[:2]):
            await pilot.press("enter")
            await pilot.pause()
            views = app.query_one(ViewsPanel)
            assert views.current == "facts" and views.scroll_y == 0
            head = views.text("facts").split("\n")[:2]
            assert head == ["Exercise: fix this layout", f"Step {i + 1}/{len(steps)}: {step.text}"], head
        assert smap.cursor_lba == steps[1].lba
        smap.move_to(63)  # a move of one's own: the explanation again
        await pilot.pause()
        assert app.query_one(ViewsPanel).current == "explain"
