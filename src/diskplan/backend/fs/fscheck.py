"""The filesystem referees of a data move: what blkid sees in a range of sectors (type, UUID, label),
and whether the filesystem's own checker finds it clean — before the move (a dirty filesystem is not
moved) and after it, at its new place.

Both look at the bytes through a private read-only loop device over the exact byte range, so they see
the same sectors whatever the kernel's partition list says at that moment (mid-move it is stale), for a
disk as well as an image file.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
from collections.abc import Iterator

from diskplan.backend import loopdev
from diskplan.backend.raw import look
from diskplan.model.value import value

CHECKERS: dict[str, tuple[tuple[str, ...], str]] = {
    # blkid TYPE -> (read-only check command, Debian package)
    "ext2": (("e2fsck", "-fn"), "e2fsprogs"),
    "ext3": (("e2fsck", "-fn"), "e2fsprogs"),
    "ext4": (("e2fsck", "-fn"), "e2fsprogs"),
    "xfs": (("xfs_repair", "-n"), "xfsprogs"),
    "btrfs": (("btrfs", "check", "--readonly"), "btrfs-progs"),
    "vfat": (("fsck.vfat", "-n"), "dosfstools"),
    "ntfs": (("ntfsfix", "--no-action"), "ntfs-3g"),
}
TIMEOUT = 600.0


class CheckError(Exception):
    """A referee could not run: one line for the user."""


@value
class Identity:
    """What blkid reads in the partition's bytes."""

    fs: str = ""
    uuid: str = ""
    label: str = ""
    read: bool = True  # False: not looked at (a move or resize refused first: a mounted one is not opened)

    def __str__(self) -> str:
        if not self.read:
            return "filesystem not read"
        if not self.fs:
            return "no filesystem blkid knows"
        return f"{self.fs} UUID={self.uuid or '-'} LABEL={self.label or '-'}"


@contextlib.contextmanager
def _held_back() -> Iterator[None]:
    """Ctrl+C waits (blocked, not lost) until the block ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def view(target: str, offset: int, size: int, *, read_only: bool = True) -> Iterator[str]:
    """A loop device showing ``size`` bytes of ``target`` from byte ``offset`` (read-only unless a resize
    tool must write through it). Autocleared (backend.loopdev): detached when this block ends, Ctrl+C
    included, and by the kernel itself when diskplan is killed while holding it."""
    try:
        loop = loopdev.attach(target, offset=offset, size=size, read_only=read_only)
    except loopdev.LoopError as exc:
        raise CheckError(f"cannot set up a loop device to check the filesystem: {exc.strerror}") from exc
    try:
        yield loop.path
    finally:
        with _held_back():
            loop.close()
        if not read_only:  # a resize tool wrote through it: what a look judged is judged again (backend.raw.look)
            look.forget()


def identify(path: str) -> Identity:
    return _blkid(path)


def identify_at(target: str, offset: int, size: int) -> Identity:
    """What blkid reads in ``size`` bytes of ``target`` from byte ``offset``, probed in place: no loop
    device. A loop device over a partition is a new block device to udev, and over an LVM physical volume
    or an md member LVM and mdadm find the volume a second time and activate it there (a dry run of a
    resize re-activated a logical volume the user had deactivated, on the loop device)."""
    return _blkid(target, "--offset", str(offset), "--size", str(size))


def _blkid(path: str, *where: str) -> Identity:
    try:
        out = subprocess.run(["blkid", "--probe", *where, "--output", "export", path], capture_output=True,
                             text=True, timeout=60, check=False, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckError(f"blkid could not run: {exc}") from exc
    fields = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    return Identity(fields.get("TYPE", ""), fields.get("UUID", ""), fields.get("LABEL", ""))


def checker(fs: str) -> tuple[tuple[str, ...], str] | None:
    """The check command for ``fs`` and its Debian package; None when diskplan has no checker for it."""
    return CHECKERS.get(fs)


def missing_tool(fs: str) -> str:
    """Why ``fs`` cannot be checked here ("" when it can, or has no checker)."""
    known = checker(fs)
    if known is None or shutil.which(known[0][0]):
        return ""
    return f"{known[0][0]} is needed to check a {fs} filesystem (Debian package {known[1]})"


def check(path: str, fs: str) -> tuple[bool, str]:
    """(clean, the checker's last lines) for the filesystem on ``path``; (True, "") with no checker."""
    known = checker(fs)
    if known is None:
        return True, ""
    try:
        # its own session, as every tool a write runs: the terminal's Ctrl+C is diskplan's to handle
        out = subprocess.run([*known[0], path], capture_output=True, text=True, timeout=TIMEOUT, check=False,
                             start_new_session=True)
    except FileNotFoundError as exc:
        raise CheckError(missing_tool(fs) or str(exc)) from exc
    except subprocess.TimeoutExpired as exc:
        raise CheckError(f"{known[0][0]} gave no answer within {TIMEOUT:g} s") from exc
    said = " ".join((out.stdout + out.stderr).split()[-30:])
    return out.returncode == 0, said


def referee(target: str, offset: int, size: int) -> tuple[Identity, bool, str]:
    """blkid's identity and the checker's verdict for the bytes at ``offset``: a loop device is set up
    only for a filesystem diskplan has a checker for (never over an LVM or md member: ``identify_at``)."""
    ident = identify_at(target, offset, size)
    if checker(ident.fs) is None:
        return ident, True, ""
    with view(target, offset, size) as loop:
        clean, said = check(loop, ident.fs)
    return ident, clean, said
