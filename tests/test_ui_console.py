"""The rescue-console profile: 80x25, TERM=linux, 16 colours, only glyphs a CP437 console font has."""

from __future__ import annotations

import asyncio
import io

import pytest
from rich.color import ColorType
from rich.console import Console
from textual import _border

from diskplan.discovery.udev import DiskInfo
from diskplan.model.teach import demos
from diskplan.ui import textual_private
from diskplan.ui.app import PlannerApp
from diskplan.ui.glyphs import CONSOLE, UNICODE, console_wanted
from diskplan.ui.sectormap import SectorMap
from diskplan.ui.target import Target
from helpers.pilot import demo as target
from helpers.pilot import screen_text, wait_for


def fake_disks() -> list[DiskInfo]:
    return [DiskInfo("sda", "/dev/sda", "Example SSD 500GB", 500107862016, 512, 512, "gpt", False, "none")]


def not_cp437(text: str) -> set[str]:
    bad = set()
    for ch in text:
        try:
            ch.encode("cp437")
        except UnicodeEncodeError:
            bad.add(ch)
    return bad


def test_the_console_profile_is_chosen_by_term_env_or_flag() -> None:
    assert console_wanted({"TERM": "linux"})
    assert not console_wanted({"TERM": "xterm-256color"})
    assert console_wanted({"TERM": "xterm-256color", "DISKPLAN_CONSOLE": "1"})
    assert console_wanted({"TERM": "xterm", "DISKPLAN_ASCII": "yes"})
    assert not console_wanted({"TERM": "linux", "DISKPLAN_CONSOLE": "0"})
    assert console_wanted({"TERM": "xterm"}, flag=True)
    assert not console_wanted({"TERM": "linux"}, flag=False)
    assert CONSOLE.all().encode("cp437")
    assert not_cp437(UNICODE.all())  # the ordinary profile may use finer glyphs


def test_every_screen_of_the_console_profile_is_cp437() -> None:
    async def visit() -> dict[str, str]:
        shots: dict[str, str] = {}
        app = PlannerApp(start=target("dos-63"), console=True, lister=fake_disks, watch_devices=False)
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            await pilot.pause()
            shots["main"] = screen_text(app)
            await pilot.press("1", "right", "right")
            shots["sector zoom"] = screen_text(app)
            for keys, name in (
                (["question_mark"], "help"),
                (["escape", "g", "x", "enter"], "go to"),
                (["escape", "d"], "demo picker"),
                (["escape", "o"], "device picker"),
                (["escape", "ctrl+p", "z"], "command palette"),
                (["escape", "i"], "facts"),
                (["tab", "tab"], "focus moved"),
            ):
                await pilot.press(*keys)
                await pilot.pause(0.1)
                shots[name] = screen_text(app)
            app.notify("a note", title="Note", severity="warning")
            await pilot.pause(0.1)
            shots["toast"] = screen_text(app)
        return shots

    shots = asyncio.run(visit())
    assert "Go to" in shots["go to"] and "Example SSD" in shots["device picker"]
    assert "Demo disks" in shots["demo picker"]
    for name, text in shots.items():
        assert not not_cp437(text), f"{name}: {sorted(not_cp437(text))}"
    # Textual's own glyph tables are back once the console app has exited.
    assert _border.BORDER_CHARS["tall"][0][0] == "▊"


