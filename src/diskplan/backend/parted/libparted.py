"""The one module that imports pyparted: read a table into the model, write a table from it.

libparted asks questions ("Fix/Ignore/Cancel?") through an exception handler; pyparted's default answers
Cancel, which fails to load tables with a missing backup GPT or a partition past the end. Ours answers
Ignore when reading (showing what is there is harmless) and records every message for the user.
Callers read through ``backend.read.reader`` (a forked child) so a libparted crash cannot take them down.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import _ped

from diskplan.backend.parted import isolate, readonly, siblings
from diskplan.backend.raw.gptcheck import GptState, check_gpt, copies_differ
from diskplan.backend.raw.rawtable import mbr_layout
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.table import GPT_ENTRY_BYTES, MBR_LIMIT_SECTORS, Region, Table, gpt_entry_sectors


class _PartedOnFirstUse:
    """Stands for pyparted's parted package until a write first uses it, then puts the package in its place."""

    def __getattr__(self, name: str) -> object:
        import parted as package

        globals()["parted"] = package
        return getattr(package, name)


TYPE_CHECKING = False  # the reading child does without importing typing (~3 ms of its read)
if TYPE_CHECKING:
    from typing import Any

    import parted

    from diskplan.model.ptypes import PartType
else:
    # Reading is done on pyparted's _ped objects; the parted package (its wrappers over them, ~8 ms to import:
    # decimal, platform, a flag table built at import) is loaded at its first use, by a write.
    parted = _PartedOnFirstUse()

WRITABLE_LABELS = ("gpt", "msdos")


class BackendError(Exception):
    """libparted refused: one line a user can read."""


_messages: list[str] = []


def _handler(kind: int, options: int, message: str) -> int:
    _messages.append(" ".join(message.split()))
    if options in (
        _ped.EXCEPTION_OPT_IGNORE_CANCEL,
        _ped.EXCEPTION_OPT_RETRY_IGNORE_CANCEL,
    ):
        return int(_ped.EXCEPTION_RESOLVE_IGNORE)
    if options == _ped.EXCEPTION_OPT_OK_CANCEL and kind in (
        _ped.EXCEPTION_TYPE_INFORMATION,
        _ped.EXCEPTION_TYPE_WARNING,
    ):
        return int(_ped.EXCEPTION_RESOLVE_OK)
    if options in (_ped.EXCEPTION_OPT_YES_NO, _ped.EXCEPTION_OPT_YES_NO_CANCEL):
        return int(_ped.EXCEPTION_RESOLVE_NO)  # never let libparted "fix" a table while we only read it
    return int(_ped.EXCEPTION_RESOLVE_CANCEL)


def _opened_read_only(message: str) -> bool:
    """libparted's warning that it fell back to a read-only open: what a read asks for (backend.parted.readonly)."""
    return message.startswith("Unable to open ") and message.endswith("has been opened read-only.")


def _read_handler(kind: int, options: int, message: str) -> int:
    """While only reading: Ignore when offered, else OK ("the primary appears OK, so that will be used"),
    else No (never "Fix": nothing is committed, but the user should see the table as it is). libparted's
    word that it opened the device read-only is what a read wants: not kept."""
    if _opened_read_only(" ".join(message.split())):
        return int(_ped.EXCEPTION_RESOLVE_OK)
    _messages.append(" ".join(message.split()))
    for answer in (_ped.EXCEPTION_RESOLVE_IGNORE, _ped.EXCEPTION_RESOLVE_OK, _ped.EXCEPTION_RESOLVE_NO):
        if options & answer:
            _went_on.add(_messages[-1])
            return int(answer)
    return int(_ped.EXCEPTION_RESOLVE_CANCEL)


_went_on: set[str] = set()  # messages _read_handler answered so that libparted would go on


# pyparted 3.13's register_exn_handler stores the function without taking a reference and drops one
# from the function it replaces. Unbalanced, the second swap in one process frees a handler that is
# still in use (SIGSEGV in func_dealloc): a child that writes and then reads back did exactly that.
# Each registration hands pyparted a reference of its own, kept here; a few entries per process.
_pyparted_refs: list[Callable[[int, int, str], int]] = []


def _register(handler: Callable[[int, int, str], int]) -> None:
    _pyparted_refs.append(handler)
    _ped.register_exn_handler(handler)


@contextmanager
def answering(handler: Callable[[int, int, str], int] = _handler) -> Iterator[list[str]]:
    """Install our handler for the duration; yields the list that collects libparted's messages."""
    _messages.clear()
    _register(handler)
    try:
        yield _messages
    finally:
        _register(_handler)


