"""Real power cuts (issue 23): a guest machine moves or grows a partition and QEMU is killed at a random
moment of it (what the guest had not handed to its disk is lost, as in a power cut); a second boot of the
same disks runs the recovery the README documents (``diskplan resume DISK --yes``, ``--rollback`` where a
rollback was begun; for a resize ``diskplan repair`` then the same resize again), and the host checks every
byte: the partition's entry at its old or new place and its bytes the ones it had (a move), or its
filesystem clean with every file's SHA-256 (a resize).

The journal lives where it would on a real system: on another disk of the guest (``/state``, an ext4
filesystem), not in memory. The default run cuts a move twice; DISKPLAN_GUEST=all cuts 30 moves and 10
resizes at random moments (DISKPLAN_GUEST_CUTS=N, DISKPLAN_GUEST_RESIZE_CUTS=N: N of each)."""

from __future__ import annotations

import os
import pathlib
import random
import subprocess
import threading

import pytest

from helpers.crashrec import entry_of, sha256_at
from helpers.guest import Case, Machine, boot_guest, e512
from helpers.movedisk import CHECK, View, file_sums, make_image
from helpers.tools import run

pytestmark = pytest.mark.guest

START, SIZE, TO = 90_000, 40_960, 2048  # 20 MiB of ext4, moved left into free space (3 chunks)
GROWN = 60_000
DISK_MIB = 96

# the state (backups, move journals) on a disk of its own: the guest's /var is a tmpfs, gone with the power
MOUNT_STATE = ("mkdir -p /state && mount $DISK_s /state && export XDG_STATE_HOME=/state "
               "DISKPLAN_MOVES_DIR=/state/moves\n")
# ``go`` is marked when the table's backup appears, just before the command's first write to the disk: the
# seconds before it (Python's start under TCG, reading, checking the filesystem) write nothing, and cuts
# drawn from the command's start fell there (three of three, at 8 s of a move's ~15)
GO = r"""
( until [ -n "$(ls /state/diskplan/backups 2>/dev/null)" ]; do sleep 0.05; done
  echo "go_at=$(date +%s.%N)"; guest-mark go ) &
watch=$!
"""
END = 'rc=$?; echo "end_at=$(date +%s.%N)"; kill $watch 2>/dev/null; exit $rc\n'
MOVE = MOUNT_STATE + GO + f"diskplan move $DISK_a --partition 1 --to {TO} --yes\n" + END
RESIZE = MOUNT_STATE + GO + f"diskplan resize $DISK_a --partition 1 --size {GROWN}s --yes\n" + END
# where the cut landed: the journal's last intact record (a mark, R n / W n: chunk n read / written) and its
# length, read before the recovery touches it
LANDED = r"""
for j in /state/moves/*.dpmove; do
  [ -f "$j" ] && echo "landed: $(wc -l < "$j") lines, last: $(tail -n 1 "$j" | cut -c1-24)"
done
"""
RECOVER_MOVE = MOUNT_STATE + LANDED + r"""
rc=0; diskplan resume $DISK_a --yes > /tmp/r.out 2>&1 || rc=$?
cat /tmp/r.out
if [ $rc = 1 ] && grep -q -- --rollback /tmp/r.out; then diskplan resume $DISK_a --rollback --yes; fi
diskplan resume $DISK_a 2>&1 || true
sync; umount /state
"""
RECOVER_RESIZE = MOUNT_STATE + LANDED + f"""
diskplan repair $DISK_a --yes || true
diskplan resize $DISK_a --partition 1 --size {GROWN}s --yes
sync; umount /state
"""


def _cuts(kind: str) -> int:
    """How many power cuts of ``kind``: DISKPLAN_GUEST_CUTS (moves) / DISKPLAN_GUEST_RESIZE_CUTS, else 30
    moves and 10 resizes with DISKPLAN_GUEST=all, else one move."""
    name = "DISKPLAN_GUEST_CUTS" if kind == "move" else "DISKPLAN_GUEST_RESIZE_CUTS"
    if os.environ.get(name):
        return int(os.environ[name])
    full = os.environ.get("DISKPLAN_GUEST") == "all"
    return (30 if full else 1) if kind == "move" else (10 if full else 0)


