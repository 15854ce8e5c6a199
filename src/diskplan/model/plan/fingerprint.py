"""What a plan was made against: a digest of the table on a disk, over what a write depends on.

Two readings of a disk give the same fingerprint when they have the same label, the same disk identifier
(GPT disk GUID or MBR signature, read raw by backend.raw.tableid; without a label, the whole-disk filesystem's
type) and the same partitions: numbers, extents, roles, types, names and flags. A filesystem made inside a
partition does not change it; another program's table write does, even one that only renames a partition
or gives the disk a new GUID.
"""

from __future__ import annotations

import hashlib
import json

from diskplan.model.table import Table

PREFIX = "sha256:"


def table_key(table: Table, disk_id: str) -> list[object]:
    """The facts the fingerprint covers, in a canonical order."""
    parts = sorted(
        (p.number, p.start, p.end, p.role.value, p.type.upper(), p.name, sorted(p.flags)) for p in table.partitions
    )
    return [table.label or "", disk_id, [list(p) for p in parts]]


def fingerprint(table: Table, disk_id: str) -> str:
    """``sha256:<hex>`` over ``table_key``: what a JSON plan records as ``made_against``."""
    text = json.dumps(table_key(table, disk_id), separators=(",", ":"), ensure_ascii=False)
    return PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
