"""Writing a plan from the planner: the confirmation screen, the typed answer, progress, the outcome, the disk
read again. Real images written through libparted; the referee is `sfdisk --dump`."""

from __future__ import annotations

import asyncio
import pathlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskplan.backend.read.reader import read
from diskplan.backend.write.steps import Host, Verdict
from diskplan.model.extent import State
from diskplan.model.teach import demos
from diskplan.ui.app import PlannerApp
from diskplan.ui.commit_screen import CommitScreen
from diskplan.ui.explain import fold_path
from diskplan.ui.target import Target
from helpers.pilot import image_target, screen_text, text_of, wait_for
from helpers.tools import need_tool, run
from helpers.units import MiB_SECTORS


def gpt_image(sparse_image: Callable[..., pathlib.Path], size: int = 64 << 20) -> pathlib.Path:
    """A GPT image with partition 1 at 1 MiB..9 MiB, written by sfdisk."""
    need_tool("sfdisk")
    img = sparse_image(size)
    run("sfdisk", "-q", str(img), input=f"label: gpt\nstart={MiB_SECTORS}, size={8 * MiB_SECTORS}, type=L\n")
    return img


def dump_parts(path: pathlib.Path) -> list[tuple[int, int]]:
    """(start, size) of every partition, as sfdisk reads the image."""
    out = []
    for line in run("sfdisk", "--dump", str(path)).splitlines():
        if " : start=" in line:
            fields = dict(f.strip().split("=", 1) for f in line.split(":", 1)[1].split(",") if "=" in f)
            out.append((int(fields["start"]), int(fields["size"])))
    return out


@dataclass
class Busy:
    blocking: bool = True

    def __str__(self) -> str:
        return "mounted on /mnt/test (a test says so)"


def test_commit_through_the_confirmation_screen_writes_exactly_the_plan(sparse_image, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    img = gpt_image(sparse_image)

    async def go() -> None:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(100, 32)) as pilot:
            await pilot.pause()
            app.clear_notifications()
            # A new partition after partition 1, 16 MiB, typed in the dialog.
            app.sector_map.move_to(20 * MiB_SECTORS)
            await pilot.press("n")
            await pilot.press("ctrl+a", "ctrl+k", *"16MiB", "enter")
            await pilot.pause()
            plan = app.session.plan  # type: ignore[union-attr]
            new = [p for p in plan.table.partitions if p.state is State.PROPOSED]
            assert len(new) == 1 and new[0].size == 16 * MiB_SECTORS
            start = new[0].start
            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            text = text_of(screen)
            assert f"create 2 at {start}..{start + 16 * MiB_SECTORS - 1}" in text
            assert "keep 1 at 2048..18431" in text
            assert "Type yes to write this table" in text
            await pilot.press(*"no", "enter")
            assert "not confirmed" in text_of(screen) and screen.outcome is None
            await pilot.press("ctrl+a", "ctrl+k", *"yes", "enter")
            await wait_for(pilot, lambda: screen.outcome is not None)
            outcome = screen.outcome
            assert outcome is not None and outcome.verdict is Verdict.WRITTEN, outcome
            assert pathlib.Path(outcome.backup_path).is_file()
            assert outcome.backup_path in text_of(screen).replace("/\n", "/")  # broken only after a "/"
            await pilot.press("enter")  # back: the disk is read again and the plan starts from it
            await wait_for(pilot, lambda: not app.session.plan.dirty and len(app.session.plan.table.partitions) == 2)
            assert {p.state for p in app.session.plan.table.partitions} == {State.EXISTING}
            return start

    start = asyncio.run(go())
    assert dump_parts(img) == [(MiB_SECTORS, 8 * MiB_SECTORS), (start, 16 * MiB_SECTORS)]


def test_a_refusal_writes_nothing_and_says_who_uses_the_disk(sparse_image) -> None:
    img = gpt_image(sparse_image)
    before = img.read_bytes()[: 34 * 512]
    busy = Host(users=lambda path: [Busy()])

    async def go() -> None:
        app = PlannerApp(start=image_target(img), host=busy)
        async with app.run_test(size=(100, 32)) as pilot:
            await pilot.pause()
            app.sector_map.move_to(MiB_SECTORS)
            await pilot.press("x", "w")  # partition 1 marked for deletion, then write
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            text = text_of(screen)
            assert "delete 1" in text and "refused:" in text and "mounted on /mnt/test" in text
            assert not screen.query_one("#commit-answer-row").has_class("-asking")
            await pilot.press("escape")
            assert not isinstance(app.screen, CommitScreen)

    asyncio.run(go())
    assert img.read_bytes()[: 34 * 512] == before