def _disks(work: pathlib.Path) -> tuple[dict[str, str], str]:
    """The data disk (a.img: GPT, ext4 at START with files) and the state disk (s.img: ext4), as the guest
    finds them in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    image, sums = make_image(work, start=START, size=SIZE, disk_mib=DISK_MIB, name="a.img")
    state = work / "s.img"
    with open(state, "wb") as f:
        f.truncate(32 << 20)
    run("mkfs.ext4", "-q", "-F", str(state))
    return sums, image


def _cut(work: pathlib.Path, script: str, delay: float) -> float:
    """Boot, run ``script``, cut the power ``delay`` s after it marks ``go`` (its first write is near): 0
    when the cut came first, else how long the command wrote (from ``go`` to its end, guest clock)."""
    timers: list[threading.Timer] = []

    def go(machine: Machine) -> None:
        timers.append(threading.Timer(delay, machine.kill))
        timers[0].daemon = True
        timers[0].start()

    try:
        got = boot_guest([e512("a", DISK_MIB << 20), e512("s", 32 << 20)], [Case("cut", script)], workdir=work,
                         handlers={"go": go})
    finally:
        for t in timers:
            t.cancel()
    if got.killed:
        return 0.0
    said = dict(line.split("=", 1) for line in got["cut"].out.splitlines() if line.startswith(("go_at=", "end_at=")))
    assert "go_at" in said, f"the command never began to write:\n{got['cut'].out}{got['cut'].err}"
    return max(0.01, float(said["end_at"]) - float(said["go_at"]))


def _recover(work: pathlib.Path, script: str) -> str:
    got = boot_guest([e512("a", DISK_MIB << 20), e512("s", 32 << 20)], [Case("recover", script)], workdir=work)
    return got["recover"].out + got["recover"].err


@pytest.mark.parametrize("kind", ["move", "resize"])
def test_power_cuts_recover_every_byte(tmp_path: pathlib.Path, kind: str) -> None:
    cuts = _cuts(kind)
    if not cuts:
        pytest.skip("resizes are cut in the full run (DISKPLAN_GUEST=all)")
    rng = random.Random(int(os.environ.get("DISKPLAN_FAULT_SEED", "23")))
    # how long the command writes in the guest (from ``go`` to its end), to draw the cuts within: a move of
    # 20 MiB wrote for ~N s there, a grow ~M s, and the host's load varies: the full run measures it first
    # with one boot left uncut, and learns again from every run the cut came too late for
    span = float(os.environ.get("DISKPLAN_GUEST_SPAN", "6" if kind == "move" else "5"))
    if cuts > 3 and not os.environ.get("DISKPLAN_GUEST_SPAN"):
        work = tmp_path / "measure"
        _disks(work)
        span = _cut(work, MOVE if kind == "move" else RESIZE, 3600.0) or span
        print(f"{kind}: the command wrote for {span:.1f} s uncut", flush=True)
    real = i = 0
    report: list[str] = []
    failed: list[str] = []
    while real < cuts and i < cuts + 3 + cuts // 5:  # a run the cut came too late for does not count
        i += 1
        work = tmp_path / f"cut{i}"
        sums, image = _disks(work)
        sha = sha256_at(image, START, SIZE)
        delay = rng.uniform(0.0, 0.95 * span)
        took = _cut(work, MOVE if kind == "move" else RESIZE, delay)
        span = min(span, took) if took else span  # it ended first: the next cuts come earlier
        real += not took
        after = entry_of(image)  # the entry as the cut left it: (0, 0) while a move hides it
        said = _recover(work, RECOVER_MOVE if kind == "move" else RECOVER_RESIZE)
        start, size, _ = entry_of(image)
        landed = next((line[8:] for line in said.splitlines() if line.startswith("landed: ")), "no journal")
        line = (f"{i}: {delay:.1f}s {'cut' if not took else f'ended first ({took:.1f} s)'}, entry {after[0]}+"
                f"{after[1]}, {landed} -> {start}+{size}")
        problem = ""
        if kind == "move":
            if (start, size) not in ((START, SIZE), (TO, SIZE)):
                problem = "dead end"
            elif sha256_at(image, start, SIZE) != sha:
                problem = "bytes differ"
        elif (start, size) != (START, GROWN):
            problem = "not resized"
        else:
            with View(image, start, size) as v:
                clean = subprocess.run([*CHECK["ext4"], v], capture_output=True, text=True)
                if clean.returncode or file_sums(v, "ext4", list(sums)) != sums:
                    problem = "filesystem or files differ: " + clean.stdout[-300:]
        print(line + (f" FAILED: {problem}" if problem else " ok"), flush=True)
        report.append(line)
        if problem:
            failed.append(f"{line}: {problem}\n{said}")
    print(f"{kind}: {real} of {cuts} runs cut, {len(failed)} failed: " + "; ".join(report))
    assert not failed, "\n\n".join(failed)
    assert real, "no run was cut before its command ended: " + ", ".join(report)
