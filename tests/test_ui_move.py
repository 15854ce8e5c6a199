"""Moving partitions that hold data from the planner (issue 14): a real mouse drag of an existing partition
and a realign with A, each written through the move dialog to a real image and judged by the referees
(sfdisk --dump for the entry, a checksum or e2fsck -fn for the data); Esc stopping a move at a chunk
boundary, and the planner offering to finish it when the disk is opened again."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from textual.widgets import Input

from diskplan.backend.move.engine import MoveOutcome, execute_move
from diskplan.model.value import replace
from diskplan.ui import move_screen
from diskplan.ui.app import PlannerApp
from diskplan.ui.move_screen import Meter, MoveScreen
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.partlist import PartitionList
from diskplan.ui.sectormap import SectorMap
from helpers.images import HOST, digest, fill, sfdisk_parts, sfdisk_uuids
from helpers.pilot import cell_at, confirm, done, image_target, part, plan_of, propose, run, started, wait_for
from helpers.tools import need_tool
from helpers.tools import run as run_tool
from helpers.units import SECTOR, MiB, MiB_SECTORS

SIZE = (100, 30)
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a move checks filesystems through loop devices: needs root")
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"


@pytest.fixture(autouse=True)
def _state(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backups and move journals go to the test's own directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def gpt_image(path: pathlib.Path, start: int, sectors: int, size: int = 64 * MiB) -> pathlib.Path:
    """A sparse image with a GPT made by sfdisk holding one partition at ``start``."""
    with open(path, "wb") as f:
        f.truncate(size)
    script = f"label: gpt\nfirst-lba: 34\nstart={start}, size={sectors}, type={LINUX}\n"
    run_tool(need_tool("sfdisk"), "--quiet", "--no-reread", str(path), input=script)
    return path


@contextlib.contextmanager
def view(image: pathlib.Path, start: int, sectors: int) -> Iterator[str]:
    """A read-only loop device over the partition's bytes (what e2fsck checks)."""
    loop = run_tool("losetup", "--find", "--show", "--read-only", "--offset", str(start * SECTOR), "--sizelimit",
                    str(sectors * SECTOR), str(image)).strip()
    try:
        yield loop
    finally:
        subprocess.run(["losetup", "--detach", loop], capture_output=True)


@run
async def test_dragging_an_existing_partition_moves_its_data(tmp_path: pathlib.Path) -> None:
    image = gpt_image(tmp_path / "drag.img", 2 * MiB_SECTORS, 8 * MiB_SECTORS)
    before = fill(image, 2 * MiB_SECTORS, 8 * MiB_SECTORS, SECTOR)  # raw bytes: moved as they are
    uuid = sfdisk_uuids(image)[1]
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        assert "M" not in app.active_bindings and not app.move_journal  # no unfinished move: nothing offered
        p = part(app, 1)
        # A real drag: press inside the partition, move the mouse 20 MiB right, release.
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, p.start + 2 * MiB_SECTORS))
        await pilot.hover(SectorMap, offset=cell_at(smap, p.start + 12 * MiB_SECTORS))
        await pilot.hover(SectorMap, offset=cell_at(smap, p.start + 22 * MiB_SECTORS))
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, p.start + 22 * MiB_SECTORS))
        await pilot.pause()
        q = part(app, 1)
        assert q.size == p.size and q.start % MiB_SECTORS == 0 and q.start >= p.start + 19 * MiB_SECTORS, q
        (op,) = plan_of(app).changes()
        assert (op.kind, op.source, op.start, op.nbytes) == ("move", p.start, q.start, 8 * MiB)
        panel = app.query_one(ViewsPanel).text("changes")
        assert "move 1 with its data" in panel and "8 MiB" in panel and "estimate" in panel
        assert "plans a data move" in " ".join(str(n.message) for n in app._notifications)
        # With a table change as well, nothing is written: the table changes go first, on their own.
        app.clear_notifications()
        propose(app, 40 * MiB_SECTORS, 4 * MiB_SECTORS)
        await pilot.press("w")
        assert "write the table changes first, then move" in " ".join(str(n.message) for n in app._notifications)
        assert not isinstance(app.screen, MoveScreen)
        await pilot.press("u")
        # The drag is one step: undo takes the data move back, redo plans it again.
        moved = plan_of(app)
        await pilot.press("u")
        assert not plan_of(app).dirty and part(app, 1).start == p.start
        await pilot.press("ctrl+y")
        assert plan_of(app) is moved
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
        await wait_for(pilot, lambda: plan_of(app).base.by_number(1).start == q.start,  # type: ignore[union-attr]
                       what="the disk read again")
    # The referees: the entry moved (same PARTUUID), the bytes are at the new place.
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(image)] == [(1, q.start, 8 * MiB_SECTORS)]
    assert sfdisk_uuids(image)[1] == uuid
    assert digest(image, q.start, 8 * MiB_SECTORS, SECTOR) == before


