"""What a target is before any table is parsed: its size and sector size (stat, or the block-device
ioctls), and signatures found by magic numbers: whole-disk filesystems, labels libparted cannot read, a
GPT written with another sector size. Pure Python; safe to run in the planner's own process."""

from __future__ import annotations

import fcntl
import os
import stat
import struct

from diskplan.backend.raw import look
from diskplan.backend.raw.rawtable import read_bytes
from diskplan.model.value import value

# <linux/fs.h>
BLKSSZGET = 0x1268
BLKPBSZGET = 0x127B
BLKGETSIZE64 = 0x80081272


@value
class DeviceFacts:
    """What the kernel says about a block device or an image file."""
    path: str
    size_bytes: int
    logical: int
    physical: int
    block: bool  # a block device (else a regular file: libparted sees 512 B sectors)

    @property
    def sectors(self) -> int:
        return self.size_bytes // self.logical

    @property
    def remainder(self) -> int:
        return self.size_bytes % self.logical


def _ioctl_int(fd: int, request: int, fmt: str) -> int:
    buf = fcntl.ioctl(fd, request, bytes(struct.calcsize(fmt)))
    return int(struct.unpack(fmt, buf)[0])


def device_facts(path: str) -> DeviceFacts:
    """Raises OSError when ``path`` cannot be opened for reading. Asked once per look (backend.raw.look)."""
    return look.judged(("facts", path), lambda: _device_facts(path))


def _device_facts(path: str) -> DeviceFacts:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISBLK(st.st_mode):
            size = _ioctl_int(fd, BLKGETSIZE64, "Q")
            logical = _ioctl_int(fd, BLKSSZGET, "i")
            try:
                physical = _ioctl_int(fd, BLKPBSZGET, "I")
            except OSError:
                physical = logical
            return DeviceFacts(path, size, logical, max(physical, logical), True)
        if stat.S_ISREG(st.st_mode):
            return DeviceFacts(path, st.st_size, 512, 512, False)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "it is a directory, not a disk or an image file")
        size = os.lseek(fd, 0, os.SEEK_END)  # a character device or pipe: whatever it says
        return DeviceFacts(path, max(size, 0), 512, 512, False)
    finally:
        os.close(fd)


# --- whole-disk filesystems ---------------------------------------------------------------------------


def _fat(boot: bytes) -> str:
    """A FAT boot sector (libblkid's checks, simplified): jump, sane BPB, and a FAT type string."""
    if len(boot) < 512 or boot[0] not in (0xEB, 0xE9):
        return ""
    bps = int.from_bytes(boot[11:13], "little")
    spc, reserved, fats = boot[13], int.from_bytes(boot[14:16], "little"), boot[16]
    if bps not in (512, 1024, 2048, 4096) or spc == 0 or spc & (spc - 1) or reserved == 0 or fats not in (1, 2):
        return ""
    if boot[82:87] == b"FAT32" or boot[54:59] in (b"FAT12", b"FAT16", b"FAT  ") or boot[510:512] == b"\x55\xaa":
        return "vfat"
    return ""


def _ext(sb: bytes) -> str:
    if len(sb) < 0x68 or sb[0x38:0x3A] != b"\x53\xef":
        return ""
    compat = int.from_bytes(sb[0x5C:0x60], "little")
    incompat = int.from_bytes(sb[0x60:0x64], "little")
    if incompat & (0x40 | 0x80 | 0x200):  # extents, 64bit, flex_bg
        return "ext4"
    return "ext3" if compat & 0x4 else "ext2"  # has_journal


def sniff_filesystem(path: str, size: int) -> str:
    """blkid-style TYPE of a filesystem (or volume) starting at byte 0, "" when none is recognised."""
    head = read_bytes(path, 0, 4096)
    if len(head) < 512:
        return ""
    checks: list[tuple[bool, str]] = [
        (head[0:4] == b"XFSB", "xfs"),
        (head[0:6] == b"LUKS\xba\xbe", "crypto_LUKS"),
        (head[0:4] == b"hsqs", "squashfs"),
        (head[3:11] == b"NTFS    ", "ntfs"),
        (head[3:11] == b"EXFAT   ", "exfat"),
        (head[512:520] == b"LABELONE" and head[536:544] == b"LVM2 001", "LVM2_member"),
    ]
    for ok, name in checks:
        if ok:
            return name
    ext = _ext(read_bytes(path, 1024, 1024))
    if ext:
        return ext
    if read_bytes(path, 0x400, 4) == b"\x10\x20\xf5\xf2":
        return "f2fs"
    if read_bytes(path, 0x10040, 8) == b"_BHRfS_M":
        return "btrfs"
    if read_bytes(path, 0x8001, 5) == b"CD001":
        return "iso9660"
    if read_bytes(path, 4096, 4) == b"\xfc\x4e\x2b\xa9":
        return "linux_raid_member"
    for page in (4096, 8192, 16384, 65536):
        if page <= size and read_bytes(path, page - 10, 10) in (b"SWAPSPACE2", b"SWAP-SPACE"):
            return "swap"
    return _fat(head)


# --- labels libparted cannot read ---------------------------------------------------------------------

# "VOL1", "LNX1", "CMS1" in EBCDIC (cp500), written out: encoding them here would import the codec on every
# check (tests/test_check_json_text.py holds them to "...".encode("cp500")).
_DASD_TAGS = {b"\xe5\xd6\xd3\xf1": "dasd", b"\xd3\xd5\xe7\xf1": "dasd", b"\xc3\xd4\xe2\xf1": "dasd"}


def sniff_foreign_label(path: str) -> tuple[str, str] | None:
    """(label, where) for an IBM DASD label, which libparted on x86 does not read; None otherwise.
    The label sits in block 2 of the device's block size, with or without a 4-byte key before it."""
    for bs in (512, 1024, 2048, 4096):
        raw = read_bytes(path, 2 * bs, 8)
        for skip in (0, 4):
            tag = raw[skip : skip + 4]
            if tag in _DASD_TAGS:
                return _DASD_TAGS[tag], f"byte {2 * bs + skip} (IBM S/390 DASD, EBCDIC {tag.decode('cp500')!r})"
    return None


def gpt_signature_at(path: str, offset: int) -> bool:
    return read_bytes(path, offset, 8) == b"EFI PART"


def other_sector_size(path: str, logical: int) -> int:
    """The sector size a GPT was written with when it is not ``logical`` (4Kn image as a plain file,
    or a 512 B image on a 4096 B loop device); 0 when the GPT is where ``logical`` puts it, or absent."""
    if gpt_signature_at(path, logical):
        return 0
    for size in (4096, 512, 1024, 2048):
        if size != logical and gpt_signature_at(path, size):
            return size
    return 0
