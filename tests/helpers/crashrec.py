"""Power cuts, simulated from a record of what a command wrote (tests/helpers/crashrun.py records it).

A power cut keeps every write that was flushed (an fsync or fdatasync of its file after it) and, of the
writes not yet flushed, any subset: none, all, some, or part of one (a torn write: on the disk image any of
its sectors, in a state file a prefix: a file's data reaches it in order of its blocks, and a partly
written append is what the journal's line checksums are for). ``crash_states`` lists those states at every
point of the record, ``materialize`` builds one (the image and the state directory, at their own paths:
journals name them), and ``outcome`` runs the recovery the README documents and says where the partition
ended and whether its bytes are the ones it had."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import random
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from helpers.movedisk import PY, state_env
from helpers.tools import REPO

RUNNER = str(REPO / "tests" / "helpers" / "crashrun.py")
SECTOR = 512


@dataclass(frozen=True)
class Write:
    index: int
    path: str
    offset: int  # a truncation: the file's new length
    at: int
    length: int  # -1: a truncation, -2: a resize tool's changes (``runs``: never torn, all or nothing); a name
    # (durable once its directory is flushed): -3 a rename of ``source`` to ``path``, -4 an unlink, -5 a creation
    runs: tuple[tuple[int, int, int], ...] = ()
    source: str = ""

    @property
    def flushed_by(self) -> str:
        """The file (or, for a name, the directory) whose flush makes this change durable."""
        return os.path.dirname(self.path) if self.length <= -3 else self.path


@dataclass(frozen=True)
class CrashState:
    point: int  # the power is cut before event ``point``
    kept: frozenset[int]  # the writes that reach the media whole
    torn: tuple[int, tuple[int, ...]] | None = None  # a write of which only these sectors (or this prefix) arrive

    @property
    def key(self) -> tuple[frozenset[int], tuple[int, tuple[int, ...]] | None]:
        return self.kept, self.torn


@dataclass
class Record:
    """A recorded run: its events (writes and flushes, in order) and the bytes written."""

    log: pathlib.Path
    events: list[list[object]]
    result: subprocess.CompletedProcess[str]

    def writes(self) -> dict[int, Write]:
        out = {}
        for i, e in enumerate(self.events):
            if e[0] == "w":
                out[i] = Write(i, str(e[1]), int(e[2]), int(e[3]), int(e[4]))  # type: ignore[call-overload]
            elif e[0] == "t":
                out[i] = Write(i, str(e[1]), int(e[2]), 0, -1)  # type: ignore[call-overload]
            elif e[0] == "r":
                out[i] = Write(i, str(e[2]), 0, 0, -3, source=str(e[1]))
            elif e[0] in ("u", "c"):
                out[i] = Write(i, str(e[1]), 0, 0, {"u": -4, "c": -5}[str(e[0])])
            elif e[0] == "x":
                runs = tuple((int(o), int(a), int(n)) for o, a, n in cast(list[list[int]], e[2]))
                out[i] = Write(i, str(e[1]), 0, 0, -2, runs)
        return out

    def data(self, w: Write) -> bytes:
        with open(self.log / "blob", "rb") as f:
            f.seek(w.at)
            return f.read(w.length)


def record(log: pathlib.Path, state: pathlib.Path, watch: list[str], *args: str, kill: str = "") -> Record:
    """Run ``diskplan ARGS`` with its writes to ``watch`` recorded in ``log``."""
    shutil.rmtree(log, ignore_errors=True)
    env = state_env(state, **({"DISKPLAN_MOVE_KILL": kill} if kill else {}))
    got = subprocess.run([PY, RUNNER, str(log), *watch, "--", *args], capture_output=True, text=True, env=env,
                         timeout=600, stdin=subprocess.DEVNULL)
    events = []
    if (log / "events.jsonl").exists():
        events = [json.loads(line) for line in (log / "events.jsonl").read_text().splitlines() if line.strip()]
    return Record(log, events, got)


def crash_states(rec: Record, image: str, rng: random.Random, subsets: int = 2) -> list[CrashState]:
    """Every distinct state a power cut can leave at each point of ``rec``: the flushed writes plus none,
    all, ``subsets`` random subsets and one torn write of the unflushed ones."""
    writes = rec.writes()
    durable: set[int] = set()
    pending: dict[str, list[int]] = {}
    seen: set[object] = set()
    out: list[CrashState] = []

    def add(point: int, kept: set[int], torn: tuple[int, tuple[int, ...]] | None = None) -> None:
        s = CrashState(point, frozenset(kept), torn)
        if s.key not in seen:
            seen.add(s.key)
            out.append(s)

    for point in range(len(rec.events) + 1):
        loose = sorted(i for ids in pending.values() for i in ids)
        add(point, durable)
        add(point, durable | set(loose))
        for _ in range(subsets if len(loose) > 1 else 0):
            add(point, durable | {i for i in loose if rng.random() < 0.5})
        torn = [i for i in loose if writes[i].length > 0]
        if torn:
            w = writes[rng.choice(torn)]
            n = -(-w.length // SECTOR)
            if w.path == image:
                part = tuple(sorted(rng.sample(range(n), rng.randint(0, max(0, n - 1))))) if n > 1 else ()
            else:
                part = (rng.randint(0, max(0, w.length - 1)),)  # a prefix of this many bytes
            add(point, durable | {i for i in loose if i < w.index}, (w.index, part))
        if point == len(rec.events):
            break
        e = rec.events[point]
        if point in writes:
            pending.setdefault(writes[point].flushed_by, []).append(point)
        else:
            durable |= set(pending.pop(str(e[1]), []))
    return out


def materialize(rec: Record, s: CrashState, image: str, base_image: str, state: pathlib.Path,
                base_state: pathlib.Path) -> None:
    """The image and state directory as the power cut ``s`` leaves them (from the copies taken before
    the recorded run)."""
    shutil.copyfile(base_image, image)
    shutil.rmtree(state, ignore_errors=True)
    shutil.copytree(base_state, state)
    writes = sorted(rec.writes().values(), key=lambda w: w.index)
    created = {w.path for w in writes if w.length == -5}  # files whose creation is an event of its own
    for w in writes:
        if w.index >= s.point:
            break
        os.makedirs(os.path.dirname(w.path), exist_ok=True)
        if w.length <= -3:
            _name(w, w.index in s.kept)
            continue
        if not os.path.exists(w.path):
            if w.path in created:
                continue  # its name did not survive the power cut: nor did its data
            with open(w.path, "ab"):
                pass  # a file that existed before the run
        if w.length == -1:
            if w.index in s.kept:
                os.truncate(w.path, w.offset)
            continue
        if w.length == -2:
            if w.index in s.kept:
                with open(rec.log / "blob", "rb") as b, open(w.path, "r+b") as f:
                    for off, at, n in w.runs:
                        b.seek(at)
                        f.seek(off)
                        f.write(b.read(n))
            continue
        data = rec.data(w)
        if w.index in s.kept:
            parts = [(0, data)]
        elif s.torn is not None and s.torn[0] == w.index:
            if w.path == image:
                parts = [(k * SECTOR, data[k * SECTOR : (k + 1) * SECTOR]) for k in s.torn[1]]
            else:
                parts = [(0, data[: s.torn[1][0]])]
        else:
            continue
        fd = os.open(w.path, os.O_WRONLY)
        try:
            for off, chunk in parts:
                os.pwrite(fd, chunk, w.offset + off)
        finally:
            os.close(fd)


def _name(w: Write, kept: bool) -> None:
    """A creation, rename or unlink, when the power cut kept it (and what it names still exists)."""
    if not kept:
        return
    if w.length == -5:
        with open(w.path, "ab"):
            pass
    elif w.length == -3 and os.path.lexists(w.source):
        os.replace(w.source, w.path)
    elif w.length == -4 and os.path.lexists(w.path):
        os.unlink(w.path)


def sha256_at(image: str, start: int, size: int) -> str:
    h = hashlib.sha256()
    with open(image, "rb") as f:
        f.seek(start * SECTOR)
        left = size * SECTOR
        while left:
            block = f.read(min(left, 1 << 20))
            if not block:
                break
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def entry_of(image: str, number: int = 1) -> tuple[int, int, str]:
    """(start, size, type) of the partition as sfdisk reads it; (0, 0, "") when it has none, or its entry is
    hidden (a move's: the type all zeros)."""
    got = subprocess.run(["sfdisk", "--json", image], capture_output=True, text=True)
    if got.returncode != 0:
        return 0, 0, ""
    for p in json.loads(got.stdout)["partitiontable"].get("partitions", []):
        if p["node"].endswith(str(number)) and str(p["type"]).strip("0-") and int(p["size"]):
            return int(p["start"]), int(p["size"]), str(p["type"])
    return 0, 0, ""


@dataclass
class Outcome:
    ended: str  # "finished", "rolled back" or "" (a dead end)
    lost: bool  # the partition's bytes are not the ones it had
    said: str  # what the recovery said


def diskplan(state: pathlib.Path, *args: str, kill: str = "") -> subprocess.CompletedProcess[str]:
    env = state_env(state, **({"DISKPLAN_MOVE_KILL": kill} if kill else {}))
    return subprocess.run([PY, "-m", "diskplan", *args], capture_output=True, text=True, env=env, timeout=300,
                          stdin=subprocess.DEVNULL)


def outcome(image: str, state: pathlib.Path, old: int, new: int, size: int, sha: str, number: int = 1) -> Outcome:
    """Run the documented recovery (``diskplan resume DISK --yes``; when it says a rollback was begun,
    ``diskplan resume DISK --rollback --yes``), then judge the partition: where its entry is, and whether
    the bytes there are the ones it had."""
    said = []
    got = diskplan(state, "resume", image, "--yes")
    said.append(got.stdout + got.stderr)
    if got.returncode == 1 and "--rollback" in got.stderr:
        got = diskplan(state, "resume", image, "--rollback", "--yes")
        said.append(got.stdout + got.stderr)
    left = diskplan(state, "resume", image)
    start, got_size, _ = entry_of(image, number)
    ended = ""
    if left.returncode == 0 and "no unfinished move" in left.stdout + left.stderr and got_size == size:
        ended = {old: "rolled back", new: "finished"}.get(start, "")
    lost = bool(ended) and sha256_at(image, start, size) != sha
    return Outcome(ended, lost, "\n".join(said).strip())


def resize_outcome(image: str, state: pathlib.Path, start: int, sizes: tuple[int, int], new: str,
                   sums: dict[str, str]) -> Outcome:
    """A resize has no journal; its documented recovery: ``diskplan repair`` when a table copy is torn, then
    the same resize again. Judged by the filesystem (a resize rewrites its metadata): the entry at ``start``
    with either size, the filesystem clean, every file with its checksum."""
    from helpers.movedisk import CHECK, View, file_sums

    said = []
    for args in (("repair", image, "--yes"), ("resize", image, "--partition", "1", "--size", new, "--yes")):
        got = diskplan(state, *args)
        said.append(f"{' '.join(args[:1])}: {got.returncode}: {got.stdout}{got.stderr}")
    got_start, size, _ = entry_of(image)
    if got_start != start or size not in sizes:
        return Outcome("", False, "\n".join(said))
    with View(image, start, size) as v:
        clean = subprocess.run([*CHECK["ext4"], v], capture_output=True, text=True)
        if clean.returncode != 0:
            return Outcome("", False, "\n".join([*said, clean.stdout]))
        lost = file_sums(v, "ext4", list(sums)) != sums
        head = subprocess.run(["dumpe2fs", "-h", v], capture_output=True, text=True).stdout
    block, count = (int(line.split(":")[1]) for key in ("Block size:", "Block count:") for line in head.splitlines()
                    if line.startswith(key))
    if size == sizes[1] and block * count != size * 512 // block * block:  # resized: the filesystem fills it
        return Outcome("", False, "\n".join([*said, f"its filesystem spans {block * count} B of {size * 512}"]))
    return Outcome("resized" if size == sizes[1] else "as before", lost, "\n".join(said))


def sample(states: list[CrashState], n: int, rng: random.Random) -> Iterator[CrashState]:
    """``n`` states spread over the record (all of them when ``n`` is 0)."""
    if not n or n >= len(states):
        yield from states
        return
    yield from sorted(rng.sample(states, n), key=lambda s: s.point)
