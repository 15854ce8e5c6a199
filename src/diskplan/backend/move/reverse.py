"""The reverse copy of a rollback: a move's chunks put back at its old place after some were copied over it.

A move copies chunk after chunk in the order that never overwrites a source not yet copied
(model.plan.move), so when it stops, the old place lacks only bytes that are safe elsewhere: chunk ``k``'s
source ``src(k)`` was overwritten only by the destinations of chunks ``j >= k`` (in copy order), and each
chunk recorded as written (``0..next-1``) has its bytes at its destination ``dst(k)`` with their checksum
in the journal; the chunk in flight that saves its old bytes (``Resume.pending``) has them in the journal's
slot. Chunks not recorded as written still have their sources whole (the group in flight never writes over a
source of its own group), so they need nothing.

Putting it back runs the same rule the other way, chunk ``next-1`` down to ``0`` (the chunk in flight
first): writing ``src(k)`` overwrites only destinations of chunks ``j >= k``, which are already back at
their sources and synced. Each chunk is taken from wherever the disk still holds the bytes the journal
recorded for it — never from the journal's word that it is there: its source when that already gives its
checksum (never overwritten, or put back before a crash: nothing is written), else its destination, else
the slot. A chunk whose write back overwrites its own destination (a shift smaller than a chunk) is saved
whole in the slot first (synced), so a crash tearing that write leaves the bytes in the slot. Every write
back is synced before the next one begins. So a crash anywhere leaves a state the same reverse copy
finishes, run again from the start: it is idempotent, and needs no record of its own beyond the journal's
``rollback`` mark (backend.move.moveundo), which stops a plain ``resume`` from copying forwards again.

A chunk found nowhere is reported with its sectors (the disk was written by something else meanwhile):
``undo_copy`` returns one line per such chunk and writes nothing more after the first.
"""

from __future__ import annotations

from collections.abc import Callable

from diskplan.backend.faults import fault
from diskplan.backend.move.datamove import Log, Medium, Progress, digest
from diskplan.backend.move.movejournal import Header
from diskplan.backend.move.moverecheck import old_place_holds, pending_source
from diskplan.backend.raw import sectorio
from diskplan.backend.write import backup as bk
from diskplan.model.plan.move import BATCH_BYTES, Read, Resume, Schedule, Step, Written, old_place_touched, resume_point


def plan_of(h: Header) -> Schedule:
    return Schedule(h.start, h.to, h.length, h.chunk)


def needs_copy(h: Header, records: list[Read | Written], marks: list[str]) -> bool:
    """Whether a rollback must copy data back: the copy began (the ``copy`` mark, in journals that make it) and a
    chunk recorded, or the group in flight, may have landed on the old place (model.plan.move.old_place_touched)."""
    if h.copy_mark and "copy" not in marks:
        return False
    plan = plan_of(h)
    batch = BATCH_BYTES // max(1, plan.chunk * h.sector_size)
    return old_place_touched(plan, resume_point(records).next, batch) is not None


def order(at: Resume) -> list[int]:
    """The chunks to put back, in the order that never overwrites bytes still needed: the chunk in flight,
    then the chunks recorded as written, last first."""
    first = [at.pending.index] if at.pending is not None else []
    return [*first, *range(at.next - 1, -1, -1)]


def _found(step: Step, want: str, read: Callable[[int, int], bytes | memoryview], log: Log, ss: int) -> bytes | None:
    """Chunk ``step``'s bytes from its destination or the slot, whichever gives ``want``; None: neither."""
    data = read(step.dst, step.count)
    if digest(data) == want:
        return bytes(data)
    try:
        kept = log.saved(step.index, step.count * ss)
    except OSError:
        return None
    return kept if len(kept) == step.count * ss and digest(kept) == want else None


def undo_copy(plan: Schedule, medium: Medium, log: Log, at: Resume, ss: int,
              progress: Progress | None = None) -> list[str]:
    """Put every chunk the move may have written over its old place back there (see the module's doc). The
    chunks that could not be found (one line each; empty: the old place holds the partition again). Raises
    MoveIOError (resumable: run it again)."""
    chunks = order(at)
    total = sum(plan.step(k).count for k in chunks) * ss
    done = 0
    for k in chunks:
        if progress:
            progress(done, total, "copying back")
        step = plan.step(k)
        done += step.count * ss
        view = medium.read(step.src, step.count, 1)  # buffer 1: written from below (aligned for direct I/O)
        here = bytes(view)
        if at.pending is not None and k == at.pending.index:
            data = (pending_source(step, bytearray(here), at.pending, log.saved, ss)
                    or _found(step, at.pending.digest, medium.read, log, ss))  # its write whole: at its new place
            if data is None:
                return [_lost(step, "its source no longer gives the checksum recorded before its write")]
            if data == here:
                continue
        else:
            want = at.digests.get(k)
            if want is None:
                return [_lost(step, "the journal has no checksum for it")]
            if digest(here) == want:
                continue  # never overwritten, or put back before a crash
            data = _found(step, want, medium.read, log, ss)
            if data is None:
                return [_lost(step, "neither its new place nor the journal's slot holds it any more")]
            if step.saved is not None:
                log.save(k, data)  # the write back overwrites its own copy: the slot holds it meanwhile
                fault("slot")
        view[:] = data
        medium.write(step.src, view)
        medium.sync()
    if progress:
        progress(total, total, "copying back")
    return []


def _lost(step: Step, why: str) -> str:
    return (f"chunk {step.index} (sectors {step.src}..{step.source.end}, moved to {step.dst}..{step.dest.end}) "
            f"cannot be put back: {why}")


def rollback_data(target: str, h: Header, records: list[Read | Written], log: Log) -> list[str]:
    """For ``resume --rollback``, before anything is written: the bytes a reverse copy would start from are on
    ``target`` (the disk, not the journal, says so). The first chunk it puts back must be found (its source
    already back, its new place, or the slot; the chunk in flight: its source, with its saved bytes), which
    also tells a disk the move did not run on (a CRC-32 of 8 MiB recorded on that disk). Empty: none missing."""
    plan = plan_of(h)
    at = resume_point(records)
    chunks = order(at)
    if not chunks:
        return old_place_holds(target, h)  # nothing of the old place was written
    step = plan.step(chunks[0])
    ss = h.sector_size
    try:
        here = bytearray(sectorio.read_sectors(target, step.src, step.count, ss))
        if at.pending is not None and step.index == at.pending.index:
            ok = pending_source(step, here, at.pending, log.saved, ss) is not None
            want = at.pending.digest
        else:
            want = at.digests.get(step.index, "")
            ok = digest(bytes(here)) == want
        ok = ok or _found(step, want, lambda lba, n: sectorio.read_sectors(target, lba, n, ss), log, ss) is not None
    except (OSError, bk.BackupError) as exc:
        return [f"{target} cannot be read: {getattr(exc, 'strerror', None) or exc}"]
    if ok:
        return []
    return [f"neither sectors {step.src}..{step.source.end} nor {step.dst}..{step.dest.end} of {target} hold the "
            f"chunk the journal recorded for them: it is not the disk the move ran on ({h.target}), or it was "
            "written since; nothing was written"]
