"""Commit a planned table to a disk without costing anyone data.

The steps, each its own function so a UI can show them one by one:

1. ``prepare(target, desired, host)`` reads the disk, takes the one list of operations (new label,
   delete N, create N at start..end, change N, keep N) the planner built and showed (``Plan.writes()``;
   for a plan file, ``operations.plan_writes`` builds it here), checks what would make the write unsafe
   (in use, read-only, a plan libparted cannot place exactly) and asks libparted, in a child, to build
   the new table in memory.
   Nothing is written. The ``Proposal`` says what to show and what to ask (type the device name for a
   block device, "yes" for an image file).
2. ``execute(proposal, answer, host)`` takes the write lock (backend.lock) and, under it until the
   verdict, checks again (someone may have mounted it meanwhile, or written another table: the table is
   read again and must be the one the proposal was made against), saves the backup (backend.backup),
   then in one child writes the table with one libparted commit, tells the kernel and reads the table
   back (a new libparted disk from the device, plus diskplan's own checks of the raw GPT copies or EBR
   chain); the parent compares it with the plan sector for sector. The ``Outcome`` says exactly what
   state the disk is in, and how to restore when something went wrong.
3. backend.restore puts a backup back byte for byte, the same way.

A GPT repair (``plan.pending_repair``) goes through the same two calls: ``prepare(..., repair=...)``
and ``execute`` hand it to backend.gptrepair, which writes exactly the repair's sectors (no libparted
commit) with the same checks, backup and verification.

Speed (a 128-partition GPT is written as fast as ``sfdisk`` writes it from a script): a caller that has
just read the target passes it to ``prepare(current=...)``; ``preload()`` imports pyparted once so the
three children (read, preview, write + read back) do not each import it again.

What each plan does to the table (the operations, the resulting table, what makes a plan unwritable,
the comparison after the write) is pure and lives in model.operations.

What the backend cannot see itself (who uses the disk, what the kernel's partition list holds) comes
from ``Host``: discovery.inuse answers it; the backend may not import discovery.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import stat
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Protocol

from diskplan.backend import backup as bk
from diskplan.backend import lock as wlock
from diskplan.backend.isolate import IsolatedFailure, run_isolated
from diskplan.backend.reader import ReadError, read
from diskplan.backend.tableid import table_fingerprint
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role
from diskplan.model.geometry import Geometry
from diskplan.model.operations import Changes, Operation, differences, plan_writes
from diskplan.model.repair import GptRepair
from diskplan.model.table import Table, new_table
from diskplan.model.units import human_bytes

WRITE_TIMEOUT = 300.0  # seconds for one libparted commit (a slow USB stick syncing)
BLKROGET = 0x125E
BLKGETDISKSEQ = 0x80081280

Progress = Callable[[int, int, str], None]  # (step, steps, what is happening now)
Fault = Callable[[str], None]  # tests: called at "backup", "write" (in the child, after the write), "verify"


class Usage(Protocol):
    """One use of the disk (discovery.inuse.Use): blocking uses refuse the write."""

    blocking: bool

    def __str__(self) -> str: ...


@dataclass(frozen=True)
class Host:
    """What only discovery can answer: who uses ``path``, and the kernel's partition list for it
    (number -> (start, size) in 512-byte units; None for an image file)."""

    users: Callable[[str], Sequence[Usage]]
    kernel_partitions: Callable[[str], Mapping[int, tuple[int, int]] | None] = lambda path: None


class CommitError(Exception):
    """The target cannot be read at all, so there is nothing to propose: one line for the user."""


class Verdict(Enum):
    WRITTEN = "written"
    NOTHING = "nothing to do"
    REFUSED = "refused"
    FAILED = "failed"

    @property
    def exit_code(self) -> int:
        return {Verdict.WRITTEN: 0, Verdict.NOTHING: 0, Verdict.REFUSED: 1, Verdict.FAILED: 2}[self]


class DiskState(Enum):
    UNCHANGED = "unchanged"  # every sector the write could touch holds its old bytes
    PLANNED = "holds the plan"  # written and verified
    DIFFERENT = "written, but not as planned"  # verification found differences
    CHANGED = "partly written"  # the write failed after changing some sectors
    UNKNOWN = "unknown"  # the disk cannot be read any more
    RESTORED = "holds the backup"  # every saved sector is back


@dataclass(frozen=True)
class Identity:
    """Enough to notice that the target is no longer the disk that was read."""

    kind: str  # "block" or "file"
    number: tuple[int, int]  # (st_dev, st_ino) of a file, (major, minor) of a block device
    size: int
    diskseq: int = 0  # bumped by the kernel whenever a loop device gets a new backing file


@dataclass(frozen=True)
class Proposal:
    target: str
    kind: str  # "block" or "file"
    model: str
    sectors: int
    sector_size: int
    current: Disk
    result: Table  # the table as it will read back: kept partitions as they are, new ones PROPOSED
    operations: tuple[Operation, ...]
    refusals: tuple[str, ...]
    notes: tuple[str, ...]
    identity: Identity | None
    fresh: bool = False
    delete: tuple[Extent, ...] = ()
    create: tuple[Partition, ...] = ()
    change: tuple[Partition, ...] = ()
    placed: tuple[Partition, ...] = ()  # number, extent and role of every partition libparted would write
    table_sectors: tuple[Extent, ...] = ()  # where the new table's own sectors go
    protect: tuple[Extent, ...] = ()  # data of kept partitions: never in the backup, never written
    repair: GptRepair | None = None  # a repair-only proposal (backend.gptrepair): these bytes are written
    made_against: str = ""  # fingerprint of ``current`` (model.fingerprint): checked again under the lock

    @property
    def changes(self) -> bool:
        return any(op.kind != "keep" for op in self.operations)

    @property
    def writable(self) -> bool:
        return not self.refusals

    @property
    def confirm_word(self) -> str:
        return confirm_word(self.kind, self.target)

    @property
    def prompt(self) -> str:
        if self.repair is not None:
            return f"Type {self.confirm_word} to repair the table on {self.target}"
        return f"Type {self.confirm_word} to write this table to {self.target}"

    def accepts(self, answer: str) -> bool:
        return accepts(self.kind, self.target, answer)

    @property
    def headline(self) -> str:
        model = f" ({self.model})" if self.model else ""
        return (
            f"{self.target}{model}: {self.sectors} sectors × {self.sector_size} B = "
            f"{human_bytes(self.sectors * self.sector_size)}"
        )


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    message: str  # one line
    state: DiskState
    target: str = ""
    details: tuple[str, ...] = ()  # differences, libparted's messages, what was checked
    backup_path: str = ""
    kernel: str = ""  # empty when the kernel is up to date (or an image file); else what to do
    operations: tuple[Operation, ...] = ()

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    @property
    def restore_command(self) -> str:
        """The command that undoes the write, when the disk holds something other than the plan or the
        old table."""
        if self.backup_path and self.state in (DiskState.CHANGED, DiskState.DIFFERENT, DiskState.UNKNOWN):
            return f"diskplan restore {self.backup_path} {self.target} --yes"
        return ""


def confirm_word(kind: str, target: str) -> str:
    """What the user types to confirm: a block device's kernel name (sdb), "yes" for an image file."""
    return os.path.basename(os.path.realpath(target)) if kind == "block" else "yes"


