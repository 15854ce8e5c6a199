"""Which table a disk holds, by its identifier read raw (libparted does not report it): a GPT's disk GUID,
an MBR's 32-bit disk signature at byte 440. Two questions, each with a spelling that is kept on disk:

- ``disk_id``, "is this still the table the plan was made against?": ``gpt:GUID`` / ``msdos:xxxxxxxx``
  (libparted's label names), folded into model.plan.fingerprint, whose hash saved plans hold (``made_against``).
  A GPT counts by its good copy (a repair copies it to the other one, so a repaired disk keeps its
  fingerprint); the label is libparted's, so an msdos table without entries still has an id.
- ``table_id``, "is this the disk a backup was taken from?": ``gpt:GUID`` / ``dos:0xXXXXXXXX`` / ``none``
  (sfdisk's label and label-id, as in the backup's own ``[sfdisk]`` dump), read from bare sectors (the
  backup's, or the disk's), recorded in every backup's header and seal, and compared with those by restore.

Respelling either would make every saved plan, or every sealed backup, stop matching its disk.
"""

from __future__ import annotations

from collections.abc import Callable

from diskplan.backend.raw.gptcheck import check_gpt
from diskplan.backend.raw.rawtable import mbr_entries, mbr_signature, parse_gpt_header, read_bytes
from diskplan.model.disk import Disk
from diskplan.model.geometry import Geometry
from diskplan.model.plan.fingerprint import fingerprint
from diskplan.model.table import Table


def disk_id(path: str, label: str | None, geometry: Geometry, filesystem: str = "") -> str:
    """``gpt:<disk GUID>``, ``msdos:<signature>``, ``fs:<type>`` for a whole-disk filesystem without a
    label (``filesystem``, as the reader found it), or "" (another label, none, or unreadable)."""
    if label is None and filesystem:
        return f"fs:{filesystem}"
    try:
        if label == "gpt":
            state = check_gpt(path, geometry.logical, geometry.sectors)
            if state is None:
                return ""
            copy = state.good or (state.primary if state.primary.header is not None else state.backup)
            return f"gpt:{copy.header.disk_guid}" if copy.header is not None else ""
        if label == "msdos":
            mbr = read_bytes(path, 0, 512)
            return f"msdos:{mbr_signature(mbr):08x}" if len(mbr) == 512 else ""
    except (OSError, ValueError):  # unreadable or hostile bytes: no identifier, the table still counts
        return ""
    return ""


def table_id(read: Callable[[int, int], bytes], sectors: int) -> str:
    """``gpt:DISK-GUID`` (a valid header at either end), ``dos:0xSIGNATURE`` or ``none``; ``read``: (first LBA,
    count) -> that many whole sectors."""
    for lba in (1, sectors - 1):
        if 0 < lba < sectors:
            h = parse_gpt_header(read(lba, 1), lba)
            if h.valid:
                return f"gpt:{h.disk_guid}"
    mbr = read(0, 1)
    if mbr_entries(mbr):
        return f"dos:0x{mbr_signature(mbr):08x}"
    return "none"


def weak(table_id: str) -> bool:
    """A ``table_id`` that many disks share: no table, or an MBR without a signature."""
    return table_id in ("none", "dos:0x00000000")


def table_fingerprint(table: Table, path: str, geometry: Geometry, filesystem: str = "") -> str:
    """The fingerprint of ``table`` as read from ``path`` (the disk identifier is read now); ``filesystem``:
    what the reader found on the whole disk (``Disk.filesystem``)."""
    return fingerprint(table, disk_id(path, table.label, geometry, filesystem))


def disk_fingerprint(disk: Disk) -> str:
    """The fingerprint of the table on ``disk`` (read from ``disk.source``); "" for a disk without a source."""
    if not disk.source:
        return ""
    return table_fingerprint(disk.table, disk.source, disk.geometry, disk.filesystem)
