"""Measuring from the planner (b, B) on a real image: the write asks for "yes" with the exact byte range,
writes only there (sha256 of the image outside the range unchanged, the test data inside it), shows IOPS,
ratios, spread, the device's honest name and the fio lines; refuses anything that is not free space on
the disk (a partition, even one the plan marks for deletion) and a disk in use; B reads anywhere, writing
nothing."""

from __future__ import annotations

import hashlib
import os
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import Input, Static

from diskplan.backend.iotime import PATTERN
from diskplan.backend.write.steps import Host
from diskplan.ui import measure_screen
from diskplan.ui.app import PlannerApp
from diskplan.ui.measure_screen import MeasureScreen
from helpers.movedisk import unfinished_journal
from helpers.pilot import image_target, run, screen_text, started, wait_for
from helpers.tools import need_tool
from helpers.tools import run as run_tool

MiB = 1 << 20
NOBODY = Host(users=lambda path: [])
# The free space at LBA 10000 (byte 5,120,000): the range starts on the next 1 MiB boundary.
FREE_LBA, BASE, END = 10000, 5 * MiB, 6 * MiB


class Busy:
    blocking = True

    def __str__(self) -> str:
        return "mounted on /mnt/test (a test says so)"


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure_screen, "ROUNDS", 2)
    monkeypatch.setattr(measure_screen, "COUNT", 2)


@pytest.fixture
def image(sparse_image: Callable[..., pathlib.Path]) -> pathlib.Path:
    """16 MiB of random bytes with a GPT: partition 1 at LBA 2048-4095, free space after it."""
    img = sparse_image(16 * MiB)
    with open(img, "r+b") as f:
        f.write(os.urandom(16 * MiB))
    run_tool(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=2048\n")
    return img


def sha_outside(data: bytes, lo: int, hi: int) -> str:
    return hashlib.sha256(data[:lo] + data[hi:]).hexdigest()


def text(screen: MeasureScreen) -> str:
    return "\n".join(str(w.render()) for w in screen.query(Static))


async def measuring(app: PlannerApp, pilot: Pilot[Any], lba: int, key: str) -> MeasureScreen:
    """The measure screen ``key`` (b writes, B reads) opens with the cursor on ``lba``."""
    await started(app, pilot)
    app.sector_map.move_to(lba)
    await pilot.press(key)
    screen = app.screen
    assert isinstance(screen, MeasureScreen)
    return screen


@run
async def test_b_writes_only_the_confirmed_range_and_shows_the_numbers(image: pathlib.Path) -> None:
    before = image.read_bytes()
    app = PlannerApp(start=image_target(image), host=NOBODY)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await measuring(app, pilot, FREE_LBA, "b")
        await wait_for(pilot, lambda: screen.ask is not None)
        shown = text(screen)
        assert f"range:\nwrites test data to, then reads bytes {BASE:,}-{END - 1:,} of {image} (LBA 10,240-12,287, " \
               "1 MiB): free space, no partition, no table metadata" in shown
        assert f"Type yes to write test data to bytes {BASE:,}-{END - 1:,} of {image}:" in shown
        assert f"{image} is a file on " in shown and "offsets in the file are not offsets on the disk" in shown
        assert "These numbers say nothing about a disk's hardware" in shown
        assert "device:\nrotational " in shown and "scheduler " in shown
        await pilot.press(*"no", "enter")  # not the word: nothing happens
        await pilot.pause()
        assert "not confirmed: type yes exactly" in text(screen) and not screen.running
        assert image.read_bytes() == before
        screen.query_one("#measure-answer", Input).value = ""
        await pilot.press(*"yes", "enter")
        await wait_for(pilot, lambda: screen.results is not None, what="the measurement")
        shown = text(screen)
        for line in ("write 4 KiB:", "write 16 KiB + flush:", "read 4 KiB:", "read 16 KiB:"):
            assert line in shown
        assert f"aligned\nbyte {BASE:,}: " in shown and "IOPS (rounds " in shown
        assert f"+512 B\nbyte {BASE + 512:,}: " in shown and "aligned/this = " in shown
        assert f"fio\n--name=at{BASE} --filename={image} --direct=1" in shown and "--fdatasync=1" in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, MeasureScreen)
    after = image.read_bytes()
    assert sha_outside(after, BASE, END) == sha_outside(before, BASE, END)
    assert after[BASE:BASE + len(PATTERN)] == PATTERN


@run
async def test_b_refuses_a_partition_even_one_marked_for_deletion_and_B_reads_it(image: pathlib.Path) -> None:
    before = image.read_bytes()
    app = PlannerApp(start=image_target(image), host=NOBODY)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        app.sector_map.move_to(3000)
        await pilot.press("x")  # the plan deletes partition 1: on the disk it still holds its data
        await pilot.press("b")
        screen = app.screen
        assert isinstance(screen, MeasureScreen)
        await wait_for(pilot, lambda: "refused:\n" in text(screen))
        assert "LBA 3000 is not free space on the disk" in text(screen)
        assert not screen.query_one("#measure-answer-row").has_class("-asking") and screen.ask is None
        await pilot.press("enter")
        await pilot.pause()
        assert not screen.running and screen.results is None
        await pilot.press("escape")
        await pilot.press("B")  # reads only, here
        reads = app.screen
        assert isinstance(reads, MeasureScreen)
        await wait_for(pilot, lambda: "Enter: measure (reads only)" in text(reads))
        assert f"range:\nreads bytes {MiB:,}-{2 * MiB - 1:,} of {image} (LBA 2,048-4,095, 1 MiB)" in text(reads)
        await pilot.press("enter")
        await wait_for(pilot, lambda: reads.results is not None, what="the reads")
        shown = text(reads)
        assert "read 4 KiB:" in shown and "aligned/this = " in shown and "write 4 KiB" not in shown
    assert image.read_bytes() == before


