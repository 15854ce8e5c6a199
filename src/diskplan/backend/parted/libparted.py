"""The parted backend's model side: read a table into the model, write a table from it. pyparted is imported
here and in backend.parted.pedread only (libparted's read as plain rows, and what every call into it shares).

libparted asks questions ("Fix/Ignore/Cancel?") through an exception handler; pyparted's default answers
Cancel, which fails to load tables with a missing backup GPT or a partition past the end. Ours answers
Ignore when reading (showing what is there is harmless) and records every message for the user.
Callers read through ``backend.read.reader`` (a forked child) so a libparted crash cannot take them down.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator

import _ped

from diskplan.backend.parted import siblings
from diskplan.backend.parted.pedread import (
    _FLAG_CODES,
    _PED_ERRORS,
    _flag_code,
    _flags_set,
    _held_open,
    _messages,
    _no_filesystem_probing,
    _opened_read_only,
    _ped_device,
    _ped_name,
    _read_handler,
    _walk,
    read_rows,
)
from diskplan.backend.parted.pedread import BackendError as BackendError  # (its callers': pedread's)
from diskplan.backend.parted.pedread import answering as answering
from diskplan.backend.parted.pedrows import disk_from_rows, raw_types
from diskplan.backend.raw.gptcheck import check_gpt, copies_differ
from diskplan.backend.raw.rawtable import mbr_layout
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.table import GPT_ENTRY_BYTES, Table


class _PartedOnFirstUse:
    """Stands for pyparted's parted package until a write first uses it, then puts the package in its place."""

    def __getattr__(self, name: str) -> object:
        import parted as package

        globals()["parted"] = package
        return getattr(package, name)


TYPE_CHECKING = False  # a child that reads and writes does without importing typing (~3 ms)
if TYPE_CHECKING:
    import parted

    from diskplan.model.ptypes import PartType
else:
    # Reading is done on pyparted's _ped objects; the parted package (its wrappers over them, ~8 ms to import:
    # decimal, platform, a flag table built at import) is loaded at its first use, by a write.
    parted = _PartedOnFirstUse()

def _device(path: str, read_only: bool = False) -> parted.Device:
    """``_ped_device`` in pyparted's wrapper."""
    return parted.Device(PedDevice=_ped_device(path, read_only))


def read_disk(path: str, filesystems: bool = True) -> Disk:
    """Read ``path`` (image file or block device) into the model. Raises BackendError with a one-line reason.
    Run it in a child (backend.read.reader): some tables crash libparted. ``filesystems=False``: each
    partition's ``fs`` is left empty rather than probed. A reading child that sends its answer to a parent
    sends ``pedread.read_rows`` instead, which the parent makes a Disk (``pedrows.disk_from_rows``)."""
    return disk_from_rows(path, read_rows(path, filesystems))


# --- writing ---------------------------------------------------------------------------------------
# The plan reaches libparted as: a label, whether to start from an empty table (``fresh``), the current
# partitions to delete (by extent: msdos renumbers logical partitions), the partitions to create (exact
# extent and number) and kept partitions whose name, type or flags change. Kept partitions are never
# deleted and re-added, so their GUIDs, attributes and data stay as they are.

_KIND = {
    Role.PRIMARY: _ped.PARTITION_NORMAL,
    Role.EXTENDED: _ped.PARTITION_EXTENDED,
    Role.LOGICAL: _ped.PARTITION_LOGICAL,
}
# The type registry (model.ptypes, model.labels: their tables, ~0.8 ms) is a write's: a read does without it (it
# takes the types from the raw table).
@functools.cache
def _type_flags() -> frozenset[str]:
    """Flags that choose a partition's type in libparted 3.5: cleared before another type is set."""
    from diskplan.model import ptypes

    return frozenset(t.flag for t in ptypes.TYPES if t.flag) | {"boot"}


@functools.cache  # a 128-partition plan names the same type 128 times
def _lookup(text: str) -> PartType | None:
    from diskplan.model import ptypes

    return ptypes.lookup(text)


