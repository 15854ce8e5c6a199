"""An image file alone in its directory, for libparted's eyes only.

libparted opens ``IMAGE1`` ... ``IMAGE63`` for writing each time it opens an image read-write (linux.c's
``_flush_cache`` takes them for the partition nodes of a block device; ``/sys/block/IMAGE/ext_range`` does
not exist, so it tries all 63): a FIFO named ``disk.img1`` beside ``disk.img`` blocks it, and a device node
or a symlink named so is opened for writing. ``ped_device_get`` canonicalizes the path, so a symlink or
``/proc/self/fd/N`` elsewhere does not help. Instead, a child that runs libparted gets a mount namespace of
its own in which the image's directory is an empty tmpfs holding only the image, bound at its own path: the
same path (messages name it as the user did), no neighbours. Nothing outside the child sees any of it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MNT_DETACH = 2
# Directories a child may still need while it reads (libparted reads /sys and /proc; /dev holds devices).
NEEDED = frozenset(("/", "/proc", "/sys", "/dev", "/run", "/etc", "/usr", "/lib"))

_namespace = False  # this process has its mount namespace (made once: user namespaces nest only so deep)
_alone = ""  # the image now alone in its directory in this process ("" when none)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _own_namespace(libc: ctypes.CDLL) -> bool:
    """A mount namespace for this process: as root directly, otherwise inside a user namespace that maps
    this user to itself (where the kernel allows unprivileged user namespaces)."""
    if libc.unshare(CLONE_NEWNS) == 0:
        return True
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return False
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError:
        return False
    return True


@functools.cache
def _python_places() -> tuple[str, ...]:
    """Where this Python imports from (resolved once: a child reading many images asks for each)."""
    # (Not all of sys.path: `python -m` puts the working directory there, where images often are.)
    here = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))  # what holds the diskplan package
    return tuple(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, here))


def _holds_python(directory: str) -> bool:
    """The directory holds (or is above) what this Python may still import: hiding it would break that."""
    inside = directory.rstrip("/") + "/"
    return any(p == directory or p.startswith(inside) for p in _python_places())


def stand_alone(path: str) -> bool:
    """Make the regular file ``path`` the only entry of its directory, for this process and its children
    only. Call it in a forked child that runs libparted, never in the main process. True when done;
    False (nothing changed) when ``path`` is not a regular file or the kernel does not allow it. A child
    that reads several images calls it for each: the directory of the one before is shown again first."""
    global _namespace, _alone
    real = os.path.realpath(path)
    if real == _alone:
        return True
    libc = _libc()
    show_again()  # the image before's neighbours (one may be this image)
    directory = os.path.dirname(real)
    try:
        if not stat.S_ISREG(os.stat(real).st_mode) or directory in NEEDED or _holds_python(directory):
            return False
    except OSError:
        return False
    if not _namespace:
        if not _own_namespace(libc) or libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None) != 0:
            return False  # (a new namespace that is not yet slave could share our mounts: stop there)
        _namespace = True
    try:  # opened in the new namespace: a bind mount's source must belong to it
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if libc.mount(b"diskplan", directory.encode(), b"tmpfs", 0, b"mode=0700") != 0:
            return False
        try:
            os.close(os.open(real, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
            if libc.mount(f"/proc/self/fd/{fd}".encode(), real.encode(), None, MS_BIND, None) != 0:
                raise OSError(ctypes.get_errno(), "bind mount")
        except OSError:
            libc.umount2(directory.encode(), MNT_DETACH)  # the directory as it was
            return False
    finally:
        os.close(fd)
    _alone = real
    return True


def show_again() -> None:
    """The directory of the image ``stand_alone`` hid the neighbours of, as it is (for whatever this process
    opens next: another image of that directory, say)."""
    global _alone
    if _alone:
        _libc().umount2(os.path.dirname(_alone).encode(), MNT_DETACH)
        _alone = ""
