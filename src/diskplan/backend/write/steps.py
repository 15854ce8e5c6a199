"""The steps every write to a disk shares, in one sequence: a table commit (backend.write.tablewrite), a GPT
repair (backend.write.gptrepair) and a restore (backend.write.restore) are each one subclass of ``Write`` that plugs
in its own checks, write and verification, as blivet's ``DeviceAction`` has one subclass per kind of
change. The data move (backend.move.engine) uses the same identity, use and confirmation checks.

``Write.run`` is the sequence: stop before writing (refusals, nothing to do, an answer that does not
confirm) -> the write lock (backend.write.lock) -> under it, check again that nothing uses the disk and that it
holds the table the proposal was made against -> save the backup (backend.write.backup) -> write and verify
with Ctrl-C ignored -> seal the backup (what restore must find to know this disk) -> the ``WriteOutcome``,
which says exactly what state the disk is in and how to restore it.

What the backend cannot see itself (who uses the disk, what the kernel's partition list holds) comes
from ``Host``: discovery.inuse answers it; the backend may not import discovery. This module imports
none of the kinds of write built on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import stat
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from diskplan.backend.move.movejournal import unfinished
from diskplan.backend.raw import kernelparts
from diskplan.backend.raw.filekind import write_refusals
from diskplan.backend.raw.gptpatch import HeaderWish
from diskplan.backend.raw.tableid import table_fingerprint
from diskplan.backend.read.reader import ReadError, read
from diskplan.backend.write import backup as bk
from diskplan.backend.write import lock as wlock
from diskplan.model.disk import Disk
from diskplan.model.exitstatus import Exit
from diskplan.model.extent import Extent, Partition
from diskplan.model.geometry import Geometry
from diskplan.model.plan.operations import Operation
from diskplan.model.plan.repair import GptRepair
from diskplan.model.table import Table
from diskplan.model.value import replace, value

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

BLKROGET = 0x125E
BLKGETDISKSEQ = 0x80081280

Progress = Callable[[int, int, str], None]  # (step, steps, what is happening now)
# tests: called at "backup", "write" (in the child, after the write), "patch" (in the child, after the first
# sector of the raw GPT patch, backend.raw.gptpatch), "verify"
Fault = Callable[[str], None]


class Usage(Protocol):
    """One use of the disk (discovery.inuse.Use): blocking uses refuse the write."""

    @property
    def blocking(self) -> bool: ...

    def __str__(self) -> str: ...


@value
class Host:
    """Who uses ``path`` (what only discovery can answer), and the kernel's partition list for it (number ->
    (start, size) in 512-byte units; None for an image file): backend.kernelparts.kernel_list, the reader the
    kernel is told with, or a stand-in (the default: no kernel to ask)."""

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
        return {Verdict.WRITTEN: Exit.OK, Verdict.NOTHING: Exit.OK, Verdict.REFUSED: Exit.REFUSED,
                Verdict.FAILED: Exit.FAILED}[self]


class DiskState(Enum):
    UNCHANGED = "unchanged"  # every sector the write could touch holds its old bytes
    PLANNED = "holds the plan"  # written and verified
    DIFFERENT = "written, but not as planned"  # verification found differences
    CHANGED = "partly written"  # the write failed after changing some sectors
    UNKNOWN = "unknown"  # the disk cannot be read any more
    RESTORED = "holds the backup"  # every saved sector is back


@value
class Identity:
    """Enough to notice that the target is no longer the disk that was read."""

    kind: str  # "block" or "file"
    number: tuple[int, int]  # (st_dev, st_ino) of a file, (major, minor) of a block device
    size: int
    diskseq: int = 0  # bumped by the kernel whenever a loop device gets a new backing file


class _Named(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def target(self) -> str: ...


class ConfirmedByName:
    """What confirms a write of ``target``: its kernel name typed for a block device, "yes" for a file
    (``confirm_word``, ``accepts``). A mixin of the proposals, which have ``kind`` and ``target``."""

    @property
    def confirm_word(self: _Named) -> str:
        return confirm_word(self.kind, self.target)

    def accepts(self: _Named, answer: str) -> bool:
        return accepts(self.kind, self.target, answer)


@value
class Proposal(ConfirmedByName):
    """What a table commit (backend.write.tablewrite) or a GPT repair (backend.write.gptrepair) would write, and what
    refuses it: everything shown before the user is asked."""

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
    repair: GptRepair | None = None  # a repair-only proposal (backend.write.gptrepair): these bytes are written
    made_against: str = ""  # fingerprint of ``current`` (model.plan.fingerprint): checked again under the lock
    # Fields libparted makes up that the plan names (an sfdisk script's first-lba, last-lba, label-id,
    # uuid=): patched into the raw GPT or MBR after the commit (backend.raw.gptpatch, mbrid); ``raw_changes``
    # says which differ from the disk now (a table otherwise the same is still written for them).
    gpt_header: HeaderWish | None = None
    guids: tuple[tuple[int, str], ...] = ()  # partition number -> unique GUID
    signature: str = ""  # msdos: the disk signature the plan names ("0x1234abcd"; backend.raw.mbrid), "" none
    raw_changes: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return bool(self.raw_changes) or any(op.kind != "keep" for op in self.operations)

    @property
    def writable(self) -> bool:
        return not self.refusals

    @property
    def prompt(self) -> str:
        if self.repair is not None:
            return f"Type {self.confirm_word} to repair the table on {self.target}"
        return f"Type {self.confirm_word} to write this table to {self.target}"


@value
class WriteOutcome:
    verdict: Verdict
    message: str  # one line
    state: DiskState
    target: str = ""
    details: tuple[str, ...] = ()  # differences, libparted's messages, what was checked
    backup_path: str = ""
    kernel: str = ""  # empty when the kernel is up to date (or an image file); else what differs and what to do
    operations: tuple[Operation, ...] = ()

    @property
    def exit_code(self) -> int:
        return kernel_exit(self.verdict, self.kernel)

    @property
    def restore_command(self) -> str:
        """The command that undoes the write, when the disk holds something other than the plan or the
        old table."""
        if self.backup_path and self.state in (DiskState.CHANGED, DiskState.DIFFERENT, DiskState.UNKNOWN):
            return f"diskplan restore {self.backup_path} {self.target} --yes"
        return ""


def kernel_exit(verdict: Verdict, kernel: str) -> int:
    """The exit status of a write: a disk written as planned whose partitions the kernel does not see as
    written (``kernel`` says how) is a failure too (3): what runs next would use the old partitions."""
    return Verdict.FAILED.exit_code if kernel and verdict is Verdict.WRITTEN else verdict.exit_code


def confirm_word(kind: str, target: str) -> str:
    """What the user types to confirm: a block device's kernel name (sdb), "yes" for an image file."""
    return os.path.basename(os.path.realpath(target)) if kind == "block" else "yes"