def accepts(kind: str, target: str, answer: str) -> bool:
    answer = answer.strip()
    if kind != "block":
        return answer.lower() == "yes"
    word = confirm_word(kind, target)
    return answer in {word, f"/dev/{word}", target, os.path.realpath(target)}


def preload() -> None:
    """Import pyparted in this process once, so that every child forked to read, preview, write and
    verify inherits it instead of importing it again (about 40 ms a child). Importing opens no device."""
    import diskplan.backend.libparted  # noqa: F401


# --- looking at the target --------------------------------------------------------------------------


def identity(path: str) -> Identity:
    """Raises OSError when ``path`` cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        size = os.lseek(fd, 0, os.SEEK_END)
        if not stat.S_ISBLK(st.st_mode):
            return Identity("file", (st.st_dev, st.st_ino), size)
        try:
            seq = struct.unpack("Q", fcntl.ioctl(fd, BLKGETDISKSEQ, bytes(8)))[0]
        except OSError:
            seq = 0
        return Identity("block", (os.major(st.st_rdev), os.minor(st.st_rdev)), size, seq)
    finally:
        os.close(fd)


def read_only_reason(path: str) -> str:
    """Why ``path`` cannot be written ("" when it can)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if stat.S_ISBLK(st.st_mode):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                ro = struct.unpack("i", fcntl.ioctl(fd, BLKROGET, bytes(4)))[0]
            finally:
                os.close(fd)
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        return f"{path} is read-only (the kernel refuses writes to it)" if ro else ""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CLOEXEC))
    except OSError as exc:
        return f"{path} cannot be opened for writing: {exc.strerror}"
    return ""


