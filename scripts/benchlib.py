"""What scripts/bench.py and scripts/bench_ui.py share: the result row and running a program in a pseudo-terminal.

Both benchmark scripts import this module; neither imports the other's helpers.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import pty
import resource
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[1]
PY = sys.executable
# The command as a user types it (the venv's console script, as README's quick start says), not `python -m
# diskplan`, whose runpy and importlib.util cost a command ~2 ms the user never pays. The venv's install is
# editable (`pip install -e`), but hatchling's is one path line in a .pth, no import hook: against `pip install .`
# in a fresh venv, check --json on 128 partitions measured the same (Nov 27, 150 alternated rounds, load ~5:
# 83.9 and 84.9 ms CPU editable, 84.2 installed; the wall times within noise), so this measures what users run.
_SCRIPT = pathlib.Path(PY).parent / "diskplan"
DISKPLAN = [str(_SCRIPT)] if _SCRIPT.is_file() else [PY, "-m", "diskplan"]


@dataclass
class Row:
    what: str
    ours: str
    floor: str
    ratio: float | None
    target: str
    note: str = ""


# --- running a program in a pseudo-terminal --------------------------------------------------------


@dataclass
class PtyRun:
    wall: float  # seconds from spawn to exit
    maxrss_kib: int
    output: bytes
    first_frame: float | None = None  # seconds from spawn until FIRST_FRAME appeared on the terminal


# What diskplan (under DISKPLAN_BENCH=first-frame) and the floor write behind their first complete frame.
FIRST_FRAME = b"\x1b]2;diskplan-first-frame\x07"


def spawn(cmd: Sequence[str], env: dict[str, str], cols: int, rows: int) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(
        list(cmd), stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO, start_new_session=True
    )
    os.close(slave)
    return proc, master


def drain(master: int, until: Callable[[], bool], quiet: float | None, limit: float,
           mark: tuple[bytes, list[float]] | None = None) -> bytes:
    """Read the terminal until ``until()`` or, with ``quiet``, until no byte came for that long. With
    ``mark`` (bytes, seen): the perf_counter() when those bytes first arrived is appended to ``seen``."""
    out = bytearray()
    deadline = time.monotonic() + limit
    last = time.monotonic()
    while time.monotonic() < deadline and not until():
        ready, _, _ = select.select([master], [], [], 0.02)
        if ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            last = time.monotonic()
            if mark is not None and not mark[1] and mark[0] in out[-len(chunk) - len(mark[0]):]:
                mark[1].append(time.perf_counter())
        elif quiet is not None and out and time.monotonic() - last >= quiet:
            break
    return bytes(out)


def term_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", COLUMNS="80", LINES="25")
    env.pop("TEXTUAL", None)
    # An installed diskplan runs from bytecode, as the floor's Textual does: don't make ours recompile every run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def run_to_exit(cmd: Sequence[str], env: dict[str, str], timeout: float = 60) -> PtyRun:
    t0 = time.perf_counter()
    proc, master = spawn(cmd, env, 80, 25)
    result: list[tuple[int, int, resource.struct_rusage]] = []

    def exited() -> bool:
        if not result:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                result.append((pid, status, usage))
        return bool(result)

    seen: list[float] = []
    out = drain(master, exited, None, timeout, (FIRST_FRAME, seen))
    if not result:  # the terminal closed first (EIO): the child is exiting, or hung past the timeout
        deadline = time.monotonic() + 5
        while not exited() and time.monotonic() < deadline:
            time.sleep(0.002)
    wall = time.perf_counter() - t0
    os.close(master)
    if not result:
        os.kill(proc.pid, 9)
        os.wait4(proc.pid, 0)
        raise RuntimeError(f"{' '.join(cmd)} did not exit within {timeout} s")
    _, status, usage = result[0]
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {status}: {out[-400:]!r}")
    first = seen[0] - t0 if seen else None
    return PtyRun(wall, usage.ru_maxrss, out, first)


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
