"""Issue 12 items 9 and 10: the snapping target is a planning choice (findings judge the device), a move
never changes a partition's size, and fix my layout says what it did and what it did not."""

from __future__ import annotations

import asyncio

from diskplan.model.findings.placement import analyze
from diskplan.model.geometry import Geometry
from diskplan.model.grain import SnapTarget, optimal_grain
from diskplan.model.plan.plan import Plan
from diskplan.model.table import new_table
from diskplan.ui.app import PlannerApp
from diskplan.ui.dialogs import SnapScreen
from helpers.pilot import demo, plan_of, started
from helpers.units import MiB_SECTORS

GEOM = Geometry(2 * 1024**3 // 512, 512, 4096)


def plan_with(*spans: tuple[int, int], target: SnapTarget = SnapTarget.OPTIMAL) -> Plan:
    plan = Plan.open(GEOM, new_table("gpt", GEOM), target)
    for start, size in spans:
        out = plan.propose(start, size)
        assert out.ok, out.message
        plan = out.plan
    return plan


def test_a_custom_target_changes_the_snapping_not_the_device() -> None:
    plan = plan_with((MiB_SECTORS, 1026 * MiB_SECTORS))
    custom = plan.set_target(SnapTarget.CUSTOM, (100 * 1024,))
    assert custom.ok, custom.message
    after = custom.plan
    assert after.grain.sectors == 200 and after.target is SnapTarget.CUSTOM  # lcm(100 KiB, 4 KiB) = 100 KiB
    assert after.geometry == plan.geometry  # the device is what it was: findings judge the same grain
    assert optimal_grain(after.geometry).sectors == MiB_SECTORS
    assert analyze(after.geometry, after.table, optimal_grain(after.geometry)) == []
    back = after.set_target(SnapTarget.OPTIMAL).plan
    assert back.grain.sectors == MiB_SECTORS  # a custom grain does not stay in the optimal one


def test_a_keyboard_move_never_changes_the_size() -> None:
    plan = plan_with((MiB_SECTORS, 2_101_248))  # 1026 MiB, made under optimal snapping
    custom = plan.set_target(SnapTarget.CUSTOM, (100 * 1024,)).plan
    for steps in (1, -1, 10):
        moved = custom.move(1, steps)
        assert moved.ok, moved.message
        p = moved.plan.partition(1)
        assert p is not None and p.size == 2_101_248, moved.message
        assert p.start % 200 == 0
        assert moved.snap is not None and "size kept" in moved.snap.describe()
    dragged = custom.move_to(1, 777_777)
    assert dragged.plan.partition(1).size == 2_101_248  # type: ignore[union-attr]


def test_fix_my_layout_with_snapping_off_says_what_it_did_not_do() -> None:
    plan = plan_with((MiB_SECTORS + 7, 5000), target=SnapTarget.NONE)
    out = plan.fix_layout()
    assert out.ok and out.plan is plan
    assert out.message.startswith("snapping is off: no partition was re-snapped")
    assert "not on the device's 1 MiB grain (what the findings judge): partition 1" in out.message
    custom = plan.set_target(SnapTarget.CUSTOM, (100 * 1024,), fix=True)
    assert custom.ok and "re-snapped partition 1 to the custom grain (200s = 100 KiB)" in custom.message
    assert "not on the device's 1 MiB grain" in custom.message
    optimal = plan.set_target(SnapTarget.OPTIMAL, fix=True)
    assert optimal.ok and "not on the device's" not in optimal.message


def test_the_title_shows_both_grains_and_the_findings_stay() -> None:
    async def go() -> None:
        app = PlannerApp(start=demo("modern"))
        async with app.run_test(size=(120, 30)) as pilot:
            await started(app, pilot)
            assert app.session is not None
            before = app.session.findings(plan_of(app))
            await pilot.press("s")
            assert isinstance(app.screen, SnapScreen)
            await pilot.press("home", "down", "down", "enter", *"100KiB", "enter")
            await pilot.pause()
            plan = plan_of(app)
            assert plan.target is SnapTarget.CUSTOM and plan.grain.sectors == 200
            assert app.session.findings(plan) == before  # the same findings: the device did not change
            title = str(app.query_one("#titlebar").render())
            assert "snap custom 100 KiB · findings 1 MiB" in title, title

    asyncio.run(go())


def test_go_to_a_decimal_size_lands_on_the_nearest_sector_and_says_so() -> None:
    from diskplan.ui.screens import GotoScreen

    async def go() -> None:
        app = PlannerApp(start=demo("advanced-format"))
        async with app.run_test(size=(120, 30)) as pilot:
            smap = await started(app, pilot)
            await pilot.press("g")
            assert isinstance(app.screen, GotoScreen)
            await pilot.press(*"17.4kB", "enter")
            await pilot.pause()
            assert smap.cursor_lba == 34  # 34 × 512 B = 17,408 B is what "17.4 kB" shows
            said = " | ".join(str(n.message) for n in app._notifications)
            assert "rounded to the nearest sector from 33.98" in said, said
            await pilot.press("g", *"100M", "enter")
            await pilot.pause()
            assert isinstance(app.screen, GotoScreen)  # refused, as the partition dialog refuses it
            assert "ambiguous" in str(app.screen.query_one("#goto-error").render())

    asyncio.run(go())
