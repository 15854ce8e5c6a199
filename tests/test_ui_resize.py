"""Resizing partitions that hold data from the planner (issue 14): a real mouse drag of an ext4 partition's end
edge (stopped at the smallest size resize2fs reports before it goes below), the keys growing one and
moving its start edge (a shrink, then a move), a refused XFS shrink and a partition with nothing blkid knows,
and a realign that has no room to move whole (its filesystem shrinks first). Each write goes through the move
dialog to a real image and is judged by the referees: sfdisk --dump for the entries, e2fsck -fn for the
filesystem, every file's SHA-256 read back through a mount."""

from __future__ import annotations

import os
import pathlib
import random
import re
import subprocess

import pytest

from diskplan.ui.app import PlannerApp
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.sectormap import SectorMap
from helpers.images import HOST, sfdisk_parts
from helpers.movedisk import View, file_sums, fill
from helpers.pilot import (
    cell_at,
    confirm,
    done,
    image_target,
    part,
    plan_of,
    run,
    started,
    status_text,
    wait_for,
)
from helpers.tools import need_tool
from helpers.tools import run as run_tool
from helpers.units import SECTOR, MiB, MiB_SECTORS

SIZE = (100, 30)
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a resize measures and checks filesystems through loop "
                                "devices: needs root")
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"


@pytest.fixture(autouse=True)
def _state(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backups and move journals go to the test's own directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def image(path: pathlib.Path, parts: list[tuple[int, int]], size: int = 64 * MiB) -> pathlib.Path:
    """A sparse image with a GPT made by sfdisk holding partitions (start, sectors)."""
    with open(path, "wb") as f:
        f.truncate(size)
    script = "label: gpt\nfirst-lba: 34\n" + "".join(f"start={s}, size={n}, type={LINUX}\n" for s, n in parts)
    run_tool(need_tool("sfdisk"), "--quiet", "--no-reread", str(path), input=script)
    return path


def ext4(path: pathlib.Path, start: int, sectors: int, tmp: pathlib.Path) -> dict[str, str]:
    """An ext4 in the partition holding four files (3 MiB in all); their SHA-256."""
    need_tool("mkfs.ext4")
    with View(str(path), start, sectors, read_only=False) as loop:
        run_tool("mkfs.ext4", "-q", "-L", "resized", loop)
        where = tmp / "mnt"
        where.mkdir(exist_ok=True)
        run_tool("mount", loop, str(where))
        try:
            return fill(str(where), random.Random(7))
        finally:
            run_tool("umount", str(where))


def assert_intact(path: pathlib.Path, start: int, sectors: int, sums: dict[str, str]) -> None:
    with View(str(path), start, sectors) as loop:
        check = subprocess.run(["e2fsck", "-fn", loop], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "LABEL=resized" in run_tool("blkid", "-p", "-o", "export", loop)
        assert file_sums(loop, "ext4", list(sums)) == sums
        blocks = run_tool("dumpe2fs", "-h", loop)
    count = int(re.search(r"Block count:\s+(\d+)", blocks).group(1))  # type: ignore[union-attr]
    size = int(re.search(r"Block size:\s+(\d+)", blocks).group(1))  # type: ignore[union-attr]
    assert sectors * SECTOR - size < count * size <= sectors * SECTOR  # the filesystem fills its partition


def measured(app: PlannerApp, number: int = 1) -> bool:
    return app.session is not None and number in app.session.limits


@run
async def test_dragging_the_end_edge_shrinks_an_ext4_but_not_below_its_minimum(tmp_path: pathlib.Path) -> None:
    start, sectors = 2048, 40 * MiB_SECTORS
    path = image(tmp_path / "drag.img", [(start, sectors)])
    sums = ext4(path, start, sectors, tmp_path)
    uuid_before = sfdisk_parts(path)[0]
    app = PlannerApp(start=image_target(path), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        p = part(app, 1)
        # Press on the cell holding the last sector: the end edge, not the whole partition.
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, p.end))
        assert app.session is not None and app.session.drag is not None
        assert app.session.drag.kind.value == "end" and app.session.drag.data
        await wait_for(pilot, lambda: measured(app), what="the filesystem measured")
        limits = app.session.limits[1]
        assert limits.fs == "ext4" and limits.shrink and limits.minimum is not None
        assert 3 * MiB < limits.minimum < 20 * MiB, limits
        floor = -(-limits.minimum // SECTOR)
        # Before anything goes below it, the status line says how far a shrink can go.
        assert "ext4: shrinks to" in status_text(app) and "at least (resize2fs)" in status_text(app)
        # Dragged almost to the start: stopped at the minimum (rounded up to the grain), and said so.
        await pilot.hover(SectorMap, offset=cell_at(smap, start + 20 * MiB_SECTORS))
        await pilot.hover(SectorMap, offset=cell_at(smap, start + 1))
        shown = app.session.drag.shown.partition(1)
        assert shown is not None and floor <= shown.size < floor + MiB_SECTORS and (shown.end + 1) % MiB_SECTORS == 0
        assert "stopped at its ext4 minimum (" in status_text(app) and "from resize2fs)" in status_text(app)
        # Then to 20 MiB, and released.
        await pilot.hover(SectorMap, offset=cell_at(smap, start + 20 * MiB_SECTORS - 1))
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, start + 20 * MiB_SECTORS - 1))
        await pilot.pause()
        q = part(app, 1)
        assert q.start == start and q.size == 20 * MiB_SECTORS, q
        (op,) = plan_of(app).changes()
        assert (op.kind, op.source, op.source_size, op.start, op.end) == ("resize", start, sectors, start,
                                                                           start + 20 * MiB_SECTORS - 1)
        panel = app.query_one(ViewsPanel).text("changes")
        assert f"shrink 1 with its data: {start}..{start + sectors - 1} -> {start}..{q.end}" in panel
        assert "resize2fs resizes the ext4 filesystem first, then the table entry is rewritten" in panel
        assert "resized by the filesystem's own tool (not journalled" in panel
        screen = await confirm(app, pilot)
        text = str(screen.query_one("#move-plan").render())
        assert f"partition 1: {start}..{start + sectors - 1} -> {start}..{q.end} (shrink {sectors} -> " \
               f"{20 * MiB_SECTORS} sectors" in text  # sector-exact in the confirmation
        assert "can shrink to" in text
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
        assert "shrunk" in screen.outcome.message
    (n, s, size, _, _), = sfdisk_parts(path)
    assert (n, s, size) == (1, start, 20 * MiB_SECTORS)
    assert sfdisk_parts(path)[0][3] == uuid_before[3]
    assert_intact(path, start, 20 * MiB_SECTORS, sums)