def test_every_planning_screen_of_the_console_profile_is_cp437(tmp_path) -> None:
    """The dialogs, the changes panel, a keyboard move and the confirmation screen: CP437 only, 80x25, and
    proposed / deleted / selected partitions told apart by glyphs (no colour needed)."""
    import subprocess

    from diskplan.backend.read.reader import read
    from diskplan.backend.write.steps import Host
    from diskplan.ui.commit_screen import CommitScreen

    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["sfdisk", "-q", str(image)], input="label: gpt\nstart=2048, size=16384, type=L\n", text=True,
                   check=True, capture_output=True)

    async def visit() -> dict[str, str]:
        shots: dict[str, str] = {}
        app = PlannerApp(start=Target(read(str(image)), "disk.img", path=str(image)), console=True,
                         host=Host(users=lambda path: []))
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            app.clear_notifications()
            smap = app.query_one(SectorMap)
            smap.move_to(40960)
            for keys, name in (
                (["n"], "propose dialog"),
                (["ctrl+a", "ctrl+k", *"100M"], "propose refused"),
                (["ctrl+a", "ctrl+k", *"16MiB", "enter"], "proposed"),
                (["m", "right"], "moving with the keys"),
                (["enter", "s"], "snapping dialog"),
                (["escape", "t"], "type dialog"),
                (["escape", "ctrl+s"], "save dialog"),
                (["escape", "L"], "label dialog"),
                (["escape", "c"], "changes"),
                (["question_mark"], "help"),
                (["escape"], "back"),
            ):
                await pilot.press(*keys)
                await pilot.pause(0.05)
                shots[name] = screen_text(app)
            smap.move_to(2048)
            await pilot.press("x", "w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None, 20)
            shots["confirmation"] = screen_text(app)
        return shots

    shots = asyncio.run(visit())
    for name, text in shots.items():
        assert not not_cp437(text), f"{name}: {sorted(not_cp437(text))}"
        lines = text.splitlines()
        assert len(lines) == 25 and all(len(line) <= 80 for line in lines), name
    assert "units: IEC" in shots["propose dialog"] and "ambiguous" in shots["propose refused"]
    assert "move #2" in shots["moving with the keys"] and "10 grains" in shots["moving with the keys"]
    assert "Snapping target" in shots["snapping dialog"] and "Save plan" in shots["save dialog"]
    assert "create 2 at" in shots["changes"]
    assert "Type yes to write" in shots["confirmation"] and "delete 1" in shots["confirmation"]
    # Proposed and selected partitions carry glyphs: the proposal's fill and the selection's brackets.
    assert CONSOLE.proposed in shots["proposed"] and CONSOLE.sel_start in shots["proposed"]


def test_everything_fits_at_80x25_in_16_colours() -> None:
    async def check() -> None:
        app = PlannerApp(start=target("advanced-format"), console=True)
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            await pilot.pause()
            app.clear_notifications()
            await pilot.pause()
            text = screen_text(app)
            lines = text.splitlines()
            assert len(lines) == 25 and all(len(line) <= 80 for line in lines)
            for needed in ("diskplan", "LBA 34", "phys block 4", "at-17.4kB", "Explain (e)", "q quit", "palette"):
                assert needed in text, needed
            smap = app.query_one(SectorMap)
            assert smap.scrollable_content_region.height >= 8 and smap.cols >= 48
            # The map's colours are the terminal's own 16 ANSI colours, not approximations of RGB.
            assert len(smap.palette) >= 16  # the partition fills and their overlays
            for name in [*SectorMap.COMPONENT_CLASSES, *smap.palette]:
                style = smap.style_of(name, partial=True)
                for color in (style.color, style.bgcolor):
                    assert color is None or color.type in (ColorType.STANDARD, ColorType.DEFAULT), (name, color)

    asyncio.run(check())


def test_without_colour_partitions_are_told_apart_and_the_cursor_shows(monkeypatch) -> None:
    """NO_COLOR (Textual then removes every colour): each partition's cells carry its number, partitions on
    the disk are reversed, the cursor reverses its cell whatever lies there, a notice is '?' and a warning
    '!', and everything is still CP437."""
    from rich.segment import Segment

    from diskplan.ui.glyphs import mono_wanted

    assert mono_wanted({"NO_COLOR": ""}) and mono_wanted({"TERM": "vt100"}) and mono_wanted({"TERM": "xterm-mono"})
    assert not mono_wanted({"TERM": "linux"}) and mono_wanted({"TERM": "linux"}, flag=True)
    monkeypatch.setenv("NO_COLOR", "1")

    async def go() -> None:
        s = demos.find("modern")
        app = PlannerApp(start=target("modern"), console=True)
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            smap = app.query_one(SectorMap)
            assert app.mono and smap.glyphs.mono
            text = screen_text(app)
            assert not not_cp437(text)
            cells = "".join(line[smap.label_width:] for line in text.splitlines()[1:13])
            for p in s.partitions:  # every partition of the demo shows its number
                assert str(p.number) in cells, cells

            def styles_at(y: int) -> list[tuple[str, bool]]:
                out = []
                for seg in smap.render_line(y)._segments:
                    assert isinstance(seg, Segment)
                    out += [(ch, bool(seg.style and seg.style.reverse)) for ch in seg.text]
                return out[smap.label_width:]

            # Partition 4 (home) fills rows; on the disk: reversed, its number in each cell.
            home = s.partitions[3]
            smap.move_to(home.start + home.size // 2)
            await pilot.pause()
            row = styles_at(smap.cursor_lba // smap.spc // smap.cols)
            col = smap.cursor_lba // smap.spc % smap.cols
            assert row[col - 1] == ("4", True) and row[col] == ("4", False)  # the cursor: the one unreversed cell
            # On a free cell the cursor is reversed.
            smap.zoom_to(1)
            smap.move_to(s.sectors - 100)
            await pilot.pause()
            row = styles_at(smap.cursor_lba // smap.spc // smap.cols - round(smap.scroll_offset.y))
            col = smap.cursor_lba % smap.cols
            assert row[col][1] and not row[col - 1][1]

    asyncio.run(go())


def test_without_colour_a_notice_and_a_warning_differ_by_glyph(monkeypatch) -> None:
    from diskplan.model.disk import Disk
    from diskplan.model.extent import Partition
    from diskplan.model.geometry import Geometry
    from diskplan.model.table import new_table

    monkeypatch.setenv("NO_COLOR", "1")
    geom = Geometry(sectors=1 << 20, physical=4096)
    notice = Partition(number=1, start=2056, end=4095)  # on a physical block, off the 1 MiB grain
    warning = Partition(number=2, start=8193, end=12287)  # off the physical block: costs I/O
    disk = Disk(geom, new_table("gpt", geom).with_partitions((notice, warning)))

    async def go() -> tuple[str, str, str]:
        app = PlannerApp(start=Target(disk, "two findings"), console=True)
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            smap = app.query_one(SectorMap)
            smap.zoom_to(1)
            glyphs = []
            for p in (notice, warning):
                smap.move_to(p.start + 100)
                await pilot.pause()
                y = p.start // smap.cols - round(smap.scroll_offset.y)
                glyphs.append(smap.render_line(y).text[smap.label_width + p.start % smap.cols])
            return glyphs[0], glyphs[1], screen_text(app)

    at_notice, at_warning, text = asyncio.run(go())
    assert (at_notice, at_warning) == ("?", "!")
    legend = next(line for line in text.splitlines() if "problem" in line)
    assert "! problem" in legend and "? notice" in legend, legend


def test_no_color_option_draws_without_colour(monkeypatch) -> None:
    """--no-color: the same drawing as NO_COLOR, and no colour reaches the terminal."""
    from diskplan.cli.planner import parser
    from diskplan.ui.glyphs import mono_wanted

    monkeypatch.delenv("NO_COLOR", raising=False)
    args = parser().parse_args(["--no-color", "--demo", "modern"])
    assert mono_wanted({"TERM": "xterm-256color"}, args.mono)
    assert not mono_wanted({"TERM": "xterm-256color"}, parser().parse_args(["--demo", "modern"]).mono)

    async def go() -> list[object]:
        app = PlannerApp(start=target("modern"), mono=True)
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            smap = app.query_one(SectorMap)
            assert app.mono and smap.glyphs.mono and "4" in smap.render_line(3).text
            lines = textual_private.full_update(app)
            console = Console(width=80, height=25, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                              record=True)
            console.print(lines)
            return [seg.style.color for seg in console._record_buffer if seg.style and seg.style.color
                    and seg.style.color.type is not ColorType.DEFAULT]

    assert asyncio.run(go()) == []


@pytest.mark.parametrize("name", ["ssd-gpt-34", "dos-63", "advanced-format", "stripe", "lvm-partition", "4kn"])
def test_every_explanation_and_fact_of_the_console_profile_is_cp437(name: str) -> None:
    """Not only what fits on the screen: every line the views hold, for every partition of the demo (the
    arithmetic says ×, − and … where the console font has none)."""
    from diskplan.ui.panels import ViewsPanel

    async def visit() -> list[str]:
        texts: list[str] = []
        app = PlannerApp(start=target(name), console=True, lister=fake_disks, watch_devices=False)
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            panel = app.query_one(ViewsPanel)
            for _ in range(len(app.target.disk.table.partitions) + 1 if app.target else 1):
                await pilot.press("bracketright", "e")
                await pilot.pause()
                texts.append(panel.text("explain"))
            await pilot.press("i")
            await pilot.pause()
            texts.append(panel.text("facts"))
        return texts

    texts = asyncio.run(visit())
    assert any("×" in t or " x " in t for t in texts)  # the arithmetic is there, in the console's letters
    for text in texts:
        assert not not_cp437(text), f"{name}: {sorted(not_cp437(text))}"


def test_the_exercise_s_status_lines_and_notes_are_cp437() -> None:
    """The walk-through's steps and k's verdict quote arithmetic (×, −): on the console, in the status line
    and the notification too, as in the panels; the notification's lines are lines, not a literal \\n."""
    from helpers.pilot import status_text

    async def visit() -> tuple[list[str], list[str]]:
        app = PlannerApp(start=target("dos-63"), console=True, lister=fake_disks, watch_devices=False,
                         exercise=True)
        said: list[str] = []
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            await pilot.pause()
            app.sector_map.focus()
            for _ in range(2):  # step 2 quotes 116,741 × 16,065 − 1
                await pilot.press("enter")
                await pilot.pause()
                said.append(status_text(app))
            await pilot.press("k")
            await pilot.pause()
            notes = [str(n.message) + str(n.title) for n in app._notifications]
        return said, notes

    said, notes = asyncio.run(visit())
    assert "116,741 x 16,065 - 1" in said[1]
    assert notes and not not_cp437("".join(said + notes)), not_cp437("".join(said + notes))
    assert not any("\\n" in n for n in notes), notes


@pytest.mark.parametrize(("console", "ellipsis"), [(True, "..."), (False, "…")])
def test_the_demo_picker_cuts_a_long_title_on_one_line_and_says_so(console: bool, ellipsis: str) -> None:
    """At 80 columns the longest demo title wrapped, its second line below the list's fold: it read as cut
    mid-phrase ("... PVs on partitions from"). One line per demo; a cut one ends in the profile's ellipsis."""
    long = "lvm-partition"
    title = demos.find(long).title.split(":")[0]

    async def go() -> list[str]:
        app = PlannerApp(start=target("ssd-gpt-34"), console=console)
        async with app.run_test(size=(80, 25)) as pilot:
            await wait_for(pilot, lambda: app.target is not None, 5)
            await pilot.press("d")
            await pilot.pause(0.2)
            await pilot.press(*["down"] * demos.names().index(long))
            await pilot.pause(0.2)
            return screen_text(app).splitlines()

    lines = asyncio.run(go())
    at = next(i for i, line in enumerate(lines) if long in line)
    shown = lines[at].split(long, 1)[1].strip().split("  ")[0]  # up to the padding
    assert shown.endswith(ellipsis) and title.startswith(shown.removesuffix(ellipsis))
    assert "parted -a optimal" not in lines[at + 1]  # no wrapped rest of the title under it
    for s in demos.SCENARIOS[demos.names().index(long) - 5:demos.names().index(long)]:  # whole when they fit
        assert any(s.name in line and s.title.split(":")[0] in line for line in lines), s.name
