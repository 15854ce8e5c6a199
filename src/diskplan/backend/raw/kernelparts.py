"""Tell the kernel a disk's partition list, partition by partition (BLKPG ioctls, as ``partx -u`` does),
then read back what it holds and compare: the kernel's view after a write is checked, never assumed.

Why not libparted's ``commitToOS``: Debian's libparted runs ``udevadm settle`` around it. A write holds the
disk's BSD lock (backend.write.lock) while it tells the kernel, and systemd-udevd, following the same
block-device locking convention, does not probe a locked disk: it waits for the lock, so the settle waits
for udevd, and each settle ran into its 120 s timeout (a write took four minutes on any system with udevd,
and a grow left the kernel with the old size). Here nothing waits for udevd: the kernel is told under the
lock, and udevd probes the disk once the lock is released.

Run it in the process that holds the lock (or its child). Units: ``want`` is in the disk's logical sectors;
sysfs and the kernel count 512-byte sectors.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
from collections.abc import Iterable, Mapping

from diskplan.backend.raw.filekind import block_sysdir
from diskplan.model.extent import Partition, Role

BLKPG = 0x1269
ADD, DELETE, RESIZE = 1, 2, 3


class _Partition(ctypes.Structure):
    _fields_ = [("start", ctypes.c_longlong), ("length", ctypes.c_longlong), ("pno", ctypes.c_int),
                ("devname", ctypes.c_char * 64), ("volname", ctypes.c_char * 64)]


class _Arg(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int), ("flags", ctypes.c_int), ("datalen", ctypes.c_int),
                ("data", ctypes.c_void_p)]


def wanted(partitions: Iterable[Partition]) -> dict[int, Partition]:
    """The partitions a table holds (``Table.live``, or libparted's placed ones), by number."""
    return {p.number: p for p in partitions}


def _extended(p: Partition) -> bool:
    return p.role is Role.EXTENDED


def kernel_units(p: Partition, sector_size: int) -> tuple[int, int]:
    """(start, size) in 512-byte units, as sysfs will show them. An extended partition is told as a stub
    of one logical sector, as libparted tells it: a logical partition's entry parked on the sector after
    the first EBR (backend.move.engine) must not overlap it (the kernel's own scan makes the stub 1 KiB, so its
    size is never compared)."""
    k = sector_size // 512
    return p.start * k, (k if _extended(p) else p.size * k)


def kernel_list(path: str, sys_root: str = "/sys") -> dict[int, tuple[int, int]] | None:
    """What the kernel holds for the whole disk ``path`` now: number -> (start, size) in 512-byte units;
    None when ``path`` is not a block device."""
    sysdir = block_sysdir(path, sys_root)
    if sysdir is None:
        return None
    return {n: (start, size) for n, (_name, start, size) in _partitions(sysdir).items()}


def _partitions(sysdir: str) -> dict[int, tuple[str, int, int]]:
    """The partitions under a disk's sysfs directory: number -> (kernel name, start, size in 512-byte units)."""
    out: dict[int, tuple[str, int, int]] = {}
    for entry in sorted(os.listdir(sysdir)):
        sub = os.path.join(sysdir, entry)
        try:
            with open(os.path.join(sub, "partition")) as f:
                number = int(f.read())
            with open(os.path.join(sub, "start")) as f:
                start = int(f.read())
            with open(os.path.join(sub, "size")) as f:
                size = int(f.read())
        except (OSError, ValueError):
            continue  # not a partition (queue/, holders/, ...)
        out[number] = (entry, start, size)
    return out


class NodeError(Exception):
    """The kernel's partition node cannot stand for the partition's bytes: one line for the user."""


def partition_node(path: str, number: int, start: int, size: int, sector_size: int) -> str:
    """The kernel's own node (``/dev/NAME``) of partition ``number`` of the whole disk ``path``, spanning
    exactly ``size`` logical sectors from ``start``: where the kernel holds it at that start with another
    size (a grow whose entry is written, the kernel not yet told) it is resized first, partition by itself
    (BLKPG, under the caller's lock, as ``sync`` does). Raises NodeError when the kernel has no such
    partition, holds it elsewhere, or refuses; or when /dev/NAME is not that device."""
    sysdir = block_sysdir(path)
    if sysdir is None:
        raise NodeError(f"{path} is not a block device")
    k = sector_size // 512
    want = (start * k, size * k)
    found = _partitions(sysdir).get(number)
    if found is None:
        raise NodeError(f"the kernel does not know partition {number} of {path}")
    name, at, length = found
    if at != want[0]:
        raise NodeError(f"the kernel has partition {number} at {at // k}+{length // k}, not {start}+{size}")
    if length != want[1]:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            _ioctl(fd, RESIZE, number, *want)
        except OSError as exc:
            raise NodeError(_why(exc, number, "resize")) from exc
        finally:
            os.close(fd)
        now = _partitions(sysdir).get(number)
        if now is None or now[1:] != want:
            raise NodeError(f"the kernel was told partition {number} is {start}+{size} and still holds another size")
    node = f"/dev/{name}"
    try:
        with open(os.path.join(sysdir, name, "dev")) as f:
            major, minor = (int(x) for x in f.read().split(":"))
        st = os.stat(node)
    except (OSError, ValueError) as exc:
        raise NodeError(f"no node {node} for partition {number} of {path}") from exc
    rdev = st.st_rdev
    if not stat.S_ISBLK(st.st_mode) or (os.major(rdev), os.minor(rdev)) != (major, minor):
        raise NodeError(f"{node} is not partition {number} of {path} (device {os.major(rdev)}:{os.minor(rdev)})")
    return node


def _ioctl(fd: int, op: int, number: int, start: int, length: int) -> None:
    part = _Partition(start=start * 512, length=length * 512, pno=number)
    arg = _Arg(op=op, flags=0, datalen=ctypes.sizeof(part), data=ctypes.addressof(part))
    fcntl.ioctl(fd, BLKPG, bytes(arg))  # the kernel reads ``part`` through the pointer; it stays alive here


def _why(exc: OSError, number: int, doing: str) -> str:
    if exc.errno == errno.EBUSY:
        return f"partition {number} is in use, the kernel cannot {doing} it"
    return f"the kernel refused to {doing} partition {number}: {exc.strerror}"


def sync(path: str, want: Mapping[int, Partition], sector_size: int) -> list[str]:
    """Make the kernel's partition list of ``path`` (a whole disk) equal ``want``: remove what is gone or
    moved, shrink, grow, add; then read it back. Returns what still differs, one line each ([] when the
    kernel holds exactly ``want``). An image file has no kernel view: []."""
    have = kernel_list(path)
    if have is None:
        return []
    units = {n: kernel_units(w, sector_size) for n, w in want.items()}
    failed: list[str] = []
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # read-only: BLKPG needs no write mode
    try:
        def run(op: int, number: int, start: int, length: int, doing: str) -> None:
            try:
                _ioctl(fd, op, number, start, length)
            except OSError as exc:
                failed.append(_why(exc, number, doing))

        resized = {n for n, (s, size) in have.items() if n in units and units[n][0] == s and units[n][1] != size}
        for n, (s, _size) in sorted(have.items()):
            if n not in units or units[n][0] != s:
                run(DELETE, n, 0, 0, "remove")
        # shrinking first frees the space a neighbour grows into
        for n in sorted(resized, key=lambda n: units[n][1] - have[n][1]):  # an extended stub too: see kernel_units
            run(RESIZE, n, *units[n], "resize")
        now = kernel_list(path) or {}
        for n, (s, size) in sorted(units.items()):
            if n not in now:
                run(ADD, n, s, size, "add")
    finally:
        os.close(fd)
    return failed + differences(path, want, sector_size)


def differences(path: str, want: Mapping[int, Partition], sector_size: int) -> list[str]:
    """What the kernel holds now for ``path`` that differs from ``want``."""
    return compare(kernel_list(path), want, sector_size)


def compare(seen: Mapping[int, tuple[int, int]] | None, want: Mapping[int, Partition], sector_size: int) -> list[str]:
    """Partitions whose kernel view ``seen`` (sysfs, 512-byte units; None for an image file: []) differs
    from ``want``. An extended partition shows as a stub in the kernel: its start only is compared."""
    if seen is None:
        return []
    k = sector_size // 512
    out = []
    for n in sorted(set(want) | set(seen)):
        p, s = want.get(n), seen.get(n)
        if p is None:
            out.append(f"the kernel still has a partition {n}")
        elif s is None:
            out.append(f"the kernel does not know partition {n}")
        elif s[0] != kernel_units(p, sector_size)[0] or (not _extended(p) and s[1] != kernel_units(p, sector_size)[1]):
            out.append(f"the kernel has partition {n} at {s[0] // k}+{s[1] // k}, not {p.start}+{p.size}")
    return out
