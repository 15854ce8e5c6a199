"""Textual's conventions in the planner: the command palette offers Textual's own commands (Theme, Keys,
Screenshot) beside ours, with one Quit; a theme chosen there is remembered for the next run (in
$XDG_CONFIG_HOME/diskplan/settings.json, replaced atomically, a bad file ignored); ``--theme NAME`` sets one
for a run without changing what is remembered and refuses an unknown name with the list of themes; the
console profile keeps its 16 colours whatever is remembered."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from diskplan.ui.app import PlannerApp
from diskplan.ui.settings import Settings, config_dir, theme_names
from helpers.pilot import demo, run, started, wait_for


async def palette_titles(app: PlannerApp, pilot: Pilot[Any]) -> list[str]:
    """What the command palette lists before anything is typed."""
    app.action_command_palette()

    def titles() -> list[str]:
        if not isinstance(app.screen, CommandPalette) or not app.screen.query("CommandList"):
            return []
        results = app.screen.query_one("CommandList", OptionList)
        return [str(results.get_option_at_index(i).prompt).split("\n")[0] for i in range(results.option_count)]

    await wait_for(pilot, lambda: "Screenshot" in "".join(titles()), 5, what="the palette's commands")
    return titles()


def _title_of(text: str) -> str:
    return text.strip()


@run
async def test_the_palette_lists_textuals_commands_beside_ours() -> None:
    app = PlannerApp(start=demo("ssd-gpt-34"))
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        titles = [_title_of(t) for t in await palette_titles(app, pilot)]
    for textuals in ("Theme", "Keys", "Screenshot"):
        assert any(t.startswith(textuals) for t in titles), (textuals, titles)
    for ours in ("Zoom in", "Write the plan...", "Go to..."):
        assert any(t.startswith(ours) for t in titles), (ours, titles)
    assert sum(t.startswith("Quit") for t in titles) == 1  # ours; Textual's would be a second one


async def choose_theme(app: PlannerApp, pilot: Pilot[Any], name: str) -> None:
    """As a user does: ctrl+p, "theme", enter, the theme's name, enter."""
    await palette_titles(app, pilot)
    await pilot.press(*"theme")
    await pilot.pause(0.3)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette) and "theme" in
                   str(app.screen.query_one("CommandInput", Input).placeholder).lower(), 5, what="the theme list")
    await pilot.press(*name)
    await pilot.pause(0.3)
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.theme == name, 5, what=f"the theme {name}")


@run
async def test_a_chosen_theme_is_remembered_and_theme_overrides_it(tmp_path: pathlib.Path) -> None:
    settings = Settings.from_env({"XDG_CONFIG_HOME": str(tmp_path / "config")})
    first = PlannerApp(start=demo("ssd-gpt-34"), settings=settings)
    default = first.theme
    async with first.run_test(size=(120, 40)) as pilot:
        await started(first, pilot)
        await choose_theme(first, pilot, "nord")
    assert default != "nord"
    saved = tmp_path / "config" / "diskplan" / "settings.json"
    assert json.loads(saved.read_text()) == {"theme": "nord"}
    assert os.listdir(saved.parent) == ["settings.json"]  # the temporary file was renamed, none left

    second = PlannerApp(start=demo("ssd-gpt-34"), settings=Settings.from_env(
        {"XDG_CONFIG_HOME": str(tmp_path / "config")}))
    async with second.run_test(size=(120, 40)) as pilot:
        await started(second, pilot)
        assert second.theme == "nord"  # the next run starts with it

    third = PlannerApp(start=demo("ssd-gpt-34"), theme="dracula", settings=settings)
    async with third.run_test(size=(120, 40)) as pilot:
        await started(third, pilot)
        assert third.theme == "dracula"  # --theme wins for this run...
    assert json.loads(saved.read_text()) == {"theme": "nord"}  # ...and does not change what is remembered


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"theme": 7}', b'{"theme": "no-such-theme"}',
                                     b"\xff\xfe", b"{" * 100_000])
@run
async def test_a_bad_settings_file_is_ignored(content: bytes, tmp_path: pathlib.Path) -> None:
    (tmp_path / "diskplan").mkdir()
    (tmp_path / "diskplan" / "settings.json").write_bytes(content)
    settings = Settings(str(tmp_path / "diskplan"))
    app = PlannerApp(start=demo("ssd-gpt-34"), settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        assert app.theme == PlannerApp(start=demo("ssd-gpt-34")).theme  # the default
        app.theme = "gruvbox"  # and choosing one still works: the file is replaced by a good one
        await wait_for(pilot, lambda: settings.theme == "gruvbox", 5, what="the theme saved")


@run
async def test_the_console_profile_keeps_its_sixteen_colours(tmp_path: pathlib.Path) -> None:
    settings = Settings(str(tmp_path))
    assert settings.remember("theme", "nord") == ""
    app = PlannerApp(start=demo("ssd-gpt-34"), console=True, theme="dracula", settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        assert app.theme == "ansi-dark"
        titles = [_title_of(t) for t in await palette_titles(app, pilot)]
    assert any(t.startswith("Keys") for t in titles) and not any(t.startswith("Theme") for t in titles)


def test_an_unknown_theme_is_one_clear_line_with_the_names() -> None:
    proc = subprocess.run([sys.executable, "-m", "diskplan", "--theme", "no-such-theme", "--demo"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "unknown theme 'no-such-theme'" in proc.stderr
    assert all(name in proc.stderr for name in theme_names()) and "nord" in theme_names()


def test_where_the_settings_live(tmp_path: pathlib.Path) -> None:
    home = os.path.expanduser("~")
    assert config_dir({"XDG_CONFIG_HOME": str(tmp_path)}) == str(tmp_path / "diskplan")
    assert config_dir({}) == os.path.join(home, ".config", "diskplan")
    assert config_dir({"XDG_CONFIG_HOME": "relative/dir"}) == os.path.join(home, ".config", "diskplan")  # the spec
    deep = Settings(str(tmp_path / "a" / "b"))
    assert deep.remember("theme", "nord") == "" and deep.theme == "nord"  # directories made as needed
    assert deep.remember("other", 1) == "" and deep.load() == {"other": 1, "theme": "nord"}  # others kept
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert "could not save" in Settings(str(blocked / "diskplan")).remember("theme", "nord")
