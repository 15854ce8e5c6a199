"""Commit a planned table to a disk without costing anyone data.

The steps, each its own function so a UI can show them one by one:

1. ``prepare(target, desired, host)`` reads the disk, lists the operations (new label, delete N,
   create N at start..end, change N, keep N), checks what would make the write unsafe (in use, read-only,
   a plan libparted cannot place exactly) and asks libparted, in a child, to build the new table in memory.
   Nothing is written. The ``Proposal`` says what to show and what to ask (type the device name for a
   block device, "yes" for an image file).
2. ``execute(proposal, answer, host)`` checks again (someone may have mounted it meanwhile), saves the
   backup (backend.backup), writes the table with one libparted commit in a child, tells the kernel,
   re-reads the disk and compares it with the plan sector for sector. The ``Outcome`` says exactly what
   state the disk is in, and how to restore when something went wrong.
3. ``prepare_restore`` / ``execute_restore`` put a backup back byte for byte.

What the backend cannot see itself (who uses the disk, what the kernel's partition list holds) comes
from ``Host``: discovery.inuse answers it; the backend may not import discovery.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import stat
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

from diskplan.backend import backup as bk
from diskplan.backend.isolate import IsolatedFailure, run_isolated
from diskplan.backend.reader import ReadError, read
from diskplan.model import ptypes
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.table import Table, new_table
from diskplan.model.units import human_bytes

WRITE_TIMEOUT = 300.0  # seconds for one libparted commit (a slow USB stick syncing)
BLKROGET = 0x125E
BLKGETDISKSEQ = 0x80081280
LABELS = {"gpt": "gpt", "msdos": "msdos", "dos": "msdos", "mbr": "msdos"}
DEFAULT_TYPE = {"gpt": "0FC63DAF-8483-4772-8E79-3D69D8477DE4", "msdos": "0x83"}  # what libparted gives

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
class Operation:
    kind: str  # "label", "delete", "create", "change", "rewrite", "keep"
    number: int = 0
    start: int = 0
    end: int = 0
    detail: str = ""

    def __str__(self) -> str:
        where = f"{self.start}..{self.end}"
        text = {
            "label": f"new {self.detail} label (every old partition is removed)",
            "delete": f"delete {self.number} ({where})",
            "create": f"create {self.number} at {where}",
            "change": f"change {self.number} ({where})",
            "rewrite": f"rewrite the EBR of logical {self.number} at {where} (its data is not touched)",
            "keep": f"keep {self.number} at {where} (untouched)",
        }[self.kind]
        return f"{text}: {self.detail}" if self.detail and self.kind != "label" else text


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

    @property
    def changes(self) -> bool:
        return any(op.kind != "keep" for op in self.operations)

    @property
    def writable(self) -> bool:
        return not self.refusals

    @property
    def confirm_word(self) -> str:
        return os.path.basename(os.path.realpath(self.target)) if self.kind == "block" else "yes"

    @property
    def prompt(self) -> str:
        if self.kind == "block":
            return f"Type {self.confirm_word} to write this table to {self.target}"
        return f"Type yes to write this table to {self.target}"

    def accepts(self, answer: str) -> bool:
        answer = answer.strip()
        if self.kind != "block":
            return answer.lower() == "yes"
        return answer in {self.confirm_word, self.target, os.path.realpath(self.target), f"/dev/{self.confirm_word}"}

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


def type_key(label: str, text: str) -> str:
    """One spelling per type, so "Linux swap", "0657FD6D-…" and "swap" compare equal on GPT, and
    "0x82", "82" and "Linux swap" on msdos."""
    if not text:
        return ""
    t = ptypes.lookup(text)
    if label == "gpt":
        return (t.gpt if t and t.gpt else text).upper()
    if t is not None and t.mbr is not None:
        return f"0x{t.mbr:02x}"
    try:
        return f"0x{int(text, 16):02x}"
    except ValueError:
        return text.lower()


def _boot(p: Partition) -> bool:
    return "boot" in p.flags


def differences(expected: Table, found: Table) -> list[str]:
    """Every way ``found`` (read back from the disk) differs from ``expected``: sector-exact extents,
    numbers, roles; types where the plan names one; GPT names; the msdos boot flag."""
    out = []
    label = expected.label or ""
    if found.label != label:
        return [f"the disk holds a {found.label or 'no'} label, not {label}"]
    want = {p.number: p for p in expected.live}
    got = {p.number: p for p in found.partitions}
    for n in sorted(set(want) | set(got)):
        w, g = want.get(n), got.get(n)
        if g is None and w is not None:
            out.append(f"partition {n} ({w.start}..{w.end}) is missing")
        elif w is None and g is not None:
            out.append(f"partition {n} ({g.start}..{g.end}) is not in the plan")
        elif w is not None and g is not None:
            if (w.start, w.end) != (g.start, g.end):
                out.append(f"partition {n} is at {g.start}..{g.end}, not {w.start}..{w.end}")
            if w.role is not g.role:
                out.append(f"partition {n} is {g.role.value}, not {w.role.value}")
            if w.role is not Role.EXTENDED and w.type and type_key(label, w.type) != type_key(label, g.type):
                out.append(f"partition {n} has type {ptypes.describe(g.type)}, not {ptypes.describe(w.type)}")
            if label == "gpt" and w.name != g.name:
                out.append(f"partition {n} is named {g.name!r}, not {w.name!r}")
            if label == "msdos" and _boot(w) != _boot(g):
                out.append(f"partition {n}'s boot flag is {'on' if _boot(g) else 'off'}")
    return out


def verify(target: str, expected: Table) -> list[str]:
    """Re-read ``target`` (libparted in a child, our own raw checks) and compare it with ``expected``."""
    try:
        disk = read(target)
    except ReadError as exc:
        return [f"the disk cannot be read back: {exc}"]
    return differences(expected, disk.table)


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


# --- planning the operations ------------------------------------------------------------------------


def _sane(label: str, live: list[Partition], usable: Extent, sectors: int, max_parts: int) -> list[str]:
    out = []
    for p in live:
        if p.end < p.start:
            out.append(f"partition {p.number} ends before it starts")
        elif not p.extent.within(usable) and p.end > sectors - 1:
            out.append(f"partition {p.number} ({p.start}..{p.end}) ends past the last sector {sectors - 1}")
        elif not p.extent.within(usable):
            out.append(
                f"partition {p.number} ({p.start}..{p.end}) lies outside the usable area "
                f"{usable.start}..{usable.end} of a {label} table"
            )
    numbers = [p.number for p in live]
    for n in sorted({n for n in numbers if numbers.count(n) > 1}):
        out.append(f"two partitions are numbered {n}")
    if label == "gpt":
        out += [f"partition number {p.number} is not in 1..{max_parts}" for p in live if not 0 < p.number <= max_parts]
        out += [f"partition {p.number}: GPT has no {p.role.value} ones" for p in live if p.role is not Role.PRIMARY]
    else:
        outer = [p for p in live if p.role is not Role.LOGICAL]
        out += [f"partition {p.number}: msdos numbers primary partitions 1..4" for p in outer if not 1 <= p.number <= 4]
        ext = [p for p in live if p.role is Role.EXTENDED]
        if len(ext) > 1:
            out.append("msdos allows one extended partition")
        logicals = sorted((p for p in live if p.role is Role.LOGICAL), key=lambda p: p.number)
        if logicals and not ext:
            out.append("logical partitions need an extended partition")
        for p in logicals:
            if ext and not (ext[0].start < p.start and p.end <= ext[0].end):
                out.append(f"logical partition {p.number} is not inside the extended partition")
        if [p.number for p in logicals] != list(range(5, 5 + len(logicals))):
            out.append("msdos numbers logical partitions 5, 6, … without gaps (the order of their EBR chain)")
    groups = [[p for p in live if p.role is not Role.LOGICAL], [p for p in live if p.role is Role.LOGICAL]]
    for group in groups:
        ordered = sorted(group, key=lambda p: p.start)
        for a, b in itertools.pairwise(ordered):
            if a.extent.overlaps(b.extent):
                out.append(f"partitions {a.number} and {b.number} overlap")
    return out


def _attributes_differ(label: str, old: Partition, new: Partition) -> list[str]:
    out = []
    if new.type and type_key(label, new.type) != type_key(label, old.type):
        out.append(f"type {ptypes.describe(old.type) or '?'} -> {ptypes.describe(new.type)}")
    if label == "gpt" and new.name != old.name:
        out.append(f"name {old.name!r} -> {new.name!r}")
    if label == "msdos" and _boot(new) != _boot(old):
        out.append("boot flag " + ("on" if _boot(new) else "off"))
    return out


@dataclass
class _Ops:
    fresh: bool
    delete: list[Partition] = field(default_factory=list)
    create: list[Partition] = field(default_factory=list)
    change: list[tuple[Partition, Partition, list[str]]] = field(default_factory=list)
    keep: list[Partition] = field(default_factory=list)
    rewrite: list[Partition] = field(default_factory=list)  # logical ones deleted and re-added in place


def _plan_ops(label: str, current: Table, live: list[Partition], fresh: bool) -> _Ops:
    ops = _Ops(fresh)
    if fresh:
        ops.delete = list(current.partitions)
        ops.create = list(live)
        return ops
    cur = list(current.partitions)
    outer_cur = [p for p in cur if p.role is not Role.LOGICAL]
    want_outer = {(p.number, p.start, p.end, p.role): p for p in live if p.role is not Role.LOGICAL}
    for p in outer_cur:
        w = want_outer.pop((p.number, p.start, p.end, p.role), None)
        if w is None:
            ops.delete.append(p)
            continue
        why = _attributes_differ(label, p, w) if p.role is not Role.EXTENDED else []
        (ops.change.append((p, w, why)) if why else ops.keep.append(p))
    ops.create += list(want_outer.values())
    # Logical partitions: libparted renumbers the rest when one is deleted and appends new ones, and the
    # EBR chain follows the numbers. Keep them when that yields the plan's numbers, else re-add them all.
    cur_log = sorted((p for p in cur if p.role is Role.LOGICAL), key=lambda p: p.number)
    want_log = sorted((p for p in live if p.role is Role.LOGICAL), key=lambda p: p.number)
    ext_kept = any(p.role is Role.EXTENDED for p in ops.keep)
    by_extent = {(p.start, p.end): p for p in want_log}
    kept = [p for p in cur_log if (p.start, p.end) in by_extent] if ext_kept else []
    new = [p for p in want_log if (p.start, p.end) not in {(k.start, k.end) for k in kept}]
    simulated = {(p.start, p.end): 5 + i for i, p in enumerate(kept)}
    simulated.update({(p.start, p.end): 5 + len(kept) + i for i, p in enumerate(new)})
    if not all(simulated[(p.start, p.end)] == p.number for p in want_log):
        kept = []  # re-add every logical partition in the plan's order (their data stays where it is)
    kept_extents = {(p.start, p.end) for p in kept}
    old = {(p.start, p.end): p for p in cur_log}
    ops.delete += [p for p in cur_log if (p.start, p.end) not in kept_extents]
    for w in want_log:
        where = (w.start, w.end)
        if where in kept_extents:
            q = old[where]
            why = _attributes_differ(label, q, w)
            renumbered = replace(q, number=w.number, extra=(("was", str(q.number)),) if q.number != w.number else ())
            (ops.change.append((q, w, why)) if why else ops.keep.append(renumbered))
        elif where in old:
            q = old[where]  # re-added at the same place: keeps its type and boot flag unless the plan says
            flags = w.flags or tuple(f for f in q.flags if f == "boot")
            ops.rewrite.append(replace(w, type=w.type or q.type, flags=flags))
        else:
            ops.create.append(w)
    return ops


def _operations(ops: _Ops, label: str, current: Table) -> tuple[Operation, ...]:
    out: list[Operation] = []
    rewritten = {(p.start, p.end) for p in ops.rewrite}
    if ops.fresh:
        out.append(Operation("label", detail=label))
    for p in sorted(ops.delete, key=lambda p: -p.number):
        if (p.start, p.end) in rewritten:
            continue
        what = p.role.value if p.role is not Role.PRIMARY else ptypes.describe(p.type) or "partition"
        out.append(Operation("delete", p.number, p.start, p.end, what))
    for p in sorted(ops.create, key=lambda p: p.number):
        what = ptypes.describe(p.type or DEFAULT_TYPE[label])
        what = "extended" if p.role is Role.EXTENDED else what if p.role is Role.PRIMARY else f"logical, {what}"
        detail = f"{p.size} sectors, {what}" + (f", {p.name!r}" if p.name else "")
        out.append(Operation("create", p.number, p.start, p.end, detail))
    for p in sorted(ops.rewrite, key=lambda p: p.number):
        out.append(Operation("rewrite", p.number, p.start, p.end))
    for _, new, why in ops.change:
        out.append(Operation("change", new.number, new.start, new.end, ", ".join(why)))
    for p in sorted(ops.keep, key=lambda p: p.number):
        was = dict(p.extra).get("was")
        out.append(Operation("keep", p.number, p.start, p.end, f"was number {was}" if was else ""))
    return tuple(out)


def _result(label: str, base: Table, ops: _Ops) -> Table:
    """The table the disk will hold, as the reader will report it."""
    parts: list[Partition] = []
    for p in ops.keep:
        parts.append(replace(p, state=State.EXISTING))
    for old, new, _ in ops.change:
        parts.append(replace(old, number=new.number, type=new.type or old.type, name=new.name, flags=new.flags))
    parts += [replace(p, state=State.EXISTING) for p in ops.rewrite]
    for p in ops.create:
        default = "" if p.role is Role.EXTENDED else DEFAULT_TYPE[label]
        parts.append(replace(p, type=p.type or default, state=State.PROPOSED))
    return replace(base, label=label, partitions=tuple(sorted(parts, key=lambda p: (p.start, p.number))))


def _usage(target: str, host: Host) -> tuple[list[str], list[str]]:
    try:
        uses = list(host.users(target))
    except OSError as exc:
        return [f"could not check whether {target} is in use: {exc.strerror or exc}"], []
    blocking = [f"{target} is in use: {u}" for u in uses if u.blocking]
    return blocking, [str(u) for u in uses if not u.blocking]


def prepare(
    target: str,
    desired: Table,
    host: Host,
    *,
    sector_size: int | None = None,
    sectors: int | None = None,
) -> Proposal:
    """Everything to show before asking: operations, the resulting table, refusals. Writes nothing.
    ``sector_size``/``sectors``: what the plan was made for, when it says. Raises CommitError only when
    the target cannot be read at all."""
    if not os.path.exists(target):
        raise CommitError(f"{target}: no such file or device")
    try:
        ident = identity(target)
        current = read(target)
    except (OSError, ReadError) as exc:
        raise CommitError(f"{target}: {getattr(exc, 'strerror', None) or exc}") from exc
    geom = current.geometry
    kind = "block" if ident.kind == "block" else "file"
    refusals: list[str] = []
    notes: list[str] = []
    label = LABELS.get((desired.label or "").lower(), "")
    if not label:
        refusals.append(f"diskplan writes gpt and msdos tables, not {desired.label or 'no table'}")
        label = "gpt"
    if sector_size and sector_size != geom.logical:
        refusals.append(f"the plan is for {sector_size} B sectors; {target} has {geom.logical} B sectors")
    if sectors and sectors != geom.sectors:
        refusals.append(f"the plan is for a disk of {sectors} sectors; {target} has {geom.sectors}")
    cur_label = current.table.label
    live = sorted(desired.live, key=lambda p: (p.role is Role.LOGICAL, p.number))
    keeps_any = cur_label == label and any(
        (p.number, p.start, p.end) == (q.number, q.start, q.end) or (p.role is Role.LOGICAL and p.extent == q.extent)
        for p in live
        for q in current.table.partitions
    )
    fresh = cur_label != label or (bool(current.table.read_only) and not keeps_any)
    if current.table.read_only and not fresh:
        refusals.append(f"the table on {target} cannot be changed in place: {current.table.read_only}")
    if current.filesystem and cur_label is None:
        notes.append(f"{target} holds a {current.filesystem} filesystem on the whole disk: the new label replaces it")
    if fresh and cur_label not in (None, label) and current.table.partitions:
        notes.append(f"the {cur_label} table and all its partitions are replaced by a new {label} label")
    base = new_table(label, geom) if fresh else current.table
    refusals += _sane(label, live, base.usable, geom.sectors, base.max_partitions)
    ro = read_only_reason(target)
    if ro:
        refusals.append(ro)
    blocking, idle = _usage(target, host)
    refusals += blocking
    notes += idle
    ops = _plan_ops(label, current.table, live, fresh)
    operations = _operations(ops, label, current.table)
    result = _result(label, base, ops)
    protect = tuple(p.extent for p in [*ops.keep, *(o for o, _, _ in ops.change), *ops.rewrite]
                    if p.role is not Role.EXTENDED)
    delete = tuple(p.extent for p in ops.delete) if not fresh else ()
    create = tuple(ops.create) + tuple(ops.rewrite)
    change = tuple(new for _, new, _ in ops.change)
    proposal = Proposal(
        target=target,
        kind=kind,
        model=geom.model,
        sectors=geom.sectors,
        sector_size=geom.logical,
        current=current,
        result=result,
        operations=operations,
        refusals=tuple(refusals),
        notes=tuple(notes),
        identity=ident,
        fresh=fresh,
        delete=delete,
        create=create,
        change=change,
        protect=protect,
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


def _commit_child(p: Proposal, fault: Fault | None) -> tuple[bool, str, tuple[str, ...]]:
    from diskplan.backend.libparted import BackendError, commit_table

    try:
        same = identity(p.target) == p.identity
    except OSError as exc:
        raise BackendError(f"{p.target} is gone: {exc.strerror}") from exc
    if not same:  # checked again here, the last moment before libparted opens it
        raise BackendError(f"{p.target} is no longer the disk that was read: it vanished or was replaced")
    return commit_table(
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


def _state_after_failure(b: bk.TableBackup, target: str) -> tuple[DiskState, str]:
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
    out = []
    try:
        now = identity(p.target)
    except OSError as exc:
        return [f"{p.target} is gone: {exc.strerror}"]
    if now != p.identity:
        return [f"{p.target} is no longer the disk that was read (it vanished, was replaced or changed size)"]
    ro = read_only_reason(p.target)
    if ro:
        out.append(ro)
    out += _usage(p.target, host)[0]
    return out


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
    steps = 5

    def step(n: int, what: str) -> None:
        if progress:
            progress(n, steps, what)

    base = Outcome(Verdict.REFUSED, "", DiskState.UNCHANGED, target=p.target, operations=p.operations)
    if p.refusals:
        return replace(base, message="refused: " + p.refusals[0], details=p.refusals)
    if not p.changes:
        return replace(base, verdict=Verdict.NOTHING, message="nothing to do: the disk already holds the plan",
                       state=DiskState.PLANNED)
    if not p.accepts(answer):
        return replace(base, message=f"not confirmed ({p.prompt.lower()}); nothing written")
    step(1, "checking that nothing uses the disk")
    now = recheck(p, host)
    if now:
        return replace(base, message="refused: " + now[0], details=tuple(now))

    step(2, "saving the backup of the old table")
    try:
        extents = bk.backup_extents(
            p.target, p.sector_size, p.sectors, also=p.table_sectors, protect=p.protect
        )
        saved = bk.capture(p.target, p.sector_size, p.sectors, extents, model=p.model)
        path = bk.save(saved, backup_path or bk.default_path(p.target))
    except (OSError, bk.BackupError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        return replace(base, verdict=Verdict.FAILED, message=f"no backup, so nothing was written: {why}")
    base = replace(base, backup_path=path)
    try:
        if fault:
            fault("backup")
        step(3, "writing the table (one libparted commit) and telling the kernel")
        told, why_not, messages = run_isolated(_commit_child, p, fault, timeout=WRITE_TIMEOUT)
        if fault:
            fault("verify")
    except Exception as exc:  # any failure here, even a test's injected one, needs the state report
        reason = exc.reason if isinstance(exc, IsolatedFailure) else " ".join(str(exc).split()) or type(exc).__name__
        state, how = _state_after_failure(saved, p.target)
        return replace(base, verdict=Verdict.FAILED, state=state, message=f"the write failed: {reason}", details=(how,))

    step(4, "reading the table back and comparing it with the plan")
    diffs = verify(p.target, p.result)
    if diffs:
        state, how = _state_after_failure(saved, p.target)
        state = DiskState.DIFFERENT if state is not DiskState.UNKNOWN else state
        return replace(base, verdict=Verdict.FAILED, state=state, message="the disk does not hold the plan",
                       details=(*diffs, how, *messages))
    step(5, "checking the kernel's partition list")
    kernel = ""
    if p.kind == "block":
        stale = kernel_differences(p.target, p.result, p.sector_size, host)
        if not told or stale:
            what = "; ".join([*([why_not] if why_not else []), *stale]) or "it refused"
            kernel = (
                f"the table is written, but the kernel could not be told ({what}). The old partitions stay in "
                f"use until `partx -u {p.target}` succeeds or the machine reboots"
            )
    msg = f"written and verified: {p.target} holds the plan"
    return replace(base, verdict=Verdict.WRITTEN, state=DiskState.PLANNED, message=msg, kernel=kernel,
                   details=tuple(messages))


# --- restoring --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreProposal:
    backup: bk.TableBackup
    backup_path: str
    target: str
    kind: str
    refusals: tuple[str, ...]
    notes: tuple[str, ...]
    changed: tuple[Extent, ...]  # saved sectors that now differ on the disk (empty: nothing to do)
    identity: Identity | None = None

    @property
    def confirm_word(self) -> str:
        return os.path.basename(os.path.realpath(self.target)) if self.kind == "block" else "yes"

    @property
    def prompt(self) -> str:
        return f"Type {self.confirm_word} to put the old table back on {self.target}"

    def accepts(self, answer: str) -> bool:
        answer = answer.strip()
        if self.kind != "block":
            return answer.lower() == "yes"
        return answer in {self.confirm_word, self.target, os.path.realpath(self.target), f"/dev/{self.confirm_word}"}


def prepare_restore(backup_path: str, target: str, host: Host) -> RestoreProposal:
    """Load the backup and check the target. Raises CommitError when either cannot be read."""
    try:
        b = bk.load(backup_path)
    except bk.BackupError as exc:
        raise CommitError(str(exc)) from exc
    if not os.path.exists(target):
        raise CommitError(f"{target}: no such file or device")
    try:
        ident = identity(target)
    except OSError as exc:
        raise CommitError(f"{target}: {exc.strerror}") from exc
    refusals: list[str] = []
    notes: list[str] = []
    changed: list[Extent] = []
    if ident.size != b.sectors * b.sector_size:
        refusals.append(
            f"{target} has {ident.size} bytes; the backup is of a disk of {b.sectors} × {b.sector_size} B: "
            "its sectors would land in the wrong places"
        )
    else:
        try:
            facts_ss = _sector_size(target)
            if facts_ss != b.sector_size:
                refusals.append(f"{target} has {facts_ss} B sectors; the backup was taken with {b.sector_size} B")
            changed = bk.changed_extents(b, target)
        except (OSError, bk.BackupError) as exc:
            raise CommitError(f"{target}: {getattr(exc, 'strerror', None) or exc}") from exc
    if os.path.realpath(b.target) != os.path.realpath(target):
        notes.append(f"the backup was taken from {b.target}")
    ro = read_only_reason(target)
    if ro:
        refusals.append(ro)
    blocking, idle = _usage(target, host)
    refusals += blocking
    notes += idle
    kind = "block" if ident.kind == "block" else "file"
    return RestoreProposal(b, os.path.abspath(backup_path), target, kind, tuple(refusals), tuple(notes),
                           tuple(changed), ident)


def _sector_size(path: str) -> int:
    from diskplan.backend.probe import device_facts

    return device_facts(path).logical


def _inform_child(target: str) -> tuple[bool, str]:
    from diskplan.backend.libparted import inform_kernel

    return inform_kernel(target)


def execute_restore(r: RestoreProposal, answer: str, host: Host, *, progress: Progress | None = None) -> Outcome:
    base = Outcome(Verdict.REFUSED, "", DiskState.UNCHANGED, target=r.target)
    if r.refusals:
        return replace(base, message="refused: " + r.refusals[0], details=r.refusals)
    if not r.changed:
        return replace(base, verdict=Verdict.NOTHING, state=DiskState.RESTORED,
                       message=f"nothing to do: {r.target} already holds the backup")
    if not r.accepts(answer):
        return replace(base, message=f"not confirmed ({r.prompt.lower()}); nothing written")
    try:
        now = identity(r.target)
    except OSError as exc:
        return replace(base, verdict=Verdict.FAILED, state=DiskState.UNKNOWN, message=f"{r.target}: {exc.strerror}")
    if r.identity is not None and now != r.identity:
        return replace(base, message=f"refused: {r.target} is no longer the disk that was checked")
    blocking, _ = _usage(r.target, host)
    if blocking:
        return replace(base, message="refused: " + blocking[0], details=tuple(blocking))

    def each(done: int, total: int) -> None:
        if progress:
            progress(done, total, "writing the saved sectors back")

    try:
        bk.put_back(r.backup, r.target, each)
    except (OSError, bk.BackupError) as exc:
        state, how = _state_after_failure(r.backup, r.target)
        state = DiskState.CHANGED if state is DiskState.UNCHANGED else state
        why = getattr(exc, "strerror", None) or str(exc)
        again = f"the backup is untouched: {r.backup_path}; try again once the disk is writable"
        return replace(base, verdict=Verdict.FAILED, state=state, message=f"the restore failed: {why}",
                       details=(how, again))
    kernel = ""
    if r.kind == "block":
        try:
            told, why_not = run_isolated(_inform_child, r.target, timeout=60.0)
        except IsolatedFailure as exc:
            told, why_not = False, exc.reason
        if not told:
            kernel = (
                f"the old table is back on the disk, but the kernel could not be told ({why_not}); run "
                f"`partx -u {r.target}` or reboot before using its partitions"
            )
    return replace(base, verdict=Verdict.WRITTEN, state=DiskState.RESTORED, kernel=kernel,
                   message=f"restored: {r.target} holds the backed-up sectors byte for byte")
