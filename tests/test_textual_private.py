"""Textual's private names that diskplan uses all live in ui/textual_private.py; this test fails, naming the
name, on a Textual upgrade that renames or removes one, before a user meets an AttributeError."""

from __future__ import annotations

import asyncio
import importlib
import pathlib
import re

from diskplan.ui import textual_private
from diskplan.ui.app import PlannerApp
from helpers.pilot import demo

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "diskplan"


def test_every_private_name_exists_in_the_installed_textual() -> None:
    async def go() -> list[str]:
        app = PlannerApp(start=demo("modern"))
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            missing = []
            for owner, name in textual_private.REQUIRED:
                if owner == "app instance":
                    obj: object = app
                elif owner == "screen instance":
                    obj = app.screen
                elif owner.startswith("textual._"):  # a private module
                    obj = importlib.import_module(owner)
                else:  # a class: module.Class
                    module, _, cls = owner.rpartition(".")
                    obj = getattr(importlib.import_module(module), cls)
                if not hasattr(obj, name):
                    missing.append(f"{owner}.{name}")
            # and what they are used for still works: a full update has every line of the screen
            assert len(textual_private.screen_lines(app.screen)) == 25
            return missing

    assert asyncio.run(go()) == []


def test_the_adapter_checks_each_private_name_it_uses() -> None:
    text = (SRC / "ui" / "textual_private.py").read_text()
    used = set(re.findall(r"(?:app|screen|driver|_border)\.(_?[a-zA-Z]\w*)", text.split("REQUIRED", 2)[2]))
    used = {u for u in used if u.startswith("_") or u in {"BORDER_CHARS", "BORDER_LOCATIONS", "get_box"}}
    required = {name for _, name in textual_private.REQUIRED}
    assert used <= required, sorted(used - required)


def test_no_other_module_reaches_into_textual_privately() -> None:
    """Outside the adapter, no ``textual._x`` import and no ``._compositor``/``._driver``-style reach."""
    private = re.compile(r"from textual\._|import textual\._|\._(compositor|driver|background_screens|display|"
                         r"return_code|exception_event|exit_renderables|close_messages_no_wait)\b")
    bad = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
           if p.name != "textual_private.py" and private.search(p.read_text())]
    assert bad == []


def test_ctrl_l_paints_the_whole_screen_again_through_the_adapter() -> None:
    """Ctrl+L composes every cell afresh and sends it (textual_private.repaint_all); the screen is unchanged
    and the app does not fall back to its own partial refresh (which would mean an internal went away)."""
    sent: list[int] = []

    async def go() -> tuple[list[str], list[str]]:
        app = PlannerApp(start=demo("modern"))
        real = app._display

        def display(screen, renderable) -> None:
            sent.append(len(getattr(renderable, "strips", []) or []))
            real(screen, renderable)

        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            before = textual_private.screen_lines(app.screen)
            app._display = display  # type: ignore[method-assign]
            await pilot.press("ctrl+l")
            await pilot.pause()
            return before, textual_private.screen_lines(app.screen)

    before, after = asyncio.run(go())
    assert before == after
    assert 25 in sent  # one update held every line of the screen