def accepts(kind: str, target: str, answer: str) -> bool:
    answer = answer.strip()
    if kind != "block":
        return answer.lower() == "yes"
    word = confirm_word(kind, target)
    return answer in {word, f"/dev/{word}", target, os.path.realpath(target)}


class Asked(Protocol):
    """A proposal shown to the user before a write (a commit's, a repair's, a restore's, a move's): what
    refuses it, and the word that confirms it."""

    @property
    def kind(self) -> str: ...  # "block" or "file"

    @property
    def target(self) -> str: ...

    @property
    def refusals(self) -> tuple[str, ...]: ...

    @property
    def confirm_word(self) -> str: ...

    @property
    def prompt(self) -> str: ...

    def accepts(self, answer: str) -> bool: ...


def preload() -> None:
    """Import pyparted in this process once, so that every child forked to read, preview, write and
    verify inherits it instead of importing it again (about 40 ms a child). Importing opens no device."""
    import diskplan.backend.parted.libparted  # noqa: F401


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
    """Partitions whose kernel view (sysfs, read by discovery through ``host``) differs from ``table``;
    [] for image files."""
    return kernelparts.compare(host.kernel_partitions(target), kernelparts.wanted(table.live), sector_size)


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


def unwritable(target: str, host: Host, sector_size: int) -> tuple[list[str], list[str]]:
    """What forbids a write that saves a backup of ``target`` first — ``unsafe``'s refusals and
    filekind.write_refusals (a path the backup cannot record, an image ending in part of a sector) — and
    the idle users to mention. Every prepare asks it but restore's, which saves no backup."""
    blocking, idle = unsafe(target, host)
    return [*blocking, *write_refusals(target, sector_size)], idle


def half_moved(target: str, size: int) -> list[str]:
    """Refusals while a data move on ``target`` is unfinished (its journal, backend.move.movejournal, found by the
    disk's identity whatever its path now): the partition's entry is hidden and its bytes are half-copied, so
    any other write could place a partition or test data over them (the hidden entry's range is free in the
    table) or bring the old entry back. Only ``diskplan resume`` may write then."""
    found = unfinished(target, size)
    if not found:
        return []
    return [f"a data move on {target} is unfinished (journal {found[0]}): finish it first with "
            f"`diskplan resume {target}` (or M in the planner)"]


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


