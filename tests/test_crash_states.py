"""The crash-state suite: every state a power cut can leave during a move, a realign, a logical msdos move, a
resume, a rollback (also of moves over their own old place, with the reverse copy) and applies (two moves; a
shrink then a move; a move then a grow), recovered the way the docs say, ends finished or rolled back with the
partitions' bytes as they were (0 dead ends, 0 losses).

Each command runs once on an image file with its writes, flushes and names (files created, renamed, unlinked:
durable once their directory is flushed) recorded (helpers/crashrun.py: the real command, its ``os`` calls
logged); helpers/crashrec.py then builds the states a power cut leaves at every point (all flushed writes plus
none, all, random subsets or a torn one of the unflushed ones), runs ``diskplan resume IMAGE --yes`` (and
``--rollback`` where a rollback was begun; for an apply, then its rest plan, after ``diskplan repair`` when the
apply asks for it) on each, and compares the SHA-256 of the partition's bytes where its entry ends with the
SHA-256 they had (a resized partition: its filesystem clean, every file intact, filling its partition). The
default run replays a sample of four records and one chosen state of two applies; DISKPLAN_FAULT_RUNS (any value)
replays every state of every record (522 states over 13 records: 4.3 minutes on the 2-core test machine),
DISKPLAN_CRASH_SAMPLE=N N states of every record."""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from helpers.crashrec import (
    CrashState,
    Outcome,
    Record,
    crash_states,
    diskplan,
    entry_of,
    materialize,
    outcome,
    record,
    resize_outcome,
    sample,
    sha256_at,
)
from helpers.logicals import write_chain
from helpers.movedisk import View, make_image, populate
from helpers.tools import need_tool, run
from helpers.units import MiB


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    start: int
    size: int
    to: int  # where the move puts the partition
    args: tuple[str, ...]  # the recorded command, IMAGE for the image
    before: str = ""  # a kill (DISKPLAN_MOVE_KILL) of the move run first: the command recorded resumes it
    new_size: int = 0  # a resize to this many sectors (its start stays)
    default: bool = True  # replayed (a sample) in the default run; else only in the full one
    number: int = 1  # the partition moved
    logical: bool = False  # an msdos extended partition with logical partitions 5 and 6 (LOGICAL), 6 moved

    @property
    def ends(self) -> tuple[int, int]:
        """Where the recorded command leaves the partition (a rollback: its old place), and its size."""
        return (self.start if "--rollback" in self.args else self.to), self.new_size or self.size


CASES = [
    Case("move left, overlapping", "gpt", 30_000, 40_960, 2048, ("move", "IMAGE", "--partition", "1", "--to", "2048")),
    Case("realign right by less than a chunk", "gpt", 34, 40_960, 2048, ("realign", "IMAGE", "--partition", "1")),
    Case("move msdos right, clean", "dos", 2048, 20_480, 40_000,
         ("move", "IMAGE", "--partition", "1", "--to", "40000"), default=False),
    Case("resume a killed move", "gpt", 34, 40_960, 2048, ("resume", "IMAGE"), before="synced:1", default=False),
    Case("rollback a killed move", "gpt", 60_000, 20_480, 2048, ("resume", "IMAGE", "--rollback"),
         before="write:2"),
    Case("rollback an overlapping move after chunks were copied", "gpt", 34, 40_960, 2048,
         ("resume", "IMAGE", "--rollback"), before="write:2", default=False),
    Case("rollback a move left over itself, torn in flight", "gpt", 30_000, 20_480, 20_000,
         ("resume", "IMAGE", "--rollback"), before="torn:2", default=False),
    Case("move a logical partition left past its EBR, overlapping", "dos", 30_063, 20_480, 21_000,
         ("move", "IMAGE", "--partition", "6", "--to", "21000"), number=6, logical=True, default=False),
    Case("grow", "gpt", 2048, 20_480, 2048, ("resize", "IMAGE", "--partition", "1", "--size", "30000s"),
         new_size=30_000),
    Case("shrink msdos", "dos", 2048, 40_960, 2048, ("resize", "IMAGE", "--partition", "1", "--size", "30000s"),
         new_size=30_000, default=False),
]

# msdos logical layout: the extended partition (start, size), then (number, EBR, data start) of each logical one
EXTENDED = (63, 90_000)
LOGICAL = ((5, 63, 126), (6, 30_000, 30_063))


