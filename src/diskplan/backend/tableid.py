"""Which table a disk holds, for "is this still the table the plan was made against?": the disk
identifier read raw (libparted does not report it), folded into model.fingerprint.

A GPT is identified by the disk GUID of its good copy (a repair copies it to the other one, so a repaired
disk keeps its fingerprint), an msdos table by the 32-bit disk signature at byte 440 of the MBR.
"""

from __future__ import annotations

from diskplan.backend.gptcheck import check_gpt
from diskplan.backend.rawtable import read_bytes
from diskplan.model.disk import Disk
from diskplan.model.fingerprint import fingerprint
from diskplan.model.geometry import Geometry
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
            return f"msdos:{mbr[443:439:-1].hex()}" if len(mbr) == 512 else ""
    except (OSError, ValueError):  # unreadable or hostile bytes: no identifier, the table still counts
        return ""
    return ""


def table_fingerprint(table: Table, path: str, geometry: Geometry, filesystem: str = "") -> str:
    """The fingerprint of ``table`` as read from ``path`` (the disk identifier is read now); ``filesystem``:
    what the reader found on the whole disk (``Disk.filesystem``)."""
    return fingerprint(table, disk_id(path, table.label, geometry, filesystem))


def disk_fingerprint(disk: Disk) -> str:
    """The fingerprint of the table on ``disk`` (read from ``disk.source``); "" for a disk without a source."""
    if not disk.source:
        return ""
    return table_fingerprint(disk.table, disk.source, disk.geometry, disk.filesystem)