def _kind_role(kind: int) -> Role:
    if kind & _ped.PARTITION_EXTENDED:
        return Role.EXTENDED
    if kind & _ped.PARTITION_LOGICAL:
        return Role.LOGICAL
    return Role.PRIMARY


def _set_type(ped: _ped.Partition, p: Partition, label: str) -> None:
    """libparted 3.5 sets a type GUID / MBR id only through a flag or a filesystem type. A GPT type it
    cannot express is left to the raw patch after the commit (backend.raw.gptpatch); an MBR id it cannot
    express is refused rather than written as another."""
    if not p.type or p.role is Role.EXTENDED:
        return
    t = _lookup(p.type)
    if label == "gpt" and (t is None or t.gpt is None or not (t.fs or t.flag)):
        return
    if t is None or (label == "gpt" and t.gpt is None) or (label == "msdos" and t.mbr is None) or not (t.fs or t.flag):
        raise BackendError(f"libparted 3.5 cannot give partition {p.number} the {label} type {p.type}")
    flag = _flag_code(t.flag) if t.flag else None
    if t.fs is None and (flag is None or not ped.is_flag_available(flag)):
        if label == "gpt":
            return
        raise BackendError(f"libparted 3.5 cannot give partition {p.number} the {label} type {p.type}")
    for name in _flags_set(ped):
        if name in _type_flags() and name != "boot":
            ped.set_flag(_FLAG_CODES[name], 0)
    if t.fs:
        ped.set_system(parted.fileSystemType[t.fs])
    if flag is not None and ped.is_flag_available(flag):
        ped.set_flag(flag, 1)


def _set_extended_type(ped: _ped.Partition, p: Partition) -> None:
    """An msdos extended partition's id is libparted's LBA flag: on gives 0x0f, off 0x05. Its default is
    on for a device and off for an image file, so a plan's id is set, never left to that; 0x85 (Linux
    extended) it cannot write at all."""
    if not p.type:
        return
    from diskplan.model.plan.operations import type_key  # (a write's: a read's child starts without it)

    code = type_key("msdos", p.type)
    if code not in ("0x0f", "0x05"):
        raise BackendError(f"libparted 3.5 cannot give the extended partition {p.number} the type {p.type}")
    lba = _flag_code("lba")
    if lba is None or not ped.is_flag_available(lba):
        raise BackendError(f"libparted 3.5 cannot set the type of the extended partition {p.number}")
    ped.set_flag(lba, int(code == "0x0f"))


def _set_attributes(ped: _ped.Partition, p: Partition, label: str, named: bool) -> None:
    """Type, GPT name and attribute flags exactly as ``p`` says (flags it does not name are cleared).
    ``named``: the label has partition names."""
    if p.role is Role.EXTENDED:
        _set_extended_type(ped, p)
        return
    _set_type(ped, p, label)
    if named and (p.name or _ped_name(ped)):
        ped.set_name(p.name)
    from diskplan.model.labels import attribute_flags
    from diskplan.model.plan.operations import ATTRIBUTE_FLAGS  # (a write's: a read's child starts without it)

    settable = ATTRIBUTE_FLAGS.get(label, ())
    for flag in p.flags:  # type flags ("esp", "swap") are the type's business: _set_type set them
        # the GPT bits libparted 3.5 cannot set (1, 48-63) are written by the raw patch after the commit
        if flag not in settable and flag not in _type_flags() and flag not in attribute_flags(label):
            raise BackendError(f"libparted 3.5 cannot set the {flag} flag of partition {p.number} on {label}")
    for name in settable:
        code = _flag_code(name)
        if code is None or not ped.is_flag_available(code):
            if name in p.flags:
                raise BackendError(f"libparted has no {name} flag for partition {p.number} on {label}")
            continue
        want = name in p.flags
        if bool(ped.get_flag(code)) != want:
            ped.set_flag(code, int(want))