@run
async def test_keys_grow_an_ext4_then_its_start_edge_shrinks_and_moves_it(tmp_path: pathlib.Path) -> None:
    start, sectors = 2048, 16 * MiB_SECTORS
    path = image(tmp_path / "keys.img", [(start, sectors)])
    sums = ext4(path, start, sectors, tmp_path)
    app = PlannerApp(start=image_target(path), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(start + 100)
        await pilot.press("r")
        assert "resizing it plans a resize of its filesystem" in " ".join(str(n.message) for n in app._notifications)
        await wait_for(pilot, lambda: measured(app), what="the filesystem measured")
        await pilot.press("right", "right", "right", "enter")  # the end edge: 3 grains of 1 MiB further
        q = part(app, 1)
        assert (q.start, q.size) == (start, sectors + 3 * MiB_SECTORS)
        (op,) = plan_of(app).changes()
        assert [(s.kind, s.to, s.new_length) for s in op.steps()] == [("grow", start, sectors + 3 * MiB_SECTORS)]
        assert "the table entry is rewritten first, then resize2fs resizes the ext4 filesystem" in str(op)
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
        await wait_for(pilot, lambda: plan_of(app).base.by_number(1).size == q.size,  # type: ignore[union-attr]
                       what="the disk read again")
        grown = q.size
        assert_intact(path, start, grown, sums)
        # The start edge (space switches edges): 2 MiB to the right is a shrink, then a move of what is left.
        smap.move_to(start + 100)
        await pilot.press("r")
        await wait_for(pilot, lambda: measured(app), what="the filesystem measured again")
        await pilot.press("space", "right", "right", "enter")
        q = part(app, 1)
        assert (q.start, q.end) == (start + 2 * MiB_SECTORS, start + grown - 1)
        (op,) = plan_of(app).changes()
        assert [(s.kind, s.to, s.new_length) for s in op.steps()] == [
            ("shrink", start, grown - 2 * MiB_SECTORS), ("move", q.start, grown - 2 * MiB_SECTORS)]
        assert app.query_one("#partitions").get_row_at(0)[3] == "(shrinks)"  # type: ignore[attr-defined]
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
        assert len(screen.finished) == 1 and "shrunk" in screen.finished[0]
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(path)] == [(1, q.start, q.size)]
    assert_intact(path, q.start, q.size, sums)


