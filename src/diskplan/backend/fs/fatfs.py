"""FAT12/16/32 resized by libparted's own FAT resizer (libparted-fs-resize: the code fatresize runs), on a
private loop device over the partition's bytes, with no partition table in sight.

Why not the ``fatresize`` command: it finds the filesystem through the partition table and rewrites that
table itself (libparted's ``ped_disk_commit``). Measured with fatresize 1.1.0 on a loop device: ``fatresize
-f -n 1 -s 150M /dev/loop1`` on a 195 MiB FAT32 answered its own question "can only be resized to this size by
converting to FAT16" with yes (-f), converted the filesystem, changed the MBR type 0x0c to 0x0e and gave the
partition 292874 sectors (libparted's constraint, not the 292968 asked). Without a partition number (on a
view of just the filesystem) it aborts: "Assertion (disk != NULL) at libparted/disk.c:1620 in
ped_disk_get_partition_by_sector() failed". So diskplan calls the resizer itself, through ctypes (pyparted
does not bind libparted-fs-resize), on the view, in a forked child (an assertion aborts the child only),
and answers every question libparted asks with Cancel (else No, OK to a plain notice, "unhandled" to
anything else): a size that needs a FAT16/FAT32 conversion, or any repair, is refused rather than done.
The table entry stays diskplan's (backend.move.moveentry). Here and not in backend.parted.libparted: another library
(pyparted has no binding for it), loaded only in that child, so its exception handler never replaces
the one libparted.py installs through pyparted (tests/test_layers.py allows these two only).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from diskplan.backend.parted.isolate import IsolatedFailure, run_isolated
from diskplan.model.plan.fsresize import RESIZERS
from diskplan.model.value import value

TIMEOUT = 3600.0
LIBRARY = RESIZERS["vfat"].tool  # the resizer's name, as model.plan.fsresize lists it beside its Debian package
_CANCEL, _NO, _OK = 64, 4, 8  # PedExceptionOption bits


class FatError(Exception):
    """libparted's FAT resizer could not do it: one line for the user."""


@value
class _Said:
    ok: bool
    value: int
    messages: tuple[str, ...]


class _Exception(ctypes.Structure):
    _fields_ = [("message", ctypes.c_char_p), ("type", ctypes.c_int), ("options", ctypes.c_int)]


class _Constraint(ctypes.Structure):
    _fields_ = [("start_align", ctypes.c_void_p), ("end_align", ctypes.c_void_p), ("start_range", ctypes.c_void_p),
                ("end_range", ctypes.c_void_p), ("min_size", ctypes.c_longlong), ("max_size", ctypes.c_longlong)]


class _Device(ctypes.Structure):  # the head of PedDevice: enough for its sector size and length
    _fields_ = [("next", ctypes.c_void_p), ("model", ctypes.c_char_p), ("path", ctypes.c_char_p),
                ("type", ctypes.c_int), ("sector_size", ctypes.c_longlong), ("phys_sector_size", ctypes.c_longlong),
                ("length", ctypes.c_longlong)]


def library() -> str | None:
    """The resizer library's file name on this machine; None when it is not installed."""
    return ctypes.util.find_library(LIBRARY.removeprefix("lib"))


def _libs() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    names = (ctypes.util.find_library("parted") or "libparted.so.2", library() or f"{LIBRARY}.so.0")
    core = ctypes.CDLL(names[0], mode=ctypes.RTLD_GLOBAL)  # the resizer links against its symbols
    fsr = ctypes.CDLL(names[1])
    vp, ll = ctypes.c_void_p, ctypes.c_longlong
    core.ped_device_get.restype = ctypes.POINTER(_Device)
    core.ped_geometry_new.restype = vp
    core.ped_geometry_new.argtypes = [vp, ll, ll]
    for f in ("ped_device_open", "ped_device_close", "ped_device_destroy"):
        getattr(core, f).argtypes = [vp]
    fsr.ped_file_system_open.restype = vp
    fsr.ped_file_system_open.argtypes = [vp]
    fsr.ped_file_system_get_resize_constraint.restype = ctypes.POINTER(_Constraint)
    fsr.ped_file_system_get_resize_constraint.argtypes = [vp]
    fsr.ped_file_system_resize.argtypes = [vp, vp, vp]
    fsr.ped_file_system_close.argtypes = [vp]
    return core, fsr