# --- comparing tables -------------------------------------------------------------------------------


def kernel_differences(target: str, table: Table, sector_size: int, host: Host) -> list[str]:
    """Partitions whose kernel view (sysfs, 512-byte units) differs from ``table``; [] for image files."""
    seen = host.kernel_partitions(target)
    if seen is None:
        return []
    k = sector_size // 512
    out = []
    want = {p.number: p for p in table.live}
    for n in sorted(set(want) | set(seen)):
        p, s = want.get(n), seen.get(n)
        if p is None and s is not None:
            out.append(f"the kernel still has a partition {n}")
        elif p is not None and s is None:
            out.append(f"the kernel does not know partition {n}")
        # An extended partition shows as 1 KiB in the kernel: compare its start only.
        elif p is not None and s is not None and (
            s[0] != p.start * k or (p.role is not Role.EXTENDED and s[1] != p.size * k)
        ):
            out.append(f"the kernel has partition {n} at {s[0] // k}+{s[1] // k}, not {p.start}+{p.size}")
    return out


def usage(target: str, host: Host) -> tuple[list[str], list[str]]:
    try:
        uses = list(host.users(target))
    except OSError as exc:
        return [f"could not check whether {target} is in use: {exc.strerror or exc}"], []
    blocking = [f"{target} is in use: {u}" for u in uses if u.blocking]
    return blocking, [str(u) for u in uses if not u.blocking]


def unsafe(target: str, host: Host) -> tuple[list[str], list[str]]:
    """What forbids writing ``target`` now (read-only, in use), and the idle users to mention."""
    ro = read_only_reason(target)
    blocking, idle = usage(target, host)
    return [*([ro] if ro else []), *blocking], idle


def read_target(target: str, current: Disk | None) -> tuple[Identity, Disk]:
    """The target's identity and its disk (``current`` when the caller just read this target).
    Raises CommitError when it cannot be read, or changed size while being read."""
    if not os.path.exists(target):
        raise CommitError(f"{target}: no such file or device")
    try:
        ident = identity(target)
        current = current if current is not None and current.source == target else read(target)
    except (OSError, ReadError) as exc:
        raise CommitError(f"{target}: {getattr(exc, 'strerror', None) or exc}") from exc
    if ident.size // current.geometry.logical != current.geometry.sectors:
        raise CommitError(f"{target} changed size while it was being read; try again")
    return ident, current


def other_disk(target: str, geom: Geometry, sector_size: int | None, sectors: int | None) -> list[str]:
    """Refusals when the plan was made for a disk of another sector size or length."""
    out = []
    if sector_size and sector_size != geom.logical:
        out.append(f"the plan is for {sector_size} B sectors; {target} has {geom.logical} B sectors")
    if sectors and sectors != geom.sectors:
        out.append(f"the plan is for a disk of {sectors} sectors; {target} has {geom.sectors}")
    return out


