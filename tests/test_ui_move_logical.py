"""The planner moves msdos logical partitions with their data (issue 14): on a DOS-era image (extended at 63,
partition 5 at 126 behind its EBR at 63, partition 6 at 39063 behind its EBR at 39000, ext4 in both), a drag
of 5 stops before 6's EBR and a drag past it is refused with `diskplan move`'s reason; A realigns 5, written
through the move dialog; sfdisk reads the chain back with every number, e2fsck finds both clean and every
file keeps its SHA-256."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from diskplan.ui.app import PlannerApp
from diskplan.ui.sectormap import SectorMap
from helpers.images import HOST, sfdisk_parts
from helpers.logicals import EXT, LAYOUT, SIZE, write_chain
from helpers.movedisk import CHECK, View, file_sums, populate
from helpers.pilot import cell_at, confirm, done, image_target, part, plan_of, run, started
from helpers.tools import need_tool
from helpers.tools import run as run_tool
from helpers.units import MiB, MiB_SECTORS

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="ext4 is made and checked through loop devices: needs root")
REASON = "would overwrite the EBR of partition 6 at LBA 39000"


@pytest.fixture(autouse=True)
def _state(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def dos_image(tmp: pathlib.Path) -> tuple[pathlib.Path, dict[int, dict[str, str]]]:
    """The image and each logical partition's files (name: SHA-256); no loop device is left attached."""
    need_tool("mkfs.ext4")
    img = tmp / "dos.img"
    with open(img, "wb") as f:
        f.truncate(96 * MiB)
    write_chain(img, EXT, [(ebr, start, SIZE) for ebr, start in LAYOUT.values()])
    sums = {}
    for n, (_, start) in LAYOUT.items():
        with View(str(img), start, SIZE, read_only=False) as v:
            run_tool("mkfs.ext4", "-q", "-L", f"part{n}", v)
            sums[n] = populate(v, "ext4", tmp, seed=n)
    return img, sums


