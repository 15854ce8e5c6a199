"""Move a partition that holds data: check, back up, copy (journalled), verify, rewrite its table entry.

``prepare_move(target, number, to, host)`` says what would move and what forbids it; nothing is written.
``execute_move(proposal, answer, host)`` then, holding a lock on the disk:

1. checks the filesystem with its own checker (through a read-only view of its sectors) and refuses a
   dirty one; notes what blkid sees (type, UUID, label) and the entry's PARTUUID;
2. saves a backup of the table (backend.write.backup; the partitions' data is never in it);
3. creates the journal beside the backup (backend.move.movejournal) and fsyncs it before the first byte moves;
4. copies chunk by chunk (backend.move.datamove): the table still points at the old place all this time;
5. reads every chunk back at the new place and compares it with the checksum of its source as first
   read; marks the journal ``verified``;
6. only then rewrites the partition's table entry (backend.move.moveentry: start and end only, the PARTUUID
   kept), marks ``table``, tells the kernel;
7. checks the filesystem again at its new place, with the same UUID and label, and marks ``done``.

Why the table is rewritten last: until step 6 the entry points at the old start, so nothing that opens
the disk by its table finds a half-copied filesystem at the new place with an entry pointing to it; once
the entry moves, the bytes it points to were already read back and found equal to the source. A crash
anywhere leaves a journal that ``resume`` finishes:

- before or during the copy: the copy goes on from the first chunk not recorded as written; the chunk
  in flight is redone from its source (intact, or its overwritten part saved in the journal) after its
  checksum is checked again;
- after the copy, before ``verified``: the read-back is done again;
- after ``verified``: the entry is rewritten (idempotent: if it is already at the new place it is left);
- after ``table``: the kernel is told and the filesystem checked, then ``done``.

**A logical msdos partition** (model.plan.ebrmove, backend.raw.ebrchain): before the copy, the extended
partition grows if the partition will end past it, the entry in its EBR is parked (hidden without
renumbering anything), and, for a move left past its own EBR, the EBR moves to just before the new
start (written, then linked); the chain is whole at every step. Step 6 rewrites the EBR's entry and the
previous EBR's link size. No other EBR is ever written, and no partition's data covers an EBR.

Resume finishes rather than rolls back: both directions need the same intact or saved chunk, but
finishing is what was asked and costs only what is left. ``resume --rollback`` (backend.move.moveundo) puts
the partition back instead until the copy is verified, copying back first what was written over its old place
(backend.move.reverse).
A Ctrl+C stops between chunks, says so, and ``resume`` finishes. Until then the partition must not be
mounted: its old entry points at bytes that are partly overwritten (the write lock keeps other
partitioners off only while diskplan runs).
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable, Sequence

from diskplan.backend.faults import fault
from diskplan.backend.fs import fscheck
from diskplan.backend.move.datamove import (
    Device,
    MoveIOError,
    Progress,
    SourceChanged,
    Stopped,
    copy,
    mismatched,
    recopy,
)
from diskplan.backend.move.diskmark import disk_mark
from diskplan.backend.move.moveentry import (
    Entry,
    EntryError,
    hidden_copies,
    hide,
    mend_torn,
    read_entry,
    reveal,
    rewrite_entry,
    torn_copy,
)
from diskplan.backend.move.movejournal import (
    ENDED,
    Header,
    Journal,
    JournalDamaged,
    journal_path,
    moves_dir,
    unfinished,
)
from diskplan.backend.move.moverecheck import old_place_holds, places_free, same_data, same_disk
from diskplan.backend.move.planrest import resave
from diskplan.backend.move.proposal import PartitionProposal
from diskplan.backend.move.reverse import needs_copy, rollback_data
from diskplan.backend.parted.isolate import IsolatedFailure, run_isolated
from diskplan.backend.raw import ebrchain, sectorio
from diskplan.backend.raw.look import fresh_look, in_one_look
from diskplan.backend.raw.rawtable import mbr_entries
from diskplan.backend.write import backup as bk
from diskplan.backend.write.steps import (
    CommitError,
    Host,
    Identity,
    Verdict,
    half_moved,
    identity,
    inform_kernel_child,
    kernel_exit,
    read_target,
    recheck,
    refused,
    save_backup,
    stop_before_writing,
    take_lock,
    unwritable,
)
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role
from diskplan.model.findings.placement import start_finding
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.labels import LabelError, check_label
from diskplan.model.plan.ebrmove import LogicalMove, extended_room, plan_logical, window
from diskplan.model.plan.move import JournalError, Schedule, resume_point, schedule
from diskplan.model.table import Table
from diskplan.model.units import human_bytes
from diskplan.model.value import field, replace, value


def movable_label(disk: Disk) -> str:
    """The disk's table label as diskplan writes it ("gpt", "msdos"), or "" when it writes no such table."""
    try:
        return check_label(disk.table.label)
    except LabelError:
        return ""