def plan_made_against_another(target: str) -> str:
    return (f"the plan was made against another table than the one on {target} now (its \"made_against\" "
            "fingerprint differs: the disk was written since, or it is another disk). Plan again from the disk, "
            "or delete \"made_against\" from the plan file to apply it to the table there now")


def prepare(
    target: str,
    desired: Table | Changes,
    host: Host,
    *,
    sector_size: int | None = None,
    sectors: int | None = None,
    current: Disk | None = None,
    repair: GptRepair | None = None,
    made_against: str | None = None,
) -> Proposal:
    """Everything to show before asking: operations, the resulting table, refusals. Writes nothing.
    ``desired``: the one list of operations the planner built and showed (``Plan.writes()``), which is
    then shown and executed as it is, or the table wanted (a plan file), from which
    ``operations.plan_writes`` builds that list against the disk read now.
    ``sector_size``/``sectors``: what the plan was made for, when it says. ``current``: the target as
    the caller read it a moment ago (backend.reader.read), so it is not read twice; the write checks
    again that the disk is the same one and still holds what is deleted. ``repair``: the plan's pending
    repair (``Plan.pending_repair``): then the proposal writes that repair and nothing else, and
    ``desired`` must keep the disk's partitions as they are. ``made_against``: the fingerprint a plan file
    recorded (model.fingerprint): a plan that changes the disk is refused when the disk's table is no
    longer that one. Raises CommitError only when the target cannot be read at all."""
    if repair is not None:
        from diskplan.backend.gptrepair import prepare_repair  # it builds on this module

        table = desired.current if isinstance(desired, Changes) else desired
        return prepare_repair(target, host, current=current, expect=repair, desired=table,
                              sector_size=sector_size, sectors=sectors)
    ident, current = read_target(target, current)
    geom = current.geometry
    kind = "block" if ident.kind == "block" else "file"
    refusals = other_disk(target, geom, sector_size, sectors)
    if isinstance(desired, Changes):
        ops = desired
        moved = differences(ops.current, current.table)
        if moved:  # the list was reviewed against another table: it must not be written on this one
            refusals.append(f"{target} no longer holds the table the plan was made on ({moved[0]}): "
                            "read the disk again and review the plan")
    else:
        ops = plan_writes(current.table, desired, geom, filesystem=current.filesystem)
    refusals += ops.problems
    blocking, idle = unsafe(target, host)
    refusals += blocking
    notes = [*ops.notes, *idle]
    fresh = ops.fresh
    done = ops.operations  # executed from this list: what is deleted, created, re-added, changed, kept
    parts = {k: tuple(op.partition for op in done if op.kind in k and op.partition is not None)
             for k in (("delete", "rewrite"), ("create", "rewrite"), ("change",), ("keep", "change", "rewrite"))}
    now = table_fingerprint(current.table, target, geom, current.filesystem)
    if made_against and made_against != now and any(op.kind != "keep" for op in done):
        refusals.append(plan_made_against_another(target))
    proposal = Proposal(
        target=target,
        kind=kind,
        model=geom.model,
        sectors=geom.sectors,
        sector_size=geom.logical,
        current=current,
        result=ops.result(new_table(ops.label, geom) if fresh else current.table),
        operations=done,
        refusals=tuple(refusals),
        notes=tuple(notes),
        identity=ident,
        fresh=fresh,
        delete=() if fresh else tuple(p.extent for p in parts["delete", "rewrite"]),
        create=parts["create", "rewrite"],
        change=parts["change",],
        protect=tuple(p.extent for p in parts["keep", "change", "rewrite"] if p.role is not Role.EXTENDED),
        made_against=now,
    )
    if refusals or not proposal.changes:
        return proposal
    return _preview(proposal)


