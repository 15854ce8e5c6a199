"""Commit a GPT repair (``Disk.repair``): rebuild the damaged GPT copy, or the protective MBR, from the
good copy, with the same safety as any write.

What is written is exactly ``GptRepair.writes``, raw, not a libparted commit of the good table: libparted
3.5 leaves a damaged entry array in place when asked to "Fix" (``sgdisk -v`` still reports the CRC), does
not read a GPT whose primary header or protective MBR is gone, and re-creating the partitions would give
them new GUIDs. The raw bytes keep every GUID, name and attribute, and ``sgdisk -v`` finds no problem.

The steps are the shared ones of backend.write.steps (``RepairWrite`` is one kind of ``Write``), and a UI drives
them as it drives a table commit: ``prepare_repair`` (or ``commit.prepare(..., repair=plan.pending_repair)``)
gives a ``Proposal`` whose operations are one "repair" per run of sectors written plus "keep N" for every
partition; ``execute_repair`` (or ``commit.execute``) takes the write lock (backend.write.lock) and, under it
until the verdict, checks again
that nothing uses the disk and that it still needs the same repair on the same table, saves a backup of
both ends of the disk, writes, syncs, and verifies by reading back: the written bytes, both GPT copies
valid and equal with the entry array the good copy had, the partitions unchanged, and no damage left of
the kind repaired. ``diskplan restore`` puts the old bytes back.
"""

from __future__ import annotations

from diskplan.backend.parted.isolate import IsolatedFailure, run_isolated
from diskplan.backend.raw import sectorio
from diskplan.backend.raw.gptcheck import GptState, check_gpt, copies_differ
from diskplan.backend.raw.rawtable import PROTECTIVE_ID, mbr_entries
from diskplan.backend.raw.tableid import table_fingerprint
from diskplan.backend.read.reader import ReadError, read
from diskplan.backend.write import backup as bk
from diskplan.backend.write.steps import (
    DiskState,
    Fault,
    Host,
    Progress,
    Proposal,
    ProposalWrite,
    Verdict,
    WriteOutcome,
    half_moved,
    inform_kernel_child,
    kernel_differences,
    not_as_planned,
    other_disk,
    proposal_as_read,
    read_target,
    table_changed,
    unwritable,
    write_failed,
)
from diskplan.model.disk import Disk
from diskplan.model.extent import Role
from diskplan.model.findings.codes import (
    GPT_BACKUP_DAMAGED,
    GPT_BACKUP_NOT_AT_END,
    GPT_NO_PROTECTIVE_MBR,
    GPT_PRIMARY_DAMAGED,
    NEEDS_REPAIR,
)
from diskplan.model.plan.operations import differences, repair_operations
from diskplan.model.plan.repair import PROTECTIVE_MBR, GptRepair
from diskplan.model.table import Table
from diskplan.model.value import replace

REPAIRED = {"primary": (GPT_PRIMARY_DAMAGED,), "backup": (GPT_BACKUP_DAMAGED,),
            PROTECTIVE_MBR: (GPT_NO_PROTECTIVE_MBR,)}


def _repaired(r: GptRepair) -> tuple[str, ...]:
    """The findings a repair makes go away."""
    return (GPT_BACKUP_NOT_AT_END,) if r.moved_from else REPAIRED.get(r.rewrite, ())


def _extents(table: Table) -> list[tuple[int, int, int]]:
    return sorted((p.number, p.start, p.end) for p in table.partitions)


def _no_repair(disk: Disk) -> str:
    """Why a disk that needs a repair is offered none ("" when it needs none)."""
    for f in disk.findings:
        if f.code in NEEDS_REPAIR:
            why = next((line for line in f.explanation if line.startswith("No repair is offered")), "")
            return f"no repair is offered: {f.message}" + (f" ({why.rstrip('.')})" if why else "")
    return ""


