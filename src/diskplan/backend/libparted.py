"""The one module that imports pyparted: read a table into the model, write a table from it.

libparted asks questions ("Fix/Ignore/Cancel?") through an exception handler; pyparted's default answers
Cancel, which fails to load tables with a missing backup GPT or a partition past the end. Ours answers
Ignore when reading (showing what is there is harmless) and records every message for the user.
Callers read through ``backend.reader`` (a forked child) so a libparted crash cannot take them down.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import _ped
import parted

from diskplan.backend.rawtable import gpt_types, msdos_types
from diskplan.model import ptypes
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.table import MBR_LIMIT_SECTORS, Region, Table, gpt_entry_sectors

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
        return _ped.EXCEPTION_RESOLVE_IGNORE
    if options == _ped.EXCEPTION_OPT_OK_CANCEL and kind in (
        _ped.EXCEPTION_TYPE_INFORMATION,
        _ped.EXCEPTION_TYPE_WARNING,
    ):
        return _ped.EXCEPTION_RESOLVE_OK
    if options in (_ped.EXCEPTION_OPT_YES_NO, _ped.EXCEPTION_OPT_YES_NO_CANCEL):
        return _ped.EXCEPTION_RESOLVE_NO  # never let libparted "fix" a table while we only read it
    return _ped.EXCEPTION_RESOLVE_CANCEL


@contextmanager
def answering(handler=_handler) -> Iterator[list[str]]:  # type: ignore[no-untyped-def]
    """Install our handler for the duration; yields the list that collects libparted's messages."""
    _messages.clear()
    _ped.register_exn_handler(handler)
    try:
        yield _messages
    finally:
        _ped.register_exn_handler(_handler)


def _raw_types(path: str, label: str, sector: int) -> dict[int, str]:
    """Type GUIDs and MBR ids straight from the table: libparted 3.5 cannot report them."""
    try:
        if label == "gpt":
            return gpt_types(path, sector)
        if label == "msdos":
            return {n: f"0x{t:02x}" for n, t in msdos_types(path, sector).items()}
    except OSError:
        pass
    return {}


def _role(part: parted.Partition) -> Role:
    if part.type & parted.PARTITION_EXTENDED:
        return Role.EXTENDED
    if part.type & parted.PARTITION_LOGICAL:
        return Role.LOGICAL
    return Role.PRIMARY


def _partition(part: parted.Partition, disk: parted.Disk, types: dict[int, str]) -> Partition:
    name = ""
    if disk.supportsFeature(parted.DISK_TYPE_PARTITION_NAME):
        try:
            name = part.name or ""
        except _ped.PartedException:
            name = ""
    fs = part.fileSystem.type if part.fileSystem else ""
    flags = tuple(f for f in part.getFlagsAsString().split(", ") if f)
    return Partition(
        number=part.number,
        start=part.geometry.start,
        end=part.geometry.end,
        type=types.get(part.number, ""),
        name=name,
        flags=flags,
        role=_role(part),
        state=State.EXISTING,
        fs=fs or "",
    )


def _gpt_usable(path: str, geom: Geometry) -> tuple[int, int]:
    """First and last usable LBA from the primary GPT header (libparted does not expose them)."""
    try:
        with open(path, "rb") as f:
            f.seek(geom.logical)
            header = f.read(92)
        first = int.from_bytes(header[40:48], "little")
        last = int.from_bytes(header[48:56], "little")
        if header[:8] == b"EFI PART" and 0 < first <= last < geom.sectors:
            return first, last
    except OSError:
        pass
    entries = gpt_entry_sectors(geom)
    return 2 + entries, geom.sectors - 2 - entries


def _regions(disk: parted.Disk, label: str, geom: Geometry, first: int, last: int) -> tuple[Region, ...]:
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
    part = disk.getFirstPartition()
    while part is not None:
        if part.type & parted.PARTITION_METADATA and part.geometry.length > 0:
            g = part.geometry
            inside_ext = bool(part.type & parted.PARTITION_LOGICAL)
            if label == "msdos" and g.start == 0:
                regions.append(Region("mbr", Extent(0, 0), "MBR"))
                if g.end > 0:
                    regions.append(Region("metadata", Extent(1, g.end), "gap before the first partition"))
            else:
                kind = "ebr" if inside_ext else "metadata"
                regions.append(Region(kind, Extent(g.start, g.end), "EBR" if inside_ext else "metadata"))
        part = part.nextPartition()
    return tuple(regions)


def _probe_filesystem(device: parted.Device) -> str:
    try:
        fs = parted.probeFileSystem(parted.Geometry(device=device, start=0, length=device.length))
        return fs or ""
    except Exception:
        return ""


