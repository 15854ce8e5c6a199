"""Driving the planner with Textual's Pilot: what it opens (demos, blank disks, images), starting it,
waiting for a condition (failing the test, with what it waited for, when it does not come true), and
reading what it shows."""

from __future__ import annotations

import asyncio
import functools
import inspect
import io
import pathlib
from collections.abc import Callable, Coroutine
from typing import Any

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Input

from diskplan.backend.read.reader import read
from diskplan.model.disk import Disk
from diskplan.model.extent import Partition
from diskplan.model.geometry import Geometry
from diskplan.model.plan.plan import Plan
from diskplan.model.table import new_table
from diskplan.model.teach import demos
from diskplan.ui import textual_private
from diskplan.ui.app import PlannerApp
from diskplan.ui.commit_screen import CommitScreen
from diskplan.ui.move_screen import MoveScreen
from diskplan.ui.panels import StatusLine
from diskplan.ui.sectormap import SectorMap
from diskplan.ui.target import Target

# --- what the planner opens -------------------------------------------------------------------------


def demo(name: str) -> Target:
    """A demo scenario as the planner opens it (from the model: no image, no root)."""
    s = demos.find(name)
    return Target(s.planned_disk(), f"demo {s.name}", s.lesson, demo=s.name)


def blank_gpt(sectors: int = 2 * 1024**3 // 512, physical: int = 4096, **geo: Any) -> Target:
    """An empty GPT (2 GiB of 512-byte sectors, 4 KiB physical blocks unless told)."""
    geom = Geometry(sectors=sectors, physical=physical, **geo)
    return Target(Disk(geom, new_table("gpt", geom)), "blank gpt")


def image_target(path: pathlib.Path) -> Target:
    """An image read through libparted, writable by the planner."""
    return Target(read(str(path)), path.name, path=str(path))


# --- running and waiting ------------------------------------------------------------------------------


def run(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test without an async pytest plugin."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


async def started(app: PlannerApp, pilot: Pilot[Any]) -> SectorMap:
    """The first disk drawn, its toasts gone: the map."""
    await pilot.pause()
    await pilot.pause()
    app.clear_notifications()
    return app.sector_map


async def settle(pilot: Pilot[Any]) -> None:
    """For snapshots (``run_before``): drawn, toasts gone, drawn again."""
    await pilot.pause()
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()


def _described(check: Callable[[], object]) -> str:
    try:
        return " ".join(inspect.getsource(check).split())
    except (OSError, TypeError):
        return repr(check)


async def wait_for(pilot: Pilot[Any], check: Callable[[], object], seconds: float = 30, what: str = "") -> None:
    """Let the app run until ``check()`` is true; fail the test when it is not within ``seconds`` (polled
    every 50 ms of the app's time, so a busy machine waits longer rather than failing sooner)."""
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out after {seconds:g} s waiting for {what or _described(check)}")


# --- the plan and what the planner shows --------------------------------------------------------------


def plan_of(app: PlannerApp) -> Plan:
    assert app.session is not None
    return app.session.plan


def part(app: PlannerApp, number: int) -> Partition:
    p = plan_of(app).partition(number)
    assert p is not None
    return p


def propose(app: PlannerApp, start: int, size: int) -> int:
    """Propose a partition as the dialog would, recorded as one step; its number."""
    outcome = plan_of(app).propose(start, size)
    assert outcome.ok, outcome.message
    assert app._step(outcome)
    assert outcome.number is not None
    return outcome.number


def status_text(app: PlannerApp) -> str:
    return str(app.query_one(StatusLine).render())


def cell_at(smap: SectorMap, lba: int) -> tuple[int, int]:
    """The content offset of the cell holding ``lba`` (checked against the map's own hit test)."""
    x = smap.label_width + lba // smap.spc % smap.cols
    y = lba // smap.spc // smap.cols - round(smap.scroll_offset.y)
    hit = smap.hit_at(x, y)
    assert hit is not None and hit.lba <= lba <= hit.last, (lba, hit)
    return x, y


def text_of(screen: CommitScreen) -> str:
    """The confirmation screen's words."""
    return "\n".join(str(w.render()) for w in screen.query("Static"))


def screen_text(app: PlannerApp) -> str:
    """Every character the terminal would show, as the compositor renders the whole screen."""
    console = Console(
        width=app.size.width,
        height=app.size.height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(textual_private.full_update(app))
    return console.export_text()


# --- the move dialog ---------------------------------------------------------------------------------


async def confirm(app: PlannerApp, pilot: Pilot[Any], then: Callable[[MoveScreen], None] | None = None) -> MoveScreen:
    """w, then the move dialog: wait for its first move to be checked, type yes, Enter (``then``: called
    just before Enter)."""
    await pilot.press("w")
    await wait_for(pilot, lambda: isinstance(app.screen, MoveScreen), what="the move dialog")
    screen = app.screen
    assert isinstance(screen, MoveScreen)
    await wait_for(pilot, lambda: screen.first is not None, what="the first move checked")
    assert screen.first is not None
    assert not screen.first.refusals, screen.first.refusals
    screen.query_one("#move-answer", Input).value = "yes"
    if then is not None:
        then(screen)
    await pilot.press("enter")
    return screen


async def done(app: PlannerApp, pilot: Pilot[Any], screen: MoveScreen) -> None:
    await wait_for(pilot, lambda: screen.outcome is not None and not screen.running, seconds=120,
                   what="the move's outcome")
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, MoveScreen), what="back in the planner")