def _raw_types(path: str, label: str, sector: int, gpt: GptState | None) -> dict[int, str]:
    """Type GUIDs and MBR ids straight from the table: libparted 3.5 cannot report them."""
    try:
        if label == "gpt":
            good = gpt.good if gpt else None
            return {e.number: e.type_guid for e in good.entries} if good else {}
        if label == "msdos":
            layout = mbr_layout(path, sector, 1 << 62)
            if layout is None:
                return {}
            return {p.number: f"0x{p.type_id:02x}" for p in (*layout.primaries, *layout.logicals)}
    except OSError:
        pass
    return {}


def _ped_partitions(pdisk: _ped.Disk) -> Iterator[_ped.Partition]:
    """Every entry of libparted's partition list, metadata and free space included, in its order."""
    part = pdisk.next_partition()
    while part is not None:
        yield part
        part = pdisk.next_partition(part)


def _partition(part: _ped.Partition, named: bool, types: dict[int, str]) -> Partition:
    """Read on the _ped partition itself, as pyparted's Partition would, without the two setlocale() calls
    pyparted puts around every attribute (for 128 partitions they cost more than libparted's whole read)."""
    return Partition(
        number=part.num,
        start=part.geom.start,
        end=part.geom.end,
        type=types.get(part.num, ""),
        name=_ped_name(part) if named else "",
        flags=tuple(_flags_set(part)),
        role=_kind_role(part.type),
        state=State.EXISTING,
        fs=part.fs_type.name if part.fs_type is not None else "",
    )


def _gpt_usable(gpt: GptState | None, geom: Geometry) -> tuple[int, int]:
    """First and last usable LBA from the good GPT header (libparted does not expose them)."""
    good = gpt.good if gpt else None
    if good is not None and good.header is not None and 0 < good.header.first_usable <= good.header.last_usable:
        return good.header.first_usable, good.header.last_usable
    entries = gpt_entry_sectors(geom)
    return 2 + entries, geom.sectors - 2 - entries


def _regions(pdisk: _ped.Disk, label: str, geom: Geometry, first: int, last: int) -> tuple[Region, ...]:
    n = geom.sectors
    if label == "gpt":
        regions = [
            Region("pmbr", Extent(0, 0), "protective MBR"),
            Region("gpt-header", Extent(1, 1), "GPT header"),
        ]
        if first > 2:
            regions.append(Region("gpt-entries", Extent(2, first - 1), "GPT entries"))
        if last + 1 <= n - 2:
            regions.append(Region("gpt-entries", Extent(last + 1, n - 2), "backup GPT entries"))
        regions.append(Region("gpt-header", Extent(n - 1, n - 1), "backup GPT header"))
        return tuple(regions)
    regions = []
    for part in _ped_partitions(pdisk):
        if part.type & _ped.PARTITION_METADATA and part.geom.length > 0:
            g = part.geom
            inside_ext = bool(part.type & _ped.PARTITION_LOGICAL)
            if label == "msdos" and g.start == 0:
                regions.append(Region("mbr", Extent(0, 0), "MBR"))
                if g.end > 0:
                    regions.append(Region("metadata", Extent(1, g.end), "gap before the first partition"))
            elif label == "msdos" and not inside_ext and g.end == n - 1:
                # libparted keeps the disk's last partial track as metadata, but parted prints it as free
                # space and a partition may use it (issue 26): it is not the table's.
                continue
            else:
                kind = "ebr" if inside_ext else "metadata"
                regions.append(Region(kind, Extent(g.start, g.end), "EBR" if inside_ext else "metadata"))
    return tuple(regions)


def _probe_filesystem(device: _ped.Device) -> str:
    try:
        fs = _ped.file_system_probe(_ped.Geometry(device, 0, device.length))
        return str(fs.name) if fs is not None else ""
    except Exception:
        return ""


def _probed_label(device: _ped.Device) -> str | None:
    """The label libparted recognises, None when none at all (asked before newDisk, which would report
    that as an error indistinguishable from a damaged table)."""
    try:
        return str(device.disk_probe().name)
    except (_ped.IOException, _ped.PartedException, _ped.DiskException):
        return None


def _ped_device(path: str, read_only: bool = False) -> _ped.Device:
    """libparted's device for ``path``. ``read_only`` (a read, a preview): in a forked child, nothing can be
    opened for writing from now on (backend.parted.readonly), so libparted opens the device read-only and opens no
    partition node to flush it: no udev re-probe, no LVM auto-activation. Otherwise (or where that filter
    cannot be had), in a forked child, an image file is first made to stand alone in its directory, so
    libparted opens nothing but it for writing (backend.parted.siblings)."""
    if isolate.IN_CHILD and not (read_only and readonly.forbid_writes()):
        siblings.stand_alone(path)
    return _ped.device_get(path)


def _device(path: str, read_only: bool = False) -> parted.Device:
    """``_ped_device`` in pyparted's wrapper."""
    return parted.Device(PedDevice=_ped_device(path, read_only))