@value
class MoveProposal(PartitionProposal):
    """Moving a partition with its data: what would be done, and what refuses it."""

    to: int
    plan: Schedule
    refusals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    identity: Identity | None = None
    fs: fscheck.Identity = field(default_factory=fscheck.Identity)
    rate: float = 0.0  # bytes/s read from this partition just now (0: not measured)
    journal: str = ""  # resume: the journal to finish
    protect: tuple[Extent, ...] = ()  # every partition's data and the new place: never in the table backup
    logical: LogicalMove | None = None  # a logical msdos partition: its EBR, parked entry, extended's end
    rollback: bool = False  # resume: put the partition back at its old place instead (backend.move.moveundo)

    @property
    def nbytes(self) -> int:
        return self.plan.length * self.sector_size

    @property
    def direction(self) -> str:
        return "left (towards the disk's start)" if self.plan.shift < 0 else "right (towards the disk's end)"

    @property
    def estimate(self) -> float:
        """Seconds: read and write every byte, then read it back."""
        return 3 * self.nbytes / self.rate if self.rate else 0.0

    @property
    def prompt(self) -> str:
        what = ("roll back the move on" if self.rollback else "finish the move on") if self.journal else (
            f"move partition {self.number} on")
        return f"Type {self.confirm_word} to {what} {self.target}"

    @property
    def nothing(self) -> str:
        """Why there is nothing to move ("" when there is)."""
        return "" if self.plan.shift else f"nothing to do: partition {self.number} already starts at {self.to}"


@value
class MoveOutcome:
    verdict: Verdict
    message: str
    target: str = ""
    details: tuple[str, ...] = ()
    backup_path: str = ""
    journal_path: str = ""
    resumable: bool = False  # the journal holds an unfinished move: ``resume`` finishes it
    kernel: str = ""  # empty when the kernel sees the partition as written (or an image file); else how not
    io_error: bool = False  # stopped by a persistent I/O error (datamove.MoveIOError): trying again may finish it

    @property
    def exit_code(self) -> int:
        return kernel_exit(self.verdict, self.kernel)

    @property
    def complete(self) -> bool:
        """Written, and the kernel sees the partition as written: a step after it may run. A step the kernel
        does not see as written stops a sequence (a plan's steps, the planner's moves) as a failure does: the
        next step would be checked against the kernel's old partitions."""
        return self.exit_code == 0 and self.verdict is Verdict.WRITTEN

    @property
    def resume_command(self) -> str:
        return f"diskplan resume {self.target} --yes" if self.resumable else ""


# --- the lock ---------------------------------------------------------------------------------------


# --- preparing --------------------------------------------------------------------------------------


