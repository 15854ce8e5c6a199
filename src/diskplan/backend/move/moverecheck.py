"""What ``resume`` and ``resume --rollback`` check on the disk itself before writing anything: a journal is a
record of what was, the disk says what is (the journal may be of another disk, or the disk may have been
written since the crash).

- **The same disk**, by identity, never by its path (names change across reboots, and ``--journal`` can
  name any journal): its table id (GPT disk GUID, msdos disk signature: backend.raw.tableid), its size and
  sector size, and its serial number where the kernel knows one (``disk_identity``, read as
  backend.move.diskmark recorded them in the journal's header when the move began).
- **The same data**: where chunks were recorded as written, the last one's destination must still hold
  the checksum recorded for it (destinations never overlap each other, so nothing of the move itself
  writes there again); with a chunk in flight only, its source (with its saved old bytes) must still
  give its checksum; before any chunk, the old place must still hold the filesystem blkid saw then.
- **The same places**: the new place must lie in the usable area and, like the old place, no other
  partition may have been made over it since (the hidden entry's range looks free to every other tool).

Any mismatch is a refusal naming both disks; nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from diskplan.backend.fs import fscheck
from diskplan.backend.move.datamove import digest
from diskplan.backend.move.diskmark import serial
from diskplan.backend.move.movejournal import Header
from diskplan.backend.raw import sectorio
from diskplan.backend.raw.tableid import table_id
from diskplan.backend.write import backup as bk
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Role
from diskplan.model.plan.move import Read, Schedule, Step, Written, resume_point


def disk_identity(path: str, sector_size: int, sectors: int) -> tuple[str, str]:
    """(table id, serial) of the disk at ``path`` now, read as the journal recorded them when the move began
    (backend.move.diskmark), in the sector size the journal says."""
    try:
        tid = table_id(lambda lba, n: sectorio.read_sectors(path, lba, n, sector_size), sectors)
    except (OSError, bk.BackupError):
        tid = ""
    return tid, serial(path)


def _named(target: str, tid: str, ser: str, size: int) -> str:
    return f"{target} ({tid or 'no table id'}, {size} bytes" + (f", serial {ser})" if ser else ")")


def same_disk(target: str, h: Header, size: int, sector_size: int) -> list[str]:
    """Refusals when ``target`` is not the disk the journal was made on."""
    tid, ser = disk_identity(target, h.sector_size, size // h.sector_size)
    was = _named(h.target, h.table_id, h.serial, h.size)
    now = _named(target, tid, ser, size)
    why = []
    if size != h.size:
        why.append("size")
    if sector_size != h.sector_size:
        why.append(f"sector size ({sector_size} B, not {h.sector_size} B)")
    if h.table_id and tid != h.table_id:
        why.append("table id")
    if h.serial and ser != h.serial:
        why.append("serial number")
    if not why:
        return []
    return [f"{now} is not the disk the journal was made for, {was} (another {' and '.join(why)}); nothing was "
            "written (name the disk the move was running on)"]


def places_free(target: str, h: Header, disk: Disk) -> list[str]:
    """Refusals when the new place leaves the usable area or another partition now lies over the old or new
    place."""
    t = disk.table
    new = Extent(h.to, h.to + h.length - 1)
    if not new.within(t.usable) or h.length <= 0:
        return [f"the journal moves partition {h.number} to {new.start}..{new.end}, outside the usable area "
                f"{t.usable.start}..{t.usable.end} of {target}: it is not a journal of this disk's move"]
    out = []
    for q in t.live:
        if q.number == h.number or q.role is Role.EXTENDED:
            continue
        for what, place in (("new", new), ("old", Extent(h.start, h.end))):
            if q.extent.overlaps(place):
                out.append(f"partition {q.number} ({q.start}..{q.end}) of {target} lies over the move's {what} place "
                           f"({place.start}..{place.end}): it was made after the move stopped; nothing was "
                           "written (its data would be overwritten)")
    return out


def _chunk_digest(target: str, lba: int, count: int, ss: int) -> str:
    return digest(sectorio.read_sectors(target, lba, count, ss))


Saved = Callable[[int, int], bytes]  # the journal's slot: (chunk, bytes) -> the old bytes saved for it


def same_data(target: str, h: Header, records: Sequence[Read | Written], saved: Saved) -> list[str]:
    """Refusals when the bytes on ``target`` are not the ones the journal recorded (see the module's doc)."""
    plan = Schedule(h.start, h.to, h.length, h.chunk)
    at = resume_point(records)
    ss = h.sector_size
    try:
        if at.next:
            step = plan.step(at.next - 1)
            if _chunk_digest(target, step.dst, step.count, ss) == at.digests[step.index]:
                return []
            return [f"sectors {step.dst}..{step.dest.end} of {target} do not hold the chunk the journal recorded "
                    f"as written there: it is not the disk the move ran on ({h.target}), or it was written since; "
                    "nothing was written"]
        if at.pending is not None and _pending_intact(target, plan, at.pending, saved, ss):
            return []
    except (OSError, bk.BackupError) as exc:
        return [f"{target} cannot be read: {getattr(exc, 'strerror', None) or exc}"]
    return old_place_holds(target, h)


def _pending_intact(target: str, plan: Schedule, pending: Read, saved: Saved, ss: int) -> bool:
    """The chunk in flight's source gives its recorded checksum (``pending_source``)."""
    step = plan.step(pending.index)
    data = bytearray(sectorio.read_sectors(target, step.src, step.count, ss))
    return pending_source(step, data, pending, saved, ss) is not None


def pending_source(step: Step, data: bytearray, pending: Read, saved: Saved, ss: int) -> bytes | None:
    """The chunk in flight's source as it was read, from ``data`` (its source as the disk holds it now): as it
    is (its write had not reached its own source, or a rollback put it back), or with the old bytes its own
    write overwrote taken from the journal's slot. None when neither gives its recorded checksum."""
    if digest(bytes(data)) == pending.digest:
        return bytes(data)
    part = step.saved
    if part is None or not pending.saved:
        return None
    try:
        old = saved(pending.index, part.size * ss)
    except OSError:
        return None
    if digest(old) != pending.saved:
        return None
    lo = (part.start - step.src) * ss
    data[lo : lo + len(old)] = old
    return bytes(data) if digest(bytes(data)) == pending.digest else None


def old_place_holds(target: str, h: Header) -> list[str]:
    """Refusals when the old place does not hold the filesystem blkid saw there when the move began."""
    if not h.fs:
        return []
    try:
        with fscheck.view(target, h.start * h.sector_size, h.length * h.sector_size) as loop:
            now = fscheck.identify(loop)
    except fscheck.CheckError as exc:
        return [f"the old place of partition {h.number} cannot be checked: {exc}"]
    was = fscheck.Identity(h.fs, h.fs_uuid, h.fs_label)
    if (now.fs, now.uuid, now.label) == (was.fs, was.uuid, was.label):
        return []
    return [f"the old place of partition {h.number} ({h.start}..{h.end}) of {target} holds {now}, not the {was} "
            f"the journal recorded on {h.target}: not the disk or the partition the move ran on; nothing was written"]
