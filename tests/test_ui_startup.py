"""Start-up stays light: what the first frame does not need is not imported, and the footer is composed
again only when the keys it shows change (scripts/bench.py measures the time itself)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from textual.widget import Widget
from textual.widgets._footer import FooterKey

from diskplan.ui.app import PlannerApp
from test_ui_commit import image_target, wait_for
from test_ui_repair import damaged_gpt

LATER = ("diskplan.backend.commit", "diskplan.ui.commit_screen", "diskplan.ui.dialogs", "diskplan.ui.screens",
         "diskplan.model.planfile")


def test_the_planner_module_leaves_dialogs_plan_files_and_the_commit_for_later() -> None:
    code = f"import sys, diskplan.ui.app; print([m for m in {LATER!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_footer_follows_the_keys_it_shows_and_nothing_else(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    img = damaged_gpt(tmp_path)
    composed: list[str] = []
    recompose = Widget.recompose

    async def counting(self: Widget) -> None:
        if type(self).__name__ == "KeysFooter":
            composed.append("footer")
        await recompose(self)

    monkeypatch.setattr(Widget, "recompose", counting)

    async def go() -> None:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(110, 30)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            await pilot.pause(0.1)

            def keys() -> list[str]:
                return [k.key for k in app.screen.query(FooterKey)]

            assert "R" in keys() and "w" in keys()
            before = len(composed)
            app.set_focus(None)  # the same keys are shown: nothing composed again
            await pilot.pause(0.1)
            app.sector_map.focus()
            await pilot.pause(0.1)
            assert len(composed) == before
            await pilot.press("R")  # planned: R leaves the footer
            await pilot.pause(0.1)
            assert "R" not in keys() and "w" in keys() and len(composed) == before + 1

    asyncio.run(go())