def _add(disk: parted.Disk, start: int, end: int, role: Role) -> _ped.Partition:
    """Add a partition at exactly start..end. On the _ped disk (pyparted's wrappers cost more than
    libparted's work); pyparted's cached partition list is invalidated as its own addPartition does."""
    pdisk = disk.getPedDisk()
    try:
        part = _ped.Partition(pdisk, _KIND[role], start, end)
        # By length: a one-sector geometry is fine this way.
        pdisk.add_partition(part, _ped.constraint_exact(_ped.Geometry(pdisk.dev, start, end - start + 1)))
    except _PED_ERRORS as exc:
        reason = " ".join(str(exc).split())
        raise BackendError(f"libparted cannot place a partition at {start}..{end}: {reason}") from exc
    finally:
        disk.partitions.invalidate()
    return part


def _spare_sectors(disk: parted.Disk, avoid: list[Extent]) -> Iterator[int]:
    """Candidate one-sector spots outside any extended partition that no planned partition will use:
    both ends of every free run (libparted's free space can include sectors the label will not accept,
    such as those before a GPT's first usable LBA, so callers try the next one)."""
    for free in disk.getFreeSpacePartitions():
        if free.type & parted.PARTITION_LOGICAL:
            continue
        runs = [Extent(free.geometry.start, free.geometry.end)]
        for e in avoid:
            runs = [piece for r in runs for piece in _minus(r, e)]
        for r in runs:
            yield from dict.fromkeys((r.end, r.start))


def _minus(run: Extent, hole: Extent) -> list[Extent]:
    if not run.overlaps(hole):
        return [run]
    out = []
    if run.start < hole.start:
        out.append(Extent(run.start, hole.start - 1))
    if run.end > hole.end:
        out.append(Extent(hole.end + 1, run.end))
    return out


def _add_numbered(disk: parted.Disk, p: Partition, spare: Iterator[int], used: set[int]) -> _ped.Partition:
    """libparted gives a new partition the lowest free number and pyparted cannot set one: fill the
    lower free numbers with one-sector placeholders, add, then drop the placeholders. ``used``: the
    numbers taken so far (kept up to date by the caller: asking pyparted for ``disk.partitions`` builds
    a Python object per partition, which made 128 creations quadratic)."""
    placeholders = []
    for number in range(1, p.number):
        if number in used:
            continue
        for lba in spare:
            said = len(_messages)
            try:
                placeholders.append(_add(disk, lba, lba, Role.PRIMARY))
                break
            except BackendError:
                del _messages[said:]  # a refused spot is not news: try the next one
                continue
        else:
            raise BackendError(f"no free sector to hold number {number} open while creating partition {p.number}")
    part = _add(disk, p.start, p.end, p.role)
    pdisk = disk.getPedDisk()
    for q in placeholders:
        pdisk.delete_partition(q)
    disk.partitions.invalidate()
    if part.num != p.number:
        raise BackendError(f"libparted numbered the partition at {p.start}..{p.end} {part.num}, not {p.number}")
    return part


