"""Loop devices diskplan attaches for itself: attached by the kernel's own ioctl, never by ``losetup``.

Why not ``losetup --find --show``: it has no option for LO_FLAGS_AUTOCLEAR (only ``mount -o loop`` sets it,
through libmount), so a loop device it attaches stays until someone detaches it: a diskplan killed with
SIGKILL between attach and detach left loop devices behind, writable ones over the user's disk among them.

Here the device is configured in one LOOP_CONFIGURE with AUTOCLEAR set while diskplan holds it open (the
``Loop``'s descriptor, close-on-exec): the kernel detaches it itself when the last descriptor closes, which
a SIGKILL does too. ``close`` detaches at once when nobody else has it open (LOOP_CLR_FD). It also saves the
two ``losetup`` processes a filesystem check used to start.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct

LOOP_SET_FD = 0x4C00
LOOP_CLR_FD = 0x4C01
LOOP_SET_STATUS64 = 0x4C04
LOOP_SET_BLOCK_SIZE = 0x4C09
LOOP_CONFIGURE = 0x4C0A
LOOP_CTL_GET_FREE = 0x4C82
LO_FLAGS_READ_ONLY = 1
LO_FLAGS_AUTOCLEAR = 4
# struct loop_info64: device, inode, rdevice, offset, sizelimit (u64); number, encrypt type, key size,
# flags (u32); file name, crypt name (64 bytes each), key (32), init (2 x u64)
_INFO64 = struct.Struct("=QQQQQIIII64s64s32s2Q")
_CONFIG = struct.Struct(f"=II{_INFO64.size}s64x")  # struct loop_config: fd, block size, info, reserved


class LoopError(OSError):
    """No loop device could be attached."""


class Loop:
    """An attached loop device (``path``), detached by the kernel when its last holder closes it."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            fcntl.ioctl(fd, LOOP_CLR_FD)  # with other holders the kernel only marks it: the last close detaches
        except OSError:
            pass
        finally:
            os.close(fd)

    def __enter__(self) -> Loop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def _info(path: str, offset: int, size: int, flags: int) -> bytes:
    name = os.fsencode(path)[:63]
    return _INFO64.pack(0, 0, 0, offset, size, 0, 0, 0, flags, name, b"", b"", 0, 0)


def attach(backing: str, *, offset: int = 0, size: int = 0, sector: int = 0, read_only: bool = True) -> Loop:
    """A loop device showing ``size`` bytes (0: to the end) of ``backing`` from byte ``offset``, with
    ``sector``-byte logical sectors (0: 512), autocleared. Raises LoopError (with the kernel's errno)."""
    flags = LO_FLAGS_AUTOCLEAR | (LO_FLAGS_READ_ONLY if read_only else 0)
    try:
        back = os.open(backing, (os.O_RDONLY if read_only else os.O_RDWR) | os.O_CLOEXEC)
    except OSError as exc:
        raise LoopError(exc.errno, f"cannot open {backing}: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(back).st_mode) and not stat.S_ISBLK(os.fstat(back).st_mode):
            raise LoopError(errno.EINVAL, f"{backing} is neither a file nor a block device")
        for _ in range(16):  # another process may take the free device between asking and configuring
            loop = _configure_free(back, _info(backing, offset, size, flags), sector, read_only)
            if loop is not None:
                return loop
        raise LoopError(errno.EBUSY, "every free loop device was taken by another program first")
    finally:
        os.close(back)


def _configure_free(back: int, info: bytes, sector: int, read_only: bool) -> Loop | None:
    try:
        ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise LoopError(exc.errno, f"no loop devices here (/dev/loop-control: {exc.strerror})") from exc
    try:
        number = fcntl.ioctl(ctl, LOOP_CTL_GET_FREE)
    except OSError as exc:
        raise LoopError(exc.errno, f"no free loop device: {exc.strerror}") from exc
    finally:
        os.close(ctl)
    path = f"/dev/loop{number}"
    try:
        fd = os.open(path, (os.O_RDONLY if read_only else os.O_RDWR) | os.O_CLOEXEC)
    except OSError as exc:
        raise LoopError(exc.errno, f"cannot open {path}: {exc.strerror}") from exc
    try:
        try:
            fcntl.ioctl(fd, LOOP_CONFIGURE, _CONFIG.pack(back, sector, info))
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                os.close(fd)
                return None
            if exc.errno not in (errno.EINVAL, errno.ENOTTY):
                raise
            _configure_old(fd, back, info, sector)  # a kernel before 5.8: the same in three steps
    except OSError as exc:
        os.close(fd)
        if exc.errno == errno.EBUSY:
            return None
        raise LoopError(exc.errno, f"cannot attach {path}: {exc.strerror}") from exc
    except BaseException:
        os.close(fd)  # autoclear: closing is detaching
        raise
    return Loop(path, fd)


def _configure_old(fd: int, back: int, info: bytes, sector: int) -> None:
    fcntl.ioctl(fd, LOOP_SET_FD, back)
    try:
        fcntl.ioctl(fd, LOOP_SET_STATUS64, info)
        if sector:
            fcntl.ioctl(fd, LOOP_SET_BLOCK_SIZE, sector)
    except BaseException:
        fcntl.ioctl(fd, LOOP_CLR_FD)
        raise
