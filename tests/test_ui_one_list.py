"""Issue 12 item 2: the user confirms exactly what they reviewed. The Changes panel, the write dialog and
the commit work from one list of operations, built once by the model (blivet's ActionList)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable

from diskplan.backend.read.reader import read
from diskplan.backend.write import commit
from diskplan.backend.write import steps as write
from diskplan.model.plan.plan import Plan
from diskplan.ui.app import PlannerApp
from diskplan.ui.commit_screen import CommitScreen
from diskplan.ui.panels import ViewsPanel
from helpers.pilot import image_target, text_of, wait_for
from helpers.tools import need_tool, run

LOGICALS = ("label: dos\nstart=2048,size=100000,type=5\nstart=4096,size=8192,type=83\n"
            "start=14336,size=8192,type=83\nstart=24576,size=8192,type=83\n")
HOST = write.Host(users=lambda path: [])


def logicals_image(sparse_image: Callable[..., pathlib.Path]) -> pathlib.Path:
    need_tool("sfdisk")
    img = sparse_image(64 << 20)
    run("sfdisk", "-q", str(img), input=LOGICALS)
    return img


def test_the_commit_executes_the_list_the_plan_shows(sparse_image: Callable[..., pathlib.Path],
                                                     tmp_path: pathlib.Path) -> None:
    img = logicals_image(sparse_image)
    disk = read(str(img))
    plan = Plan.open(disk.geometry, disk.table).delete(5).plan
    assert [(q.number, q.start) for q in plan.live if q.number >= 5] == [(5, 14336), (6, 24576)]  # as libparted
    p = commit.prepare(str(img), plan.writes(), HOST)
    assert all(a is b for a, b in zip(p.operations, plan.operations(), strict=True))  # the same objects
    assert [str(op) for op in plan.changes()] == [
        "delete 5 (4096..12287): logical",
        "keep 5 at 14336..22527 (untouched): was number 6",
        "keep 6 at 24576..32767 (untouched): was number 7",
    ]
    assert plan.problems() == () and p.refusals == ()  # one validator: the planner and the commit agree
    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert o.verdict is write.Verdict.WRITTEN, o.details
    dump = run("sfdisk", "--dump", str(img))
    assert "img5 : start=       14336, size=        8192" in dump and "img6 : start=       24576" in dump
    assert "img7" not in dump and "start=        4096" not in dump


def test_a_disk_changed_since_the_review_is_refused(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = logicals_image(sparse_image)
    disk = read(str(img))
    reviewed = Plan.open(disk.geometry, disk.table).delete(1).plan.writes()
    run("sfdisk", "-q", "--delete", str(img), "7")
    p = commit.prepare(str(img), reviewed, HOST)
    assert any("no longer holds the table the plan was made on" in r for r in p.refusals), p.refusals


def test_the_panel_and_the_confirmation_list_the_same_operations(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = logicals_image(sparse_image)

    async def go() -> None:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            app.sector_map.move_to(4096 + 100)  # inside logical partition 5
            await pilot.press("x")
            await pilot.pause()
            plan = app.session.plan  # type: ignore[union-attr]
            assert plan.deleted(5) is not None
            panel = app.query_one(ViewsPanel).text("changes")
            shown = [str(op) for op in plan.changes()]
            assert f"{len(shown)} pending changes" in panel and len(shown) == 3
            assert all(line in panel for line in shown)
            assert f"Changes (c): {len(shown)}" in str(app.query_one(ViewsPanel).border_title)
            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            proposal = screen.proposal
            assert proposal is not None
            listed = [str(op) for op in proposal.operations if op.pending]
            assert listed == shown
            text = text_of(screen)
            assert all(line in text for line in shown)

    asyncio.run(go())


def test_a_deleted_logical_partition_kept_after_all_takes_its_number_back(
        sparse_image: Callable[..., pathlib.Path]) -> None:
    img = logicals_image(sparse_image)
    disk = read(str(img))
    start = Plan.open(disk.geometry, disk.table)
    gone = start.delete(6)
    assert gone.ok and "are now 6" in gone.message
    assert [(q.number, q.start) for q in gone.plan.live if q.number >= 5] == [(5, 4096), (6, 24576)]
    back = gone.plan.undelete(6)
    assert back.ok and back.plan == start and not back.plan.dirty