def _full() -> bool:
    """Every state (DISKPLAN_FAULT_RUNS), or a sample of a chosen size (DISKPLAN_CRASH_SAMPLE)."""
    return bool(os.environ.get("DISKPLAN_FAULT_RUNS") or os.environ.get("DISKPLAN_CRASH_SAMPLE"))


DEFAULT_SAMPLE = 2  # states per record in the default run (a few seconds each)


def _how_many() -> int:
    if os.environ.get("DISKPLAN_CRASH_SAMPLE"):
        return int(os.environ["DISKPLAN_CRASH_SAMPLE"])
    return 0 if os.environ.get("DISKPLAN_FAULT_RUNS") else DEFAULT_SAMPLE


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_power_cut_states_recover(tmp_path: pathlib.Path, case: Case) -> None:
    need_tool("losetup")
    if not case.default and not _full():
        pytest.skip("replayed in the full run only (DISKPLAN_FAULT_RUNS=1)")
    if case.logical:
        image, sums = _logical_image(tmp_path, case.size)
    else:
        image, sums = make_image(tmp_path, label=case.label, start=case.start, size=case.size, disk_mib=48, seed=1)
    state = tmp_path / "state"
    old_sha = sha256_at(image, case.start, case.size)
    if case.before:  # the recorded command starts from a move killed there
        killed = diskplan(state, "move", image, "--partition", str(case.number), "--to", str(case.to), "--yes",
                          kill=case.before)
        assert killed.returncode < 0, killed.stdout + killed.stderr
    base_image, base_state = str(tmp_path / "base.img"), tmp_path / "base-state"
    shutil.copyfile(image, base_image)
    shutil.rmtree(base_state, ignore_errors=True)
    if state.exists():
        shutil.copytree(state, base_state)
    else:
        base_state.mkdir()
    args = [image if a == "IMAGE" else a for a in case.args]
    rec = record(tmp_path / "log", state, [image, str(state)], *args, "--yes")
    assert rec.result.returncode == 0, rec.result.stdout + rec.result.stderr
    assert entry_of(image, case.number)[:2] == case.ends, rec.result.stdout
    rng = random.Random(23)
    states = crash_states(rec, image, rng)

    def recover(s: CrashState) -> Outcome:
        materialize(rec, s, image, base_image, state, base_state)
        if case.new_size:
            return resize_outcome(image, state, case.start, (case.size, case.new_size), f"{case.new_size}s", sums)
        return outcome(image, state, case.start, case.to, case.size, old_sha, case.number)

    replay(case.name, rec, states, _how_many(), rng, recover)


def replay(name: str, rec: Record, states: list[CrashState], n: int, rng: random.Random,
           recover: Callable[[CrashState], Outcome]) -> None:
    """``recover`` ``n`` of the ``states`` (0: all): none may end in a dead end or with bytes lost."""
    dead, lost = [], []
    tried = 0
    for s in sample(states, n, rng):
        got = recover(s)
        tried += 1
        if not got.ended:
            dead.append(f"point {s.point} kept {sorted(s.kept)[-3:]} torn {s.torn and s.torn[0]}: {got.said}")
        elif got.lost:
            lost.append(f"point {s.point}: {got.ended}, bytes differ: {got.said}")
    print(f"{name}: {len(rec.events)} events, {len(states)} crash states, {tried} replayed, "
          f"{len(dead)} dead ends, {len(lost)} losses")
    assert not dead, "\n".join(dead[:5])
    assert not lost, "\n".join(lost[:5])


def _logical_image(tmp: pathlib.Path, size: int) -> tuple[str, dict[str, str]]:
    """A 48 MiB image with an msdos extended partition holding logical partitions 5 and 6 (LOGICAL), each
    ``size`` sectors of ext4 with files."""
    need_tool("mkfs.ext4")
    img = tmp / "disk.img"
    with open(img, "wb") as f:
        f.truncate(48 * MiB)
    write_chain(img, EXTENDED, [(ebr, start, size) for _, ebr, start in LOGICAL])
    sums: dict[str, str] = {}
    for n, _, start in LOGICAL:
        with View(str(img), start, size, read_only=False) as v:
            run("mkfs.ext4", "-q", "-L", f"part{n}", v)
            sums = populate(v, "ext4", tmp, seed=n)
    return str(img), sums