def prepare_repair(
    target: str,
    host: Host,
    *,
    current: Disk | None = None,
    expect: GptRepair | None = None,
    desired: Table | None = None,
    sector_size: int | None = None,
    sectors: int | None = None,
) -> Proposal:
    """What the repair of ``target`` would write, and what refuses it. Writes nothing.

    ``current``: the disk as the caller just read it (not read twice). ``expect``: the repair the user
    planned (``plan.pending_repair``): refused unless the disk still offers exactly these bytes.
    ``desired``: the plan's table, which must hold the disk's partitions unchanged (a repair is written
    on its own). Without an offered repair the proposal has no changes ("nothing to do"), or a refusal
    when the disk is damaged beyond what diskplan repairs. Raises CommitError when the target cannot be
    read at all."""
    ident, current = read_target(target, current)
    geom = current.geometry
    r = current.repair
    refusals: list[str] = []
    notes: list[str] = []
    if expect is not None and r is None:
        refusals.append(f"{target} no longer offers this repair (it was read again): read it again and plan anew")
    elif expect is not None and r is not None and not r.same_writes(expect):
        refusals.append(f"{target} changed since the repair was planned: read it again and plan the repair again")
    elif r is None and _no_repair(current):
        refusals.append(_no_repair(current))
    refusals += other_disk(target, geom, sector_size, sectors)
    refusals += half_moved(target, ident.size)
    if desired is not None and differences(replace(desired, partitions=desired.live), current.table):
        refusals.append("a repair is written on its own: the plan also changes partitions (commit the repair, "
                        "then plan the changes on the repaired table)")
    written = r.extents(geom.logical) if r is not None else ()
    data = [p for p in current.table.partitions if p.role is not Role.EXTENDED]  # never written, never backed up
    for e in written:
        if e.end >= geom.sectors:
            refusals.append(f"the repair would write sectors {e.start}..{e.end}, past the last LBA {geom.last_lba}")
        refusals += [f"the repair would write sectors {e.start}..{e.end}, inside partition {p.number}"
                     for p in data if p.extent.overlaps(e)]
    blocking, idle = unwritable(target, host, geom.logical)
    refusals += blocking
    notes += idle
    ops = repair_operations(r, current.table, geom.logical)
    return proposal_as_read(
        target,
        ident,
        current,
        result=replace(current.table, read_only=""),
        operations=ops,
        refusals=tuple(refusals),
        notes=tuple(notes),
        table_sectors=written,
        protect=tuple(p.extent for p in data),
        repair=r,
        made_against=table_fingerprint(current.table, target, geom, current.filesystem),
    )


# --- writing ----------------------------------------------------------------------------------------


def _problems_now(p: Proposal) -> list[str]:
    """Does the disk still need exactly this repair? (Time has passed since prepare.)"""
    try:
        now = read(p.target)
    except ReadError as exc:
        return [f"{p.target} cannot be read again: {exc}"]
    if now.repair is None or p.repair is None or not now.repair.same_writes(p.repair):
        return [f"{p.target} changed since the repair was prepared: read it again"]
    if _extents(now.table) != _extents(p.current.table):
        return [f"the partitions on {p.target} changed since the repair was prepared: read it again"]
    return table_changed(p, now)


