"""diskplan's benchmark: ratios against a floor measured in the same run, so they hold on a busy machine.

    make bench            (or .venv/bin/python scripts/bench.py [--runs N] [--only NAME ...])

It prints; it asserts nothing. Measured:
  startup  start-up to the first complete frame of `diskplan --demo` vs a minimal Textual app (Header, Static,
           Footer), both in a pseudo-terminal of 80x25: the time until the mark each writes behind that frame
           reaches the terminal (then both exit; the time to exit and the peak memory are printed too)
  drag     one one-grain drag step (plan update, snap, re-render) on a 20 TB disk with 128 GPT partitions vs a
           1 GB disk with one partition, driven through the real app headless; median step time, and beside it
           the CPU time and the calls per step (the calls are deterministic: on a loaded machine the times
           scatter by tens of percent, the calls say whether the big disk costs more work)
  bytes    bytes written to an 80x25 terminal for one drag step, beside a full redraw's
  write    writing a 128-partition plan to an image: `diskplan apply --yes` vs `sfdisk` from a script
  check    `diskplan check --json` on a 128-partition image vs `parted -s IMG unit s print` (wall time, and the CPU
           time of each process tree beside it, with the load average: the machine is shared); 100 images in
           one `check` call vs 100 calls of `sfdisk -J`
  move     moving 1 GiB on a loop device vs `dd bs=4M iflag=direct oflag=direct` (scripts/bench_move.py)
  plan     reading and checking a plan file of 200,000 msdos entries vs json.loads of the same text (the
           checks were quadratic: over 11 minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

from bench_move import bench_move
from bench_ui import bench_bytes, bench_drag
from benchlib import DISKPLAN, PY, REPO, Row, fmt_s, run_to_exit, term_env
from rich.console import Console
from rich.table import Table

# --- start-up -------------------------------------------------------------------------------------


def bench_startup(runs: int) -> list[Row]:
    env = term_env(DISKPLAN_BENCH="first-frame")
    ours_cmd = [*DISKPLAN, "--demo"]
    floor_cmd = [PY, str(REPO / "scripts" / "bench_floor.py")]
    run_to_exit(ours_cmd, env)  # warm the page cache and the bytecode for both
    run_to_exit(floor_cmd, env)
    ours, floor = [], []
    runs *= 3  # a few hundred ms each, and this machine's noise is of the order of the difference
    for _ in range(runs):  # interleaved, so a busy moment hits both
        ours.append(run_to_exit(ours_cmd, env))
        floor.append(run_to_exit(floor_cmd, env))
    ours_frames = [r.first_frame for r in ours if r.first_frame is not None]
    floor_frames = [r.first_frame for r in floor if r.first_frame is not None]
    if len(ours_frames) + len(floor_frames) < len(ours) + len(floor):
        raise RuntimeError("a run exited without marking its first frame")
    t_ours = statistics.median(ours_frames)
    t_floor = statistics.median(floor_frames)
    x_ours = statistics.median(r.wall for r in ours)
    x_floor = statistics.median(r.wall for r in floor)
    m_ours = max(r.maxrss_kib for r in ours)
    m_floor = max(r.maxrss_kib for r in floor)
    return [
        Row("start-up to first frame (--demo)", fmt_s(t_ours), fmt_s(t_floor), t_ours / t_floor, "<= 1.3x",
            f"median of {runs}, includes building the demo image; until the frame is on the terminal"),
        Row("  the same, until the process exited", fmt_s(x_ours), fmt_s(x_floor), x_ours / x_floor, "-",
            "adds Textual's shutdown (its input thread polls every 100 ms)"),
        Row("peak memory (max RSS)", f"{m_ours / 1024:.1f} MiB", f"{m_floor / 1024:.1f} MiB", m_ours / m_floor,
            "<= 1.5x", "the main process (forked readers not counted)"),
    ]


# --- writing a 128-partition plan ----------------------------------------------------------------


def _plan_128(sectors: int) -> tuple[dict[str, object], str]:
    size = 256 * 2048  # 256 MiB in 512-byte sectors
    parts = [{"number": i + 1, "start": 2048 + i * size, "size": size, "type": "Linux filesystem"} for i in range(128)]
    assert 2048 + 128 * size < sectors - 34
    plan = {"format": "diskplan-plan", "version": 1, "label": "gpt", "sector_size": 512, "partitions": parts}
    script = "label: gpt\n" + "".join(f"start={p['start']}, size={p['size']}, type=L\n" for p in parts)
    return plan, script


def bench_write(runs: int) -> list[Row]:
    sectors = 64 * 2**30 // 512
    plan, script = _plan_128(sectors)
    with tempfile.TemporaryDirectory(prefix="diskplan-bench-") as tmp:
        plan_path = pathlib.Path(tmp, "plan.json")
        plan_path.write_text(json.dumps(plan))
        img = pathlib.Path(tmp, "disk.img")

        def fresh() -> None:
            img.unlink(missing_ok=True)
            with open(img, "wb") as f:
                f.truncate(sectors * 512)

        def timed(cmd: list[str], stdin: str | None = None) -> float:
            fresh()
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=term_env())
            dt = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"{cmd[0]} failed: {proc.stderr.strip()[-300:]}")
            return dt

        ours_cmd = [*DISKPLAN, "apply", str(plan_path), str(img), "--yes", "--backup", str(pathlib.Path(tmp, "b"))]
        sfdisk_cmd = ["sfdisk", "-q", str(img)]
        ours, theirs = [], []
        for i in range(runs + 1):
            pathlib.Path(tmp, "b").unlink(missing_ok=True)
            o = timed(ours_cmd)
            t = timed(sfdisk_cmd, script)
            if i:  # the first pair warms caches
                ours.append(o)
                theirs.append(t)
    a, b = statistics.median(ours), statistics.median(theirs)
    return [Row("write 128-partition GPT plan", fmt_s(a), fmt_s(b) + " (sfdisk)", a / b, "<= 1.0x",
                "whole commands; ours also checks use, backs up, verifies")]


def bench_check(runs: int) -> list[Row]:
    """`diskplan check --json` on a 128-partition image vs `parted -s IMG unit s print`, and 100 images in one
    `check` call vs 100 calls of `sfdisk -J`: whole processes, the same run."""
    sectors = 64 * 2**30 // 512
    _, script = _plan_128(sectors)
    with tempfile.TemporaryDirectory(prefix="diskplan-bench-") as tmp:
        big = pathlib.Path(tmp, "big.img")
        with open(big, "wb") as f:
            f.truncate(sectors * 512)
        subprocess.run(["sfdisk", "-q", str(big)], input=script, text=True, check=True, capture_output=True)
        fleet = []
        for i in range(100):
            img = pathlib.Path(tmp, f"d{i}.img")
            with open(img, "wb") as f:
                f.truncate(64 << 20)
            subprocess.run(["sfdisk", "-q", str(img)], input="label: gpt\n,10MiB,L\n,10MiB,S\n,,L\n", text=True,
                           check=True, capture_output=True)
            fleet.append(str(img))

        def timed(cmds: list[list[str]]) -> tuple[float, float]:
            """(wall time, CPU time of the whole process tree: each command and the children it waited for)."""
            t0, cpu = time.perf_counter(), 0.0
            for cmd in cmds:
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=term_env())
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                if proc.returncode not in (0, 1):
                    raise RuntimeError(f"{cmd[0]} failed")
                cpu += usage.ru_utime + usage.ru_stime
            return time.perf_counter() - t0, cpu

        pairs = {
            "one": ([[*DISKPLAN, "check", "--json", str(big)]], [["parted", "-s", str(big), "unit", "s", "print"]]),
            "fleet": ([[*DISKPLAN, "check", "--json", *fleet]], [["sfdisk", "-J", img] for img in fleet]),
        }
        # One image: ~0.1 s a pair, and the machine's speed drifts by a tenth within seconds: many pairs, and the
        # ratio is the median of the pairs' own ratios (a slow moment slows both sides of one pair), as the move's.
        med, cpu, pair, repeats = {}, {}, {}, {"one": runs * 6, "fleet": runs}
        load = os.getloadavg()[0]
        for key, (ours_cmds, floor_cmds) in pairs.items():
            ours, floor = [], []
            for i in range(repeats[key] + 1):
                o, t = timed(ours_cmds), timed(floor_cmds)
                if i:  # the first pair warms caches
                    ours.append(o)
                    floor.append(t)
            med[key] = statistics.median(w for w, _ in ours), statistics.median(w for w, _ in floor)
            pair[key] = statistics.median(o / f for (o, _), (f, _) in zip(ours, floor, strict=True))
            cpu[key] = statistics.median(c for _, c in ours), statistics.median(c for _, c in floor)
        load = max(load, os.getloadavg()[0])
    (a, b), (c, d), (cpu_ours, cpu_floor) = med["one"], med["fleet"], cpu["one"]
    return [Row("check --json, 128 partitions", fmt_s(a), fmt_s(b) + " (parted print)", pair["one"], "<= 1.0x",
                f"whole processes; times: medians; ratio: the median of {repeats['one']} interleaved pairs' ratios (of "
                f"the medians: {a / b:.2f}x); load average up to {load:.1f} "
                f"on {os.cpu_count()} cores"),
            Row("  the same, CPU time", fmt_s(cpu_ours), fmt_s(cpu_floor), cpu_ours / cpu_floor, "-",
                "user+system of the process and the children it waited for (diskplan's reading child)"),
            Row("check 100 images in one call", fmt_s(c), fmt_s(d) + " (100x sfdisk -J)", c / d, "<= 1x",
                "one process; whole checks in one child per core")]


# --- the drag step and the bytes it costs ------------------------------------------------------------


def bench_plan(runs: int) -> list[Row]:
    """model.formats.planfile.load_plan on 200,000 logical partitions vs parsing its JSON alone, in this process."""
    from diskplan.model.formats.planfile import load_plan

    n = 200_000
    entries = [{"start": 2048, "end": 2048 + n * 8 + 100, "role": "extended"},
               *({"start": 2049 + i * 8, "size": 7, "role": "logical"} for i in range(n))]
    text = json.dumps({"label": "msdos", "partitions": entries}, separators=(",", ":"))
    ours, floor = [], []
    for _ in range(max(1, runs // 3)):
        t0 = time.perf_counter()
        load_plan(text)
        t1 = time.perf_counter()
        json.loads(text)
        t2 = time.perf_counter()
        ours.append(t1 - t0)
        floor.append(t2 - t1)
    a, b = statistics.median(ours), statistics.median(floor)
    return [Row("plan file of 200,000 entries", fmt_s(a), fmt_s(b) + " (json.loads)", a / b, "linear",
                f"{len(text) >> 20} MiB of JSON, read and checked; median of {len(ours)}")]


BENCHES: dict[str, Callable[[int], list[Row]]] = {
    "startup": bench_startup,
    "drag": lambda runs: asyncio.run(bench_drag(runs)),
    "bytes": bench_bytes,
    "write": bench_write,
    "check": bench_check,
    "move": bench_move,
    "plan": bench_plan,
}


def compile_sources() -> None:
    """Write the bytecode an installed copy would have (this machine may set PYTHONDONTWRITEBYTECODE)."""
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "src"), str(REPO / "scripts")], check=False)


def main() -> int:
    compile_sources()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", nargs="*", choices=list(BENCHES))
    args = ap.parse_args()
    table = Table(title="diskplan benchmark (ratios measured in this run)", header_style="bold")
    for col in ("measure", "diskplan", "floor", "ratio", "target", "note"):
        table.add_column(col, justify="right" if col in ("ratio",) else "left")
    console = Console()
    for name, fn in BENCHES.items():
        if args.only and name not in args.only:
            continue
        console.print(f"[dim]measuring {name}...[/]")
        try:
            rows = fn(args.runs)
        except Exception as exc:  # a benchmark that breaks says so and the others still run
            table.add_row(name, "-", "-", "-", "-", f"failed: {exc}")
            continue
        for r in rows:
            table.add_row(r.what, r.ours, r.floor, "-" if r.ratio is None else f"{r.ratio:.2f}x", r.target, r.note)
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