def _preview(p: Proposal) -> Proposal:
    """Ask libparted (in a child) to build the table in memory: it must place every partition exactly."""
    try:
        placed, sectors, messages = run_isolated(
            _preview_child, p.target, p.result.label, p.fresh, p.delete, p.create, p.change, timeout=60.0
        )
    except IsolatedFailure as exc:
        return replace(p, refusals=(*p.refusals, f"libparted cannot write this plan: {exc.reason}"))
    expected = tuple(
        sorted((Partition(q.number, q.start, q.end, role=q.role) for q in p.result.live), key=lambda q: q.number)
    )
    refusals = list(p.refusals)
    if placed != expected:
        got = ", ".join(f"{q.number}:{q.start}..{q.end}" for q in placed)
        refusals.append(f"libparted would not write the plan exactly (it would place {got})")
    notes = [*p.notes, *(f"libparted: {m}" for m in messages)]
    return replace(p, placed=placed, table_sectors=sectors, refusals=tuple(refusals), notes=tuple(notes))


def _preview_child(
    target: str, label: str, fresh: bool, delete: tuple[Extent, ...], create: tuple[Partition, ...],
    change: tuple[Partition, ...],
) -> tuple[tuple[Partition, ...], tuple[Extent, ...], tuple[str, ...]]:
    from diskplan.backend.libparted import preview_table

    return preview_table(target, label, fresh=fresh, delete=delete, create=create, change=change)


# --- writing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Written:
    """What the commit child reports: the kernel's news, libparted's messages, and the table read back
    (None when it could not be read: ``problems`` says why)."""

    told: bool
    why_not: str
    messages: tuple[str, ...]
    found: Table | None
    problems: tuple[str, ...]


def _commit_child(p: Proposal, fault: Fault | None) -> _Written:
    """Write with one libparted commit, tell the kernel, then read the table back from the device with a
    new libparted disk and diskplan's raw checks: one fork (and one pyparted start) for all of it."""
    from diskplan.backend.libparted import BackendError, commit_table, read_back

    try:
        same = identity(p.target) == p.identity
    except OSError as exc:
        raise BackendError(f"{p.target} is gone: {exc.strerror}") from exc
    if not same:  # checked again here, the last moment before libparted opens it
        raise BackendError(f"{p.target} is no longer the disk that was read: it vanished or was replaced")
    told, why_not, messages = commit_table(
        p.target,
        p.result.label or "",
        fresh=p.fresh,
        delete=p.delete,
        create=p.create,
        change=p.change,
        sectors=p.sectors,
        sector_size=p.sector_size,
        expect=p.placed,
        after_write=(lambda: fault("write")) if fault else None,
    )
    if fault:
        fault("verify")
    try:
        found, problems = read_back(p.target, p.sectors, p.sector_size)
    except Exception as exc:  # the table is written: a failed read-back is a failed verification, not a failed write
        why = " ".join(str(exc).split()) or type(exc).__name__
        return _Written(told, why_not, messages, None, (f"the disk cannot be read back: {why}",))
    return _Written(told, why_not, messages, found, problems)


@contextlib.contextmanager
def uninterruptible() -> Iterator[None]:
    """Ctrl-C is ignored while sectors are being written: stopping half-way would leave a torn table
    (and the writing child, which inherits this, would carry on regardless). Only the main thread can
    change signal handling; elsewhere (a UI worker) the caller's own handling stays."""
    try:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def state_after_failure(b: bk.TableBackup, target: str) -> tuple[DiskState, str]:
    try:
        changed = bk.changed_extents(b, target)
    except (OSError, bk.BackupError) as exc:
        return DiskState.UNKNOWN, f"{target} cannot be read any more ({getattr(exc, 'strerror', None) or exc})"
    if not changed:
        return DiskState.UNCHANGED, "the disk is unchanged: every sector the write could touch holds its old bytes"
    where = ", ".join(f"{e.start}..{e.end}" for e in changed[:6]) + (" …" if len(changed) > 6 else "")
    return DiskState.CHANGED, f"the disk is partly written: sectors {where} differ from the old table"


