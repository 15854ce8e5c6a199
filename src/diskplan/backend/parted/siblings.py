"""An image file alone in its directory, for libparted's eyes only.

libparted opens ``IMAGE1`` ... ``IMAGE63`` for writing each time it opens an image read-write (linux.c's
``_flush_cache`` takes them for the partition nodes of a block device; ``/sys/block/IMAGE/ext_range`` does
not exist, so it tries all 63): a FIFO named ``disk.img1`` beside ``disk.img`` blocks it, and a device node
or a symlink named so is opened for writing. ``ped_device_get`` canonicalizes the path, so a symlink or
``/proc/self/fd/N`` elsewhere does not help. Instead, a child that runs libparted gets a mount namespace of
its own in which the image's directory is an empty tmpfs holding only the image, bound at its own path: the
same path (messages name it as the user did), no neighbours. Nothing outside the child sees any of it.

A new mount namespace holds a copy of every mount there is, and where mounts are private (rescue systems,
containers: nothing shared for MS_SLAVE to follow) an ``umount`` elsewhere does not reach that copy: the
filesystem would stay alive, its last writes not yet on the disk, its loop device not detached, until the
child exits. So as root each image gets a namespace of its own that lets go of every disk filesystem not on
the way to it (``_let_go``), and the child goes back to where it began once the image is read.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import stat
import sys

from diskplan.model.mountinfo import disk_mounts

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MNT_DETACH = 2
# Directories a child may still need while it reads (libparted reads /sys and /proc; /dev holds devices).
NEEDED = frozenset(("/", "/proc", "/sys", "/dev", "/run", "/etc", "/usr", "/lib"))

# Mount points whose contents a child may load code or settings from: a disk filesystem there is kept.
CODE = ("/usr", "/lib", "/lib64", "/etc")

# As root, an image gets a fresh namespace (``_fresh``); one that let go of a filesystem the next image may
# be on is left (this process goes back home) once the image is read, one that let go of nothing is kept.
_home: tuple[int, int] | None = None  # (its first mount namespace, its working directory), as fds
_away = False  # in a fresh namespace now
_gone: tuple[str, ...] = ()  # the mount points that namespace let go of
# Without root, one namespace inside a user namespace, made once (they nest only so deep); it can let go of
# nothing (a user namespace locks the mounts it copies) and cannot go back.
_namespace = False
_alone = ""  # the image now alone in its directory in this process ("" when none)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _user_namespace(libc: ctypes.CDLL) -> bool:
    """A mount namespace for this process inside a user namespace that maps this user to itself (where the
    kernel allows unprivileged user namespaces)."""
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


def needed(point: str, keep: tuple[str, ...]) -> bool:
    """``point`` lies on the way to one of the ``keep`` paths, or under a place code is loaded from."""
    inside = point.rstrip("/") + "/"
    return any(k == point or k.startswith(inside) for k in keep) or any(
        point == c or point.startswith(c + "/") for c in CODE)


def _let_go(libc: ctypes.CDLL, keep: tuple[str, ...]) -> tuple[str, ...]:
    """Detach, in this process's new namespace only, every disk filesystem not on the way to ``keep``:
    its copy here would keep it mounted after its owner unmounts it. The mount points detached."""
    try:
        with open("/proc/self/mountinfo") as f:
            text = f.read()
    except OSError:
        return ()
    points = [p for p in disk_mounts(text) if not needed(p, keep)]
    return tuple(p for p in points if libc.umount2(p.encode(), MNT_DETACH) == 0)


def _go_home(libc: ctypes.CDLL) -> bool:
    """Back to the namespace this process began in; the one left, and what it held, is gone with it."""
    global _away, _gone
    if _home is None or libc.setns(_home[0], CLONE_NEWNS) != 0:
        return False
    _away, _gone = False, ()
    with contextlib.suppress(OSError):
        os.fchdir(_home[1])  # joining a namespace moves this process to its root
    return True


def _fresh(libc: ctypes.CDLL, keep: tuple[str, ...]) -> bool:
    """As root: a new mount namespace, slave to the one this process began in, holding no disk filesystem
    but those on the way to ``keep``. False when it cannot be made (then this process is at home)."""
    global _home, _away, _gone
    if _home is None:
        try:
            _home = (os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC),
                     os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            return False
    if libc.unshare(CLONE_NEWNS) != 0:
        return False
    _away = True
    # (a new namespace that is not yet slave could share our mounts: stop there)
    if libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None) != 0:
        _go_home(libc)
        return False
    _gone = _let_go(libc, keep)
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
    if not _namespace and not _away and not _fresh(libc, (*NEEDED, *_python_places(), real)):
        if _away:  # made, not made slave, and no way back home: stop there
            return False
        if not _user_namespace(libc) or libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None) != 0:
            return False
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
    libc = _libc()
    # A namespace that let go of filesystems is left (the next image may lie on one); one that let go of
    # nothing is kept, with only the image's directory shown again (entering a namespace costs a little).
    if not (_away and _gone and _go_home(libc)) and _alone:
        libc.umount2(os.path.dirname(_alone).encode(), MNT_DETACH)
    _alone = ""
