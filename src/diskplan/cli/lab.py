"""``diskplan measure --lab NAME``: run one experiment's pattern (model.teach.lab) in the bytes measure chose and the
user confirmed, at the aligned offset and as from LBA 34 or 63, and print the experiment's number beside the
student's, with a line where this device cannot show the effect."""

from __future__ import annotations

import os
from collections.abc import Callable

from diskplan.backend import labrun
from diskplan.backend.iotime import Interrupted
from diskplan.cli.textout import Out
from diskplan.discovery.devicekind import DeviceKind
from diskplan.discovery.topology import set_scheduler, topology
from diskplan.model.exitstatus import Exit, stopped
from diskplan.model.teach.lab import SSD_DEPTH, SSD_JOBS, Lab, fio_job, stripe_arithmetic
from diskplan.model.units import human_bytes


def _pair(console: Out, what: str, unit: str, base: int, lab: Lab, timed: Callable[[int], float], seed: str,
          *, percent: bool = False) -> None:
    """Time ``timed`` at each offset of ``lab`` and print them, with aligned/misaligned and the seed's figure.
    ``unit`` "B/s" is said in bytes per second as the experiment did (GB/s), others as counts."""
    # A, B, B, A: the first timing of a range pays for warming it (a scratch file's blocks, a device's cache);
    # the mean of both orders weighs that on each offset alike
    (la, da), (lb, db) = lab.offsets()
    a1, b1, b2, a2 = timed(base + da), timed(base + db), timed(base + db), timed(base + da)
    got = [(la, base + da, (a1 + a2) / 2), (lb, base + db, (b1 + b2) / 2)]
    console.print(f"{what}:", style="bold")
    for label, at, value in got:
        shown = f"{value / 1e9:.2f} GB/s ({human_bytes(int(value))}/s)" if unit == "B/s" else f"{value:,.0f} {unit}"
        console.print(f"  {label:<10} byte {at:,}: {shown}")
    aligned, other = got[0][2], got[1][2]
    if other > 0:
        mine = f"{(aligned / other - 1) * 100:+.0f}% aligned" if percent else f"aligned/this = {aligned / other:.2f}x"
        console.print(f"  yours: {mine}; the experiment: {seed}")


def run_lab(console: Out, err: Out, path: str, placed: tuple[int, int], lab: Lab, seconds: float,
            dev: DeviceKind, fio_path: str | None) -> int:
    base, end = placed
    console.print(f"lab {lab.name}: {lab.title}", style="bold")
    console.print(f"the experiment: {lab.seed}")
    console.print(f"here: {lab.shape}; {seconds:g} s per timing, each offset timed twice (A B B A)")
    console.print(f"what it cannot show: {lab.cannot}", style="dim")
    wrote = False
    try:
        if lab.name == "ssd":
            wrote = True
            _pair(console, "sequential 4 KiB direct writes", "IOPS", base, lab,
                  lambda at: labrun.parallel_sequential(path, at, True, seconds), "19x (~28,000 vs ~1,500 IOPS)")
            _pair(console, "sequential 4 KiB direct reads", "IOPS", base, lab,
                  lambda at: labrun.parallel_sequential(path, at, False, seconds), "1.3x (~28,700 vs ~21,400 IOPS)")
            job = fio_job(path, base, base + lab.misaligned, max(1, round(seconds)))
            if fio_path:
                with open(fio_path, "x", encoding="utf-8") as f:
                    f.write(job)
                console.print(f"fio job file: {fio_path} (run `fio {fio_path}`: the same bytes, libaio, "
                              f"{SSD_JOBS} jobs x iodepth {SSD_DEPTH})")
            else:
                console.print("the experiment's fio job for these bytes (save it, then `fio FILE`; or --fio-job FILE):",
                              style="bold")
                for line in job.splitlines():
                    console.print(f"  {line}")
        elif lab.name == "fsync":
            wrote = True
            _pair(console, "4 x 4 kB open_sync writes", "ops/s", base, lab,
                  lambda at: labrun.synced(path, at, "4x4k", seconds), "+25% (3,991 -> 4,989 ops/s)", percent=True)
            _pair(console, "one 16 kB write + fdatasync", "ops/s", base, lab,
                  lambda at: labrun.synced(path, at, "16k+fdatasync", seconds), "+8% (9,700 -> 10,500 ops/s)",
                  percent=True)
        elif lab.name == "metadata":
            wrote = True
            _pair(console, "creates (two 4 KiB writes + fdatasync each)", "creates/s", base, lab,
                  lambda at: labrun.creates(path, at, 8 << 20, seconds), "file creation up to 2.6x slower")
        elif lab.name == "scheduler":
            wrote = _schedulers(console, err, path, base, seconds)
        elif lab.name == "stripe":
            for line in stripe_arithmetic(lab.misaligned):
                console.print(f"  {line}")
            wrote = True
            _pair(console, "six parallel 1 MiB direct writes (dd bs=1024k oflag=direct)", "B/s", base, lab,
                  lambda at: labrun.parallel_dd(path, at),
                  "2.9 GB/s with PVs on whole disks vs 5.9 GB/s on partitions (two devices)")
    except (KeyboardInterrupt, Interrupted) as exc:
        if wrote or (isinstance(exc, Interrupted) and exc.written):
            err.print(f"diskplan: interrupted: lab data was written to bytes {base:,}-{end - 1:,} of {path} (the "
                      "range shown above, nothing outside it).", style="yellow")
            return Exit.FAILED  # as measure's own timing (model.exitstatus): a write began and was stopped
        err.print("diskplan: interrupted before the lab wrote; nothing was written.", style="yellow")
        return stopped(False)  # 2, as measure's own timing and any command's top level
    if not dev.hardware:
        console.print("This device cannot show a disk's alignment effect (see its first line): run the lab on the "
                      "disk itself, in its free space, to see one.", style="yellow")
    return 0


def _schedulers(console: Out, err: Out, path: str, base: int, seconds: float) -> bool:
    """Each scheduler the device offers, read then write IOPS at the aligned offset; the first one put back.
    True once anything was written."""
    topo = topology(path)
    if topo is None or not topo.schedulers:
        console.print(f"{path} has no I/O scheduler to compare (a file: its filesystem's device has them)",
                      style="yellow")
        return False
    before = topo.scheduler or topo.schedulers[0]
    console.print(f"schedulers offered (queue/scheduler): {' '.join(topo.schedulers)}; in use: {before}")
    if os.geteuid() != 0:
        console.print("switching needs root: shown, not compared", style="yellow")
        return False
    wrote = False
    try:
        for name in topo.schedulers:
            why = set_scheduler(path, name)
            if why:
                console.print(f"  {name}: {why}", style="yellow")
                continue
            reads = labrun.parallel_sequential(path, base, False, seconds)
            wrote = True
            writes = labrun.parallel_sequential(path, base, True, seconds)
            console.print(f"  {name:<12} reads {reads:,.0f} IOPS, writes {writes:,.0f} IOPS")
    except KeyboardInterrupt:  # run_lab's own flag is set only when this returns: say here whether it wrote
        raise Interrupted(wrote, 0) from None
    finally:
        why = set_scheduler(path, before)
        if why:
            err.print(f"diskplan measure: {why}: put it back by hand", style="yellow")
        else:
            console.print(f"scheduler put back: {before}", style="dim")
    console.print("the experiment: cfq reads 62,815, deadline 58,886, noop 57,809 IOPS; sequential writes 66,407 / "
                  "66,548 / 66,522 (within 0.2%): no scheduler won everywhere")
    return wrote

