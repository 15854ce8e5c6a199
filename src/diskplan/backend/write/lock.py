"""The write lock: a BSD ``flock(LOCK_EX)`` on the whole-disk device node, the lock util-linux
(``sfdisk --lock``, ``mkfs --lock``) and systemd agree on (systemd.io/BLOCK_DEVICE_LOCKING), and the same
lock on an image file. Every write (a table commit, a GPT repair, a restore) holds it from the last check
that nothing uses the disk until the table has been read back, so two writers never interleave: the second
one waits, then finds that the table is no longer the one its plan was made against, and refuses.

The lock is taken with ``LOCK_NB`` and tried again for at most ``WAIT`` seconds, not blocked on: systemd-udevd
holds a shared lock on the whole disk for the moment it probes it (after every write), which is worth
waiting out, while a partitioner holding the disk for minutes must get a refusal, not a hang.

A BSD lock belongs to the open file, not the process: the children forked to write and read back share
it, and closing another descriptor of the same file (as the backup and libparted do) does not drop it,
unlike a POSIX ``fcntl`` lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from types import TracebackType

from diskplan.backend.raw.filekind import block_sysdir, not_a_disk
from diskplan.backend.write import udevhandoff

WAIT = 5.0  # seconds: longer than a udev probe, shorter than a user's patience
POLL = 0.05


class LockBusy(Exception):
    """Another program holds the lock: ``str(exc)`` is one line saying which file and how long we waited."""


def whole_disk(path: str, sys_root: str = "/sys") -> str:
    """The node to lock for ``path``: the whole disk of a partition node, else ``path`` itself (udev locks
    the whole disk, never a partition)."""
    sysdir = block_sysdir(path, sys_root)
    if sysdir is None or not os.path.exists(os.path.join(sysdir, "partition")):
        return path
    disk = f"/dev/{os.path.basename(os.path.dirname(sysdir))}"
    return disk if os.path.exists(disk) else path


class WriteLock:
    """The lock held on ``path`` (the node or file locked); released by ``release`` or leaving ``with``."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            held = None
            try:
                held = udevhandoff.hold(self.path)  # udevd answers the close: it must not re-read the table
            finally:
                try:
                    os.close(fd)  # the last descriptor of this open file: the lock goes with it, whatever hold raised
                finally:
                    if held is not None:  # the partition let go whatever the close said
                        held.wait()

    def __enter__(self) -> WriteLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _open(path: str) -> int:
    """A descriptor to hold the lock with. A block device is opened for writing when it can be: closing
    it then signals IN_CLOSE_WRITE, on which systemd-udevd probes the disk again, once the lock is gone
    (it skipped the events of the write itself, which happened under the lock), with "change" events, not
    a re-read of the table (backend.write.udevhandoff). O_NONBLOCK: opening must
    never wait (a FIFO put in an image's place)."""
    flags = os.O_NONBLOCK | os.O_CLOEXEC
    try:
        if stat.S_ISBLK(os.stat(path).st_mode):
            return os.open(path, os.O_RDWR | flags)
    except OSError:
        pass  # read-only, or mounted as a whole (the checks under the lock say so): the lock needs no mode
    return os.open(path, os.O_RDONLY | flags)


def take(target: str, wait: float | None = None) -> WriteLock:
    """Lock ``target`` (its whole disk, for a partition) for writing. Raises LockBusy when another program
    still holds a lock on it after ``wait`` seconds (default ``WAIT``), OSError when it cannot be opened."""
    wait = WAIT if wait is None else wait
    path = whole_disk(target)
    fd = _open(path)
    try:
        problem = not_a_disk(path, os.fstat(fd).st_mode)
        if problem:
            raise OSError(errno.EINVAL, problem)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return WriteLock(path, fd)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"{path} is locked by another program (its BSD flock, the lock partitioners and "
                        f"systemd-udevd take; waited {wait:g} s)"
                    ) from None
                time.sleep(POLL)
    except BaseException:
        os.close(fd)
        raise
