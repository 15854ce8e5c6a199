#!/usr/bin/env python3
"""Make screenshots/*.svg from real runs of the planner: real demo images written by libparted, read back
through the forked reader, driven by Pilot key presses, saved with ``App.save_screenshot``.

    .venv/bin/python scripts/screenshots.py [NAME ...]      (make screenshots)

The 4Kn demo needs root (a loop device with 4096-byte sectors); without it that shot shows the
model-only fallback, as the planner itself would. The planning shots type their plan with the keys, and
the confirmation shot waits for libparted to build the table in memory (nothing is written: the shot is
taken before the answer).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.segment import Segment, Segments

from diskplan.cli.planner import CliSource, parser
from diskplan.ui.app import PlannerApp
from diskplan.ui.commit_screen import CommitScreen
from diskplan.ui.move_screen import MoveScreen

OUT = pathlib.Path(__file__).resolve().parents[1] / "screenshots"


@dataclass(frozen=True)
class Shot:
    name: str
    demo: str  # a demo's name (empty when ``image`` builds the disk)
    keys: tuple[str, ...] = ()
    size: tuple[int, int] = (100, 30)
    console: bool = False
    about: str = ""
    image: Callable[[pathlib.Path], str] | None = None  # builds a disk image to open instead of the demo
    args: tuple[str, ...] = ()  # the planner's options for that image
    exercise: bool = False  # the demo opened as an exercise (--exercise)


def misaligned_pv(directory: pathlib.Path) -> str:
    """GPT with partition 1 at 1 MiB holding an LVM2 PV whose pe_start is 1 MiB + 1 KiB: the data misses
    4 KiB flash pages although the partition is aligned (the headers pvs would read: model.formats.lvmformat)."""
    import subprocess

    from diskplan.model.formats.lvmformat import StripedVg, pv_header_pieces

    img = directory / "misaligned-pv.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["parted", "-s", str(img), "mklabel", "gpt", "mkpart", "p", "1MiB", "100%"], check=True,
                   capture_output=True)
    with open(img, "r+b") as f:
        for off, data in pv_header_pieces(StripedVg("vgdata01", 62 << 20, (1 << 20) + 1024, 4 << 20, 8192), 0):
            f.seek((1 << 20) + off)
            f.write(data)
    return str(img)


def _ext4_gpt_image(path: pathlib.Path, script: str, start: int) -> str:
    """A 4 GiB image at `path` with the GPT `script` (sfdisk) and a 1 GiB ext4 at sector `start`."""
    with open(path, "wb") as f:
        f.truncate(4 << 30)
    subprocess.run(["sfdisk", "--quiet", "--no-reread", str(path)], input=script, text=True, check=True,
                   capture_output=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "data", "-E", f"offset={start * 512}", str(path), "1G"],
                   check=True, capture_output=True)
    return str(path)


def old_gpt(directory: pathlib.Path) -> str:
    """A 4 GiB disk partitioned as old tools did: a 1 GiB ext4 partition from sector 34 (made by sfdisk and
    mkfs.ext4), then free space: what A realigns."""
    return _ext4_gpt_image(directory / "old-gpt-34.img",
                           "label: gpt\nfirst-lba: 34\nstart=34, size=2097152, type=linux, name=data\n", 34)


def ext4_gpt(directory: pathlib.Path) -> str:
    """A 4 GiB disk with a 1 GiB ext4 partition at 1 MiB, then free space: what r grows or shrinks."""
    return _ext4_gpt_image(directory / "ext4-gpt.img", "label: gpt\nstart=2048, size=2097152, type=linux, name=data\n",
                           2048)


WAIT = "(wait)"  # a key that waits for the planner's workers (a filesystem measured) before the next key

SHOTS = (
    Shot("overview", "modern", about="a modern aligned disk, whole-disk zoom"),
    Shot("ssd-gpt-34", "ssd-gpt-34", ("1",),
         about="an SSD reporting 512/512 with a GPT partition at 34s, one sector per cell"),
    Shot("advanced-format", "advanced-format", ("1",), about="a 512e HDD: partitions at 17.4 kB and 1 MiB"),
    Shot("stripe", "stripe", ("1", *["minus"] * 8), about="192 KiB stripe: the 3 MiB grain's lines"),
    Shot("disk-facts", "stripe", ("i",), about="the device facts and the demo's lesson"),
    Shot("lvm-stripe", "lvm-partition", ("1", "minus", "minus", "minus"),
         about="the LVM-striping experiment: a PV on a 1 MiB partition, its extent 0 marked at 2 MiB"),
    Shot("explain-stack", "", ("e",), (110, 40), about="the explain panel walking down a partition's stack to a "
         "misaligned pe_start", image=misaligned_pv, args=("--ssd",)),
    Shot("console", "dos-63", ("1",), (80, 25), True, "TERM=linux at 80x25: CP437 glyphs, 16 colours"),
    Shot("console-help", "empty", ("question_mark",), (80, 25), True, "the help screen on a console"),
    Shot("demos", "ssd-gpt-34", ("d", "down", "down"), (80, 25), about="the demo disks"),
    Shot("propose", "empty", ("L", "enter", "n", "ctrl+a", "ctrl+k", *"100MB"),
         about="a new partition: MB is decimal, and the dialog says what MiB would be"),
    Shot("planning", "modern", ("]", "]", "]", "x", "n", "ctrl+a", "ctrl+k", *"100GiB", "enter", "m", "right", "right",
                                "enter", "c"),
         about="home marked for deletion, a 100 GiB proposal moved two grains, the pending changes"),
    Shot("console-move", "modern", ("]", "]", "]", "x", "n", "ctrl+a", "ctrl+k", *"100GiB", "enter", "m", "right"),
         (80, 25), True, "moving a proposal with the keys on a console: requested -> snapped in the status line"),
    Shot("confirm", "modern", ("]", "]", "]", "x", "n", "ctrl+a", "ctrl+k", *"100GiB", "enter", "w"),
         about="the confirmation screen: every operation and the resulting table, sector-exact"),
    Shot("realign", "", ("A", "c"), image=old_gpt,
         about="A realigns a partition that holds data: 34s -> 2048s, a data move with bytes and an estimate"),
    Shot("realign-confirm", "", ("A", "w"), image=old_gpt,
         about="the data move's confirmation: sector-exact, the measured estimate, what each move does"),
    Shot("exercise", "dos-63", ("k",), exercise=True,
         about="dos-63 as an exercise: the goal, and what the check (k) finds still wrong, with its arithmetic"),
    Shot("exercise-solved", "dos-63", ("A", "k"), exercise=True,
         about="the exercise solved by realigning in place (A): the check ties it back to the experiment"),
    Shot("resize", "", ("r", WAIT, "up", "up", "up"), image=ext4_gpt,
         about="r on an ext4 that holds data: measured first, the status line says how far a shrink can go"),
    Shot("resize-confirm", "", ("r", WAIT, "up", "up", "up", "enter", "w"), image=ext4_gpt,
         about="a shrink in the move dialog: sector-exact, what resize2fs does and in which order"),
)


async def take(shot: Shot, source: CliSource) -> pathlib.Path:
    start = ("demo", shot.demo)
    if shot.image is not None:
        image = shot.image(pathlib.Path(source.workspace.directory))
        source = CliSource(parser().parse_args([image, *shot.args]))
        start = ("path", image)
    app = PlannerApp(source, start, console=shot.console, exercise=shot.exercise)
    async with app.run_test(size=shot.size) as pilot:
        for _ in range(200):  # the demo image is built and read in a worker
            await pilot.pause(0.02)
            if app.target is not None:
                break
        else:
            raise RuntimeError(f"{shot.demo} did not open")
        await pilot.pause()
        app.clear_notifications()
        for key in shot.keys:
            if key == WAIT:
                await app.workers.wait_for_complete()
                await pilot.pause()
            else:
                await pilot.press(key)
        if isinstance(app.screen, CommitScreen | MoveScreen):
            screen = app.screen
            for _ in range(600):
                await pilot.pause(0.05)
                if (screen.proposal if isinstance(screen, CommitScreen) else screen.first) is not None:
                    break
        await pilot.pause(0.1)
        app.clear_notifications()
        await pilot.pause(0.1)
        path = OUT / f"{shot.name}.svg"
        path.write_text(export_svg(app), encoding="utf-8")
    return path


def export_svg(app: PlannerApp) -> str:
    """Like ``App.export_screenshot``, but without the map's per-cell hit-testing metadata, so runs of
    equal cells become one SVG text element (a tenth of the size)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    assert update is not None  # a full update always renders
    merged: list[Segment] = []
    for text, style, control in console.render(update):
        style = style.clear_meta_and_links() if style else style
        last = merged[-1] if merged else None
        # Join equal cells; never join across a cursor move, nor blanks with glyphs (some SVG
        # renderers squeeze the spaces inside a text element).
        if (
            last is not None
            and not control
            and not last.control
            and last.style == style
            and (not last.text.strip()) == (not text.strip())
            and (" " not in last.text + text or not (last.text + text).strip())
        ):
            merged[-1] = Segment(last.text + text, style)
        else:
            merged.append(Segment(text, style, control))
    console.print(Segments(merged))
    return console.export_svg(title=app.title)


