"""libparted's read of a disk as plain rows (numbers and strings), and what every call into it shares.

The part of the parted backend that needs no model: libparted's exception handlers, opening a device, walking
its partitions and their flags. A reading child (backend.parted.readahead) runs ``read_rows`` and sends its
answer as builtins, so neither it nor its parent's unpickling imports the model for it: the model's enums and
tables, the raw GPT parsers and the object building were ~10 ms of the child's ~25 for a 128-partition `check`
(Nov 27), on the path every reading command waits on. backend.parted.pedrows makes the rows a Disk, in the
parent, where the model is imported anyway. backend.parted.libparted (the reads into the model, and every
write) builds on this module; these two are the only ones that import pyparted (tests/test_layers.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
from contextlib import contextmanager

import _ped

from diskplan.backend.parted import isolate, readonly, siblings

TYPE_CHECKING = False  # the reading child does without importing typing (~3 ms of its read)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, TypedDict

    class Rows(TypedDict):
        """What libparted says of a disk (``read_rows``)."""

        sectors: int
        logical: int
        physical: int
        model: str
        label: str | None  # None: no table libparted knows ("loop", a filesystem on the whole device, is None)
        filesystem: str  # with no label: what libparted's probe found on the whole device
        named: bool  # the label has partition names
        # (number, start, end, role: primary/extended/logical, name, flags set, filesystem libparted probed)
        partitions: list[tuple[int, int, int, str, str, tuple[str, ...], str]]
        # libparted's metadata entries of an msdos (or other non-GPT) table: (start, end, inside the extended)
        metadata: list[tuple[int, int, bool]]
        messages: list[str]


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


_PED_ERRORS: tuple[type[BaseException], ...] = tuple(
    v for k, v in vars(_ped).items() if k.endswith("Exception") and isinstance(v, type) and issubclass(v, Exception)
)


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


def _ped_partitions(pdisk: _ped.Disk) -> Iterator[_ped.Partition]:
    """Every entry of libparted's partition list, metadata and free space included, in its order."""
    part = pdisk.next_partition()
    while part is not None:
        yield part
        part = pdisk.next_partition(part)


def _walk(pdisk: _ped.Disk) -> Iterator[_ped.Partition]:
    """The real partitions of ``pdisk`` (no free space or metadata), as pyparted's ``Disk.partitions``."""
    hidden = _ped.PARTITION_FREESPACE | _ped.PARTITION_METADATA | _ped.PARTITION_PROTECTED
    return (q for q in _ped_partitions(pdisk) if not q.type & hidden)


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


def _flags_set(ped: _ped.Partition) -> list[str]:
    return [name for name, code in _FLAG_CODES.items() if ped.get_flag(code)]


def _role(kind: int) -> str:
    """The model's name of a partition's role (model.extent.Role's values) from libparted's type bits."""
    if kind & _ped.PARTITION_EXTENDED:
        return "extended"
    if kind & _ped.PARTITION_LOGICAL:
        return "logical"
    return "primary"


def read_rows(path: str, filesystems: bool = True) -> Rows:
    """What libparted says of ``path`` (image file or block device), as builtins (``Rows``). Raises BackendError
    with a one-line reason. Run it in a child (backend.parted.readahead): some tables crash libparted.
    ``filesystems=False``: each partition's filesystem is left empty rather than probed (for 128 partitions,
    ~44,000 reads of one sector).

    The device is held open for the whole read: libparted fsyncs it each time it closes it, and a probe, a read
    and a filesystem probe each open and close it (an fsync of an unchanged image still flushes the disk's
    cache: milliseconds each, more than the read)."""
    with answering(_read_handler) as messages:
        try:
            try:
                device = _ped_device(path, read_only=True)
            except (_ped.PartedException, _ped.IOException, _ped.DeviceException) as exc:
                raise BackendError(f"cannot open {path}: {' '.join(str(exc).split())}") from exc
            held = _held_open(device, messages)
            try:
                return _rows(path, device, messages, filesystems)
            finally:
                if held:
                    device.close()
        finally:
            siblings.show_again()  # this process may go on to open other files of that directory


def _rows(path: str, device: _ped.Device, messages: list[str], filesystems: bool) -> Rows:
    rows: Rows = {
        "sectors": device.length, "logical": device.sector_size,
        "physical": max(device.phys_sector_size, device.sector_size), "model": device.model or "",
        "label": None, "filesystem": "", "named": False, "partitions": [], "metadata": [], "messages": [],
    }
    if device.length <= 0:
        raise BackendError(f"{path} is empty: no sectors to hold a table")
    probed = _probed_label(device)
    if probed is None:
        rows["filesystem"] = _probe_filesystem(device)  # ("unrecognised disk label", what no table means: not kept)
        return rows
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
        rows["filesystem"] = next((q.fs_type.name for q in _walk(pdisk) if q.fs_type), "") or _probe_filesystem(device)
        rows["messages"] = list(messages)
        return rows
    named = bool(pdisk.type.check_feature(_ped.DISK_TYPE_PARTITION_NAME))
    rows["label"], rows["named"] = label, named
    # Read on the _ped partition itself, as pyparted's Partition would, without the two setlocale() calls pyparted
    # puts around every attribute (for 128 partitions they cost more than libparted's whole read).
    rows["partitions"] = [
        (q.num, q.geom.start, q.geom.end, _role(q.type), _ped_name(q) if named else "", tuple(_flags_set(q)),
         q.fs_type.name if q.fs_type is not None else "")
        for q in _walk(pdisk)
    ]
    if label != "gpt":
        rows["metadata"] = [(q.geom.start, q.geom.end, bool(q.type & _ped.PARTITION_LOGICAL))
                            for q in _ped_partitions(pdisk) if q.type & _ped.PARTITION_METADATA and q.geom.length > 0]
    rows["messages"] = list(messages)
    return rows
