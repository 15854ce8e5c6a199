"""Output on a terminal that is not UTF-8 (a serial line, a rescue system's C locale, Latin-1): every command
shows what the encoding lacks as an ASCII lookalike, never "internal error"; documents stay exact."""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskplan.model.safetext import lookalike, width
from helpers.tools import need_tool, run
from helpers.units import MiB

NAME = "Données ×→ 日本"
ENCODINGS = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    "C locale": {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0"},
}


def diskplan(encoding: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_ALL", "PYTHONUTF8")}
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**env, **ENCODINGS[encoding]})
    assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def named_disk(sparse_image: Callable[..., pathlib.Path]) -> pathlib.Path:
    """A partition from sector 34 (its finding's arithmetic has ×) named with accents, an arrow and CJK."""
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input=f'label: gpt\nfirst-lba: 34\nstart=34, size=20480, name="{NAME}"\n')
    return img


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_check_shows_lookalikes(named_disk: pathlib.Path, encoding: str) -> None:
    proc = diskplan(encoding, "check", "--physical-block", "4096", str(named_disk))
    assert proc.returncode == 1  # the finding, reported
    out = proc.stdout.decode("latin-1")
    times = "×" if encoding == "latin-1" else "x"
    assert f"Start: 34 {times} 512 B = 17408 B" in out, out
    if encoding == "ascii":  # (in the C locale libparted cannot translate the name: it reads none)
        assert "Donnees x> ????" in out, out


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("args", [("--help",), ("--list-demos",), ("lesson", "aligned"), ("check", "--help")])
def test_help_lists_and_pages_are_shown(encoding: str, args: tuple[str, ...]) -> None:
    proc = diskplan(encoding, *args)
    assert proc.returncode == 0 and proc.stdout, proc.stderr


def test_an_exported_plan_keeps_its_names_exact(named_disk: pathlib.Path) -> None:
    """A plan is UTF-8 whatever the terminal: ``export > plan.json`` must not turn a name into "?"."""
    for fmt in ("json", "parted"):
        proc = diskplan("ascii", "export", "--format", fmt, str(named_disk))
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout.decode("utf-8")
        assert NAME in text
    doc = json.loads(diskplan("latin-1", "export", str(named_disk)).stdout.decode("utf-8"))
    assert doc["partitions"][0]["name"] == NAME


def test_a_message_on_stderr_uses_lookalikes(tmp_path: pathlib.Path) -> None:
    proc = diskplan("ascii", "check", str(tmp_path / "nowhere→"))
    assert proc.returncode == 2 and b"nowhere>" in proc.stderr, proc.stderr


@given(st.characters(blacklist_categories=("Cc", "Cs")))
def test_a_lookalike_is_ascii_and_as_wide(ch: str) -> None:
    shown = lookalike(ch)
    assert shown.isascii() and width(shown) == width(ch)


def _pty_run(env: dict[str, str], keys: bytes, seconds: float, signum: int = 0) -> tuple[int, bytes]:
    """The planner on a pseudo-terminal of 80x25: what it drew, and its exit status after ``keys`` (or, with
    ``signum``, that signal sent instead)."""
    main, sub = os.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 25, 80, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "diskplan", "--demo"], stdin=sub, stdout=sub, stderr=sub,
                            env=env, start_new_session=True)
    os.close(sub)
    drawn = b""
    deadline = time.monotonic() + seconds
    sent = False
    try:
        while time.monotonic() < deadline:
            if select.select([main], [], [], 0.2)[0]:
                try:
                    drawn += os.read(main, 65536)
                except OSError:  # the planner ended and closed the terminal
                    break
            if not sent and b"quit" in drawn:
                time.sleep(0.5)
                if signum:
                    proc.send_signal(signum)
                else:
                    os.write(main, keys)
                sent = True
            if sent and proc.poll() is not None:
                break
        return proc.wait(timeout=10), drawn
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)


def test_the_planner_draws_in_ascii_on_an_ascii_terminal() -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "TERM": "linux"}
    code, drawn = _pty_run(env, b"q", 60)
    assert code == 0, drawn[-500:]
    assert b"UnAlign" in drawn
    assert drawn.isascii()
    assert b"\\u25" not in drawn and b"\\u2502" not in drawn  # not Python's escapes of the box drawing


def test_sigterm_ends_the_idle_planner_at_once_with_a_line_and_status_2() -> None:
    """The handler runs while the idle loop waits in select(): the planner must end then (it went on until a
    key woke it), not with 0 ("done") but as a Ctrl+C ends a command before any write (model.exitstatus)."""
    code, drawn = _pty_run({**os.environ, "TERM": "linux"}, b"", 30, signal.SIGTERM)
    assert b"diskplan: ended by SIGTERM (nothing was written)" in drawn, drawn[-500:]
    assert code == 2


@pytest.mark.parametrize("encoding", ["ascii", "C locale"])
def test_an_exported_script_names_a_file_by_its_own_bytes(tmp_path: pathlib.Path, encoding: str) -> None:
    """A file name that is not UTF-8 (Latin-1 "café") reaches the script as its bytes, as sfdisk's own dump
    does, not as an error."""
    img = os.path.join(os.fsencode(tmp_path), b"caf\xe9.img")
    with open(img, "wb") as f:
        f.truncate(16 * MiB)
    run(need_tool("sfdisk"), "-q", os.fsdecode(img), input="label: gpt\nstart=2048, size=2048\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_ALL", "PYTHONUTF8")}
    proc = subprocess.run([sys.executable.encode(), b"-m", b"diskplan", b"export", b"--format", b"sfdisk", img],
                          capture_output=True, timeout=120, env={**env, **ENCODINGS[encoding]})
    assert proc.returncode == 0 and b"internal error" not in proc.stderr, proc.stderr
    assert b"sfdisk '" + img + b"' < this-file" in proc.stdout