def proposal_as_read(target: str, ident: Identity, current: Disk, **fields: Any) -> Proposal:
    """A proposal to write ``target`` as ``read_target`` just gave it (``ident``, ``current``): what every kind
    of proposal says about the disk (block device or file, model, size, sector size) and checks again under
    the lock comes from what was read, never from the plan. ``fields``: what the kind of write adds (its
    result, operations, refusals, notes, ...)."""
    geom = current.geometry
    return Proposal(target=target, kind="block" if ident.kind == "block" else "file", model=geom.model,
                    sectors=geom.sectors, sector_size=geom.logical, current=current, identity=ident, **fields)


def other_disk(target: str, geom: Geometry, sector_size: int | None, sectors: int | None) -> list[str]:
    """Refusals when the plan was made for a disk of another sector size or length."""
    out = []
    if sector_size and sector_size != geom.logical:
        out.append(f"the plan is for {sector_size} B sectors; {target} has {geom.logical} B sectors")
    if sectors and sectors != geom.sectors:
        out.append(f"the plan is for a disk of {sectors} sectors; {target} has {geom.sectors}")
    return out


# --- the steps of the sequence ---------------------------------------------------------------------


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


class Identified(Protocol):
    """A proposal of any kind of write: the target and what it was when read."""

    @property
    def target(self) -> str: ...

    @property
    def identity(self) -> Identity | None: ...


def recheck(p: Identified, host: Host) -> list[str]:
    """What makes writing unsafe now (run again right before the write: time has passed since prepare)."""
    try:
        now = identity(p.target)
    except OSError as exc:
        return [f"{p.target} is gone: {exc.strerror}"]
    if now != p.identity:
        return [f"{p.target} is no longer the disk that was read (it vanished, was replaced or changed size)"]
    return unsafe(p.target, host)[0]


Refused = TypeVar("Refused", bound="DataclassInstance")  # an outcome with ``message`` and ``details``


def refused(base: Refused, why: Sequence[str]) -> Refused:
    """``base`` refused for the first of ``why``, each reason in its details."""
    return replace(base, message="refused: " + why[0], details=tuple(why))


def take_lock(target: str, host: Host, base: Refused) -> wlock.WriteLock | Refused:
    """The write lock on ``target`` (backend.write.lock), or ``base`` as the refusal naming who holds it (a table
    write's outcome, or a data move's)."""
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


def stop_before_writing(p: Asked, answer: str, base: Refused, nothing: str, **done: object) -> Refused | None:
    """The outcome (``base`` changed: a write's, a move's or a resize's) when a write must not start:
    prepare's refusals, nothing to do (``nothing``: the message, "" when there is something to write;
    ``done``: what else the outcome then says, e.g. the disk's state), or an answer that does not
    confirm; else None."""
    if p.refusals:
        return refused(base, p.refusals)
    if nothing:
        return replace(base, verdict=Verdict.NOTHING, message=nothing, **done)
    if not p.accepts(answer):
        return replace(base, message=f"not confirmed ({p.prompt.lower()}); nothing written")
    return None


class Backed(Protocol):
    """A proposal of any kind of write, as its table backup needs it (a commit's, a move's, a resize's)."""

    @property
    def target(self) -> str: ...

    @property
    def sector_size(self) -> int: ...

    @property
    def sectors(self) -> int: ...

    @property
    def model(self) -> str: ...

    @property
    def protect(self) -> tuple[Extent, ...]: ...


def save_backup(
    p: Backed, backup_path: str | None, base: Refused, also: tuple[Extent, ...] = ()
) -> tuple[bk.TableBackup, Refused] | Refused:
    """Save the backup of every sector the write may touch (the table's, and ``also``: where a new table's
    own sectors go): the backup and ``base`` naming its file, or the failed outcome (nothing is written
    without a backup). ``base``: a table write's outcome or a data move's."""
    try:
        extents = bk.backup_extents(p.target, p.sector_size, p.sectors, also=also, protect=p.protect)
        saved = bk.capture(p.target, p.sector_size, p.sectors, extents, model=p.model)
        path = bk.save(saved, backup_path or bk.default_path(p.target))
    except (OSError, bk.BackupError) as exc:
        why = str(exc)
        if isinstance(exc, OSError):  # which file: an unwritable home says "Permission denied" and nothing more
            why = f"{exc.filename}: {exc.strerror or exc}" if exc.filename else exc.strerror or why
        return replace(base, verdict=Verdict.FAILED, message=f"no backup, so nothing was written: {why}")
    return saved, replace(base, backup_path=path)


def write_failed(base: WriteOutcome, saved: bk.TableBackup, target: str, reason: str) -> WriteOutcome:
    """The write raised: say what state the disk is left in."""
    state, how = state_after_failure(saved, target)
    return replace(base, verdict=Verdict.FAILED, state=state, message=f"the write failed: {reason}", details=(how,))


