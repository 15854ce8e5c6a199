"""Which disk a move journal belongs to, by what the disk itself says rather than by the name it had.

A path is no identity: ``/dev/sdb`` after a reboot may be another disk, and a loop device or an image path
is reused. A journal records the disk's table identifier (backend.raw.tableid.table_id: the GPT disk GUID or the
MBR signature, which a move never changes), its size, and its serial number where the hardware has one;
an unfinished move is found on whatever path the disk has now, and never on another disk that happens to
have the old path and size. Only a disk that has neither a usable identifier (no table, or an MBR with
signature 0) nor a serial is recognised by its path and size, as before: there is nothing else to go by.
"""

from __future__ import annotations

import os

from diskplan.backend.raw.filekind import block_sysdir
from diskplan.backend.raw.rawtable import read_bytes
from diskplan.backend.raw.tableid import table_id, weak
from diskplan.backend.read.probe import device_facts
from diskplan.model.value import value

# Where the kernel shows a disk's serial number, by kind of disk (NVMe, virtio, SCSI/SATA's VPD page 0x80,
# then the world-wide identifiers). The backend reads them itself: it may not import discovery.
SERIAL_FILES = ("device/serial", "serial", "device/vpd_pg80", "device/wwid", "wwid")


@value
class DiskMark:
    """What identifies a disk across renames: its table identifier, size in bytes, serial ("": none)."""

    table_id: str
    size: int
    serial: str = ""

    @property
    def weak(self) -> bool:
        """Nothing but the size to tell it from another disk: its path has to count too."""
        return weak(self.table_id) and not self.serial


def serial(path: str) -> str:
    """The hardware serial number (or world-wide name) of the block device ``path``; "" when it has none (a
    loop device, an image file) or it cannot be read."""
    base = block_sysdir(path)
    if base is None:
        return ""
    for name in SERIAL_FILES:
        try:
            with open(os.path.join(base, name), "rb") as f:
                raw = f.read(256)
        except OSError:
            continue
        if name.endswith("vpd_pg80"):
            raw = raw[4:]  # the page's header: type, page code, length
        text = raw.decode("ascii", "replace").strip(" \0\n")
        if text:
            return text
    return ""


def disk_mark(path: str, size: int) -> DiskMark:
    """``path``'s mark now; raises OSError when it cannot be read."""
    ss = device_facts(path).logical  # the sector size a table on it is written in (an image file: 512)
    sectors = size // ss

    def read(lba: int, count: int) -> bytes:
        return read_bytes(path, lba * ss, count * ss)

    return DiskMark(table_id(read, sectors), size, serial(path))