def measure_rate(target: str, start: int, length: int, sector_size: int) -> float:
    """Bytes/s of a short direct read of the partition (an estimate, not a promise)."""
    n = min(length, (8 << 20) // sector_size)  # one chunk: enough for an estimate, a fraction of a second
    try:
        dev = Device(target, sector_size, n * sector_size, write=False)
    except OSError:
        return 0.0
    try:
        t = time.perf_counter()
        dev.read(start, n)
        return n * sector_size / max(time.perf_counter() - t, 1e-6)
    except MoveIOError:
        return 0.0
    finally:
        dev.close()


class NothingToResume(CommitError):
    """No unfinished move is recorded for the disk: nothing to do (not a failure)."""


def journal_dir(target: str) -> str:
    return moves_dir()


def placement(disk: Disk, number: int, to: int, length: int = 0) -> list[str]:
    """What forbids partition ``number`` at ``to`` with ``length`` sectors (default: its size)."""
    t = disk.table
    p = t.by_number(number)
    if p is None:
        return [f"{disk.source} has no partition {number}"]
    if p.role is Role.EXTENDED:
        return [f"partition {number} is the extended partition: diskplan moves and resizes the partitions in it, "
                "not it"]
    new = Extent(to, to + (length or p.size) - 1)
    if not new.within(t.usable):
        return [f"partition {number} at {new.start}..{new.end} would leave the usable area "
                f"{t.usable.start}..{t.usable.end}"]
    if p.role is Role.LOGICAL:
        return []  # judged against the EBR chain (logical_move)
    for q in t.live:
        if q.number != number and q.extent.overlaps(new):
            return [f"partition {number} at {new.start}..{new.end} would overlap partition {q.number} "
                    f"({q.start}..{q.end})"]
    return []


def _chain(target: str, disk: Disk, number: int) -> ebrchain.Chain | str:
    try:
        chain = ebrchain.read_chain(target, disk.geometry.logical)
        chain.link(number)
    except (ebrchain.ChainError, OSError, bk.BackupError) as exc:
        return str(exc)
    return chain


def logical_window(target: str, disk: Disk, number: int) -> Extent | str:
    """Where logical partition ``number`` may go within its extended partition (model.plan.ebrmove.window)."""
    chain = _chain(target, disk, number)
    if isinstance(chain, str):
        return chain
    parts = [Extent(lk.start, lk.start + lk.size - 1) for lk in chain.links]
    return window(number - 5, [lk.lba for lk in chain.links], parts, Extent(chain.ext_start, chain.ext_end))


def logical_move(target: str, disk: Disk, number: int, to: int, length: int) -> LogicalMove | str:
    """Where logical partition ``number``'s EBR goes (model.plan.ebrmove), or why it cannot move there. The
    extended partition may grow up to the next partition after it or the end of the usable area."""
    chain = _chain(target, disk, number)
    if isinstance(chain, str):
        return chain
    ext = Extent(chain.ext_start, chain.ext_end)
    parts = [Extent(lk.start, lk.start + lk.size - 1) for lk in chain.links]
    limit = extended_room(disk.table, ext)
    return plan_logical(number - 5, [lk.lba for lk in chain.links], parts, ext, limit, to, length)


def entry_problems(target: str, entry: Entry, p: Partition | None, ss: int) -> list[str]:
    """The raw entry must be the partition libparted read, and nothing else may name its sectors."""
    if p is None or (entry.start, entry.end) != (p.start, p.end):
        return [f"the table's entry {entry.number} ({entry.start}..{entry.end}) is not the partition libparted read"]
    if entry.label == "gpt":
        mbr = mbr_entries(sectorio.read_sectors(target, 0, 1, ss))
        if any(e.type_id not in (0, 0xEE) and e.size for e in mbr):
            return ["the disk has a hybrid MBR: its entries would still point at the old place"]
    return []



def checked_entry(target: str, label: str, number: int, ss: int, sectors: int, p: Partition | None,
                  refusals: list[str]) -> Entry | None:
    """The partition's raw table entry (what a move or resize rewrites), its problems added to ``refusals``."""
    try:
        entry = read_entry(target, label, number, ss, sectors)
    except (EntryError, OSError, bk.BackupError) as exc:
        refusals.append(str(exc))
        return None
    refusals += entry_problems(target, entry, p, ss)
    return entry


def in_use_or_half_moved(target: str, host: Host, size: int, sector_size: int, notes: list[str]) -> list[str]:
    """Refusals when the disk cannot be written (``unwritable``: in use, read-only...; its idle users go to
    ``notes``) or a move on it is unfinished."""
    blocking, idle = unwritable(target, host, sector_size)
    notes += idle
    return [*blocking, *half_moved(target, size)]


@in_one_look  # the disk read once for every check below (backend.raw.look); nothing is written
def prepare_move(
    target: str, number: int, to: int, host: Host, *, current: Disk | None = None, length: int = 0
) -> MoveProposal:
    """What moving partition ``number`` of ``target`` to start at ``to`` would do, and what forbids it
    (``length``: the sectors it will have by then, when a shrink comes first). Writes nothing. Raises
    CommitError when the target cannot be read."""
    ident, disk = read_target(target, current)
    geom = disk.geometry
    ss = geom.logical
    label = movable_label(disk)
    p = disk.table.by_number(number)
    length = length or (p.size if p is not None else 0)
    refusals: list[str] = []
    notes: list[str] = []
    entry = None
    logical = None
    if not label:
        refusals.append(f"diskplan moves partitions on gpt and msdos tables, not {disk.table.label or 'no table'}")
    else:
        refusals += placement(disk, number, to, length)
    if not refusals and p is not None and p.role is Role.LOGICAL:
        logical = logical_move(target, disk, number, to, length)
        if isinstance(logical, str):
            refusals.append(logical)
        elif not logical.park and to != p.start:
            refusals.append(f"the extended partition has no free sector to park partition {number}'s entry on "
                            "while it is hidden for the move")
    if not refusals:
        entry = checked_entry(target, label, number, ss, geom.sectors, p, refusals)
    refusals += in_use_or_half_moved(target, host, ident.size, ss, notes)
    start = p.start if p is not None else 0
    plan = schedule(start, to, length, ss)
    fs = fscheck.Identity(read=False)
    rate = 0.0
    if p is not None and to != start:
        notes += new_start_note(geom, disk.table, replace(p, start=to, end=to + length - 1))
    if not refusals and to != start:
        try:
            fs = fscheck.identify_at(target, start * ss, length * ss)
        except fscheck.CheckError as exc:
            refusals.append(str(exc))
        missing = fscheck.missing_tool(fs.fs)
        if missing:
            refusals.append(f"cannot check the filesystem before and after the move: {missing}")
        if fscheck.checker(fs.fs) is None:
            notes.append(f"partition {number} holds {fs}: moved as raw bytes, with no filesystem check")
        rate = measure_rate(target, start, length, ss)
        notes += boot_warnings(target, label, fs.fs, start, ss)
    # Restoring the backup must never roll back partition data: the backup leaves every partition's
    # sectors and the new place out (a partition inside the first or last MiB would otherwise be in it).
    protect = (*(q.extent for q in disk.table.live if q.role is not Role.EXTENDED), Extent(to, to + max(length, 1) - 1))
    return MoveProposal(target, "block" if ident.kind == "block" else "file", geom.model, geom.sectors, ss,
                        number, entry, to, plan, tuple(refusals), tuple(notes), ident, fs, rate, protect=protect,
                        logical=logical if isinstance(logical, LogicalMove) else None)


def partuuid_kept(guid: str) -> str:
    """What an outcome says of the entry's PARTUUID: a GPT entry's unique GUID stays; an msdos entry has none
    (its PARTUUID is the disk's signature and the number, neither of which a move or resize changes)."""
    return f", PARTUUID {guid} unchanged" if guid else ""


def new_start_note(geom: Geometry, table: Table, moved: Partition) -> list[str]:
    """The move goes where it is asked (the user may mean it), but says so when the new start is itself
    off the alignment the findings judge by, with their arithmetic."""
    found = start_finding(geom, moved, optimal_grain(geom), table)
    if found is None:
        return []
    return [f"the new start {moved.start}s is not aligned: it {found.message}. {found.explanation[0]}"]


def boot_warnings(target: str, label: str, fs: str, start: int, ss: int) -> list[str]:
    """What finds this partition by its sector address and is not updated by the move."""
    out = []
    if fs in ("vfat", "ntfs", "exfat"):
        out.append(f"the {fs} boot sector records the partition's old start ({start}) as its 'hidden sectors': "
                   "boot code that uses it (Windows, syslinux) must be reinstalled after the move")
    try:
        mbr = sectorio.read_sectors(target, 0, 1, ss)
    except (OSError, bk.BackupError):
        return out
    if label == "msdos" and (b"GRUB" in mbr[:440] or b"SYSLINUX" in mbr[:440].upper()):
        out.append("a BIOS boot loader is installed in the MBR: if it loads from this partition, reinstall it after "
                   "the move (grub-install or syslinux --install)")
    return out


# --- executing --------------------------------------------------------------------------------------


def saying(progress: Progress | None) -> Callable[[str], None]:
    """What a step is doing, as the progress callback shows it (nothing without one)."""
    return (lambda what: progress(1, 1, what)) if progress else (lambda what: None)


def check_after(
    target: str, kind: str, start: int, length: int, ss: int, found: fscheck.Identity, base: MoveOutcome, did: str,
    say: Callable[[str], None], doing: str, where: str = "",
) -> tuple[fscheck.Identity, str] | MoveOutcome:
    """After a move, its rollback or a resize wrote the table: tell the kernel, then check the filesystem on
    ``length`` sectors at ``start`` with its own checker: ``found`` (type, UUID, label) as before, clean. The
    filesystem and what the kernel said ("" when it was told), or the failed outcome (``did``: "moved", ...)."""
    kernel = tell_kernel(target, kind)
    say(doing)
    failed = replace(base, verdict=Verdict.FAILED)
    try:
        fs, clean, said = fscheck.referee(target, start * ss, length * ss)
    except fscheck.CheckError as exc:
        return replace(failed, message=f"{did}, but the check afterwards could not run: {exc}")
    if (fs.fs, fs.uuid, fs.label) != (found.fs, found.uuid, found.label):
        return replace(failed, message=f"{did}, but blkid now sees {fs} where it saw {found}")
    if not clean:
        return replace(failed, details=(said,),
                       message=f"{did}, but the {fs.fs} checker does not find the filesystem clean{where}")
    return fs, kernel


def execute_move(
    p: MoveProposal,
    answer: str,
    host: Host,
    *,
    backup_path: str | None = None,
    progress: Progress | None = None,
    stop: Callable[[], bool] = lambda: False,
    rest: str = "",
) -> MoveOutcome:
    """Check, back up, journal, copy, verify, rewrite the entry, check again (see the module's doc). ``rest``:
    the rest plan of the apply this move is a step of, recorded in the journal (backend.move.planrest)."""
    base = MoveOutcome(Verdict.REFUSED, "", p.target)
    gate = stop_before_writing(p, answer, base, p.nothing)
    if gate is not None:
        return gate
    assert p.entry is not None
    held = take_lock(p.target, host, base)
    if isinstance(held, MoveOutcome):
        return held
    try:
        # from the last in-use check to ``done`` or the stop: no other writer in between; the disk is seen afresh
        # under the lock, then once until each write (backend.raw.look)
        with held, fresh_look():
            now = recheck(p, host)
            if now:
                return refused(base, now)
            ss, plan = p.sector_size, p.plan
            if progress:
                progress(0, 1, "checking the filesystem")
            fs, clean, said = fscheck.referee(p.target, plan.start * ss, plan.length * ss)
            if not clean:
                return replace(base, message=f"refused: the {fs.fs} filesystem on partition {p.number} is not clean; "
                               "repair it first, nothing was written", details=(said,))
            got = save_backup(p, backup_path, base)
            if not isinstance(got, tuple):
                return got
            path = got[1].backup_path
            created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            mark = disk_mark(p.target, p.identity.size if p.identity else 0)  # how the journal finds its disk again
            header = Header(p.target, p.identity.size if p.identity else 0, ss, p.entry.label, p.number,
                            p.entry.guid, plan.start, plan.target, plan.length, plan.chunk, path, fs.fs, fs.uuid,
                            fs.label, created, p.entry.ptype, *_ebr_fields(p.logical), rest=rest,
                            table_id=mark.table_id, serial=mark.serial, copy_mark=True)
            journal = Journal.create(journal_path(path), header)
            base = replace(base, backup_path=path, journal_path=journal.path)
            try:
                return _finish(journal, base, p.kind, progress, stop)
            finally:
                journal.close()
    except CommitError as exc:
        return replace(base, message=f"refused: {exc}")
    except fscheck.CheckError as exc:
        return replace(base, message=f"refused: {exc}")


def _ebr_fields(m: LogicalMove | None) -> tuple[int, int, int, int]:
    return (m.ebr, m.new_ebr, m.park, m.ext_end) if m else (0, 0, 0, 0)


def tell_kernel(target: str, kind: str) -> str:
    """Have the kernel read the table again (a block device); what went wrong, or ""."""
    if kind != "block":
        return ""
    try:
        told, why = run_isolated(inform_kernel_child, target, timeout=120.0)
    except IsolatedFailure as exc:
        told, why = False, exc.reason
    return "" if told else f"the kernel could not be told ({why}): run `partx -u {target}` or reboot before using it"


def at_old_place(entry: Entry, h: Header) -> bool:
    """The entry as the move found it, or hidden there (a hidden msdos entry has no size; a hidden logical
    one is parked, in its EBR before or after the EBR moved)."""
    if entry.ebr:
        return entry.ebr in (h.ebr, h.new_ebr) and (entry.hidden or (entry.start, entry.end) == (h.start, h.end))
    return entry.start == h.start and (entry.hidden or entry.end == h.end)


def at_new_place(entry: Entry, h: Header) -> bool:
    """The entry rewritten by the move: at its new place, shown."""
    return (entry.start, entry.end, entry.hidden) == (h.to, h.to + h.length - 1, False)


def _hide(h: Header) -> None:
    """Before the first byte moves: hide the entry (backend.move.moveentry) unless the journal is of a move that
    never hides (``ptype`` empty) or it is hidden already; a logical partition's extended partition grown
    first and its EBR moved after (each step skipped when done). Raises EntryError or ChainError."""
    if not h.ptype:
        return
    ss, sectors = h.sector_size, h.size // h.sector_size
    if h.ebr:
        ebrchain.grow_extended(h.target, ebrchain.read_chain(h.target, ss), h.ext_end, ss)
    entry = read_entry(h.target, h.label, h.number, ss, sectors, hidden=True)
    if entry.guid != h.guid or not at_old_place(entry, h):
        raise EntryError(f"partition {h.number} is not where the journal says it was ({h.start}..{h.end})")
    if not entry.hidden:
        hide(h.target, entry, ss, sectors, park=h.park)
    if h.ebr and entry.ebr != h.new_ebr:
        fault("parked")
        ebrchain.relocate(h.target, ebrchain.read_chain(h.target, ss), h.number, h.new_ebr, h.to + h.length - 1, ss)


def _hidden_on_disk(h: Header) -> str:
    """Where the entry reads hidden at its old place on the disk itself (the page cache dropped first: after a
    failed flush it may hold what never reached the disk): "on the disk", "in the backup GPT only" (a rewrite
    writes the backup copy first), or "" when nowhere."""
    try:
        fd = os.open(h.target, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        copies = hidden_copies(h.target, h.label, h.number, h.sector_size, h.size // h.sector_size, h.guid)
        if copies in (("table",), ("primary", "backup")):
            entry = read_entry(h.target, h.label, h.number, h.sector_size, h.size // h.sector_size, hidden=True)
            return "on the disk" if entry.guid == h.guid and at_old_place(entry, h) else ""
    except (EntryError, ebrchain.ChainError, OSError):
        return ""
    return f"in the {copies[0]} GPT only" if copies else ""


def _finish(
    journal: Journal, base: MoveOutcome, kind: str, progress: Progress | None, stop: Callable[[], bool]
) -> MoveOutcome:
    """Take the move in ``journal`` from wherever it stands to done."""
    h = journal.header
    plan = Schedule(h.start, h.to, h.length, h.chunk)
    ss = h.sector_size
    base = replace(base, resumable=True)
    where = f"partition {h.number} ({h.start}..{h.end} → {h.to}..{h.to + h.length - 1})"
    try:
        at = resume_point(journal.records)
    except JournalError as exc:
        return replace(base, verdict=Verdict.FAILED, resumable=False,
                       message=f"the move journal {journal.path} is inconsistent: {exc}")
    # "table" is a record, not proof (_entry_moved): an entry not at its new place is rewritten, and the new place
    # read back again first, as after "verified" alone (the table without the rewrite showed it free meanwhile)
    moved = "table" in journal.marks and _entry_moved(h)
    if "verified" not in journal.marks:
        try:
            _hide(journal.header)
        except (EntryError, ebrchain.ChainError, OSError, bk.BackupError) as exc:
            where = _hidden_on_disk(h)
            if where:  # the write landed (or half of it), its flush (or the check after it) failed
                return replace(base, verdict=Verdict.FAILED, message=f"nothing moved yet, but the entry of partition "
                               f"{h.number} is hidden {where}: the disk did not confirm it ({exc}); the move is "
                               "resumable (`diskplan resume` goes on once the disk answers again)")
            return replace(base, verdict=Verdict.FAILED, message=f"nothing moved yet: the entry of partition "
                           f"{h.number} could not be hidden for the move: {exc}")
        fault("hidden")
        kernel_now = tell_kernel(h.target, kind) if h.ptype else ""
        if kernel_now:
            return replace(base, verdict=Verdict.FAILED, message=f"nothing moved yet: {kernel_now}; or put the "
                           f"partition back as it was: `diskplan resume {h.target} --rollback --yes`")
        if h.copy_mark and "copy" not in journal.marks:
            journal.append("copy")
        try:
            dev = Device(h.target, ss, plan.chunk * ss)
        except OSError as exc:
            return replace(base, verdict=Verdict.FAILED, message=f"cannot open {h.target} for the move: {exc.strerror}")
        try:
            copy(plan, dev, journal, at, ss, stop=stop, progress=progress)
            digests = resume_point(journal.records).digests
            bad = mismatched(plan, dev, digests, ss, progress)
            lost = recopy(plan, dev, digests, bad, ss) if bad else []
        except Stopped as s:
            return replace(base, verdict=Verdict.FAILED,
                           message=f"stopped after {s.done} of {plan.count} chunks of {where}: the partition is "
                           "half-moved and hidden from the system until `diskplan resume` finishes it")
        except MoveIOError as exc:  # a failed flush has no sector (-1)
            at_sector = f" at sector {exc.sector}" if exc.sector >= 0 else ""
            return replace(base, verdict=Verdict.FAILED, io_error=True,
                           message=f"I/O error{at_sector}: {exc}; the move of {where} stopped in a "
                           "resumable state (`diskplan resume` goes on once the disk answers again)")
        except SourceChanged as exc:
            return replace(base, verdict=Verdict.FAILED, resumable=False, message=f"the move of {where} stopped: {exc}")
        except OSError as exc:  # the journal or its slot (a full or failing state disk): no chunk goes unrecorded
            return replace(base, verdict=Verdict.FAILED,
                           message=f"the move journal {journal.path} could not be written ({exc.strerror or exc}): the "
                           f"move of {where} stopped in a resumable state (`diskplan resume` goes on once it can be)")
        finally:
            dev.close()
        if lost:
            return replace(base, verdict=Verdict.FAILED, resumable=False, details=tuple(lost[:10]),
                           message=f"{len(lost)} chunk(s) of {where} read back wrong at the new place and could not be "
                           "copied again (listed below): those sectors' data is lost, every other chunk is verified at "
                           "its new place; the entry stays hidden, so nothing mounts the damaged filesystem (its "
                           "files there must come from another copy of them)")
        journal.append("verified")
        fault("verified")
    elif not moved:  # "verified" is a record: read back again before the entry points there
        failed = _read_back_again(journal, base, where, progress)
        if failed is not None:
            return failed
    if not moved:
        if progress:
            progress(1, 1, "rewriting the partition's table entry")
        try:
            entry = read_entry(h.target, h.label, h.number, ss, h.size // ss, hidden=True)
            if entry.guid != h.guid:
                raise EntryError(f"partition {h.number} now has the GUID {entry.guid}, not {h.guid}")
            moved = at_new_place(entry, h)
            if at_old_place(entry, h) and h.ptype:
                reveal(h.target, entry, h.to, h.length, h.ptype, ss, h.size // ss)
            elif at_old_place(entry, h):
                rewrite_entry(h.target, entry, h.to, ss, h.size // ss)
            elif not moved:
                raise EntryError(f"partition {h.number} is at {entry.start}..{entry.end}, neither its old nor its "
                                 "new place")
            elif entry.ebr:  # revealed already: the previous EBR's link size may still be owed
                rewrite_entry(h.target, entry, h.to, ss, h.size // ss)
        except (EntryError, ebrchain.ChainError, OSError, bk.BackupError) as exc:
            # Not `diskplan restore`: the old entry would point at bytes the move has overwritten.
            return replace(base, verdict=Verdict.FAILED, message=f"the data is moved and verified, but the table "
                           f"entry could not be rewritten: {exc}")
        fault("table")
        if "table" not in journal.marks:
            journal.append("table")
    after = check_after(h.target, kind, h.to, h.length, ss, fscheck.Identity(h.fs, h.fs_uuid, h.fs_label), base,
                        "moved", saying(progress), "checking the filesystem at its new place", " at its new place")
    if isinstance(after, MoveOutcome):
        return after
    fs, kernel = after
    rest = _rest_after(h)
    journal.append("done")
    return replace(base, verdict=Verdict.WRITTEN, resumable=False, kernel=kernel, details=(rest,) if rest else (),
                   message=f"moved and verified: {where}, {human_bytes(h.length * ss)}; {fs}{partuuid_kept(h.guid)}")


def _read_back_again(journal: Journal, base: MoveOutcome, where: str, progress: Progress | None) -> MoveOutcome | None:
    """Resume after ``verified``: the new place read back again (something may have written the range the
    hidden entry leaves looking free since the crash), a chunk that differs copied again from its source as the
    first read-back does; None when all hold, else the failed outcome."""
    h = journal.header
    ss, plan = h.sector_size, Schedule(h.start, h.to, h.length, h.chunk)
    try:
        dev = Device(h.target, ss, plan.chunk * ss)
    except OSError as exc:
        return replace(base, verdict=Verdict.FAILED, message=f"cannot open {h.target} for the move: {exc.strerror}")
    try:
        digests = resume_point(journal.records).digests
        bad = mismatched(plan, dev, digests, ss, progress)
        lost = recopy(plan, dev, digests, bad, ss) if bad else []
    except MoveIOError as exc:
        return replace(base, verdict=Verdict.FAILED, io_error=True, message=f"{exc}; the move of {where} stopped in "
                       "a resumable state (`diskplan resume` goes on once the disk answers again)")
    finally:
        dev.close()
    if lost:
        return replace(base, verdict=Verdict.FAILED, resumable=False, details=tuple(lost[:10]),
                       message=f"{len(lost)} chunk(s) of {where} were changed at the new place after the move had "
                       "verified them, and their source no longer holds them (listed below); the entry stays hidden")
    return None


def _entry_moved(h: Header) -> bool:
    """The disk holds the entry at its new place. The journal's "table" is a record, not proof: the disk may have
    lost the rewrite in the crash (a write cache), or the old table been put back since."""
    try:
        return at_new_place(read_entry(h.target, h.label, h.number, h.sector_size, h.size // h.sector_size,
                                       hidden=True), h)
    except (EntryError, ebrchain.ChainError, OSError, bk.BackupError):
        return False  # read again by the rewrite, which says why
def _rest_after(h: Header) -> str:
    """A step of an apply: its rest plan made to start from the table this move leaves, before the journal is
    marked done (backend.move.planrest.resave says why then); what went wrong, or ""."""
    if not h.rest:
        return ""
    return resave(h.rest, h.target) or ""


# --- resuming ---------------------------------------------------------------------------------------


@in_one_look  # the disk read once for every check (backend.raw.look); the lock's look sees it again
def prepare_resume(target: str, host: Host, journal: str | None = None, *, rollback: bool = False) -> MoveProposal:
    """The unfinished move recorded for ``target`` (the newest, or ``journal``) and what forbids
    finishing it (or, ``rollback``, undoing it: backend.move.moveundo). Raises CommitError when there is none or
    the target cannot be read."""
    try:
        ident = identity(target)
    except OSError as exc:
        raise CommitError(f"{target}: {exc.strerror}") from exc
    paths = [journal] if journal else unfinished(target, ident.size)
    if not paths:
        raise NothingToResume(f"no unfinished move is recorded for {target} in {journal_dir(target)}")
    try:
        j = Journal.open(paths[0])
    except JournalDamaged as exc:
        raise CommitError(str(exc)) from exc
    except OSError as exc:  # opened for appending (an immutable file, a read-only mount): one line, not a repr
        raise CommitError(f"cannot open the move journal {paths[0]}: {exc.strerror or exc}") from exc
    try:
        h = j.header
        done = resume_point(j.records).next
        marks = list(j.marks)
        refusals, entry, notes = journal_checks(target, j, rollback)
    except JournalError as exc:
        raise CommitError(f"the move journal {paths[0]} is inconsistent: {exc}") from exc
    finally:
        j.close()
    refusals[:0] = marks_refusals(target, paths[0], marks, rollback)
    plan = Schedule(h.start, h.to, h.length, h.chunk)
    if rollback and needs_copy(h, j.records, marks):
        notes.append(f"rolling back copies the chunks written over the old place back there first ({done} of "
                     f"{plan.count} chunks were copied), then puts the entry back")
    blocking, idle = unwritable(target, host, h.sector_size)
    refusals += blocking
    state = (f"{done} of {plan.count} chunks copied" + (", verified" if "verified" in marks else "")
             + (", table entry rewritten" if "table" in marks else ""))
    return MoveProposal(target, "block" if ident.kind == "block" else "file", "", h.size // h.sector_size,
                        h.sector_size, h.number, entry, h.to, plan, tuple(refusals), (state, *notes, *idle), ident,
                        fscheck.Identity(h.fs, h.fs_uuid, h.fs_label), 0.0, os.path.abspath(paths[0]),
                        rollback=rollback)


def journal_checks(target: str, j: Journal, rollback: bool) -> tuple[list[str], Entry | None, list[str]]:
    """Is ``target`` now the disk, the partition and the data of the journal's move (backend.move.moverecheck)?
    The refusals, the partition's entry as the table holds it, and notes (a GPT copy a crash tore, which
    ``resume`` rebuilds first). Run by prepare and again under the lock, right before anything is written."""
    ss = j.header.sector_size
    try:
        ident, disk = read_target(target, None)
    except CommitError as exc:
        return [str(exc)], None, []
    refusals = same_disk(target, j.header, ident.size, disk.geometry.logical)
    h = replace(j.header, target=target)
    if refusals:
        return refusals, None, []
    notes = []
    entry = None
    try:
        entry = read_entry(target, h.label, h.number, ss, h.size // ss, hidden=True, torn=True)
        if entry.guid != h.guid or not (at_old_place(entry, h) or at_new_place(entry, h)):
            refusals.append(f"partition {h.number} of {target} is not the one the journal moves")
        torn = torn_copy(target, ss, h.size // ss) if h.label == "gpt" else None
        if torn is not None and torn.good is not None:
            bad = torn.backup if torn.good is torn.primary else torn.primary
            notes.append(f"the {bad.which} GPT copy was cut short by the crash ({bad.problem}): it is rebuilt from the "
                         f"{torn.good.which} copy first, which holds partition {h.number} where the journal expects it")
    except (EntryError, OSError, bk.BackupError) as exc:
        refusals.append(str(exc))
    refusals += places_free(target, h, disk)
    # chunks go back first (backend.move.reverse); once a rollback began, a plain resume is told to finish it, and
    # its data is checked as the rollback left it
    copy_back = (rollback or "rollback" in j.marks) and needs_copy(h, j.records, j.marks)
    if not refusals:
        refusals += rollback_data(target, h, j.records, j) if copy_back else same_data(target, h, j.records, j.saved)
    if not refusals and rollback and j.records and not copy_back:
        refusals += old_place_holds(target, h)
    return refusals, entry, notes


def marks_refusals(target: str, path: str, marks: Sequence[str], rollback: bool) -> list[str]:
    """What the journal ``path``'s marks forbid: an ended move; a rollback of a verified move (it is finished
    instead: what is written over the old place is copied back first, backend.move.reverse); a plain resume once
    a rollback began. Run by prepare and again under the lock: another process may have resumed or rolled the
    move back while this one waited for its confirmation."""
    if set(ENDED) & set(marks):
        return [f"the move in {path} is already {'done' if 'done' in marks else 'rolled back'}"]
    if rollback and "verified" in marks:
        return [f"the data is already copied and verified at its new place: finishing the move (`diskplan resume "
                f"{target} --yes`) only rewrites the table entry"]
    if not rollback and "rollback" in marks:
        return [f"a rollback of this move was begun: finish it with `diskplan resume {target} --rollback`"]
    return []


def execute_resume(
    p: MoveProposal, answer: str, host: Host, *, progress: Progress | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> MoveOutcome:
    return with_journal(p, answer, host, lambda j, base: _finish(j, base, p.kind, progress, stop))


def with_journal(
    p: MoveProposal, answer: str, host: Host, body: Callable[[Journal, MoveOutcome], MoveOutcome]
) -> MoveOutcome:
    """Confirmed, locked and rechecked: ``body`` on ``p.journal`` (resume finishes, moveundo rolls back)."""
    base = MoveOutcome(Verdict.REFUSED, "", p.target, journal_path=p.journal)
    gate = stop_before_writing(p, answer, base, p.nothing)
    if gate is not None:
        return gate
    held = take_lock(p.target, host, base)
    if isinstance(held, MoveOutcome):
        return held
    try:
        with held, fresh_look():  # the disk seen afresh under the lock, then once until each write (backend.raw.look)
            now = recheck(p, host)
            if now:
                return refused(base, now)
            journal = Journal.open(p.journal)
            try:
                now = marks_refusals(p.target, p.journal, journal.marks, p.rollback)
                now = now or journal_checks(p.target, journal, p.rollback)[0]
                if now:
                    return refused(base, now)
                # Only the disk checked and locked is written, whatever path the journal recorded.
                journal.header = replace(journal.header, target=p.target)
                try:
                    mended = _mend(journal.header)
                except (EntryError, OSError, bk.BackupError) as exc:
                    return replace(base, verdict=Verdict.FAILED,
                                   message=f"the torn GPT copy could not be rebuilt: {exc}")
                out = body(journal, replace(base, backup_path=journal.header.backup))
                return replace(out, details=(mended, *out.details)) if mended else out
            finally:
                journal.close()
    except (CommitError, JournalDamaged, JournalError) as exc:
        return replace(base, message=f"refused: {exc}")
    except OSError as exc:  # the journal's own appends (a full or failing state disk): each step is done again
        again = f"diskplan resume {p.target}" + (" --rollback" if p.rollback else "")
        return replace(base, verdict=Verdict.FAILED, resumable=not p.rollback, message=f"the move journal {p.journal} "
                       f"could not be written ({exc.strerror or exc}): `{again}` goes on once it can be")


def _mend(h: Header) -> str:
    """A GPT copy torn by a crash inside an entry rewrite, rebuilt from the whole one (journal_checks found
    the entry there where the journal expects it): what was done, "" when nothing was torn."""
    return mend_torn(h.target, h.sector_size, h.size // h.sector_size) if h.label == "gpt" else ""