def read_disk(path: str, filesystems: bool = True) -> Disk:
    """Read ``path`` (image file or block device). Raises BackendError with a one-line reason.
    Run it in a child (backend.read.reader): some tables crash libparted. ``filesystems=False``: each
    partition's ``fs`` is left empty rather than probed (for 128 partitions, ~44,000 reads of one sector).

    The device is held open for the whole read: libparted fsyncs it each time it closes it, and a
    probe, a read and a filesystem probe each open and close it (an fsync of an unchanged image still
    flushes the disk's cache: milliseconds each, more than the read)."""
    with answering(_read_handler) as messages:
        try:
            try:
                device = _ped_device(path, read_only=True)
            except (_ped.PartedException, _ped.IOException, _ped.DeviceException) as exc:
                raise BackendError(f"cannot open {path}: {' '.join(str(exc).split())}") from exc
            held = _held_open(device, messages)
            try:
                return _read_disk(path, device, messages, filesystems)
            finally:
                if held:
                    device.close()
        finally:
            siblings.show_again()  # this process may go on to open other files of that directory


def _held_open(device: _ped.Device, messages: list[str]) -> bool:
    """Open ``device`` once more, so the opens inside libparted's calls nest in this one. False when it
    would not open: each call then opens it and says why, as before (what this attempt said is dropped)."""
    said = len(messages)
    try:
        device.open()
    except _PED_ERRORS:
        del messages[said:]
        return False
    return True


def _read_disk(path: str, device: _ped.Device, messages: list[str], filesystems: bool) -> Disk:
    geom = Geometry(
        sectors=device.length,
        logical=device.sector_size,
        physical=max(device.phys_sector_size, device.sector_size),
        path=path,
        model=device.model or "",
    )
    if device.length <= 0:
        raise BackendError(f"{path} is empty: no sectors to hold a table")
    probed = _probed_label(device)
    if probed is None:
        fs = _probe_filesystem(device)
        messages.clear()  # "unrecognised disk label" is what no table means, not a message
        return Disk(geom, Table(None, 0, geom.sectors - 1), path, filesystem=fs)
    # ("loop", a filesystem on the whole device, is recognised by probing filesystems: kept for it)
    probing = filesystems or probed == "loop"
    try:
        with contextlib.nullcontext() if probing else _no_filesystem_probing():
            pdisk = _ped.disk_new(device)
    except (_ped.PartedException, _ped.IOException, _ped.DiskException, _ped.DiskLabelException) as exc:
        reason = " ".join(str(exc).split()) or (messages[-1] if messages else "unreadable table")
        if reason in _went_on:  # pyparted repeats a question we answered; the failure came later, unsaid
            reason = f"it failed after saying: {reason}"
        raise BackendError(f"libparted refused it: {reason}") from exc
    label = str(pdisk.type.name)
    if label == "loop":  # libparted's name for a filesystem on the whole device, not a table
        fs = next((q.fs_type.name for q in _walk(pdisk) if q.fs_type), "") or _probe_filesystem(device)
        return Disk(geom, Table(None, 0, geom.sectors - 1), path, filesystem=fs, messages=tuple(messages))
    gpt = check_gpt(path, geom.logical, geom.sectors) if label == "gpt" else None
    if label == "gpt":
        first, last = _gpt_usable(gpt, geom)
    elif label == "msdos":
        first, last = 1, min(geom.sectors, MBR_LIMIT_SECTORS) - 1
    else:
        first, last = 0, geom.sectors - 1
    types = _raw_types(path, label, geom.logical, gpt)
    named = bool(pdisk.type.check_feature(_ped.DISK_TYPE_PARTITION_NAME))
    parts = tuple(sorted((_partition(q, named, types) for q in _walk(pdisk)), key=lambda p: (p.start, p.number)))
    read_only = ""
    if label not in WRITABLE_LABELS:
        read_only = f"diskplan writes gpt and msdos tables; this one is {label}"
    max_parts = 4
    if label == "gpt":
        good = gpt.good if gpt else None
        max_parts = good.header.entry_count if good and good.header else 128
    table = Table(
        label=label,
        first_usable=first,
        last_usable=last,
        partitions=parts,
        metadata=_regions(pdisk, label, geom, first, last),
        max_partitions=max_parts,  # maxSupportedPartitionCount aborts in 3.5
        read_only=read_only,
    )
    return Disk(geom, table, path, messages=tuple(messages))


# --- writing ---------------------------------------------------------------------------------------
# The plan reaches libparted as: a label, whether to start from an empty table (``fresh``), the current
# partitions to delete (by extent: msdos renumbers logical partitions), the partitions to create (exact
# extent and number) and kept partitions whose name, type or flags change. Kept partitions are never
# deleted and re-added, so their GUIDs, attributes and data stay as they are.

