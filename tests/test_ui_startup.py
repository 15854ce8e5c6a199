"""Start-up stays light: what the first frame does not need is not imported, and the footer is drawn
again only when the keys it shows change (scripts/bench.py measures the time itself)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from diskplan.ui import textual_private
from diskplan.ui.app import PlannerApp
from diskplan.ui.panels import KeysFooter
from helpers.images import damaged_gpt
from helpers.pilot import image_target, wait_for

LATER = ("diskplan.backend.write.commit", "diskplan.backend.write.steps", "diskplan.backend.write.tablewrite",
         "diskplan.backend.write.gptrepair", "diskplan.ui.commit_screen", "diskplan.ui.dialogs", "diskplan.ui.screens",
         "diskplan.model.formats.planfile")


def test_the_planner_module_leaves_dialogs_plan_files_and_the_commit_for_later() -> None:
    code = f"import sys, diskplan.ui.app; print([m for m in {LATER!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_footer_follows_the_keys_it_shows_and_nothing_else(tmp_path, monkeypatch) -> None:
    img = damaged_gpt(tmp_path)
    repaints: list[str] = []
    refresh = KeysFooter.refresh

    def counting(self: KeysFooter, *a, **kw):
        repaints.append("footer")
        return refresh(self, *a, **kw)

    monkeypatch.setattr(KeysFooter, "refresh", counting)

    async def go() -> None:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(110, 30)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            footer = app.query_one(KeysFooter)

            def keys() -> list[str]:
                return [e.key for e in footer.shown]

            await wait_for(pilot, lambda: "R" in keys())
            assert "R" in keys() and "w" in keys()
            assert "repair GPT" in str(footer.render())  # the first frame already showed them
            before = len(repaints)
            app.set_focus(None)  # the same keys are shown: nothing drawn again
            await pilot.pause(0.1)
            app.sector_map.focus()
            await pilot.pause(0.1)
            assert len(repaints) == before
            await pilot.press("R")  # planned: R leaves the footer
            await wait_for(pilot, lambda: "R" not in keys(), 5)
            assert "R" not in keys() and "w" in keys() and len(repaints) > before

    asyncio.run(go())


def test_a_click_on_a_footer_key_presses_it(tmp_path) -> None:
    from diskplan.ui.screens import HelpScreen

    async def go() -> None:
        app = PlannerApp(start=image_target(damaged_gpt(tmp_path)))
        async with app.run_test(size=(110, 30)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            footer = app.query_one(KeysFooter)
            x = str(footer.render()).index("? help")
            await pilot.click(KeysFooter, offset=(x + 1, 0))
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), 5)
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), 5)
            x = str(footer.render()).index("^p palette")
            await pilot.click(KeysFooter, offset=(x + 1, 0))
            await wait_for(pilot, lambda: type(app.screen).__name__.endswith("CommandPalette"), 5)
            assert type(app.screen).__name__.endswith("CommandPalette")

    asyncio.run(go())


def test_the_first_frame_already_shows_the_disk_and_the_keys(tmp_path) -> None:
    from diskplan.ui.target import ModelSource

    seen: list[tuple[bool, bool, bool]] = []

    def frame(app: PlannerApp) -> None:
        if not seen:
            footer, smap = app.query_one(KeysFooter), app.sector_map
            # The whole disk, as the map shows a new disk: not the zoom it had before its first layout.
            whole = smap.content is not None and smap.spc == smap.fit_spc > 1
            seen.append((smap.content is not None, bool(footer.render().plain.strip()), whole))

    Watched = textual_private.display_hook(PlannerApp, frame)

    async def go(app: PlannerApp) -> None:
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()

    for app in (Watched(start=image_target(damaged_gpt(tmp_path))), Watched(ModelSource(), ("demo", "dos-63"))):
        seen.clear()
        asyncio.run(go(app))
        assert seen == [(True, True, True)]
