"""Roll back an interrupted move (``diskplan resume TARGET --rollback``): the partition back at its old
place, with its bytes as they were.

``resume`` finishes a move from any point; a rollback is offered until the copy is verified (then finishing
only rewrites the table entry). While no byte of the partition's old place can have been overwritten
(model.plan.move.old_place_touched: the chunks recorded as written and the group in flight all landed
elsewhere, or the copy never began) undoing it needs no data copy, only the table. Otherwise the chunks written
over the old place are copied back first (backend.move.reverse: a reverse copy in the safe order, each chunk
taken from where the disk still gives its recorded checksum, idempotent after any crash). Then the entry gets
its old type (and msdos size) back at its old place; for a logical partition whose EBR moved, the EBR is
written back at its old sector and the previous EBR linked to it first (backend.raw.ebrchain: written, then
linked), the extended partition keeps the size it grew to (harmless). That is the way out when the move cannot
finish: an I/O error at the destination (util-linux #984 left the partition half-moved), or a destination that
turns out to be needed.

Order, each step idempotent so an interrupted rollback is simply run again: the journal is marked
``rollback`` (from then on a plain ``resume`` refuses, so the copy never starts again over a partition
being put back), the chunks are copied back when any were written over the old place, the table is
rewritten, the kernel told, the filesystem checked at its old place (same type, UUID and label, clean), and
the journal marked ``undone``. When the move was a step of an apply that saved
the rest of its plan (backend.move.planrest), that file is made to start from the table the rollback leaves.
"""

from __future__ import annotations

from collections.abc import Callable

from diskplan.backend.fs import fscheck
from diskplan.backend.move.datamove import Device, MoveIOError, Progress
from diskplan.backend.move.engine import MoveOutcome, MoveProposal, at_old_place, check_after, saying, with_journal
from diskplan.backend.move.moveentry import EntryError, read_entry, reveal
from diskplan.backend.move.movejournal import Header, Journal
from diskplan.backend.move.planrest import after_rollback
from diskplan.backend.move.reverse import needs_copy, undo_copy
from diskplan.backend.raw import ebrchain
from diskplan.backend.write import backup as bk
from diskplan.backend.write.steps import Host, Verdict
from diskplan.model.plan.move import Schedule, resume_point
from diskplan.model.value import replace


def _put_back(h: Header) -> None:
    """The entry at its old place with its old type (and its EBR at its old sector). Raises EntryError or
    ChainError."""
    ss, sectors = h.sector_size, h.size // h.sector_size
    entry = read_entry(h.target, h.label, h.number, ss, sectors, hidden=True)
    if entry.guid != h.guid or not at_old_place(entry, h):
        raise EntryError(f"partition {h.number} is not where the journal says it was ({h.start}..{h.end})")
    if h.ebr and entry.ebr != h.ebr:
        ebrchain.relocate(h.target, ebrchain.read_chain(h.target, ss), h.number, h.ebr, h.end, ss)
        entry = read_entry(h.target, h.label, h.number, ss, sectors, hidden=True)
    if h.ptype and (entry.hidden or (entry.start, entry.end) != (h.start, h.end)):
        reveal(h.target, entry, h.start, h.length, h.ptype, ss, sectors)


def _copy_back(journal: Journal, progress: Progress | None) -> list[str]:
    """The chunks the move wrote over the old place, copied back (backend.move.reverse): what went wrong (the
    message first), or nothing."""
    h = journal.header
    plan = Schedule(h.start, h.to, h.length, h.chunk)
    try:
        dev = Device(h.target, h.sector_size, plan.chunk * h.sector_size)
    except OSError as exc:
        return [f"cannot open {h.target} for the rollback: {exc.strerror}"]
    try:
        lost = undo_copy(plan, dev, journal, resume_point(journal.records), h.sector_size, progress)
    except MoveIOError as exc:
        return [f"I/O error at sector {exc.sector}: {exc}; the rollback of partition {h.number} stopped, the entry "
                f"stays hidden (`diskplan resume {h.target} --rollback --yes` goes on once the disk answers again)"]
    finally:
        dev.close()
    if lost:
        return [f"the rollback stopped: part of partition {h.number} cannot be put back at {h.start}..{h.end} (listed "
                "below); the entry stays hidden, so nothing mounts the damaged filesystem", *lost]
    return []


def execute_rollback(
    p: MoveProposal, answer: str, host: Host, *, progress: Progress | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> MoveOutcome:
    """Put the partition of ``p.journal`` back at its old place (see the module's doc)."""
    return with_journal(p, answer, host, lambda j, base: _undo(j, base, p.kind, progress))


def _undo(journal: Journal, base: MoveOutcome, kind: str, progress: Progress | None) -> MoveOutcome:
    h = journal.header
    ss = h.sector_size
    base = replace(base, verdict=Verdict.FAILED, resumable=True)
    if "rollback" not in journal.marks:
        journal.append("rollback")
    if needs_copy(h, journal.records, journal.marks):
        failed = _copy_back(journal, progress)
        if failed:
            return replace(base, message=failed[0], details=failed[1:], resumable=failed[0].startswith("I/O"))
    if progress:
        progress(1, 1, "rewriting the partition's table entry at its old place")
    try:
        _put_back(h)
    except (EntryError, ebrchain.ChainError, OSError, bk.BackupError) as exc:
        return replace(base, message=f"the rollback stopped: the table entry could not be put back: {exc}; its data "
                       f"at {h.start}..{h.end} is untouched (`diskplan resume {h.target} --rollback` tries again)")
    found = fscheck.Identity(h.fs, h.fs_uuid, h.fs_label)
    after = check_after(h.target, kind, h.start, h.length, ss, found, base, "put back", saying(progress),
                        "checking the filesystem at its old place", f" at {h.start}..{h.end}")
    if isinstance(after, MoveOutcome):
        return after
    fs, kernel = after
    journal.append("undone")
    rest = after_rollback(h.rest, h.target) if h.rest else ""
    return replace(base, verdict=Verdict.WRITTEN, resumable=False, kernel=kernel, details=(rest,) if rest else (),
                   message=f"rolled back: partition {h.number} is at {h.start}..{h.end} again, as before the move; "
                   f"{fs}, nothing of its data was moved")