async def drag(pilot, smap: SectorMap, frm: int, to: int) -> None:
    await pilot.mouse_down(SectorMap, offset=cell_at(smap, frm))
    await pilot.hover(SectorMap, offset=cell_at(smap, (frm + to) // 2))
    await pilot.mouse_up(SectorMap, offset=cell_at(smap, to))
    await pilot.pause()


@run
async def test_a_realigns_a_logical_partition_and_a_drag_over_the_next_ebr_is_refused(tmp_path: pathlib.Path) -> None:
    need_tool("e2fsck")
    image, sums = dos_image(tmp_path)
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=(100, 30)) as pilot:
        smap = await started(app, pilot)
        assert plan_of(app).base.ebrs == (63, 39_000)  # the raw chain, not libparted's guess (32130 for 6)
        # A drag 20 MiB right stops at the last boundary before partition 6's EBR, saying why.
        await drag(pilot, smap, 10_000, 10_000 + 20 * MiB_SECTORS)
        assert (part(app, 5).start, part(app, 5).size) == (8192, SIZE)
        assert REASON in app._said, app._said
        # Dragged again, it cannot go further: refused with `diskplan move`'s reason, nothing changes.
        moved = plan_of(app)
        await drag(pilot, smap, 8192 + 10_000, 8192 + 10_000 + 20 * MiB_SECTORS)
        assert plan_of(app) is moved and part(app, 5).start == 8192
        said = " ".join(str(n.message) for n in app._notifications)
        assert "partition 5 cannot be moved further" in said and REASON in said, said
        await pilot.press("u")
        assert not plan_of(app).dirty
        smap.move_to(126 + 100)
        await pilot.press("A")
        assert (part(app, 5).start, part(app, 5).size) == (2048, SIZE)
        (op,) = plan_of(app).changes()
        assert str(op).startswith(f"move 5 with its data: 126..{126 + SIZE - 1} -> 2048..{2048 + SIZE - 1}")
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
    # The referees: sfdisk reads the whole chain with the same numbers, the filesystems are clean, the files whole.
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(image)] == [
        (1, EXT[0], EXT[1]), (5, 2048, SIZE), (6, 39_063, SIZE)]
    verify = subprocess.run(["sfdisk", "--verify", str(image)], capture_output=True, text=True)
    assert verify.returncode == 0 and "No errors detected" in verify.stdout, verify.stdout + verify.stderr
    for n, start in ((5, 2048), (6, 39_063)):
        with View(str(image), start, SIZE) as v:
            check = subprocess.run([*CHECK["ext4"], v], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
            assert file_sums(v, "ext4", list(sums[n])) == sums[n]


@run
async def test_fix_my_layout_realigns_both_logical_partitions_in_an_order_the_chain_allows(
        tmp_path: pathlib.Path) -> None:
    """A off any partition: 6 goes left past its own EBR (which moves to 38849, after partition 5), 5 goes right;
    the dialog writes both, one after the other."""
    from diskplan.backend.raw.ebrchain import read_chain

    need_tool("e2fsck")
    image, sums = dos_image(tmp_path)
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=(100, 30)) as pilot:
        smap = await started(app, pilot)
        smap.move_to(170_000)  # free space after the extended partition
        await pilot.press("A")
        assert [(op.kind, op.number, op.source, op.start) for op in plan_of(app).changes()] == [
            ("move", 6, 39_063, 38_912), ("move", 5, 126, 2048)]
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
    assert [(n, s, size) for n, s, size, _, _ in sfdisk_parts(image)] == [
        (1, EXT[0], EXT[1]), (5, 2048, SIZE), (6, 38_912, SIZE)]
    assert [lk.lba for lk in read_chain(str(image), 512).links] == [63, 38_849]
    for n, start in ((5, 2048), (6, 38_912)):
        with View(str(image), start, SIZE) as v:
            check = subprocess.run([*CHECK["ext4"], v], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
            assert file_sums(v, "ext4", list(sums[n])) == sums[n]


def _dump_parts(image: pathlib.Path) -> dict[int, tuple[int, int, str]]:
    """``sfdisk --dump``, read as number -> (start, size, type)."""
    out = {}
    for line in run_tool("sfdisk", "--dump", str(image)).splitlines():
        if ": start=" not in line:
            continue
        node, fields = line.split(" : ")
        kv = dict(f.strip().split("=", 1) for f in fields.split(","))
        out[int(node.strip()[len(str(image)):])] = (int(kv["start"]), int(kv["size"]), kv["type"])
    return out


@run
async def test_a_drag_past_the_extended_end_grows_it_in_the_same_plan(tmp_path: pathlib.Path) -> None:
    """Partition 6 (the last logical one, ext4) dragged past the extended partition's end (150062) into the free
    space after it: the plan grows the extended partition to the partition's new end, the change list says so,
    and the move dialog writes it (backend.move.engine grows it first). sfdisk --dump shows the extended grown exactly
    that far and both logical partitions with their numbers; e2fsck finds both clean, every file whole."""
    need_tool("e2fsck")
    image, sums = dos_image(tmp_path)
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=(100, 30)) as pilot:
        smap = await started(app, pilot)
        await drag(pilot, smap, 50_000, 50_000 + 121_000)
        p6, ext = part(app, 6), part(app, 1)
        assert p6.size == SIZE and p6.end > EXT[0] + EXT[1] - 1, (p6, app._said)
        assert (ext.start, ext.end) == (EXT[0], p6.end)
        assert "extended partition 1 grows to end at" in app._said, app._said
        (op,) = [op for op in plan_of(app).changes() if op.kind == "move"]
        assert str(op).endswith(f"extended partition 1 grows to end at {p6.end} first"), str(op)
        assert not plan_of(app).writes().problems
        screen = await confirm(app, pilot)
        await done(app, pilot, screen)
        assert screen.outcome is not None and screen.outcome.verdict.value == "written", screen.outcome
    dumped = _dump_parts(image)
    assert dumped == {1: (EXT[0], p6.end - EXT[0] + 1, "5"), 5: (126, SIZE, "83"), 6: (p6.start, SIZE, "83")}, dumped
    verify = subprocess.run(["sfdisk", "--verify", str(image)], capture_output=True, text=True)
    assert verify.returncode == 0 and "No errors detected" in verify.stdout, verify.stdout + verify.stderr
    for n, start in ((5, 126), (6, p6.start)):
        with View(str(image), start, SIZE) as v:
            check = subprocess.run([*CHECK["ext4"], v], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
            assert file_sums(v, "ext4", list(sums[n])) == sums[n]


@run
async def test_a_drag_past_the_extended_end_with_nothing_free_after_it_says_why(tmp_path: pathlib.Path) -> None:
    """The image ends where the extended partition ends: nothing to grow it into. The drag stops at its end and
    says why, in `diskplan move`'s words; the disk is not written."""
    image, _ = dos_image(tmp_path)
    os.truncate(image, (EXT[0] + EXT[1]) * 512)
    app = PlannerApp(start=image_target(image), host=HOST)
    async with app.run_test(size=(100, 30)) as pilot:
        smap = await started(app, pilot)
        await drag(pilot, smap, 50_000, 50_000 + 100_000)
        p6, ext = part(app, 6), part(app, 1)
        assert p6.end <= EXT[0] + EXT[1] - 1 and (ext.start, ext.end) == (EXT[0], EXT[0] + EXT[1] - 1)
        assert "nothing after it is free to grow it into" in app._said, app._said