def not_as_planned(
    base: WriteOutcome, saved: bk.TableBackup, target: str, message: str, diffs: Sequence[str], then: Sequence[str] = ()
) -> WriteOutcome:
    """The write finished but the disk reads back otherwise: ``diffs`` say how, then its state, then ``then``."""
    state, how = state_after_failure(saved, target)
    state = DiskState.DIFFERENT if state is not DiskState.UNKNOWN else state
    return replace(base, verdict=Verdict.FAILED, state=state, message=message, details=(*diffs, how, *then))


def inform_kernel_child(target: str) -> tuple[bool, str]:
    """Run in a child (``run_isolated``): ask libparted to tell the kernel about ``target``'s table."""
    from diskplan.backend.parted.libparted import inform_kernel

    return inform_kernel(target)


# --- the sequence -----------------------------------------------------------------------------------

P = TypeVar("P", bound=Asked)


class Write(ABC, Generic[P]):
    """One write of proposal ``p`` to its disk. ``run(answer)`` is the sequence every write follows; a
    subclass says what "nothing to do" is, what to check again under the lock, how to back up, and how
    to write and verify."""

    steps = 5  # for ``progress``
    checking = "locking the disk and checking that nothing uses it"  # step 1 ("": not reported)
    done = DiskState.PLANNED  # the state of a disk with nothing to do
    asks_under_lock = False  # True: refusals and the answer are looked at once the lock is held

    def __init__(self, p: P, host: Host, *, backup_path: str | None = None, progress: Progress | None = None,
                 fault: Fault | None = None) -> None:
        self.p = p
        self.host = host
        self.backup_path = backup_path
        self.progress = progress
        self.fault = fault  # tests: called at "backup", "write" and "verify"
        self.step = stepper(progress, self.steps)

    def base(self) -> WriteOutcome:
        """The outcome every other one is made from: refused, the disk unchanged."""
        return WriteOutcome(Verdict.REFUSED, "", DiskState.UNCHANGED, target=self.p.target)

    @abstractmethod
    def nothing(self) -> str:
        """The message when there is nothing to write, "" when there is something."""

    @abstractmethod
    def recheck(self, base: WriteOutcome) -> WriteOutcome | None:
        """Under the lock: the outcome when the write must not start after all, else None."""

    @abstractmethod
    def back_up(self, base: WriteOutcome) -> tuple[bk.TableBackup, WriteOutcome] | WriteOutcome:
        """The backup of every sector the write may touch and ``base`` naming its file, or the outcome
        when there is none (nothing is written without a backup)."""

    @abstractmethod
    def write_and_verify(self, saved: bk.TableBackup, base: WriteOutcome) -> WriteOutcome:
        """Write, read back, compare: the verdict. Runs with Ctrl-C ignored."""

    def seal(self, saved: bk.TableBackup, base: WriteOutcome) -> None:
        """Record in the backup what restore must find on this disk to know it (backup.seal)."""
        bk.seal(saved, base.backup_path, self.p.target)

    def run(self, answer: str) -> WriteOutcome:
        """``answer``: what the user typed (``p.accepts``)."""
        base = self.base()
        if not self.asks_under_lock:
            stop = stop_before_writing(self.p, answer, base, self.nothing(), state=self.done)
            if stop is not None:
                return stop
        if self.checking:
            self.step(1, self.checking)
        held = take_lock(self.p.target, self.host, base)
        if isinstance(held, WriteOutcome):
            return held
        with held:  # from the last check to the verdict: no other writer in between
            if self.asks_under_lock:
                stop = stop_before_writing(self.p, answer, base, self.nothing(), state=self.done)
                if stop is not None:
                    return stop
            refused = self.recheck(base)
            if refused is not None:
                return refused
            got = self.back_up(base)
            if isinstance(got, WriteOutcome):
                return got
            saved, base = got
            with uninterruptible():  # from the first written sector to the verdict
                outcome = self.write_and_verify(saved, base)
            self.seal(saved, base)
            return outcome


class ProposalWrite(Write[Proposal]):
    """A write of a ``Proposal`` (a table commit, a GPT repair): its operations in every outcome, its
    backup saved before anything is written."""

    saving = "saving the backup of the old table"  # step 2

    def base(self) -> WriteOutcome:
        return replace(super().base(), operations=self.p.operations)

    def recheck(self, base: WriteOutcome) -> WriteOutcome | None:
        now = recheck(self.p, self.host) or self.changed_since()
        return refused(base, now) if now else None

    def changed_since(self) -> list[str]:
        """How the disk no longer matches the proposal, read again under the lock."""
        return table_changed(self.p)

    def back_up(self, base: WriteOutcome) -> tuple[bk.TableBackup, WriteOutcome] | WriteOutcome:
        self.step(2, self.saving)
        return save_backup(self.p, self.backup_path, base, also=self.p.table_sectors)
