"""Write a planned table to a disk with one libparted commit, built on the shared write steps
(backend.write.steps).

1. ``prepare_table(target, desired, host)`` reads the disk, takes the one list of operations (new label,
   delete N, create N at start..end, change N, keep N) the planner built and showed (``Plan.writes()``;
   for a plan file, ``operations.plan_writes`` builds it here), checks what would make the write unsafe
   (in use, read-only, a plan libparted cannot place exactly) and asks libparted, in a child, to build
   the new table in memory. Nothing is written. The ``Proposal`` says what to show and what to ask (type
   the device name for a block device, "yes" for an image file).
2. ``execute_table(proposal, answer, host)`` runs ``TableWrite`` through ``Write.run``: under the write
   lock it checks again (someone may have mounted it meanwhile, or written another table: the table is
   read again and must be the one the proposal was made against), saves the backup, then in one child
   writes the table with one libparted commit, writes into the raw GPT entries the types and attribute
   bits libparted 3.5 cannot set (backend.raw.gptpatch), tells the kernel and reads the table back (a new
   libparted disk from the device, plus diskplan's own checks of the raw GPT copies or EBR chain); the
   parent compares it with the plan sector for sector.

Speed (a 128-partition GPT is written as fast as ``sfdisk`` writes it from a script): a caller that has
just read the target passes it to ``prepare_table(current=...)``; ``write.preload()`` imports pyparted
once so the three children (read, preview, write + read back) do not each import it again.

What each plan does to the table (the operations, the resulting table, what makes a plan unwritable,
the comparison after the write) is pure and lives in model.plan.operations.
"""

from __future__ import annotations

from diskplan.backend.parted.isolate import IsolatedFailure, run_isolated
from diskplan.backend.raw import gptpatch, mbrid
from diskplan.backend.raw.tableid import table_fingerprint
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
    identity,
    kernel_differences,
    not_as_planned,
    other_disk,
    proposal_as_read,
    read_target,
    unwritable,
    write_failed,
)
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role
from diskplan.model.plan.operations import Changes, differences, plan_writes
from diskplan.model.table import Table, new_table
from diskplan.model.value import replace, value

WRITE_TIMEOUT = 300.0  # seconds for one libparted commit (a slow USB stick syncing)


def plan_made_against_another(target: str) -> str:
    return (f"the plan was made against another table than the one on {target} now (its \"made_against\" "
            "fingerprint differs: the disk was written since, or it is another disk). Plan again from the disk, "
            "or delete \"made_against\" from the plan file to apply it to the table there now")


def prepare_table(
    target: str,
    desired: Table | Changes,
    host: Host,
    *,
    sector_size: int | None = None,
    sectors: int | None = None,
    current: Disk | None = None,
    made_against: str | None = None,
) -> Proposal:
    """Everything to show before asking: operations, the resulting table, refusals. Writes nothing.
    ``desired``: the one list of operations the planner built and showed (``Plan.writes()``), which is
    then shown and executed as it is, or the table wanted (a plan file), from which
    ``operations.plan_writes`` builds that list against the disk read now.
    ``sector_size``/``sectors``: what the plan was made for, when it says. ``current``: the target as
    the caller read it a moment ago (backend.read.reader.read), so it is not read twice; the write checks
    again that the disk is the same one and still holds what is deleted. ``made_against``: the fingerprint a plan file
    recorded (model.plan.fingerprint): a plan that changes the disk is refused when the disk's table is no
    longer that one. Raises CommitError only when the target cannot be read at all."""
    ident, current = read_target(target, current)
    geom = current.geometry
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
    if any(op.moves_data for op in ops.operations):  # the data move is backend.move.engine's write, not a table commit
        refusals.append("this plan moves data: write its table changes first, then the moves (the planner's w, "
                        "or diskplan move)")
    refusals += half_moved(target, ident.size)
    blocking, idle = unwritable(target, host, geom.logical)
    refusals += blocking
    notes = [*ops.notes, *idle]
    fresh = ops.fresh
    done = ops.operations  # executed from this list: what is deleted, created, re-added, changed, kept
    parts = {k: tuple(op.partition for op in done if op.kind in k and op.partition is not None)
             for k in (("delete", "rewrite"), ("create", "rewrite"), ("change",), ("keep", "change", "rewrite"))}
    header, guids = _gpt_wishes(desired, ops.label)
    libparted = _usable(new_table("gpt", geom) if fresh else current.table)  # the usable area it writes
    raw = () if header is None else gptpatch.pending(target, geom.logical, geom.sectors, header, dict(guids),
                                                     libparted, fresh)
    signature = desired.disk_id if isinstance(desired, Table) and ops.label == desired.label == "msdos" else ""
    if signature and (fresh or mbrid.current(target, geom.logical) != signature):
        raw += (f"the disk identifier becomes {signature}: written into the MBR after the commit",)
    notes += raw
    now = table_fingerprint(current.table, target, geom, current.filesystem)
    if made_against and made_against != now and any(op.kind != "keep" for op in done):
        refusals.append(plan_made_against_another(target))
    proposal = proposal_as_read(
        target,
        ident,
        current,
        result=ops.result(new_table(ops.label, geom) if fresh else current.table),
        operations=done,
        refusals=tuple(refusals),
        notes=tuple(notes),
        fresh=fresh,
        delete=() if fresh else tuple(p.extent for p in parts["delete", "rewrite"]),
        create=parts["create", "rewrite"],
        change=parts["change",],
        protect=tuple(p.extent for p in parts["keep", "change", "rewrite"] if p.role is not Role.EXTENDED),
        made_against=now,
        gpt_header=header,
        guids=guids,
        signature=signature,
        raw_changes=raw,
    )
    if refusals or not proposal.changes:
        return proposal
    return _preview(proposal)


