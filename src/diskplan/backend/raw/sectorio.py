"""A disk's sectors, read and written whole: the I/O under every table read diskplan does itself, the backup,
the entry rewrites of a data move and the patches libparted cannot write. Only regular files and block devices
are opened (non-blocking: a FIFO cannot stall the open); a block device is opened exclusively to write, so the
kernel refuses while the disk is mounted or held."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator

from diskplan.backend.raw import look


class DiskIOError(Exception):
    """Sectors could not be read or written (or the path is no disk or image file): one line for the user.
    backend.write.backup knows it as BackupError: one error, whether a backup or the sectors under it failed."""


def path_kind(path: str, mode: int) -> str:
    if stat.S_ISDIR(mode):
        raise DiskIOError(f"{path} is a directory, not a disk or an image file")
    if not (stat.S_ISREG(mode) or stat.S_ISBLK(mode)):
        raise DiskIOError(f"{path} is not a regular file or a block device")
    return "block" if stat.S_ISBLK(mode) else "file"


def open_disk(path: str, write: bool = False) -> int:
    """Non-blocking, so a FIFO cannot stall the open; anything but a file or a block device is refused."""
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_CLOEXEC | os.O_NONBLOCK
    if write and stat.S_ISBLK(os.stat(path).st_mode):
        flags |= os.O_EXCL  # the kernel refuses while the disk is mounted or held
    fd = os.open(path, flags)
    try:
        path_kind(path, os.fstat(fd).st_mode)
    except DiskIOError:
        os.close(fd)
        raise
    return fd


def pread_sectors(fd: int, lba: int, count: int, sector_size: int) -> bytes:
    want = count * sector_size
    out = b""
    while len(out) < want:
        got = os.pread(fd, want - len(out), lba * sector_size + len(out))
        if not got:
            raise DiskIOError(f"short read at sector {lba + len(out) // sector_size}: the device ended early")
        out += got
    return out


@contextlib.contextmanager
def reading(path: str) -> Iterator[int]:
    """A descriptor that reads ``path`` as it is now: a look's one (backend.raw.look), else one opened for the
    block and closed after it."""
    held = look.reading_fd(path, open_disk)
    if held is not None:
        yield held
        return
    fd = open_disk(path)
    try:
        yield fd
    finally:
        os.close(fd)


def read_sectors(path: str, lba: int, count: int, sector_size: int) -> bytes:
    with reading(path) as fd:
        return pread_sectors(fd, lba, count, sector_size)


def device_size(path: str) -> int:
    """The size of ``path`` in bytes. Raises OSError, or DiskIOError when it is no disk or image file."""
    with reading(path) as fd:
        return os.lseek(fd, 0, os.SEEK_END)


def write_sectors(
    path: str,
    writes: Iterable[tuple[int, bytes]],
    sector_size: int,
    *,
    each: Callable[[int], None] | None = None,
    after_first: Callable[[], None] | None = None,
) -> None:
    """Write each (LBA, whole sectors) to ``path`` (exclusively, for a block device: the kernel refuses
    while it is mounted or held), fsync, then drop those pages from the cache so a read-back reaches the
    device. ``each(n)`` after the n-th run; ``after_first`` (tests: a fault) after the first. What a look judged
    is forgotten (backend.raw.look): every check after this reads the disk again."""
    look.forget()
    try:
        fd = open_disk(path, write=True)
    except OSError as exc:
        raise DiskIOError(f"cannot open {path} for writing: {exc.strerror}") from exc
    try:
        for i, (lba, data) in enumerate(writes):
            if len(data) % sector_size:
                raise DiskIOError(f"{len(data)} bytes for LBA {lba} are not whole {sector_size} B sectors")
            view, offset = memoryview(data), lba * sector_size
            while view:
                n = os.pwrite(fd, view, offset)
                view, offset = view[n:], offset + n
            if each:
                each(i + 1)
            if i == 0 and after_first:
                after_first()
        os.fsync(fd)
        with contextlib.suppress(OSError):  # only a cache hint
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError as exc:
        raise DiskIOError(f"writing {path} failed: {exc.strerror}") from exc
    finally:
        os.close(fd)
        look.forget()  # also after a write cut short: part of it may have landed