@dataclass(frozen=True)
class ApplyCase:
    name: str
    before: dict[int, tuple[int, int]]  # number: (start, size) on the disk
    after: dict[int, tuple[int, int]]  # number: (start, size) the plan puts it at
    default_cut: str  # the default run's one state: the cut right before step 2's "journal" or the "resize tool"
    default: bool = True  # replayed (one state) in the default run; else only in the full one

    @property
    def resized(self) -> set[int]:
        return {n for n, (_, size) in self.after.items() if size != self.before[n][1]}


APPLY_CASES = [
    # 2 moves right out of the way first, then 1 right over its own old place
    ApplyCase("two moves", {1: (2048, 16_384), 2: (20_480, 16_384)}, {1: (10_000, 16_384), 2: (40_000, 16_384)},
              "journal"),
    # 1 shrinks (resize2fs, then its entry), then 2 moves left into the room, over its own old place
    ApplyCase("a shrink, then a move into its room", {1: (2048, 24_576), 2: (28_672, 16_384)},
              {1: (2048, 16_384), 2: (20_480, 16_384)}, "resize tool"),
    # 2 moves right out of the way, then 1 grows into the room (the entry first, then the filesystem's tool): a cut
    # between the two leaves the table as planned and the filesystem its old size; the rest plan has nothing left
    # to do and says the command that grows it (4 of 72 states ended there, unsaid, before)
    ApplyCase("a move, then a grow into its room", {1: (2048, 16_384), 2: (20_480, 16_384)},
              {1: (2048, 30_000), 2: (40_000, 16_384)}, "", default=False),
]


def _apply_image(tmp: pathlib.Path, case: ApplyCase) -> tuple[str, dict[int, dict[str, str]]]:
    """The image, and each partition's files with their SHA-256."""
    need_tool("mkfs.ext4")
    img = tmp / "disk.img"
    with open(img, "wb") as f:
        f.truncate(48 * MiB)
    lines = "".join(f"start={s}, size={n}, type=L\n" for s, n in case.before.values())
    run("sfdisk", "-q", str(img), input=f"label: gpt\nfirst-lba: 34\n{lines}")
    files = {}
    for n, (start, size) in case.before.items():
        with View(str(img), start, size, read_only=False) as v:
            run("mkfs.ext4", "-q", "-L", f"part{n}", v)
            files[n] = populate(v, "ext4", tmp, seed=n)
    return str(img), files


def apply_outcome(image: str, state: pathlib.Path, plan: pathlib.Path, case: ApplyCase, shas: dict[int, str],
                  files: dict[int, dict[str, str]]) -> Outcome:
    """The documented recovery of an apply cut anywhere: ``diskplan resume IMAGE --yes`` (``--rollback`` when a
    rollback was begun), then the rest plan apply saved beside the plan (or, when there is none, or it is not
    whole, the plan itself). Finished when every partition is where the plan puts it, the size it gives it, with
    the bytes it had (a resized one: its filesystem clean and every file with its checksum; a resize rewrites the
    filesystem's metadata)."""
    from helpers.movedisk import CHECK, file_sums

    said = []

    def step(*args: str, again: bool = True) -> subprocess.CompletedProcess[str]:
        """The command, as a user follows what it says: refused until a torn GPT copy is repaired (a resize's
        entry write cut), it is run again after ``diskplan repair``."""
        got = diskplan(state, *args)
        said.append(f"{' '.join(args[:2])}: {got.returncode}: {got.stdout}{got.stderr}")
        if again and got.returncode == 1 and "`diskplan repair" in got.stdout + got.stderr:
            step("repair", image, "--yes", again=False)
            return step(*args, again=False)
        return got

    def apply(path: pathlib.Path) -> subprocess.CompletedProcess[str]:
        got = step("apply", str(path), image, "--yes")
        for told in re.findall(r"`diskplan (resize [^`]+)`", got.stdout):  # a grow cut after its entry write
            step(*shlex.split(told), "--yes")
        return got

    got = step("resume", image, "--yes")
    if got.returncode == 1 and "--rollback" in got.stderr:
        step("resume", image, "--rollback", "--yes")
    rest = plan.with_name("plan.rest.json")
    applied = apply(rest) if rest.exists() else None
    if applied is None or applied.returncode == 2:
        apply(plan)
    left = diskplan(state, "resume", image)
    ended = "finished" if left.returncode == 0 and "no unfinished move" in left.stdout + left.stderr else ""
    lost = False
    for n, (to, size) in case.after.items():
        start, got_size, _ = entry_of(image, n)
        if (start, got_size) != (to, size):
            ended = ""
        elif n not in case.resized:
            lost = lost or sha256_at(image, start, size) != shas[n]
        else:
            with View(image, start, size) as v:
                clean = subprocess.run([*CHECK["ext4"], v], capture_output=True, text=True)
                said.append(f"e2fsck partition {n}: {clean.returncode}: {clean.stdout}")
                lost = lost or clean.returncode != 0 or file_sums(v, "ext4", list(files[n])) != files[n]
                head = run("dumpe2fs", "-h", v)
                block, count = (int(line.split(":")[1]) for key in ("Block size:", "Block count:")
                                for line in head.splitlines() if line.startswith(key))
                if block * count != size * 512 // block * block:  # the filesystem fills its partition, as planned
                    ended = ""
                    said.append(f"partition {n}: its filesystem holds {block * count} B of {size * 512}")
    return Outcome(ended, lost and bool(ended), "\n".join(said))