def build_disk(
    device: parted.Device,
    label: str,
    *,
    fresh: bool,
    delete: tuple[Extent, ...] = (),
    create: tuple[Partition, ...] = (),
    change: tuple[Partition, ...] = (),
) -> parted.Disk:
    """The new table as a parted Disk in memory; nothing is written. Raises BackendError when libparted
    cannot hold the plan exactly (a partition it would move, a number or type it cannot give)."""
    if fresh:
        disk = parted.freshDisk(device, label)
    else:
        disk = parted.newDisk(device)
        if disk.type != label:
            raise BackendError(f"the disk holds a {disk.type} table, not {label}: a new label must start empty")
    if disk.isFlagAvailable(parted.DISK_CYLINDER_ALIGNMENT):
        disk.unsetFlag(parted.DISK_CYLINDER_ALIGNMENT)  # otherwise msdos snaps partitions to cylinders
    order = {Role.LOGICAL: 0, Role.PRIMARY: 1, Role.EXTENDED: 2}  # logical ones live inside the extended one
    # One walk over the existing partitions (pyparted builds an object per partition for every walk).
    at = {} if fresh else {(q.geometry.start, q.geometry.end): q for q in disk.partitions}
    doomed = [at.get((e.start, e.end)) for e in delete]
    for part in sorted((q for q in doomed if q is not None), key=lambda q: order[_kind_role(q.type)]):
        disk.deletePartition(part)
    if None in doomed:
        missing = [f"{e.start}..{e.end}" for e, q in zip(delete, doomed, strict=True) if q is None]
        raise BackendError(f"no partition to delete at {', '.join(missing)}: the disk changed since it was read")
    named = disk.supportsFeature(parted.DISK_TYPE_PARTITION_NAME)
    for p in change:
        kept = at.get((p.start, p.end))
        if kept is None or any(kept is q for q in doomed):
            raise BackendError(f"partition {p.number} is no longer at {p.start}..{p.end}")
        _set_attributes(kept.getPedPartition(), p, label, named)
    # Numbers after the deletions (msdos renumbers logical partitions when one goes).
    used = set() if fresh else {q.number for q in disk.partitions if q.number > 0}
    avoid = [p.extent for p in create]
    spare = _spare_sectors(disk, avoid)
    for p in sorted(create, key=lambda p: (p.role is Role.LOGICAL, p.number)):
        if p.role is Role.LOGICAL:
            new = _add(disk, p.start, p.end, p.role)
            if new.num != p.number:
                raise BackendError(f"libparted numbered the logical partition at {p.start} {new.num}, not {p.number}")
        else:
            new = _add_numbered(disk, p, spare, used)
        used.add(new.num)
        _set_attributes(new, p, label, named)
    return disk


def placed(disk: parted.Disk) -> tuple[Partition, ...]:
    """Number, extent and role of every partition in the in-memory table."""
    return _placed(disk.getPedDisk())


def _placed(pdisk: _ped.Disk) -> tuple[Partition, ...]:
    parts = (Partition(q.num, q.geom.start, q.geom.end, role=_kind_role(q.type)) for q in _walk(pdisk))
    return tuple(sorted(parts, key=lambda p: p.number))