def recheck(p: Proposal, host: Host) -> list[str]:
    """What makes writing unsafe now (run again right before the write: time has passed since prepare)."""
    try:
        now = identity(p.target)
    except OSError as exc:
        return [f"{p.target} is gone: {exc.strerror}"]
    if now != p.identity:
        return [f"{p.target} is no longer the disk that was read (it vanished, was replaced or changed size)"]
    return unsafe(p.target, host)[0]


def execute(
    p: Proposal,
    answer: str,
    host: Host,
    *,
    backup_path: str | None = None,
    progress: Progress | None = None,
    fault: Fault | None = None,
) -> Outcome:
    """Back up, write, tell the kernel, verify. ``answer`` is what the user typed (``p.accepts``)."""
    if p.repair is not None:
        from diskplan.backend.gptrepair import execute_repair

        return execute_repair(p, answer, host, backup_path=backup_path, progress=progress, fault=fault)
    step = stepper(progress, 5)
    base = Outcome(Verdict.REFUSED, "", DiskState.UNCHANGED, target=p.target, operations=p.operations)
    stop = stop_before_writing(p, answer, base, "" if p.changes else "nothing to do: the disk already holds the plan")
    if stop is not None:
        return stop
    step(1, "locking the disk and checking that nothing uses it")
    held = take_lock(p.target, host, base)
    if isinstance(held, Outcome):
        return held
    with held:  # from the last check to the verdict: no other writer in between
        now = recheck(p, host) or table_changed(p)
        if now:
            return replace(base, message="refused: " + now[0], details=tuple(now))

        step(2, "saving the backup of the old table")
        got = save_backup(p, backup_path, base)
        if isinstance(got, Outcome):
            return got
        saved, base = got
        with uninterruptible():  # from the first written sector to the verdict
            outcome = _write_and_verify(p, host, saved, base, step, fault)
        bk.seal(saved, base.backup_path, p.target)  # what restore must find here to know this disk
        return outcome


def take_lock(target: str, host: Host, base: Outcome) -> wlock.WriteLock | Outcome:
    """The write lock on ``target`` (backend.lock), or the refusal naming who holds it."""
    try:
        return wlock.take(target)
    except wlock.LockBusy as exc:
        return replace(base, message=f"refused: {exc}", details=tuple(usage(target, host)[0]))
    except FileNotFoundError as exc:
        return replace(base, message=f"refused: {target} is gone: {exc.strerror}")
    except OSError as exc:
        return replace(base, message=f"refused: {target} cannot be locked: {exc.strerror or exc}")


def table_changed(p: Proposal, now: Disk | None = None) -> list[str]:
    """Is the table still the one the proposal was made against (``now``: the disk read again)? Run under
    the lock: another writer may have finished while this one waited for it."""
    if not p.made_against:
        return []
    try:
        now = now if now is not None else read(p.target)
    except ReadError as exc:
        return [f"{p.target} cannot be read again: {exc}"]
    if table_fingerprint(now.table, p.target, now.geometry, now.filesystem) != p.made_against:
        return [f"the table on {p.target} changed since it was read (another program wrote it meanwhile): "
                "read the disk again and plan anew"]
    return []


def stepper(progress: Progress | None, steps: int) -> Callable[[int, str], None]:
    """``step(n, what)``: report step n of ``steps`` to ``progress``, if any."""

    def step(n: int, what: str) -> None:
        if progress:
            progress(n, steps, what)

    return step


class Asked(Protocol):
    """A proposal shown to the user: a commit's, a repair's or a restore's."""

    @property
    def refusals(self) -> tuple[str, ...]: ...

    @property
    def prompt(self) -> str: ...

    def accepts(self, answer: str) -> bool: ...