@pytest.mark.parametrize("case", APPLY_CASES, ids=[c.name for c in APPLY_CASES])
def test_power_cut_states_of_an_apply_recover(tmp_path: pathlib.Path, case: ApplyCase) -> None:
    """``diskplan apply`` of a plan with two steps (its rest plan saved beside it, each move journalled): every
    state a power cut leaves, recovered by resume then the rest plan, ends with both partitions where the plan
    puts them, byte for byte (a resized one: clean, every file intact). In the default run one state (the cut
    right before a step's journal is created: a rest plan was refused as stale there before), every state with
    DISKPLAN_FAULT_RUNS."""
    need_tool("losetup")
    if not case.default and not _full():
        pytest.skip("replayed in the full run only (DISKPLAN_FAULT_RUNS=1)")
    image, files = _apply_image(tmp_path, case)
    state = tmp_path / "state"
    state.mkdir()
    shas = {n: sha256_at(image, s, size) for n, (s, size) in case.before.items()}
    plans = tmp_path / "plans"
    plans.mkdir()
    plan = plans / "plan.json"
    got = diskplan(state, "export", image, "-o", str(plan))
    assert got.returncode == 0, got.stderr
    spec = json.loads(plan.read_text())
    for p in spec["partitions"]:
        p["start"], size = case.after[p["number"]]
        p["end"] = p["start"] + size - 1
        if "size" in p:
            p["size"] = size
    plan.write_text(json.dumps(spec))
    base_image, base_state, base_plans = str(tmp_path / "base.img"), tmp_path / "base-state", tmp_path / "base-plans"
    shutil.copyfile(image, base_image)
    shutil.copytree(state, base_state)
    shutil.copytree(plans, base_plans)
    rec = record(tmp_path / "log", state, [image, str(state), str(plans)], "apply", str(plan), image, "--yes")
    assert rec.result.returncode == 0, rec.result.stdout + rec.result.stderr
    assert {n: entry_of(image, n)[:2] for n in case.after} == case.after, rec.result.stdout
    rng = random.Random(23)
    states = crash_states(rec, image, rng)

    def recover(s: CrashState) -> Outcome:
        shutil.rmtree(plans)
        shutil.copytree(base_plans, plans)  # then the cut's writes, as in the state directory
        materialize(rec, s, image, base_image, state, base_state)
        return apply_outcome(image, state, plan, case, shas, files)

    if not _full():
        # the default run: one cut that left a dead end before, everything before it on the disk. Right before step
        # 2's journal is created: its rest plan was made against the table after step 2, refused as stale after
        # resume found nothing to do. Right before the shrink's tool changes the image: the rest plan, made against
        # the table after the shrink, was refused as stale, and the plan too once the shrink's entry was written.
        if case.default_cut == "journal":
            cut = [i for i, e in enumerate(rec.events) if e[0] == "c" and str(e[1]).endswith(".dpmove")][1]
        else:
            cut = next(i for i, e in enumerate(rec.events) if e[0] == "x")
        states = [CrashState(cut, frozenset(i for i in rec.writes() if i < cut))]
    replay(f"apply, {case.name}", rec, states, _how_many(), rng, recover)