@run
async def test_b_refuses_a_disk_in_use(image: pathlib.Path) -> None:
    before = image.read_bytes()
    app = PlannerApp(start=image_target(image), host=Host(users=lambda path: [Busy()]))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await measuring(app, pilot, FREE_LBA, "b")
        await wait_for(pilot, lambda: "refused:\n" in text(screen))
        assert "refused:\nmounted on /mnt/test (a test says so)" in text(screen) and screen.ask is None
    assert image.read_bytes() == before


@run
async def test_b_refuses_under_the_lock_a_move_begun_after_the_confirmation_was_shown(image: pathlib.Path) -> None:
    """A move started (and killed) while the confirmation waits leaves its journal: the partition's entry hidden,
    its bytes looking free. Asked again under the write lock, as `diskplan measure` does, b writes nothing."""
    before = image.read_bytes()
    app = PlannerApp(start=image_target(image), host=NOBODY)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await measuring(app, pilot, FREE_LBA, "b")
        await wait_for(pilot, lambda: screen.ask is not None)
        assert "refused:" not in text(screen)  # nothing refused when asked
        journal = unfinished_journal(str(image), 16 * MiB)
        await pilot.press(*"yes", "enter")
        await wait_for(pilot, lambda: screen.results is not None, what="the answer")
        shown = " ".join(text(screen).split())
        assert f"refused: a data move on {image} is unfinished (journal {journal})" in shown, shown
        assert "Nothing was written." in shown and "write 4 KiB:" not in shown
    assert image.read_bytes() == before


@run
async def test_at_80_columns_each_line_wraps_beside_its_label(image: pathlib.Path) -> None:
    """On the console's 80x25 a long line goes on under its text, not back at the screen's edge: the range under
    "range:", a ratio under its offset's numbers; numbers grouped as on the other screens, fio lines as typed."""
    app = PlannerApp(start=image_target(image), host=NOBODY, console=True)
    async with app.run_test(size=(80, 25)) as pilot:
        screen = await measuring(app, pilot, FREE_LBA, "B")
        await wait_for(pilot, lambda: "tests:" in screen_text(app), what="the rows drawn")
        lines = [line[2:].rstrip(" │") for line in screen_text(app).splitlines()]  # inside the border
        start = next(i for i, line in enumerate(lines) if line.startswith("range:"))
        end = next(i for i, line in enumerate(lines) if line.startswith("tests:"))
        assert end - start > 1, lines  # the range takes more than one line here
        assert all(line.startswith(" " * 9) and line.strip() for line in lines[start + 1:end]), lines[start:end]
        reads = 4 * MiB  # B: from the 1 MiB boundary at or before the cursor's byte 5,120,000
        assert f"bytes {reads:,}-{reads + MiB - 1:,} of" in lines[start]
        await pilot.press("enter")
        await wait_for(pilot, lambda: "2 rounds x 2 operations" in screen_text(app), what="the results drawn")
        shown = text(screen)
        body = screen.query_one("#measure-body", VerticalScroll)
        lines = []
        for _ in range(20):  # every page of the results, as PageDown shows them
            lines += [line[2:].rstrip(" │") for line in screen_text(app).splitlines()[1:-1]]
            if body.scroll_y >= body.max_scroll_y:
                break
            await pilot.press("pagedown")
            await pilot.pause()
        rows = [line for line in lines if line.startswith("  ")]  # an offset's or a fio line, or their wraps
        assert any(line.startswith("  +512 B     byte ") for line in rows), lines
        assert any(line.startswith(" " * 13 + "aligned/this") for line in rows), lines  # wrapped beside its label
        assert any(line.startswith("  fio --name=") for line in rows), lines
        assert any(line.startswith(" " * 6 + "--") for line in rows), lines  # a fio line's options, clear of fio
        results = lines[next(i for i, line in enumerate(lines) if line.startswith("2 rounds x 2 operations")):]
        headings = ("read 4 KiB:", "read 16 KiB:", "the same with fio", "2 rounds x 2", "Esc or Enter")
        assert all(line.startswith(("  ", *headings)) or not line.strip() for line in results), results
        assert f"fio\n--name=at{reads + 512} " in shown and f"--offset={reads + 512} " in shown


@run
async def test_B_on_a_sparse_image_says_its_reads_were_holes(sparse_image: Callable[..., pathlib.Path]) -> None:
    """Issue 26 item 9: reads from a sparse image's hole come from no disk (1.7 million "IOPS"): said so."""
    img = sparse_image(16 * MiB)  # never written past the table: holes
    run_tool(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=2048\n")
    app = PlannerApp(start=image_target(img), host=NOBODY)
    async with app.run_test(size=(120, 40)) as pilot:
        reads = await measuring(app, pilot, FREE_LBA, "B")
        await wait_for(pilot, lambda: "Enter: measure (reads only)" in text(reads))
        await pilot.press("enter")
        await wait_for(pilot, lambda: reads.results is not None, what="the reads")
        shown = " ".join(text(reads).split())
        assert f"are holes of {img} (never written)" in shown and "measure memory, not a device" in shown
        assert "2 rounds x 2 operations" in shown