@run
async def test_realign_with_a_key_moves_an_ext4_from_34s_to_the_grain(tmp_path: pathlib.Path) -> None:
    need_tool("mkfs.ext4")
    need_tool("e2fsck")
    sectors = 16 * MiB_SECTORS
    image = gpt_image(tmp_path / "old.img", 34, sectors)
    run_tool("mkfs.ext4", "-q", "-F", "-L", "aligned", "-E", f"offset={34 * SECTOR}", str(image), "16M")
    with view(image, 34, sectors) as loop:
        uuid = run_tool("blkid", "-s", "UUID", "-o", "value", loop).strip()
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(34 + 100)
        await pilot.press("A")
        q = part(app, 1)
        assert (q.start, q.size) == (2048, sectors)  # the nearest 1 MiB boundary with room, size unchanged
        (op,) = plan_of(app).changes()
        assert str(op).startswith(f"move 1 with its data: 34..{34 + sectors - 1} -> 2048..{2048 + sectors - 1}")
        screen = await confirm(app, pilot)
        assert f"partition 1: 34..{34 + sectors - 1} -> 2048..{2048 + sectors - 1}" in str(
            screen.query_one("#move-plan").render())  # sector-exact in the confirmation
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(image)] == [(1, 2048, sectors)]
    with view(image, 2048, sectors) as loop:
        assert subprocess.run(["e2fsck", "-fn", loop], capture_output=True).returncode == 0
        assert run_tool("blkid", "-s", "UUID", "-o", "value", loop).strip() == uuid


@run
async def test_esc_stops_a_move_and_the_planner_offers_to_finish_it(tmp_path: pathlib.Path) -> None:
    sectors = 96 * MiB_SECTORS  # 12 chunks of 8 MiB: Esc, pressed once the copy has begun, lands before the last
    image = gpt_image(tmp_path / "stop.img", 34, sectors, size=128 * MiB)
    before = fill(image, 34, sectors, SECTOR)
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(34)
        await pilot.press("A")
        def esc_once_copying(screen: MoveScreen) -> None:
            shown = screen._progress

            def progress(i: int, count: int, done: int, total: int, phase: str) -> None:
                if done and not screen.stop.is_set() and not pressed:
                    pressed.append(phase)
                    app.simulate_key("escape")  # the key itself, as a user presses it
                shown(i, count, done, total, phase)

            screen._progress = progress  # type: ignore[method-assign]

        pressed: list[str] = []
        screen = await confirm(app, pilot, esc_once_copying)
        await done(app, pilot, screen)
        assert pressed and screen.stop.is_set()
        o = screen.outcome
        assert o is not None and o.resumable and "stopped after" in o.message, o
        # Read again: the entry still points at the old place, and the planner offers M.
        await wait_for(pilot, lambda: bool(app.move_journal), what="the unfinished move offered")
        assert "M finishes the move" in " ".join(str(n.message) for n in app._notifications)
        assert sfdisk_parts(image)[0][1] == 34
    # Opened again later (another session), the disk's unfinished move is offered at once: M finishes it.
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: bool(app.move_journal), what="the unfinished move offered")
        assert "Unfinished move" in [n.title for n in app._notifications]
        assert "M" in app.active_bindings and app.active_bindings["M"].enabled  # the footer shows M
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, MoveScreen), what="the resume dialog")
        resume = app.screen
        assert isinstance(resume, MoveScreen) and resume.resuming
        await wait_for(pilot, lambda: resume.first is not None, what="the journal read")
        resume.query_one("#move-answer", Input).value = "yes"
        await pilot.press("enter")
        await done(app, pilot, resume)
        assert resume.outcome is not None and resume.outcome.verdict.value == "written", resume.outcome
        await wait_for(pilot, lambda: not app.move_journal, what="the offer withdrawn")
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(image)] == [(1, 2048, sectors)]
    assert digest(image, 2048, sectors, SECTOR) == before


@run
async def test_realigning_every_partition_moves_them_in_an_order_the_disk_allows(tmp_path: pathlib.Path) -> None:
    # Partition 1 at 34s has no room until partition 2, 100 sectors after it, has moved right: A realigns
    # both (two passes), and the write moves partition 2 first, then 1 into the space it left.
    size = 8 * MiB_SECTORS
    image = gpt_image(tmp_path / "two.img", 34, size)
    script = f"start={34 + size + 100}, size={size}, type={LINUX}\n"
    run_tool(need_tool("sfdisk"), "--quiet", "--no-reread", "--append", str(image), input=script)
    sums = {1: fill(image, 34, size, SECTOR), 2: fill(image, 34 + size + 100, size, SECTOR)}
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(40 * MiB_SECTORS)  # free space: A realigns every partition that can be
        await pilot.press("A")
        assert [(op.kind, op.number, op.start) for op in plan_of(app).changes()] == [
            ("move", 2, 18432), ("move", 1, 2048)]  # 2 first: 1 goes where 2 is now
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
        assert len(screen.finished) == 1 and "partition 2" in screen.finished[0]
    assert [(n, s) for n, s, _, _, _ in sfdisk_parts(image)] == [(1, 2048), (2, 18432)]
    assert {n: digest(image, s, size, SECTOR) for n, s in ((1, 2048), (2, 18432))} == sums


