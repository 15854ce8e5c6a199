"""Hostile bytes: what a careless or hostile disk, image or plan file holds must not reach the terminal, hang
diskplan, exhaust its memory or end in an "internal error"; a misread input is an error, not a guess."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable

import pytest

from conftest import need_tool, run

MiB = 1 << 20
EVIL = "\x1b]0;OWNED\x07\x1b[2J"  # retitles an xterm, then clears the screen
EVIL_SFDISK = r"\x1b]0;OWNED\x07\x1b[2J"  # the same name as sfdisk writes it


def diskplan(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, timeout=timeout,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    assert b"Traceback" not in proc.stderr + proc.stdout
    assert b"internal error" not in proc.stderr + proc.stdout
    return proc


def one_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The whole of stderr, which must be one line."""
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err


def evil_image(sparse_image: Callable[..., pathlib.Path], name: str = "evil.img") -> pathlib.Path:
    img = sparse_image(64 * MiB, name)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img),
        input=f'label: gpt\nstart=2048, size=20480, name="{EVIL_SFDISK}"\n')
    return img


# --- 5. terminal escapes --------------------------------------------------------------------------------


def test_check_shows_an_escape_in_a_partition_name_without_sending_it(sparse_image) -> None:  # type: ignore[no-untyped-def]
    img = evil_image(sparse_image)
    proc = diskplan("check", str(img))
    assert proc.returncode == 0
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    assert rb"\x1b]0;OWNED\x07\x1b[2J" in proc.stdout  # shown, visibly
    # JSON escapes it itself and keeps the name exact.
    doc = json.loads(diskplan("check", "--json", str(img)).stdout)
    assert doc["partitions"][0]["name"] == EVIL


def test_a_path_with_escapes_and_markup_is_shown_as_it_is(sparse_image) -> None:  # type: ignore[no-untyped-def]
    img = evil_image(sparse_image, "[bold]x\x1b[31m.img")
    proc = diskplan("check", str(img))
    assert b"\x1b" not in proc.stdout
    assert rb"[bold]x\x1b[31m.img" in proc.stdout  # not eaten as rich markup
    proc = diskplan("check", str(img) + "\x9b2J")  # no such file: the error quotes the path, escaped
    assert proc.returncode == 2 and "\x9b" not in proc.stderr.decode() and "\\x9b2J" in one_line(proc)


def test_apply_keeps_a_hostile_name_byte_for_byte_and_shows_it_escaped(sparse_image, tmp_path) -> None:  # type: ignore[no-untyped-def]
    img = evil_image(sparse_image)
    plan = json.loads(diskplan("export", str(img)).stdout)
    plan["partitions"].append({"start": 40960, "size": 2048})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    proc = diskplan("apply", str(path), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in proc.stdout + proc.stderr and rb"\x1b]0;OWNED" in proc.stdout
    assert f'name="{EVIL_SFDISK}"' in run("sfdisk", "--dump", str(img))  # written back unchanged


def test_the_planner_shows_escapes_from_the_disk_and_still_draws_the_map(sparse_image) -> None:  # type: ignore[no-untyped-def]
    from diskplan.backend.reader import read
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.target import Target
    from test_ui_commit import wait_for

    img = evil_image(sparse_image, "evil\x1b[2J.img")

    def screen_text(app: PlannerApp) -> str:
        return "\n".join("".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips())

    async def go() -> None:
        app = PlannerApp(start=Target(read(str(img)), img.name, note=f"note {EVIL}", path=str(img)))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            await pilot.pause(0.2)
            for key in ("", "i", "e"):  # the explain panel, the facts with the note, the notifications
                if key:
                    await pilot.press(key)
                    await pilot.pause(0.2)
                text = screen_text(app)
                assert not any(ch in text for ch in "\x1b\x07\x9b"), repr(text)
            assert r"\x1b]0;OWNED\x07\x1b[2J" in text  # the list, the status line, the explanation
            assert r"evil\x1b[2J.img" in text  # the title
            assert " 126,880 " in text  # the map is drawn (its last row's label)
            app.action_edit_partition()  # the dialog that edits the name: shown escaped, kept when not edited
            await pilot.pause(0.3)
            assert not any(ch in screen_text(app) for ch in "\x1b\x07")
            await pilot.press("enter")
            await pilot.pause(0.3)
            assert app.session is not None and app.session.plan.partition(1).name == EVIL  # type: ignore[union-attr]

    asyncio.run(go())
