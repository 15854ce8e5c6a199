"""The planner's part of `make bench` (scripts/bench.py runs it; both share scripts/benchlib.py).

  drag   one one-grain keyboard drag step on a 20 TB disk with 128 GPT partitions (one of them proposed, the
         one moved) vs a 1 GB disk with that proposal alone: the real app, headless (Textual's run_test), each
         step timed from handing the key to the driver until every widget has handled its messages and the
         screen update is composed (Pilot.press itself waits for the CPU to go idle, tens of ms, so it is not
         used for timing); median of the steps, and the ratio of the medians; the same for this process's
         CPU time per step, and for the calls per step (four more steps, counted, not timed).
  bytes  the real planner (`diskplan --demo empty`) in a pseudo-terminal of 80x25: a new gpt label and a
         10 GiB proposal are made with the keys, move mode is entered (m), then the bytes the planner writes
         for one step (Right) are counted, beside a full redraw (Ctrl+L, what a user presses after line noise
         on a serial console): the whole screen, as the first frame writes it.

Run alone: .venv/bin/python scripts/bench_ui.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from benchlib import DISKPLAN, Row, drain, fmt_s, spawn, term_env

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from diskplan.ui.target import Target

MiB = 2048  # sectors of 512 B
STEP_TARGET = "<= 1.2x"
BYTES_TARGET = "<= 600 B"


def _target(sectors: int, existing: int) -> Target:
    """A GPT disk with ``existing`` partitions on it and free space after them for the proposal."""
    from diskplan.model.disk import Disk
    from diskplan.model.extent import Partition
    from diskplan.model.geometry import Geometry
    from diskplan.model.table import new_table
    from diskplan.ui.target import Target

    geom = Geometry(sectors=sectors, physical=4096)
    table = new_table("gpt", geom)
    span = (table.last_usable - 2048) // (existing + 1) // MiB * MiB
    parts = tuple(Partition(i + 1, 2048 + i * span, 2048 + (i + 1) * span - 1) for i in range(existing))
    return Target(Disk(geom, table.with_partitions(parts)), f"{existing + 1} partitions")


@dataclass
class Steps:
    """One disk's drag steps: wall time, this process's CPU time (what a busy machine disturbs least), and
    Python/C calls (deterministic: a rescan that grows with the disk shows up here whatever the load)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)


async def _step(pilot: Pilot[int], key: str, count: bool = False) -> tuple[float, float, int]:
    """One key, timed until it is handled and the screen update is composed (with ``count``: its calls
    counted instead, which slows it: those steps are not timed)."""
    from textual import events

    app = pilot.app
    calls = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    if count:
        sys.setprofile(profile)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        event = events.Key(key, None)
        event.set_sender(app)
        assert app._driver is not None  # the pilot's app is running
        app._driver.send_message(event)
        await pilot._wait_for_screen()
        app.screen._on_timer_update()  # what Textual's refresh timer does: compose and write the update
    finally:
        if count:
            sys.setprofile(None)
    return time.perf_counter() - t0, time.process_time() - c0, calls


async def _drag_steps(sectors: int, existing: int, steps: int, out: Steps) -> None:
    from diskplan.ui.app import PlannerApp

    app = PlannerApp(start=_target(sectors, existing))
    async with app.run_test(size=(80, 25)) as pilot:
        await pilot.pause()
        await pilot.pause()
        app.clear_notifications()
        assert app.session is not None
        gap = app.session.plan.free_regions()[-1]
        outcome = app.session.plan.propose(gap.lo, 64 * MiB)
        assert outcome.ok and outcome.number is not None, outcome.message
        app._step(outcome)
        proposed = outcome.plan.partition(outcome.number)
        assert proposed is not None
        app.sector_map.move_to(proposed.start)
        await pilot.press("m")
        await pilot.pause()
        for i in range(steps + 5):
            wall, cpu, _ = await _step(pilot, "right" if i % 2 == 0 else "left")
            if i >= 5:  # the first steps warm the caches
                out.wall.append(wall)
                out.cpu.append(cpu)
        for i in range(4):
            out.calls.append((await _step(pilot, "right" if i % 2 == 0 else "left", count=True))[2])
        await pilot.pause()
        drag = app.session.drag
        assert drag is not None and drag.last is not None and drag.last.ok, "the steps did not move the partition"
        await pilot.press("escape")