def verify_repair(p: Proposal, before: GptState | None) -> tuple[list[str], Disk | None]:
    """Read the disk back and say every way it is not repaired (empty: repaired), with the disk as read.
    ``before``: both GPT copies as judged right before the write (the good one is the reference)."""
    r = p.repair
    assert r is not None
    out: list[str] = []
    try:
        for lba, data in r.writes:
            got = sectorio.read_sectors(p.target, lba, len(data) // p.sector_size, p.sector_size)
            if got != data:
                out.append(f"sectors {lba}..{lba + len(data) // p.sector_size - 1} do not read back as written")
        after = check_gpt(p.target, p.sector_size, p.sectors)
        mbr = sectorio.read_sectors(p.target, 0, 1, p.sector_size)
    except (OSError, bk.BackupError) as exc:
        return [f"the disk cannot be read back: {getattr(exc, 'strerror', None) or exc}"], None
    good = before.good if before is not None else None
    if after is None:
        out.append("no GPT header is readable any more")
    else:
        out += [f"the {c.which} GPT is still damaged: {c.problem}" for c in (after.primary, after.backup) if c.problem]
        differ = copies_differ(after)
        if differ:
            out.append(f"the two GPT copies differ: {differ}")
        if good is not None and good.header is not None:
            for c in (after.primary, after.backup):
                if c.ok and c.raw_entries != good.raw_entries:
                    out.append(f"the {c.which} GPT's entry array is not the one the good copy had")
                if c.ok and c.header is not None and c.header.disk_guid != good.header.disk_guid:
                    out.append(f"the {c.which} GPT has disk GUID {c.header.disk_guid}, not {good.header.disk_guid}")
    if r.rewrite == PROTECTIVE_MBR and not any(e.type_id == PROTECTIVE_ID for e in mbr_entries(mbr)):
        out.append("sector 0 has no protective 0xEE entry")
    try:
        disk = read(p.target)
    except ReadError as exc:
        return [*out, f"the disk cannot be read back: {exc}"], None
    if disk.table.label != "gpt":
        out.append(f"the disk reads as {disk.table.label or 'no table'}, not gpt")
    elif _extents(disk.table) != _extents(p.current.table):
        found = ", ".join(f"{n}:{s}..{e}" for n, s, e in _extents(disk.table)) or "none"
        out.append(f"the partitions read back are {found}, not the ones the disk had")
    left = [f.message for f in disk.findings if f.code in _repaired(r)]
    out += [f"still: {m}" for m in left]
    return out, disk


class RepairWrite(ProposalWrite):
    """Exactly the repair's sectors written raw (no libparted commit), read back and judged: both GPT
    copies valid and equal with the good copy's entries, the partitions unchanged, the damage gone."""

    checking = "locking the disk, checking that nothing uses it and that it still needs this repair"
    saving = "saving the backup of both ends of the disk"
    before: GptState | None = None  # both GPT copies as judged under the lock, right before the write

    def nothing(self) -> str:
        p = self.p
        return "" if p.repair is not None and p.changes else f"nothing to do: the table on {p.target} needs no repair"

    def changed_since(self) -> list[str]:
        return _problems_now(self.p)

    def recheck(self, base: WriteOutcome) -> WriteOutcome | None:
        refused = super().recheck(base)
        if refused is None:
            self.before = check_gpt(self.p.target, self.p.sector_size, self.p.sectors)
        return refused

    def back_up(self, base: WriteOutcome) -> tuple[bk.TableBackup, WriteOutcome] | WriteOutcome:
        got = super().back_up(base)
        if isinstance(got, WriteOutcome):
            return got
        saved, base = got
        missing = [e for e in self.p.table_sectors if not any(e.within(c) for c in saved.extents)]
        if missing:  # never write a sector whose old bytes are not in the backup
            first = missing[0]
            return replace(base, verdict=Verdict.FAILED,
                           message=f"the backup lacks sectors {first.start}..{first.end}; nothing was written")
        return saved, base

    def write_and_verify(self, saved: bk.TableBackup, base: WriteOutcome) -> WriteOutcome:
        p, fault = self.p, self.fault
        r = p.repair
        assert r is not None
        try:
            if fault:
                fault("backup")
            self.step(3, f"writing {r.sectors_written(p.sector_size)} sectors of the repair and syncing")
            sectorio.write_sectors(p.target, r.writes, p.sector_size,
                             after_first=(lambda: fault("write")) if fault else None)
            if fault:
                fault("verify")
        except Exception as exc:  # any failure here, even a test's injected one, needs the state report
            reason = " ".join(str(getattr(exc, "strerror", None) or exc).split()) or type(exc).__name__
            return write_failed(base, saved, p.target, reason)

        self.step(4, "reading the disk back: the bytes written, both GPT copies, the partitions")
        diffs, disk = verify_repair(p, self.before)
        if diffs:
            return not_as_planned(base, saved, p.target, "the disk is not repaired as planned", diffs)
        details = [
            "both GPT copies pass every check (signatures, header and entry-array CRCs) and are equal"
            if r.rewrite != PROTECTIVE_MBR else "sector 0 holds a protective MBR; the GPT was not touched",
            f"partitions unchanged: {', '.join(str(n) for n, _, _ in _extents(p.current.table)) or 'none'}",
        ]
        if disk is not None and disk.repair is not None:
            details.append(f"another repair is offered now: {disk.repair.summary}")
        kernel = ""
        if p.kind == "block":
            self.step(5, "telling the kernel")
            kernel = _tell_kernel(p, self.host, disk)
        what = (f"{p.target} has a protective MBR again" if r.rewrite == PROTECTIVE_MBR
                else f"the backup GPT on {p.target} is moved to the end of the disk (last usable LBA {r.grown[1]})"
                if r.moved_from else f"the {r.rewrite} GPT on {p.target} is rebuilt from the {r.good} copy")
        return replace(base, verdict=Verdict.WRITTEN, state=DiskState.PLANNED, kernel=kernel,
                       details=tuple(details), message=f"repaired and verified: {what}")


def execute_repair(
    p: Proposal,
    answer: str,
    host: Host,
    *,
    backup_path: str | None = None,
    progress: Progress | None = None,
    fault: Fault | None = None,
) -> WriteOutcome:
    """Check, back up, write the repair, verify, tell the kernel. ``answer``: what the user typed
    (``p.accepts``). ``fault`` (tests): called at "backup", "write" (after the first run is written) and
    "verify"."""
    return RepairWrite(p, host, backup_path=backup_path, progress=progress, fault=fault).run(answer)


def _tell_kernel(p: Proposal, host: Host, disk: Disk | None) -> str:
    """The kernel reads a GPT only behind a protective MBR, and uses the backup when the primary is bad:
    after a repair its partition list may be new. Told through libparted, only when libparted now reads
    the table (otherwise it would take the table for empty and remove the kernel's partitions)."""
    if disk is None or disk.table.label != "gpt" or disk.table.read_only:
        return ("the kernel was not told: the table is not yet one libparted reads; run `partx -u "
                f"{p.target}` once it is fully repaired")
    try:
        told, why_not = run_isolated(inform_kernel_child, p.target, timeout=60.0)
    except IsolatedFailure as exc:
        told, why_not = False, exc.reason
    stale = kernel_differences(p.target, disk.table, p.sector_size, host)
    if told and not stale:
        return ""
    what = "; ".join([*([why_not] if why_not else []), *stale]) or "it refused"
    return f"the table is repaired, but the kernel could not be told ({what}); run `partx -u {p.target}` or reboot"