def _child(path: str, new_bytes: int) -> _Said:
    """In a forked child: open the FAT on the whole of ``path``; ``new_bytes`` 0 gives its minimum size in
    bytes, else resizes it to that many bytes (from sector 0)."""
    core, fsr = _libs()
    said: list[str] = []
    handler_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Exception))

    def answer(ex: ctypes._Pointer[_Exception]) -> int:
        said.append((ex.contents.message or b"").decode(errors="replace"))
        opts = ex.contents.options
        return _CANCEL if opts & _CANCEL else _NO if opts & _NO else _OK if opts == _OK else 0

    handler = handler_type(answer)
    core.ped_exception_set_handler(handler)
    dev = core.ped_device_get(path.encode())
    if not dev or not core.ped_device_open(dev):
        return _Said(False, 0, (*said, f"libparted cannot open {path}"))
    try:
        ss = dev.contents.sector_size
        whole = core.ped_geometry_new(dev, 0, dev.contents.length)
        fs = fsr.ped_file_system_open(whole)
        if not fs:
            return _Said(False, 0, (*said, "libparted finds no FAT filesystem it can resize"))
        try:
            if not new_bytes:
                c = fsr.ped_file_system_get_resize_constraint(fs)
                return _Said(bool(c), c.contents.min_size * ss if c else 0, tuple(said))
            target = core.ped_geometry_new(dev, 0, new_bytes // ss)
            return _Said(bool(fsr.ped_file_system_resize(fs, target, None)), new_bytes, tuple(said))
        finally:
            fsr.ped_file_system_close(fs)
    finally:
        core.ped_device_close(dev)
        core.ped_device_destroy(dev)


def unresizable(path: str) -> str:
    """Why libparted must not be given the FAT on ``path`` ("" when it may): it reads a FAT of other than
    512-byte sectors as if its sectors were 512 bytes (a grow left both FATs corrupt)."""
    try:
        with open(path, "rb") as f:
            bps = int.from_bytes(f.read(13)[11:13], "little")
    except OSError as exc:
        return f"cannot read the FAT's boot sector: {exc.strerror}"
    if bps == 512:
        return ""
    return (f"libparted's FAT resizer handles FAT filesystems with 512-byte sectors only; this one has "
            f"{bps}-byte sectors (as on a 4Kn disk), so it is left as it is")


def _run(path: str, new_bytes: int) -> int:
    why = unresizable(path)
    if why:
        raise FatError(why)
    try:
        got = run_isolated(_child, path, new_bytes, timeout=TIMEOUT)
    except IsolatedFailure as exc:
        raise FatError(f"libparted's FAT resizer failed: {exc.reason}") from exc
    if not got.ok:
        why = " ".join(" ".join(got.messages).split()) or "no reason given"
        raise FatError(f"libparted's FAT resizer refused: {why}")
    return got.value


def minimum(path: str) -> int:
    """The smallest size in bytes libparted can shrink the FAT on ``path`` to."""
    return _run(path, 0)


def _label_at(boot: bytes) -> int:
    """Where the boot sector keeps its 11-byte volume label: FAT32 (no 16-bit FAT size) further on."""
    return 71 if int.from_bytes(boot[22:24], "little") == 0 else 43


def resize(path: str, new_bytes: int) -> None:
    """Make the FAT on ``path`` ``new_bytes`` long (a grow: ``path`` is already that long). libparted writes a
    new boot sector with its own OEM name ("MSWIN4.1"), "hidden sectors" set to the start of what it was
    given (0 here: the view) and the label "NO NAME" (then ``fsck.fat -n`` finds the root directory's label
    differs and exits 1): those three fields are put back as they were, in the FAT32 backup boot sector too."""
    with open(path, "rb") as f:
        old = f.read(512)
    kept = [(3, old[3:11]), (28, old[28:32]), (_label_at(old), old[_label_at(old) : _label_at(old) + 11])]
    _run(path, new_bytes)
    with open(path, "r+b") as f:
        new = f.read(512)
        if _label_at(new) != _label_at(old):
            raise FatError("libparted changed the FAT type")  # cannot happen: conversions are cancelled
        sectors = [0]
        if _label_at(new) == 71 and (backup := int.from_bytes(new[50:52], "little")):
            sectors.append(backup)
        for lba in sectors:
            for at, field in kept:
                f.seek(lba * 512 + at)
                f.write(field)
        f.flush()
        os.fsync(f.fileno())
