"""The GPT repair offered in the planner: a damaged backup header is shown, R plans the repair as the one
pending change, the commit screen lists it, "yes" writes it, and the disk read again is whole. Real images
made by sgdisk; the referees are `sgdisk -v` and `gdisk -l` (through helpers.images.sgdisk_clean)."""

from __future__ import annotations

import asyncio
import os

from diskplan.backend.write.steps import Verdict
from diskplan.model.plan.plan import REPAIR_PENDING
from diskplan.ui.app import PlannerApp
from diskplan.ui.commit_screen import CommitScreen
from helpers.images import damaged_gpt, sgdisk_clean
from helpers.pilot import image_target, text_of, wait_for
from helpers.tools import need_tool, run
from helpers.units import MiB


def test_the_planner_offers_plans_and_writes_the_gpt_repair(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    img = damaged_gpt(tmp_path)

    async def go() -> None:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(110, 34)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            await pilot.pause()
            s = app.session
            assert s is not None and s.plan.offer is not None and not s.plan.repairing
            said = [n.message for n in app._notifications]
            assert any("R plans the repair" in m and s.plan.offer.summary in m for m in said), said
            assert app.check_action("repair", ()) is True  # in the footer while offered
            app.clear_notifications()

            await pilot.press("R")
            await pilot.pause()
            plan = s.plan
            assert plan.repairing and {c.kind for c in plan.changes()} == {"repair"}
            assert plan.blocked() == REPAIR_PENDING
            assert not app.check_action("repair", ())  # planned: no longer offered
            # Other edits are refused with the reason while the repair is pending.
            app.sector_map.move_to(4096)
            await pilot.press("x")
            await pilot.pause()
            assert s.plan is plan
            assert any(REPAIR_PENDING in n.message for n in app._notifications)
            # Undo takes it back (and the offer returns); R plans it again.
            await pilot.press("u")
            await pilot.pause()
            assert not s.plan.repairing and app.check_action("repair", ()) is True
            await pilot.press("R")
            await pilot.pause()
            assert s.plan.repairing

            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            p = screen.proposal
            assert p is not None and not p.refusals, p.refusals
            assert [op.kind for op in p.operations if op.kind == "repair"], p.operations
            text = text_of(screen)
            assert "repair" in text and "Type yes to repair the table" in text
            await pilot.press(*"yes", "enter")
            await wait_for(pilot, lambda: screen.outcome is not None)
            assert screen.outcome is not None and screen.outcome.verdict is Verdict.WRITTEN, screen.outcome
            await pilot.press("enter")  # back: the disk is read again
            await wait_for(pilot, lambda: app.session is not s)
            await pilot.pause()
            fresh = app.session
            assert fresh is not None and fresh.plan.offer is None and not fresh.plan.dirty
            assert fresh.plan.blocked() == "" and not app.check_action("repair", ())
            assert len(fresh.plan.table.partitions) == 2
            # The table is writable in the planner: a new partition is proposed in the free space.
            app.sector_map.move_to(20 * MiB // 512)
            await pilot.press("n")
            await pilot.press("ctrl+a", "ctrl+k", *"4MiB", "enter")
            await pilot.pause()
            assert len(fresh.plan.changes()) == 1 and fresh.plan.changes()[0].kind == "create"

    asyncio.run(go())
    assert sgdisk_clean(img)


def test_the_planner_moves_a_grown_disks_backup_gpt_and_the_new_space_can_be_planned(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    img = tmp_path / "grown.img"
    with open(img, "wb") as f:
        f.truncate(32 * MiB)
    run(need_tool("sgdisk"), "-n1:0:+8M", "-n2:0:0", str(img))  # the old disk is full
    os.truncate(img, 48 * MiB)

    async def go() -> None:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(110, 34)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            await pilot.pause()
            s = app.session
            assert s is not None and s.plan.offer is not None and s.plan.offer.moved_from == 32 * MiB // 512 - 1
            assert s.plan.table.last_usable == 32 * MiB // 512 - 34
            await pilot.press("R", "w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            await pilot.press(*"yes", "enter")
            await wait_for(pilot, lambda: screen.outcome is not None)
            assert screen.outcome is not None and screen.outcome.verdict is Verdict.WRITTEN, screen.outcome
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.session is not s)
            await pilot.pause()
            fresh = app.session
            assert fresh is not None and fresh.plan.offer is None
            assert fresh.plan.table.last_usable == 48 * MiB // 512 - 34
            app.sector_map.move_to(40 * MiB // 512)  # in the space the disk grew by
            await pilot.press("n")
            await pilot.press("ctrl+a", "ctrl+k", *"4MiB", "enter")
            await pilot.pause()
            assert [c.kind for c in fresh.plan.changes()] == ["create"]

    asyncio.run(go())
    assert sgdisk_clean(img)
