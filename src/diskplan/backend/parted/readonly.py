"""A reading child that cannot open anything for writing: a seccomp filter on open/openat (and sync).

libparted has no read-only open: ``ped_device_open`` opens the device read-write, and (linux.c's
``_flush_cache``) opens every partition node of it for writing too. Closing a block device opened for
writing is what systemd-udevd watches (inotify IN_CLOSE_WRITE): it probes the disk again, and LVM
auto-activates the volumes it finds — a `check`, a dry run or the planner's read re-activated a logical
volume the user had just deactivated. When the read-write open fails, libparted opens the device read-only
and flushes nothing; this filter makes it fail, in the forked child that reads (backend.parted.isolate), for the
rest of that child's life: whatever runs there, nothing is opened for writing.

Nor is anything synced there: fsync and fdatasync return at once. A process that cannot write has nothing of
its own to flush, and reads see the page cache either way; libparted syncs the device each time it closes it
(twice in a read), which on a disk asks the drive to flush its cache and on an image file can wait for the
filesystem's journal (1 to 4 ms each on this project's ext4 machines, for an image nothing had written to).

Only on x86-64 (the system call numbers are that architecture's); elsewhere ``forbid_writes`` says False
and the reading child goes on as before.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

from diskplan.backend.parted import isolate

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
# classic BPF
LD_ABS_W, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
# x86-64 system calls that open by name (their flags argument), and two that cannot be told apart
OPEN, OPENAT, CREAT, OPENAT2 = 2, 257, 85, 437
FSYNC, FDATASYNC = 74, 75
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC  # any of them: opened to write or create

_installed = False


def _program() -> bytes:
    """seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (the low half first on x86-64)."""
    deny = RET_ERRNO | errno.EROFS  # libparted then opens read-only, as on a write-protected disk
    ins = [
        (LD_ABS_W, 0, 0, 4), (JEQ, 1, 0, AUDIT_ARCH_X86_64), (RET, 0, 0, RET_ALLOW),  # 0-2: another ABI: untouched
        (LD_ABS_W, 0, 0, 0),  # 3: the system call
        (JEQ, 6, 0, OPEN),  # 4: -> 11
        (JEQ, 7, 0, OPENAT),  # 5: -> 13
        (JEQ, 8, 0, CREAT),  # 6: -> 15
        (JEQ, 7, 0, OPENAT2),  # 7: -> 15 (its flags are behind a pointer; glibc's open does not use it)
        (JEQ, 8, 0, FSYNC),  # 8: -> 17
        (JEQ, 7, 0, FDATASYNC),  # 9: -> 17
        (RET, 0, 0, RET_ALLOW),  # 10: anything else
        (LD_ABS_W, 0, 0, 16 + 8 * 1), (JSET, 2, 3, WRITING),  # 11-12: open(path, flags): -> 15 or 16
        (LD_ABS_W, 0, 0, 16 + 8 * 2), (JSET, 0, 1, WRITING),  # 13-14: openat(dirfd, path, flags): -> 15 or 16
        (RET, 0, 0, deny),  # 15
        (RET, 0, 0, RET_ALLOW),  # 16
        (RET, 0, 0, RET_ERRNO | 0),  # 17: a sync: done at once, returning 0
    ]
    return b"".join(struct.pack("=HBBI", *i) for i in ins)


def forbid_writes() -> bool:
    """From now on this process (a forked child only: never the caller's own) cannot open a file for
    writing. True when the filter is in place."""
    global _installed
    if _installed:
        return True
    if not isolate.IN_CHILD or os.uname().machine != "x86_64":  # (the platform module costs the child ~1 ms)
        return False
    prog = ctypes.create_string_buffer(_program())
    fprog = struct.pack("=HxxxxxxQ", len(prog.raw) // 8, ctypes.addressof(prog))
    arg = ctypes.create_string_buffer(fprog)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        return False
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(arg), 0, 0) != 0:
        return False
    _installed = True
    return True