async def bench_drag(runs: int) -> list[Row]:
    rounds, steps = 4, max(10, runs * 5)
    small_t, big_t = Steps(), Steps()
    for _ in range(rounds):  # interleaved, so a busy moment hits both
        await _drag_steps(10**9 // 512, 0, steps, small_t)
        await _drag_steps(20 * 10**12 // 512, 127, steps, big_t)
    small, big = statistics.median(small_t.wall), statistics.median(big_t.wall)
    small_cpu, big_cpu = statistics.median(small_t.cpu), statistics.median(big_t.cpu)
    small_calls, big_calls = statistics.median(small_t.calls), statistics.median(big_t.calls)
    print(f"drag step: 1 GB/1 partition {fmt_s(small)}, 20 TB/128 partitions {fmt_s(big)} "
          f"(median of {len(big_t.wall)} steps); CPU {fmt_s(small_cpu)} vs {fmt_s(big_cpu)}; "
          f"calls {small_calls:.0f} vs {big_calls:.0f}")
    return [Row("drag step, 20 TB/128 parts vs 1 GB/1", fmt_s(big), fmt_s(small), big / small, STEP_TARGET,
                f"median of {len(big_t.wall)} one-grain key steps, headless app"),
            Row("  the same, CPU time", fmt_s(big_cpu), fmt_s(small_cpu), big_cpu / small_cpu, STEP_TARGET,
                "this process's CPU time per step: what other load disturbs least"),
            Row("  the same, calls", f"{big_calls:.0f}", f"{small_calls:.0f}", big_calls / small_calls, STEP_TARGET,
                "Python and C calls per step: deterministic, the work itself")]


# --- bytes on the terminal ------------------------------------------------------------------------


KEYS = {"enter": b"\r", "right": b"\x1b[C", "left": b"\x1b[D", "ctrl+a": b"\x01", "ctrl+k": b"\x0b",
        "ctrl+l": b"\x0c", "escape": b"\x1b"}


class Terminal:
    """The planner in a pseudo-terminal: send keys, count what comes back until it has been quiet a while."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.proc, self.master = spawn(cmd, env, 80, 25)

    def read(self, quiet: float = 0.4, limit: float = 60) -> bytes:
        return drain(self.master, lambda: False, quiet, limit)

    def press(self, *keys: str, quiet: float = 0.4) -> bytes:
        out = b""
        for key in keys:
            os.write(self.master, KEYS.get(key, key.encode()))
            out += self.read(quiet)
        return out

    def close(self) -> None:
        try:
            os.write(self.master, b"q")
            self.read(0.5, 5)
        finally:
            os.close(self.master)
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()


def bench_bytes(runs: int) -> list[Row]:
    term = Terminal([*DISKPLAN, "--demo", "empty"], term_env())
    try:
        first = term.read(quiet=1.0)  # the first frame (the demo image is built while Textual starts)
        if b"demo empty" not in first:
            raise RuntimeError("the planner did not show the empty demo")
        term.press("L", "enter", quiet=0.6)  # a new gpt label
        term.press("n", quiet=0.6)
        term.press("ctrl+a", "ctrl+k", *"10GiB", quiet=0.3)
        term.press("enter", quiet=0.6)  # partition 1 at 1 MiB, 10 GiB, under the cursor
        term.press("m", quiet=0.6)
        steps = [len(term.press("right" if i % 2 == 0 else "left")) for i in range(max(5, runs))]
        term.press("enter", quiet=0.6)
        redraws = [len(term.press("ctrl+l", quiet=0.6)) for _ in range(3)]
    finally:
        term.close()
    step, redraw = statistics.median(steps), statistics.median(redraws)
    print(f"bytes: one drag step {step:.0f} B (each: {steps}), full redraw {redraw:.0f} B, first frame {len(first)} B")
    return [Row("bytes for one drag step (80x25)", f"{step:.0f} B", f"{redraw:.0f} B (full redraw)",
                  step / redraw, BYTES_TARGET, "median of one-grain Right presses in move mode; redraw = Ctrl+L")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", choices=["drag", "bytes"])
    args = ap.parse_args()
    rows = []
    if args.only in (None, "drag"):
        rows += asyncio.run(bench_drag(args.runs))
    if args.only in (None, "bytes"):
        rows += bench_bytes(args.runs)
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        print(f"{r.what}: {r.ours} vs {r.floor} ({ratio}; target {r.target}) {r.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