BROWSER_SHOT = "serve"  # screenshots/serve.png: `diskplan serve` in headless Chromium, taken by its test


def browser_shot() -> pathlib.Path:
    """The browser test (tests/test_serve.py) keeps its screenshot here: the page as a browser shows it."""
    path = OUT / f"{BROWSER_SHOT}.png"
    env = {**os.environ, "DISKPLAN_BROWSER_SHOT": str(path)}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-k", "a_browser_sees",
                    str(OUT.parent / "tests" / "test_serve.py")], check=True, env=env, cwd=OUT.parent)
    if not path.exists():  # the test was skipped (it says why): no browser here
        raise SystemExit(f"{path.name} was not taken: the browser test was skipped")
    return path


async def main(names: list[str]) -> int:
    chosen = [s for s in SHOTS if not names or s.name in names]
    if not chosen and BROWSER_SHOT not in names:
        print(f"no such screenshot; choose from: {', '.join(s.name for s in SHOTS)}, {BROWSER_SHOT}", file=sys.stderr)
        return 2
    OUT.mkdir(exist_ok=True)
    if not names or BROWSER_SHOT in names:
        print(f"{browser_shot().relative_to(OUT.parent)}  the planner served to a browser (diskplan serve)")
    source = CliSource(parser().parse_args([]))
    try:
        for shot in chosen:
            path = await take(shot, source)
            print(f"{path.relative_to(OUT.parent)}  {shot.about}")
    finally:
        source.close()
    return 0


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("names", nargs="*", help="which screenshots (default: all)")
    raise SystemExit(asyncio.run(main(cli.parse_args().names)))