def read_disk(path: str) -> Disk:
    """Read ``path`` (image file or block device). Raises BackendError with a one-line reason."""
    with answering() as messages:
        try:
            device = parted.getDevice(path)
        except (_ped.PartedException, _ped.IOException, _ped.DeviceException) as exc:
            raise BackendError(f"cannot open {path}: {' '.join(str(exc).split())}") from exc
        geom = Geometry(
            sectors=device.length,
            logical=device.sectorSize,
            physical=max(device.physicalSectorSize, device.sectorSize),
            path=path,
            model=device.model or "",
        )
        if device.length <= 0:
            raise BackendError(f"{path} is empty: no sectors to hold a table")
        try:
            disk = parted.newDisk(device)
        except _ped.DiskLabelException:
            fs = _probe_filesystem(device)
            return Disk(geom, Table(None, 0, geom.sectors - 1), path, filesystem=fs, messages=tuple(messages))
        except (_ped.PartedException, _ped.IOException, _ped.DiskException) as exc:
            reason = " ".join(str(exc).split()) or (messages[-1] if messages else "unreadable table")
            raise BackendError(f"libparted could not read the table on {path}: {reason}") from exc
        label = disk.type
        if label == "gpt":
            first, last = _gpt_usable(path, geom)
        elif label == "msdos":
            first, last = 1, min(geom.sectors, MBR_LIMIT_SECTORS) - 1
        else:
            first, last = 0, geom.sectors - 1
        types = _raw_types(path, label, geom.logical)
        parts = tuple(sorted((_partition(p, disk, types) for p in disk.partitions), key=lambda p: (p.start, p.number)))
        read_only = ""
        if label not in WRITABLE_LABELS:
            read_only = f"diskplan writes gpt and msdos tables; this one is {label}"
        table = Table(
            label=label,
            first_usable=first,
            last_usable=last,
            partitions=parts,
            metadata=_regions(disk, label, geom, first, last),
            max_partitions=128 if label == "gpt" else 4,  # maxSupportedPartitionCount aborts in 3.5
            read_only=read_only,
        )
        return Disk(geom, table, path, messages=tuple(messages))


# --- writing ---------------------------------------------------------------------------------------


def _set_type(part: parted.Partition, p: Partition) -> None:
    """libparted 3.5 sets a type GUID / MBR id only through a flag or a filesystem type."""
    t = ptypes.lookup(p.type) if p.type else None
    if t is None or p.role is Role.EXTENDED:
        return
    if t.fs:
        part.system = parted.fileSystemType[t.fs]
    if t.flag:
        code = _flag_code(t.flag)
        if code is not None and part.isFlagAvailable(code):
            part.setFlag(code)


def build_disk(device: parted.Device, label: str, partitions: tuple[Partition, ...], fresh: bool) -> parted.Disk:
    """A parted Disk in memory holding exactly ``partitions`` (states other than DELETE)."""
    if fresh:
        disk = parted.freshDisk(device, label)
    else:
        disk = parted.newDisk(device)
        if disk.type != label:
            disk = parted.freshDisk(device, label)
    if disk.isFlagAvailable(parted.DISK_CYLINDER_ALIGNMENT):
        disk.unsetFlag(parted.DISK_CYLINDER_ALIGNMENT)  # otherwise msdos snaps partitions to cylinders
    wanted = {p.number: p for p in partitions if p.state is not State.DELETE}
    existing = {p.number: p for p in disk.partitions}
    # Delete what the plan drops or moved (logical ones first: they live inside the extended one).
    for number in sorted(existing, reverse=True):
        part = existing[number]
        keep = wanted.get(number)
        if keep is None or (keep.start, keep.end) != (part.geometry.start, part.geometry.end):
            disk.deletePartition(part)
    present = {p.number for p in disk.partitions}
    order = sorted(
        (p for p in wanted.values() if p.number not in present),
        key=lambda p: (p.role is Role.LOGICAL, p.start),
    )
    for p in order:
        kind = {
            Role.PRIMARY: parted.PARTITION_NORMAL,
            Role.EXTENDED: parted.PARTITION_EXTENDED,
            Role.LOGICAL: parted.PARTITION_LOGICAL,
        }[p.role]
        geometry = parted.Geometry(device=device, start=p.start, end=p.end)
        part = parted.Partition(disk=disk, type=kind, geometry=geometry)
        disk.addPartition(part, parted.Constraint(exactGeom=geometry))
        _set_type(part, p)
        if p.name and disk.supportsFeature(parted.DISK_TYPE_PARTITION_NAME):
            part.name = p.name
        for flag in p.flags:
            code = _flag_code(flag)
            if code is not None and part.isFlagAvailable(code):
                part.setFlag(code)
    return disk


def _flag_code(name: str) -> int | None:
    for code, text in parted.partitionFlag.items():
        if text == name:
            return int(code)
    return None


def write_table(path: str, label: str, partitions: tuple[Partition, ...], *, fresh: bool = True) -> None:
    """Write ``partitions`` to ``path`` in one commit, exactly where they are (no snapping by libparted)."""
    with answering() as messages:
        try:
            device = parted.getDevice(path)
            disk = build_disk(device, label, partitions, fresh)
            got = {p.number: (p.geometry.start, p.geometry.end) for p in disk.partitions}
            want = {p.number: (p.start, p.end) for p in partitions if p.state is not State.DELETE}
            if sorted(got.values()) != sorted(want.values()):
                placed, planned = sorted(got.values()), sorted(want.values())
                raise BackendError(f"libparted placed partitions at {placed}, not {planned}")
            disk.commit()
        except _ped.PartedException as exc:
            detail = " ".join(str(exc).split()) or (messages[-1] if messages else "")
            raise BackendError(f"libparted refused to write {path}: {detail}") from exc