@run
async def test_a_move_the_kernel_does_not_see_stops_the_next_and_says_so(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first of two moves is written, but the kernel does not show the partition where the table has it
    (as on a block device whose partition is held open; an image has no kernel view, so the real move's outcome
    is given that answer): an error in the dialog, as `diskplan move` prints it, and the second move is not
    started (it would be checked against the kernel's old partitions)."""
    size = 8 * MiB_SECTORS
    image = gpt_image(tmp_path / "two.img", 34, size)
    script = f"start={34 + size + 100}, size={size}, type={LINUX}\n"
    run_tool(need_tool("sfdisk"), "--quiet", "--no-reread", "--append", str(image), input=script)
    said = "the kernel could not be told (partition 2 is in use, the kernel cannot remove it)"
    moves: list[int] = []

    def unseen(p: Any, *args: Any, **kwargs: Any) -> MoveOutcome:
        moves.append(p.number)
        return replace(execute_move(p, *args, **kwargs), kernel=said)

    monkeypatch.setattr(move_screen, "execute_move", unseen)
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(40 * MiB_SECTORS)
        await pilot.press("A")  # partition 2 moves first, then 1 into the room it leaves
        screen = await confirm(app, pilot)
        await wait_for(pilot, lambda: screen.outcome is not None and not screen.running, seconds=120,
                       what="the move's outcome")
        shown = "\n".join(str(w.render()) for w in screen.query("Static"))
        assert moves == [2] and not screen.finished, (moves, screen.finished)
        assert f"error: {said}" in " ".join(shown.split()), shown
        await pilot.press("enter")
    assert [(n, s) for n, s, _, _, _ in sfdisk_parts(image)] == [(1, 34), (2, 18432)]


def test_the_progress_line_says_bytes_rate_and_time_left() -> None:
    meter = Meter()
    assert meter.line(0, 8 * MiB, "copying") == "[........................] 0 B of 8 MiB, 0 B/s - copying"
    meter.began -= 2.0  # two seconds into the copy, half of it done
    line = meter.line(4 * MiB, 8 * MiB, "copying")
    assert line.startswith("[############............] 4 MiB of 8 MiB, 2 MiB/s, 2 s left - copying"), line
    phase = "rewriting the partition's table entry"  # a step, not bytes: no amounts
    assert meter.line(1, 1, phase) == f"[{'#' * 24}] - {phase}"


@run
async def test_m_on_a_partition_that_holds_data_warns_then_moves_it_with_the_keys(tmp_path: pathlib.Path) -> None:
    image = gpt_image(tmp_path / "keys.img", 34, 4 * MiB_SECTORS)
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(34)
        await pilot.press("m")
        notes = " ".join(str(n.message) for n in app._notifications)
        assert "Partition 1 holds data: moving it plans a data move (4 MiB copied" in notes
        await pilot.press("right", "right")  # snapped to the 1 MiB grain as a proposal would be: 2048, then 4096
        assert part(app, 1).start == 34 and app.session.drag.shown.partition(1).start == 4096  # type: ignore[union-attr]
        await pilot.press("enter")
        assert part(app, 1).start == 4096 and part(app, 1).size == 4 * MiB_SECTORS
        assert [(op.kind, op.source, op.start) for op in plan_of(app).changes()] == [("move", 34, 4096)]
        assert app.query_one(PartitionList).get_row_at(0)[3] == "(moves)"  # the list marks it
        # A on a proposal is refused with what re-snaps proposals; off any partition it realigns (nothing here).
        n = propose(app, 20 * MiB_SECTORS, MiB_SECTORS)
        smap.move_to(part(app, n).start)
        app.clear_notifications()
        await pilot.press("A")
        assert "a re-snaps proposals" in " ".join(str(x.message) for x in app._notifications)


@run
async def test_a_saved_plan_with_a_realign_is_applied_as_a_move(tmp_path: pathlib.Path) -> None:
    """Ctrl+S writes the move with ``keeps`` (number and PARTUUID), so ``diskplan apply`` moves the data
    instead of deleting the partition and creating an empty one."""
    need_tool("mkfs.ext4")
    sectors = 16 * MiB_SECTORS
    image = gpt_image(tmp_path / "save.img", 34, sectors)
    run_tool("mkfs.ext4", "-q", "-F", "-L", "saved", "-E", f"offset={34 * SECTOR}", str(image), "16M")
    uuid = sfdisk_uuids(image)[1]
    saved = tmp_path / "realign.json"
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(34 + 100)
        await pilot.press("A")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen.query("#path"), what="the save dialog")
        app.screen.query_one("#path", Input).value = str(saved)
        await pilot.press("enter")
        await wait_for(pilot, saved.exists, what="the plan file")
    (p,) = json.loads(saved.read_text())["partitions"]
    assert (p["start"], p["keeps"]) == (2048, {"number": 1, "guid": uuid})
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    got = subprocess.run([sys.executable, "-m", "diskplan", "apply", str(saved), str(image), "--yes"],
                         capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    assert got.returncode == 0 and "moved and verified" in got.stdout, got.stdout + got.stderr
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(image)] == [(1, 2048, sectors)]
    assert sfdisk_uuids(image)[1] == uuid
    with view(image, 2048, sectors) as loop:
        assert subprocess.run(["e2fsck", "-fn", loop], capture_output=True).returncode == 0


@run
async def test_two_partitions_that_need_each_others_place_are_refused_before_anything_is_written(
        tmp_path: pathlib.Path) -> None:
    """Partitions 1 and 2 swap places and 3 moves left: 3 could go first, then neither 1 nor 2 can. The
    change list and w say so with data_steps' reason; the move dialog never opens, so 3 is not moved either.
    (The planner's own moves never jump over a neighbour; the swapped plan is put in as one step.)"""
    from diskplan.model.plan.plan import Outcome

    size = 4 * MiB_SECTORS
    image = gpt_image(tmp_path / "swap.img", 2 * MiB_SECTORS, size)
    script = "".join(f"start={s}, size={size}, type={LINUX}\n" for s in (6 * MiB_SECTORS, 40 * MiB_SECTORS))
    run_tool(need_tool("sfdisk"), "--quiet", "--no-reread", "--append", str(image), input=script)
    before = sfdisk_parts(image)
    sums = {n: fill(image, s, size, SECTOR) for n, s in ((1, 2 * MiB_SECTORS), (2, 6 * MiB_SECTORS),
                                                         (3, 40 * MiB_SECTORS))}
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        plan = plan_of(app)
        to = {1: 6 * MiB_SECTORS, 2: 2 * MiB_SECTORS, 3: 30 * MiB_SECTORS}
        moved = sorted((replace(p, start=to[p.number], end=to[p.number] + p.size - 1,
                                extra=(("moved_from", str(p.start)),)) for p in plan.table.partitions),
                       key=lambda p: p.start)
        swapped = plan._rebuilt(replace(plan.wanted, partitions=tuple(moved)))
        assert app._step(Outcome(plan, swapped, True, "swapped"))
        reason = "no order moves partitions 1, 2 one at a time: partition 2 needs 4096..12287, where partition 1 is"
        assert any(reason in why for why in plan_of(app).problems()), plan_of(app).problems()
        panel = " ".join(app.query_one(ViewsPanel).text("changes").split())
        assert f"cannot be written: {reason}" in panel, panel
        app.clear_notifications()
        await pilot.press("w")
        await pilot.pause()
        assert not isinstance(app.screen, MoveScreen)
        said = [(str(n.title), str(n.message)) for n in app._notifications]
        assert any(title == "Cannot write" and reason in message for title, message in said), said
    assert sfdisk_parts(image) == before
    assert {n: digest(image, s, size, SECTOR) for n, s in ((1, 2 * MiB_SECTORS), (2, 6 * MiB_SECTORS),
                                                           (3, 40 * MiB_SECTORS))} == sums


@run
async def test_the_served_planner_offers_m_and_no_command_for_an_unfinished_move(tmp_path: pathlib.Path) -> None:
    """A browser (diskplan serve) cannot run `diskplan resume`: its planner says M, the terminal's both."""
    sectors = 16 * MiB_SECTORS
    image = gpt_image(tmp_path / "cut.img", 34, sectors)
    fill(image, 34, sectors, SECTOR)
    killed = subprocess.run([sys.executable, "-m", "diskplan", "move", str(image), "-N", "1", "--to", "2048",
                             "--yes"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                            env={**os.environ, "DISKPLAN_MOVE_KILL": "synced:1"})
    assert killed.returncode < 0, killed.stderr  # killed part-way: its journal is unfinished
    for served in (False, True):
        app = PlannerApp(start=image_target(image), host=HOST, served=served)
        async with app.run_test(size=SIZE) as pilot:
            def offered(planner: PlannerApp = app) -> bool:
                return bool(planner.move_journal)

            await wait_for(pilot, offered, what="the unfinished move offered")
            said = " ".join(str(n.message) for n in app._notifications)
            assert "M finishes the move" in said
            assert ("diskplan resume" in said) != served, said
