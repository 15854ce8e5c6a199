"""The hand-off to systemd-udevd when a write lets go of its disk.

Closing the lock's descriptor (opened for writing: backend.write.lock) signals IN_CLOSE_WRITE, on which
udevd probes the disk again once the lock is gone. Left alone, udevd does that by re-reading the partition
table (BLKRRPART), which removes and adds every partition of the disk: the "add" of a partition that holds an
LVM physical volume makes LVM's rules (69-lvm.rules) scan it and auto-activate its volume group, a group the
user may have deactivated for diskplan to write (measured in the guest: a resize of the PV of a deactivated
group re-activated it, in 2 runs of 2). While one partition of the disk is open the kernel refuses that
re-read (EBUSY), and udevd sends "change" events for the disk and each partition instead: every partition is
probed again, none removed or added.

So, on a disk and when udevd runs, a partition of it is held open (read-only: its close signals nothing)
from just before the lock is released until udevd has answered the release (its "change" of the disk, seen
as the kernel's uevent) and nothing more came for ``QUIET`` seconds; ``WAIT`` seconds at most.
"""

from __future__ import annotations

import os
import select
import socket
import time

from diskplan.backend.raw.filekind import block_sysdir

NETLINK_KOBJECT_UEVENT = 15
KERNEL_GROUP = 1  # the kernel's own uevents (udevd's go to group 2)
UDEVD_CONTROL = "/run/udev/control"
WAIT = 10.0  # seconds: udevd answers in milliseconds on a real machine, seconds in the emulated guest
QUIET = 0.5


class Held:
    """A partition of the disk ``name`` held open, and the kernel's uevents heard since before the release."""

    def __init__(self, name: str, fd: int, sock: socket.socket) -> None:
        self.name = name
        self._fd = fd
        self._sock = sock

    def answered(self, data: bytes) -> bool:
        """Is the uevent ``data`` udevd's "change" of this disk?"""
        fields = set(data.split(b"\0")[1:])
        return b"ACTION=change" in fields and b"DEVNAME=" + self.name.encode() in fields

    def wait(self, wait: float = WAIT, quiet: float = QUIET) -> bool:
        """Until udevd has answered (and ``quiet`` seconds passed with nothing more), at most ``wait``
        seconds; then let the partition go. Whether udevd answered."""
        deadline = time.monotonic() + wait
        last: float | None = None
        try:
            while True:
                now = time.monotonic()
                until = deadline if last is None else min(deadline, last + quiet)
                if now >= until:
                    return last is not None
                ready, _, _ = select.select([self._sock], [], [], until - now)
                if ready and self.answered(self._sock.recv(1 << 16)):
                    last = time.monotonic()
        except OSError:
            return last is not None
        finally:
            self._sock.close()
            os.close(self._fd)


def udevd_listens(control: str) -> bool:
    """Does a udevd answer on its control socket? The socket's file alone is no proof: one left behind by a
    udevd that stopped (a container, a rescue system) made every lock release wait the whole ``WAIT``. A bare
    connect and close is what ``udevadm control --ping`` starts with; udevd takes it as an empty message."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC) as s:
            s.settimeout(0.5)
            s.connect(control)
    except OSError:  # no such file, not a socket, nobody listening (ECONNREFUSED), or no answer in time
        return False
    return True


def hold(path: str) -> Held | None:
    """Before the lock on the whole disk ``path`` is released: a partition of it held open, when udevd
    runs and the disk has one (None otherwise: an image file, no udevd, no partition)."""
    sysdir = block_sysdir(path)
    if sysdir is None or not udevd_listens(UDEVD_CONTROL):
        return None
    try:
        parts = sorted(e for e in os.listdir(sysdir) if os.path.exists(os.path.join(sysdir, e, "partition")))
    except OSError:  # the disk went away under its node (unplugged): nothing to hold, the lock still goes
        return None
    if not parts:
        return None
    try:
        fd = os.open(f"/dev/{parts[0]}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT)
        sock.bind((0, KERNEL_GROUP))
    except OSError:
        os.close(fd)
        return None
    return Held(os.path.basename(sysdir), fd, sock)