@run
async def test_an_xfs_shrink_and_an_unknown_content_are_refused_with_the_reason(tmp_path: pathlib.Path) -> None:
    need_tool("mkfs.xfs")
    xfs, raw = (2048, 310 * MiB_SECTORS), (320 * MiB_SECTORS, 8 * MiB_SECTORS)
    path = image(tmp_path / "xfs.img", [xfs, raw], size=340 * MiB)
    with View(str(path), *xfs, read_only=False) as loop:
        run_tool("mkfs.xfs", "-q", "-f", loop)
    app = PlannerApp(start=image_target(path), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(xfs[0] + 100)
        await pilot.press("r")
        await wait_for(pilot, lambda: measured(app), what="the filesystem measured")
        assert "xfs: grows only (an XFS filesystem cannot shrink" in status_text(app)
        app.clear_notifications()
        await pilot.press("left")
        said = " ".join(str(n.message) for n in app._notifications)
        assert "partition 1 cannot be shrunk: an XFS filesystem cannot shrink: it can only grow" in said
        assert app.session is not None and app.session.drag is not None
        assert app.session.drag.shown.partition(1).size == xfs[1]  # type: ignore[union-attr]
        await pilot.press("right", "enter")  # growing is what XFS does
        (op,) = plan_of(app).changes()
        assert op.kind == "resize" and "xfs_growfs resizes the xfs filesystem" in str(op)
        await pilot.press("u")
        # Nothing blkid knows: refused outright, the drag ends.
        smap.move_to(raw[0] + 100)
        app.clear_notifications()
        await pilot.press("r")
        await wait_for(pilot, lambda: measured(app, 2), what="the second partition measured")
        await pilot.pause()
        said = " ".join(str(n.message) for n in app._notifications)
        assert "partition 2 cannot be resized: it holds no filesystem blkid knows" in said
        assert "Enter plans it" not in said  # no "resizing it plans..." beside the refusal
        assert app.session.drag is None and not plan_of(app).dirty


@run
async def test_realign_without_room_shrinks_the_filesystem_first(tmp_path: pathlib.Path) -> None:
    # Partition 1 at 34s runs up to partition 2 at 16 MiB: no grain boundary leaves room for it whole, so A
    # shrinks its ext4 by the 2014 sectors before 2048s, then moves it there.
    first, second = (34, 16 * MiB_SECTORS - 34), (16 * MiB_SECTORS, 8 * MiB_SECTORS)
    path = image(tmp_path / "tight.img", [first, second])
    sums = ext4(path, *first, tmp_path)
    app = PlannerApp(start=image_target(path), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        smap.move_to(first[0] + 100)
        await pilot.press("A")
        await wait_for(pilot, lambda: plan_of(app).dirty, what="the realign planned")
        q = part(app, 1)
        assert (q.start, q.end) == (2048, second[0] - 1)
        (op,) = plan_of(app).changes()
        assert [(s.kind, s.to, s.new_length) for s in op.steps()] == [("shrink", 34, q.size), ("move", 2048, q.size)]
        planned = plan_of(app)
        # Fix my layout (A off any partition) does the same for every flagged partition.
        await pilot.press("u")
        assert not plan_of(app).dirty
        smap.move_to(40 * MiB_SECTORS)
        await pilot.press("A")
        await wait_for(pilot, lambda: plan_of(app).dirty, what="the layout fixed")
        assert plan_of(app) == planned and "realigned partition 1" in status_text(app)
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(path)] == [(1, 2048, q.size), (2, *second)]
    assert_intact(path, 2048, q.size, sums)


@run
async def test_dragging_the_start_edge_left_moves_then_grows_an_ext4(tmp_path: pathlib.Path) -> None:
    start, sectors = 8 * MiB_SECTORS, 16 * MiB_SECTORS
    path = image(tmp_path / "left.img", [(start, sectors)])
    sums = ext4(path, start, sectors, tmp_path)
    app = PlannerApp(start=image_target(path), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        await pilot.mouse_down(SectorMap, offset=cell_at(smap, start))
        assert app.session is not None and app.session.drag is not None and app.session.drag.kind.value == "start"
        await wait_for(pilot, lambda: measured(app), what="the filesystem measured")
        await pilot.hover(SectorMap, offset=cell_at(smap, 6 * MiB_SECTORS))
        await pilot.hover(SectorMap, offset=cell_at(smap, 4 * MiB_SECTORS))
        await pilot.mouse_up(SectorMap, offset=cell_at(smap, 4 * MiB_SECTORS))
        await pilot.pause()
        q = part(app, 1)
        assert (q.start, q.end) == (4 * MiB_SECTORS, start + sectors - 1), q
        (op,) = plan_of(app).changes()
        assert [(s.kind, s.to, s.new_length) for s in op.steps()] == [("move", q.start, sectors),
                                                                   ("grow", q.start, q.size)]
        assert "A resize is planned" in [n.title for n in app._notifications]
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
        assert len(screen.finished) == 1 and "moved and verified" in screen.finished[0]
        assert "grown" in screen.outcome.message
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(path)] == [(1, q.start, q.size)]
    assert_intact(path, q.start, q.size, sums)


@run
async def test_two_shrinks_and_moves_are_written_in_the_order_apply_uses(tmp_path: pathlib.Path) -> None:
    # Both start edges 2 MiB right (keys): every shrink first, then the moves (right: the last one first), as
    # model.plan.move.data_steps orders them for `diskplan apply`, not one partition after the other.
    sectors = 16 * MiB_SECTORS
    starts = (2048, 2048 + sectors + MiB_SECTORS)
    path = image(tmp_path / "two.img", [(s, sectors) for s in starts])
    sums = {n: ext4(path, s, sectors, tmp_path) for n, s in enumerate(starts, 1)}
    app = PlannerApp(start=image_target(path), host=HOST)
    async with app.run_test(size=SIZE) as pilot:
        smap = await started(app, pilot)
        for n, s in enumerate(starts, 1):
            smap.move_to(s + 100)
            await pilot.press("r")
            await wait_for(pilot, lambda n=n: measured(app, n), what=f"partition {n} measured")  # type: ignore[misc]
            await pilot.press("space", "right", "right", "enter")
            assert (part(app, n).start, part(app, n).end) == (s + 2 * MiB_SECTORS, s + sectors - 1)
        steps = plan_of(app).writes().steps
        assert [(st.kind, st.number) for st in steps] == [("shrink", 1), ("shrink", 2), ("move", 2), ("move", 1)]
        screen = await confirm(app, pilot)
        assert screen.steps == steps
        text = " ".join(str(screen.query_one("#move-plan").render()).split())
        assert "written in this order, as `diskplan apply` writes it: shrink 1, shrink 2, move 2, move 1" in text
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
        assert len(screen.finished) == 3 and "shrunk" in screen.finished[1] and "moved" in screen.outcome.message
    size = sectors - 2 * MiB_SECTORS
    assert [(n, s, k) for n, s, k, _, _ in sfdisk_parts(path)] == [(n, s + 2 * MiB_SECTORS, size)
                                                                    for n, s in enumerate(starts, 1)]
    for n, s in enumerate(starts, 1):
        assert_intact(path, s + 2 * MiB_SECTORS, size, sums[n])