def test_escape_waits_until_the_write_has_ended(sparse_image, tmp_path, monkeypatch) -> None:
    """Going back while the write runs would leave its outcome unseen: Esc does nothing until it is known, then
    goes back. The write is held inside its own check under the lock (who uses the disk), in the worker."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    img = gpt_image(sparse_image)
    armed, inside, release = threading.Event(), threading.Event(), threading.Event()

    def users(path: str) -> list[Busy]:
        if armed.is_set() and threading.current_thread() is not threading.main_thread():
            inside.set()
            release.wait(30)
        return []

    async def go() -> None:
        app = PlannerApp(start=image_target(img), host=Host(users=users))
        async with app.run_test(size=(100, 32)) as pilot:
            await pilot.pause()
            app.sector_map.move_to(20 * MiB_SECTORS)
            await pilot.press("n", "enter", "w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            armed.set()
            await pilot.press(*"yes", "enter")
            try:
                await wait_for(pilot, inside.is_set, what="the write's check under the lock")
                assert screen.writing
                await pilot.press("escape")
                await pilot.pause()
                assert isinstance(app.screen, CommitScreen) and screen.is_current and screen.outcome is None
            finally:
                release.set()
            await wait_for(pilot, lambda: screen.outcome is not None)
            assert screen.outcome is not None and screen.outcome.verdict is Verdict.WRITTEN, screen.outcome
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, CommitScreen))

    asyncio.run(go())


def test_a_demo_shown_from_the_model_cannot_be_written() -> None:
    s = demos.find("modern")

    async def go() -> None:
        app = PlannerApp(start=Target(s.planned_disk(), "demo modern", s.lesson, demo="modern"))
        async with app.run_test(size=(100, 32)) as pilot:
            await pilot.pause()
            app.clear_notifications()
            app.sector_map.move_to(s.partitions[-1].start)
            await pilot.press("x", "w")
            assert not isinstance(app.screen, CommitScreen)
            assert any("nothing to write to" in str(n.message) for n in app._notifications)

    asyncio.run(go())


@pytest.mark.root
def test_a_block_device_needs_its_name_typed(sparse_image, loop_device, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    img = gpt_image(sparse_image)
    dev = loop_device(img)
    name = pathlib.Path(dev).name

    async def go() -> None:
        app = PlannerApp(start=Target(read(dev), dev, path=dev))
        async with app.run_test(size=(100, 32)) as pilot:
            await pilot.pause()
            app.sector_map.move_to(MiB_SECTORS)
            await pilot.press("x", "w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            assert f"Type {name} to write" in text_of(screen)
            await pilot.press(*"yes", "enter")
            assert screen.outcome is None and "not confirmed" in text_of(screen)
            await pilot.press("ctrl+a", "ctrl+k", *name, "enter")
            await wait_for(pilot, lambda: screen.outcome is not None)
            assert screen.outcome is not None and screen.outcome.verdict is Verdict.WRITTEN, screen.outcome

    asyncio.run(go())
    assert dump_parts(img) == []


def test_at_80_columns_the_backup_path_breaks_only_after_a_slash(sparse_image, tmp_path, monkeypatch) -> None:
    """The path to copy for a restore: on lines of its own, each a run of whole directories (the screen's
    own wrap folded it mid-name)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-of-the-planner"))
    need_tool("sfdisk")
    img = sparse_image(64 << 20, "a-disk-with-a-longer-name.img")
    run("sfdisk", "-q", str(img), input=f"label: gpt\nstart={MiB_SECTORS}, size={8 * MiB_SECTORS}, type=L\n")

    async def go() -> tuple[str, list[str]]:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            app.clear_notifications()
            app.sector_map.move_to(20 * MiB_SECTORS)
            await pilot.press("n", "enter", "w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            await pilot.press(*"yes", "enter")
            await wait_for(pilot, lambda: screen.outcome is not None)
            await pilot.pause()
            assert screen.outcome is not None and screen.outcome.verdict is Verdict.WRITTEN
            return screen.outcome.backup_path, screen_text(app).splitlines()

    path, lines = asyncio.run(go())
    assert len(path) > 76  # wider than the dialog: it must break somewhere
    at = next(i for i, line in enumerate(lines) if "backup of the old table:" in line)
    pieces = []
    for line in lines[at + 1:]:
        piece = line.strip(" │")
        if not piece:
            break
        pieces.append(piece)
    assert "".join(pieces) == path, pieces
    assert all(piece.endswith("/") for piece in pieces[:-1]), pieces


@given(st.lists(st.text("abc.-", min_size=0, max_size=12), min_size=1, max_size=12), st.integers(1, 40))
def test_a_folded_path_is_the_path_broken_only_after_slashes(names: list[str], width: int) -> None:
    path = "/".join(names)
    lines = fold_path(path, width).split("\n")
    assert "".join(lines) == path
    assert all(line.endswith("/") for line in lines[:-1])
    # A line is wider than ``width`` only when a single name is.
    assert all(len(line) <= width or "/" not in line.rstrip("/") for line in lines)