_PED_ERRORS: tuple[type[BaseException], ...] = tuple(
    v for k, v in vars(_ped).items() if k.endswith("Exception") and isinstance(v, type) and issubclass(v, Exception)
)
_KIND = {
    Role.PRIMARY: _ped.PARTITION_NORMAL,
    Role.EXTENDED: _ped.PARTITION_EXTENDED,
    Role.LOGICAL: _ped.PARTITION_LOGICAL,
}
# The type registry (model.ptypes, model.labels: their tables, ~0.8 ms) is a write's: the reading child starts
# without it (a read takes the types from the raw table).
@functools.cache
def _type_flags() -> frozenset[str]:
    """Flags that choose a partition's type in libparted 3.5: cleared before another type is set."""
    from diskplan.model import ptypes

    return frozenset(t.flag for t in ptypes.TYPES if t.flag) | {"boot"}


# Flag names to libparted's codes. Flags are read and set on the _ped partition itself: pyparted wraps
# every call in two setlocale() calls (for untranslated messages; our children never set LC_MESSAGES),
# which made setting 128 partitions' attributes cost more than building the table.
def _flag_table() -> dict[str, int]:
    """Every partition flag libparted knows, by name (as pyparted's partitionFlag, without importing it)."""
    codes, code = {}, _ped.partition_flag_next(0)
    while code:
        codes[_ped.partition_flag_get_name(code)] = int(code)
        code = _ped.partition_flag_next(code)
    return codes


_FLAG_CODES = _flag_table()


def _flag_code(name: str) -> int | None:
    return _FLAG_CODES.get(name)


@functools.cache  # a 128-partition plan names the same type 128 times
def _lookup(text: str) -> PartType | None:
    from diskplan.model import ptypes

    return ptypes.lookup(text)


def _flags_set(ped: _ped.Partition) -> list[str]:
    return [name for name, code in _FLAG_CODES.items() if ped.get_flag(code)]


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


def _walk(pdisk: _ped.Disk) -> Iterator[_ped.Partition]:
    """The real partitions of ``pdisk`` (no free space or metadata), as pyparted's ``Disk.partitions``."""
    hidden = _ped.PARTITION_FREESPACE | _ped.PARTITION_METADATA | _ped.PARTITION_PROTECTED
    return (q for q in _ped_partitions(pdisk) if not q.type & hidden)


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
        from diskplan.backend.raw import kernelparts  # (writes only: the reading child does without, ~0.4 ms)

        stale = kernelparts.sync(path, kernelparts.wanted(placed(disk)), sector_size)
        return not stale, "; ".join(stale), tuple(messages)


def _ped_name(q: _ped.Partition) -> str:
    try:
        return q.get_name() or ""
    except (_ped.PartedException, _ped.PartitionException):  # (pyparted's Partition.name gives None for the latter)
        return ""


@functools.cache
def _fs_type_calls() -> tuple[Any, Any, Any] | None:
    """libparted's get_next, unregister and register of filesystem types (looked up once: a child that reads
    many images asks for each), or None when they cannot be reached."""
    try:
        import ctypes

        lib = ctypes.CDLL(_ped.__file__, mode=os.RTLD_NOLOAD)  # dlsym also searches its libparted
        get_next, unregister = lib.ped_file_system_type_get_next, lib.ped_file_system_type_unregister
        register = lib.ped_file_system_type_register
    except (OSError, AttributeError, ImportError):
        return None
    get_next.restype, get_next.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    unregister.restype, unregister.argtypes = None, [ctypes.c_void_p]
    register.restype, register.argtypes = None, [ctypes.c_void_p]
    return get_next, unregister, register


@contextmanager
def _no_filesystem_probing() -> Iterator[None]:
    """Take libparted's filesystem types off its list for the duration. Reading a table otherwise probes
    every partition for each of them (128 partitions: 44,000 reads, 60 ms), and the comparison after a
    write looks at the table, not at what the partitions hold. Public libparted API, reached through the
    library _ped is linked with; when it cannot be reached, probing simply stays. The list is put back
    as it was (libparted's own clean-up at exit unregisters every type and asserts that each is there)."""
    taken: list[int] = []
    calls = _fs_type_calls()
    if calls is None:
        yield
        return
    get_next, unregister, register = calls
    try:
        while len(taken) < 256 and (fs_type := get_next(None)):  # libparted 3.5 has about twenty
            unregister(fs_type)
            taken.append(fs_type)
        yield
    finally:
        for fs_type in reversed(taken):  # register() puts each at the head: the list ends up as it was
            register(fs_type)


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

        types = _raw_types(path, label, sector_size, gpt)
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
