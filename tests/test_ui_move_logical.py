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
from helpers.movedisk import CHECK, View, file_sums, populate
from helpers.pilot import cell_at, image_target, part, plan_of, run, started
from helpers.tools import need_tool
from helpers.tools import run as run_tool
from helpers.units import MiB, MiB_SECTORS
from test_move_logical import EXT, LAYOUT, SIZE, write_chain
from test_ui_move import confirm, done

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
    from diskplan.backend.ebrchain import read_chain

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