def table_sectors(disk: parted.Disk) -> tuple[Extent, ...]:
    """The sectors a commit of ``disk`` writes: MBR or protective MBR, GPT headers and entry arrays,
    and for msdos every EBR (libparted puts each one at the start of the gap before its partition)."""
    n, ss = disk.device.length, disk.device.sectorSize
    if disk.type == "gpt":
        entries = -(-GPT_ENTRY_BYTES // ss)
        return (Extent(0, 1 + entries), Extent(n - 1 - entries, n - 1))
    out = [Extent(0, 0)]
    ext = disk.getExtendedPartition()
    if ext is not None:
        out.append(Extent(ext.geometry.start, ext.geometry.start))
    prev = None
    part = disk.getFirstPartition()
    while part is not None:
        real = not part.type & (parted.PARTITION_METADATA | parted.PARTITION_FREESPACE)
        if part.type & parted.PARTITION_LOGICAL and real and prev is not None:
            out.append(Extent(prev.geometry.start, prev.geometry.start))
        prev = part
        part = part.nextPartition()
    return tuple(sorted(set(out)))


def preview_table(
    path: str,
    label: str,
    *,
    fresh: bool,
    delete: tuple[Extent, ...] = (),
    create: tuple[Partition, ...] = (),
    change: tuple[Partition, ...] = (),
) -> tuple[tuple[Partition, ...], tuple[Extent, ...], tuple[str, ...]]:
    """Build the new table in memory only: what libparted would write (partitions as placed, sectors
    written, its messages). Run it in a child (backend.parted.isolate)."""
    with answering() as messages:
        try:
            device = _device(path, read_only=True)
            disk = build_disk(device, label, fresh=fresh, delete=delete, create=create, change=change)
            return placed(disk), table_sectors(disk), tuple(m for m in messages if not _opened_read_only(m))
        except _PED_ERRORS as exc:
            detail = " ".join(str(exc).split()) or (messages[-1] if messages else "")
            raise BackendError(f"libparted cannot build this table: {detail}") from exc


def commit_table(
    path: str,
    label: str,
    *,
    fresh: bool,
    delete: tuple[Extent, ...] = (),
    create: tuple[Partition, ...] = (),
    change: tuple[Partition, ...] = (),
    sectors: int,
    sector_size: int,
    expect: tuple[Partition, ...] | None = None,
    after_write: Callable[[], None] | None = None,
) -> tuple[bool, str, tuple[str, ...]]:
    """Write the new table with one libparted commit, then tell the kernel (block devices only).

    Returns (kernel told, why not, libparted's messages). Raises BackendError, having written nothing,
    when the device is not the one that was read (``sectors``/``sector_size``), or when libparted would
    place anything other than ``expect``. ``after_write`` runs between the write and the kernel update
    (tests inject faults there). Run it in a child (backend.parted.isolate)."""
    # Only a write needs it: a read's child starts without it.
    from diskplan.backend.raw.sectorio import DiskIOError, device_size

    with answering() as messages:
        try:
            size = device_size(path)
        except OSError as exc:
            raise BackendError(f"{path} is gone: {exc.strerror}") from exc
        except DiskIOError as exc:  # no longer a disk or an image file
            raise BackendError(str(exc)) from exc
        if size != sectors * sector_size:
            was = sectors * sector_size
            raise BackendError(f"{path} now has {size} bytes, not the {was} that were read: it vanished or changed")
        try:
            device = _device(path)
            if (device.length, device.sectorSize) != (sectors, sector_size):
                raise BackendError(f"{path} changed: {device.length} sectors of {device.sectorSize} B")
            disk = build_disk(device, label, fresh=fresh, delete=delete, create=create, change=change)
            if expect is not None and placed(disk) != expect:
                raise BackendError("libparted would not place the partitions exactly as planned; nothing written")
            boot_code = b""
            if label == "msdos" and not fresh:
                with open(path, "rb") as f:
                    boot_code = f.read(446)
            disk.commitToDevice()
        except _PED_ERRORS as exc:
            detail = " ".join(str(exc).split()) or (messages[-1] if messages else "")
            raise BackendError(f"libparted could not write {path}: {detail}") from exc
        if boot_code:
            _keep_boot_code(path, boot_code)
        if after_write is not None:
            after_write()
        if device.type == parted.DEVICE_FILE:
            return True, "", tuple(messages)
        # not libparted's commitToOS: Debian's runs `udevadm settle` under our lock (backend.raw.kernelparts)
        from diskplan.backend.raw import kernelparts  # (writes only: a read does without, ~0.4 ms)

        stale = kernelparts.sync(path, kernelparts.wanted(placed(disk)), sector_size)
        return not stale, "; ".join(stale), tuple(messages)


def read_back(path: str, sectors: int, sector_size: int) -> tuple[Table, tuple[str, ...]]:
    """What ``path`` holds now, for verifying a write: a new libparted disk read from the device (not
    the one that was committed), with types and attribute bits from the raw entries, and what is wrong
    with the raw bytes themselves (a GPT copy failing its CRCs, copies that disagree, a broken EBR chain).
    Returns (table, problems); raises BackendError when libparted cannot read it at all. Run it in a child: the commit
    child calls it right after the write, so writing and verifying cost one fork.

    Lean on purpose (it runs on every write): no filesystem probing, partitions walked on the _ped disk
    without pyparted's per-call locale switching, none of the reader's findings."""
    with answering(_read_handler):
        try:
            device = _device(path)
            with _no_filesystem_probing():
                disk = parted.newDisk(device)
        except _PED_ERRORS as exc:
            raise BackendError(f"libparted cannot read it back: {' '.join(str(exc).split())}") from exc
        label = disk.type
        problems: list[str] = []
        gpt = check_gpt(path, sector_size, sectors) if label == "gpt" else None
        if gpt is not None:
            problems += [f"the {c.which} GPT {c.problem}" for c in (gpt.primary, gpt.backup) if c.problem]
            differ = copies_differ(gpt)
            if differ:
                problems.append(f"the two GPT copies differ: {differ}")
        elif label == "gpt":
            problems.append("no GPT header is readable")
        if label == "msdos":
            layout = mbr_layout(path, sector_size, sectors)
            if layout is not None:
                problems += [f"the extended partition {n} has no EBR at LBA {lba}" for n, lba in layout.missing_ebr]
                problems += [f"the EBR chain of partition {n} is damaged: {why}" for n, why in layout.chain_problems]
        from diskplan.model.labels import gpt_attribute_flags

        types = raw_types(path, label, sector_size, gpt)
        bits = {e.number: e.attributes for e in gpt.good.entries} if gpt is not None and gpt.good else {}
        named = disk.supportsFeature(parted.DISK_TYPE_PARTITION_NAME)
        parts = [
            Partition(
                number=q.num, start=q.geom.start, end=q.geom.end, type=types.get(q.num, ""),
                name=_ped_name(q) if named else "", role=_kind_role(q.type),
                flags=tuple(sorted({*_flags_set(q), *gpt_attribute_flags(bits.get(q.num, 0))})),
                state=State.EXISTING,
            )
            for q in _walk(disk.getPedDisk())
        ]
        ordered = tuple(sorted(parts, key=lambda p: (p.start, p.number)))
        return Table(label=label, first_usable=0, last_usable=sectors - 1, partitions=ordered), tuple(problems)


def _keep_boot_code(path: str, old: bytes) -> None:
    """libparted 3.5 replaces an msdos boot area that starts with a zero byte with its own boot code and
    a new random disk identifier, which changes every kept partition's PARTUUID. Put the old one back."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        if os.pread(fd, len(old), 0) != old:
            os.pwrite(fd, old, 0)
            os.fsync(fd)
    finally:
        os.close(fd)


def inform_kernel(path: str) -> tuple[bool, str]:
    """Make the kernel's partition list match the table now on ``path`` (after a restore, a move, a
    repair): the partitions libparted reads, told one by one and checked (backend.raw.kernelparts). An empty
    list when there is no table. Returns (told, why not)."""
    with answering(_read_handler) as messages:
        try:
            # Read only, as every read (``_ped_device``): the table was written and synced before this is asked,
            # through the same device, so libparted's flush of every partition node (opened for writing, which
            # udev and LVM react to) adds nothing; nor does loading pyparted's wrapper package (_ped reads).
            device = _ped_device(path, read_only=True)
            if device.type == _ped.DEVICE_FILE:
                return True, ""
            held = _held_open(device, messages)
            try:
                parts = _placed(_ped.disk_new(device))
            except _PED_ERRORS:
                parts = ()  # no table: the kernel must hold no partitions either
            finally:
                if held:
                    device.close()
            sector_size = device.sector_size
        except _PED_ERRORS as exc:
            return False, " ".join(str(exc).split()) or "libparted could not read the table"
        finally:
            siblings.show_again()
    from diskplan.backend.raw import kernelparts

    stale = kernelparts.sync(path, kernelparts.wanted(parts), sector_size)
    return not stale, "; ".join(stale)


def write_table(path: str, label: str, partitions: tuple[Partition, ...]) -> None:
    """Write ``partitions`` to ``path`` on an empty ``label`` table in one commit, exactly where they are
    (for fixtures and demos: no backup, no checks; the user path is backend.write.commit)."""
    live = tuple(p for p in partitions if p.state is not State.DELETE)
    with answering() as messages:
        try:
            device = _device(path)
            disk = build_disk(device, label, fresh=True, create=live)
            got = sorted((p.geometry.start, p.geometry.end) for p in disk.partitions)
            want = sorted((p.start, p.end) for p in live)
            if got != want:
                raise BackendError(f"libparted placed partitions at {got}, not {want}")
            disk.commit()
        except _PED_ERRORS as exc:
            detail = " ".join(str(exc).split()) or (messages[-1] if messages else "")
            raise BackendError(f"libparted refused to write {path}: {detail}") from exc