def stop_before_writing(
    p: Asked, answer: str, base: Outcome, nothing: str, done: DiskState = DiskState.PLANNED
) -> Outcome | None:
    """The outcome when a write must not start: prepare's refusals, nothing to do (``nothing``: the
    message, "" when there is something to write; the disk is then ``done``), or an answer that does
    not confirm; else None."""
    if p.refusals:
        return replace(base, message="refused: " + p.refusals[0], details=p.refusals)
    if nothing:
        return replace(base, verdict=Verdict.NOTHING, state=done, message=nothing)
    if not p.accepts(answer):
        return replace(base, message=f"not confirmed ({p.prompt.lower()}); nothing written")
    return None


def save_backup(p: Proposal, backup_path: str | None, base: Outcome) -> tuple[bk.TableBackup, Outcome] | Outcome:
    """Save the backup of every sector the write may touch: the backup and ``base`` naming its file, or
    the failed outcome (nothing is written without a backup)."""
    try:
        extents = bk.backup_extents(p.target, p.sector_size, p.sectors, also=p.table_sectors, protect=p.protect)
        saved = bk.capture(p.target, p.sector_size, p.sectors, extents, model=p.model)
        path = bk.save(saved, backup_path or bk.default_path(p.target))
    except (OSError, bk.BackupError) as exc:
        why = str(exc)
        if isinstance(exc, OSError):  # which file: an unwritable home says "Permission denied" and nothing more
            why = f"{exc.filename}: {exc.strerror or exc}" if exc.filename else exc.strerror or why
        return replace(base, verdict=Verdict.FAILED, message=f"no backup, so nothing was written: {why}")
    return saved, replace(base, backup_path=path)


def write_failed(base: Outcome, saved: bk.TableBackup, target: str, reason: str) -> Outcome:
    """The write raised: say what state the disk is left in."""
    state, how = state_after_failure(saved, target)
    return replace(base, verdict=Verdict.FAILED, state=state, message=f"the write failed: {reason}", details=(how,))


def not_as_planned(
    base: Outcome, saved: bk.TableBackup, target: str, message: str, diffs: Sequence[str], then: Sequence[str] = ()
) -> Outcome:
    """The write finished but the disk reads back otherwise: ``diffs`` say how, then its state, then ``then``."""
    state, how = state_after_failure(saved, target)
    state = DiskState.DIFFERENT if state is not DiskState.UNKNOWN else state
    return replace(base, verdict=Verdict.FAILED, state=state, message=message, details=(*diffs, how, *then))


def _write_and_verify(
    p: Proposal, host: Host, saved: bk.TableBackup, base: Outcome, step: Callable[[int, str], None],
    fault: Fault | None,
) -> Outcome:
    try:
        if fault:
            fault("backup")
        step(3, "writing the table (one libparted commit), telling the kernel and reading it back")
        w: _Written = run_isolated(_commit_child, p, fault, timeout=WRITE_TIMEOUT)
    except Exception as exc:  # any failure here, even a test's injected one, needs the state report
        reason = exc.reason if isinstance(exc, IsolatedFailure) else " ".join(str(exc).split()) or type(exc).__name__
        return write_failed(base, saved, p.target, reason)

    step(4, "comparing the table read back with the plan")
    diffs = [*w.problems, *(differences(p.result, w.found) if w.found is not None else ())]
    if diffs:
        return not_as_planned(base, saved, p.target, "the disk does not hold the plan", diffs, w.messages)
    step(5, "checking the kernel's partition list")
    kernel = ""
    if p.kind == "block":
        stale = kernel_differences(p.target, p.result, p.sector_size, host)
        if not w.told or stale:
            what = "; ".join([*([w.why_not] if w.why_not else []), *stale]) or "it refused"
            kernel = (
                f"the table is written, but the kernel could not be told ({what}). The old partitions stay in "
                f"use until `partx -u {p.target}` succeeds or the machine reboots"
            )
    msg = f"written and verified: {p.target} holds the plan"
    return replace(base, verdict=Verdict.WRITTEN, state=DiskState.PLANNED, message=msg, kernel=kernel,
                   details=tuple(w.messages))