def _usable(t: Table) -> tuple[int, int]:
    return t.first_usable, t.last_usable


def _gpt_wishes(desired: Table | Changes, label: str | None) -> tuple[gptpatch.HeaderWish | None,
                                                                     tuple[tuple[int, str], ...]]:
    """What a plan file's GPT names that libparted makes up (its usable area, disk GUID, unique GUIDs: an
    sfdisk script's first-lba, last-lba, label-id, uuid=), for backend.raw.gptpatch; the planner's changes name
    none of them."""
    if not isinstance(desired, Table) or label != "gpt" or desired.label != "gpt":
        return None, ()
    named = desired.usable_named
    header = gptpatch.HeaderWish(desired.first_usable if named else None, desired.last_usable if named else None,
                                 desired.disk_id.upper())
    return header, tuple((p.number, p.uuid.upper()) for p in desired.live if p.uuid)


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
    from diskplan.backend.parted.libparted import preview_table

    return preview_table(target, label, fresh=fresh, delete=delete, create=create, change=change)


# --- writing ----------------------------------------------------------------------------------------


@value
class _Written:
    """What the commit child reports: the kernel's news, libparted's messages, and the table read back
    (None when it could not be read: ``problems`` says why)."""

    told: bool
    why_not: str
    messages: tuple[str, ...]
    found: Table | None
    problems: tuple[str, ...]
    patched: tuple[str, ...] = ()  # what the raw patch after libparted's commit changed (backend.raw.gptpatch)


def _commit_child(p: Proposal, fault: Fault | None) -> _Written:
    """Write with one libparted commit, patch into the raw GPT entries the types and attribute bits
    libparted cannot write, tell the kernel, then read the table back from the device with a new libparted
    disk and diskplan's raw checks: one fork (and one pyparted start) for all of it."""
    from diskplan.backend.parted.libparted import BackendError, commit_table, read_back

    patched: list[str] = []

    def after_write() -> None:  # between libparted's write and the kernel's update: the kernel sees the patch
        if fault:
            fault("write")
        if p.result.label == "gpt":
            kept = [op.partition for op in p.operations if op.kind == "keep" and op.partition is not None]
            wanted = gptpatch.wishes((*p.create, *p.change), dict(p.guids), kept)
            patched.extend(gptpatch.patch_entries(p.target, p.sector_size, p.sectors, wanted,
                                                  after_first=(lambda: fault("patch")) if fault else None,
                                                  header=p.gpt_header))
        elif p.signature:
            patched.extend(mbrid.write_signature(p.target, p.sector_size, p.signature))

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
        after_write=after_write,
    )
    if fault:
        fault("verify")
    try:
        found, problems = read_back(p.target, p.sectors, p.sector_size)
    except Exception as exc:  # the table is written: a failed read-back is a failed verification, not a failed write
        why = " ".join(str(exc).split()) or type(exc).__name__
        return _Written(told, why_not, messages, None, (f"the disk cannot be read back: {why}",), tuple(patched))
    return _Written(told, why_not, messages, found, problems, tuple(patched))


class TableWrite(ProposalWrite):
    """The new table written with one libparted commit, the kernel told, the table read back (by libparted
    and by diskplan's raw checks of the GPT copies or the EBR chain) and compared sector for sector."""

    def nothing(self) -> str:
        return "" if self.p.changes else "nothing to do: the disk already holds the plan"

    def write_and_verify(self, saved: bk.TableBackup, base: WriteOutcome) -> WriteOutcome:
        try:
            if self.fault:
                self.fault("backup")
            self.step(3, "writing the table (one libparted commit), telling the kernel and reading it back")
            w: _Written = run_isolated(_commit_child, self.p, self.fault, timeout=WRITE_TIMEOUT)
        except Exception as exc:  # any failure here, even a test's injected one, needs the state report
            reason = (exc.reason if isinstance(exc, IsolatedFailure)
                      else " ".join(str(exc).split()) or type(exc).__name__)
            return write_failed(base, saved, self.p.target, reason)

        self.step(4, "comparing the table read back with the plan")
        diffs = [*w.problems, *(differences(self.p.result, w.found) if w.found is not None else ())]
        if diffs:
            return not_as_planned(base, saved, self.p.target, "the disk does not hold the plan", diffs, w.messages)
        self.step(5, "checking the kernel's partition list")
        kernel = ""
        if self.p.kind == "block":
            stale = kernel_differences(self.p.target, self.p.result, self.p.sector_size, self.host)
            if not w.told or stale:
                what = "; ".join([*([w.why_not] if w.why_not else []), *stale]) or "it refused"
                kernel = (
                    f"the table is written, but the kernel could not be told ({what}). The old partitions stay in "
                    f"use until `partx -u {self.p.target}` succeeds or the machine reboots"
                )
        msg = f"written and verified: {self.p.target} holds the plan"
        return replace(base, verdict=Verdict.WRITTEN, state=DiskState.PLANNED, message=msg, kernel=kernel,
                       details=(*w.patched, *w.messages))


def execute_table(
    p: Proposal,
    answer: str,
    host: Host,
    *,
    backup_path: str | None = None,
    progress: Progress | None = None,
    fault: Fault | None = None,
) -> WriteOutcome:
    """Back up, write, tell the kernel, verify. ``answer`` is what the user typed (``p.accepts``)."""
    return TableWrite(p, host, backup_path=backup_path, progress=progress, fault=fault).run(answer)
