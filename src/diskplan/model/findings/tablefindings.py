"""Findings about a table as a whole (or how it was read), not about where one partition lies.

The reader (backend.read.reader) builds these from what it measured; ``diskplan check --json`` prints their
codes (registered, with their severities, in model.findings.codes). Each explanation shows the numbers it is based on.
"""

from __future__ import annotations

from diskplan.model.findings.codes import (
    EBR_CHAIN_DAMAGED,
    EXTENDED_WITHOUT_EBR,
    GPT_BACKUP_DAMAGED,
    GPT_BACKUP_NOT_AT_END,
    GPT_BOTH_DAMAGED,
    GPT_COPIES_DIFFER,
    GPT_NO_PROTECTIVE_MBR,
    GPT_PRIMARY_DAMAGED,
    HYBRID_ISO,
    HYBRID_MBR,
    SECTOR_SIZE_MISMATCH,
    SIZE_NOT_SECTOR_MULTIPLE,
    TABLE_LARGER_THAN_DISK,
    TINY_DISK,
    UNREADABLE,
)
from diskplan.model.findings.placement import Finding
from diskplan.model.units import MiB, human_bytes

UNSAFE_PREFIX = "this table could not be read safely"
HOW_TO_REPAIR = ("To write it: `diskplan repair DISK`, or plan the repair in the planner and commit; a backup of "
                 "both ends of the disk is saved first, and `diskplan restore` puts it back.")


def unreadable(reason: str, recovered: str = "") -> Finding:
    """libparted crashed, hung or refused; ``recovered`` says what diskplan's own parser showed instead."""
    lines = [
        "diskplan reads tables in a separate process, so this did not take the planner down; nothing was written.",
    ]
    if recovered:
        lines.append(f"The partitions shown come from diskplan's own reading of {recovered}; they are read-only.")
    else:
        lines.append("No partitions can be shown.")
    lines.append("You can still plan a new label, which replaces whatever table is there (and loses it).")
    return Finding(UNREADABLE, f"{UNSAFE_PREFIX}: {reason}", tuple(lines))


def unknown_label(kind: str, where: str) -> Finding:
    return Finding(
        UNREADABLE,
        f"{UNSAFE_PREFIX}: a {kind} label is on this disk and diskplan cannot read it",
        (
            f"Its signature is at {where}; libparted does not read this label, so no partitions can be shown.",
            "Treat the disk as in use: a new label would replace that table and lose what it describes.",
        ),
    )


def gpt_copy_damaged(which: str, problem: str, good: str, repair: str, no_repair: str = "") -> Finding:
    """One GPT copy failed a check (``which`` is "primary" or "backup"); ``good`` is shown instead.
    ``repair`` describes the planned repair; ``no_repair`` says why none is offered when it is empty."""
    code = GPT_PRIMARY_DAMAGED if which == "primary" else GPT_BACKUP_DAMAGED
    last = (
        f"Repair, offered as a planned operation (nothing is written until you commit): {repair}. {HOW_TO_REPAIR}"
        if repair
        else f"No repair is offered: {no_repair}."
    )
    return Finding(
        code,
        f"the {which} GPT is damaged ({problem}); the {good} copy is good and is shown",
        (
            "A GPT is stored twice: the primary at LBA 1 (entries after it) and a backup at the last LBA "
            "(entries before it); each header carries a CRC32 of itself and of its entry array.",
            f"The {which} copy: {problem}. The {good} copy passed every check (signature, both CRCs, "
            "its own LBA, entry array inside the disk).",
            last,
        ),
    )


def gpt_without_protective_mbr(repair: str) -> Finding:
    return Finding(
        GPT_NO_PROTECTIVE_MBR,
        "a valid GPT without a protective MBR: libparted and some firmware do not see it",
        (
            "Sector 0 of a GPT disk holds a protective MBR: one 0xEE entry covering the disk, so that MBR-only "
            "tools see it as in use. Here it is missing (zeroed, or overwritten by a tool that wrote only an MBR).",
            "The GPT itself passed every check and is shown, read-only: libparted (parted, diskplan's writer) "
            "does not recognise it until sector 0 is fixed.",
            f"Repair, offered as a planned operation (nothing is written until you commit): {repair}.",
            HOW_TO_REPAIR,
        ),
    )


def gpt_both_damaged(primary: str, backup: str) -> Finding:
    return Finding(
        GPT_BOTH_DAMAGED,
        "both GPT copies are damaged: there is no good copy to show",
        (
            f"Primary (LBA 1): {primary}.",
            f"Backup (last LBA): {backup}.",
            "gdisk's recovery menu can try to salvage a table from the remains; diskplan will not guess.",
        ),
    )


def gpt_backup_not_at_end(backup_lba: int, last_lba: int, logical: int, repair: str) -> Finding:
    """``repair``: the planned move of the backup to the end (model.plan.repair's summary), "" when none is offered."""
    grown = (last_lba - backup_lba) * logical
    last = (f"Repair, offered as a planned operation (nothing is written until you commit): {repair}. {HOW_TO_REPAIR}"
            if repair else "No repair is offered: the two GPT copies must first be good and equal.")
    return Finding(
        GPT_BACKUP_NOT_AT_END,
        f"the backup GPT is at LBA {backup_lba}, not at the disk's last LBA {last_lba}",
        (
            f"The disk is {last_lba - backup_lba} sectors ({human_bytes(grown)}) larger than when the table "
            "was written (a grown image, a cloned disk): that space cannot be partitioned until the backup "
            "moves to the end. A table write (apply, the planner's commit) keeps the backup where it is.",
            last,
        ),
    )


def gpt_copies_differ(detail: str) -> Finding:
    return Finding(
        GPT_COPIES_DIFFER,
        f"the primary and backup GPT are both valid but differ ({detail}); the primary is shown",
        (
            "Both copies pass their CRC checks, so one was written without the other (an interrupted write, "
            "a tool that updates one copy).",
            "Firmware and the kernel use the primary. Writing the table makes both copies equal again.",
        ),
    )


def table_larger_than_disk(label: str, table_sectors: int, sectors: int, logical: int) -> Finding:
    missing = table_sectors - sectors
    return Finding(
        TABLE_LARGER_THAN_DISK,
        f"the {label} table describes a disk of {table_sectors} sectors; this one has {sectors}",
        (
            f"{table_sectors} × {logical} B = {human_bytes(table_sectors * logical)} described, "
            f"{sectors} × {logical} B = {human_bytes(sectors * logical)} present: {missing} sectors are missing.",
            "The image was truncated, or the table was copied from a larger disk. Partitions past the end are "
            "shown but cannot hold what they say; the table is read-only.",
        ),
    )


def hybrid_mbr(lines: list[str]) -> Finding:
    return Finding(
        HYBRID_MBR,
        "hybrid MBR: sector 0 lists partitions of its own beside the GPT's protective entry",
        (
            "BIOS-era systems (Boot Camp's Windows, old boot loaders) read the MBR view; everything else "
            "reads the GPT. Both views are shown:",
            *lines,
            "Change one view without the other and they disagree. Writing with libparted (parted, diskplan) "
            "replaces sector 0 with a plain protective MBR and the MBR view is lost, so this table is read-only.",
        ),
    )


def extended_without_ebr(number: int, lba: int) -> Finding:
    return Finding(
        EXTENDED_WITHOUT_EBR,
        f"extended partition {number} has no EBR at its first sector (LBA {lba}): it holds no logical partitions",
        (
            f"Logical partitions are chained through Extended Boot Records; the first must be at LBA {lba} and "
            "end in the 0x55 0xAA signature. That sector has no signature, so the chain is empty or was lost "
            "(an image that kept only the MBR).",
            "Whatever the extended partition held is not described by any table; do not reuse its space "
            "before checking it.",
        ),
        number,
    )


def ebr_chain_damaged(number: int, detail: str) -> Finding:
    return Finding(
        EBR_CHAIN_DAMAGED,
        f"the chain of logical partitions in extended partition {number} is damaged: {detail}",
        ("Logical partitions after the damage are not shown; the table is read-only.",),
        number,
    )


def size_not_sector_multiple(size_bytes: int, logical: int) -> Finding:
    whole, rest = divmod(size_bytes, logical)
    return Finding(
        SIZE_NOT_SECTOR_MULTIPLE,
        f"the image is {size_bytes} B, not a whole number of {logical} B sectors: the last {rest} B are unused",
        (
            f"{size_bytes} B = {whole} × {logical} B + {rest} B. Every tool sees {whole} sectors; the "
            f"trailing {rest} B belong to no sector.",
            "A truncated download or copy often looks like this; check the image against its source.",
        ),
    )


def tiny_disk(sectors: int, logical: int) -> Finding:
    size = sectors * logical
    return Finding(
        TINY_DISK,
        f"the disk is only {human_bytes(size)} ({sectors} sectors): no partition fits on the 1 MiB grain",
        (
            f"{sectors} × {logical} B = {size} B < {MiB} B. Partitions this small can only start off the "
            "1 MiB grain; a GPT alone needs 2 × 33 sectors with 512 B sectors.",
        ),
    )


def sector_size_mismatch(found_at: int, logical: int) -> Finding:
    """A GPT header at LBA 1 of ``found_at``-byte sectors, none at LBA 1 of the ``logical`` ones in use."""
    return Finding(
        SECTOR_SIZE_MISMATCH,
        f"this looks like a {found_at}-byte-sector disk: attach it with losetup --sector-size {found_at}",
        (
            f"No GPT header at byte {logical} (LBA 1 with {logical} B sectors), but one at byte {found_at} "
            f"(LBA 1 with {found_at} B sectors): the table was written with {found_at} B logical sectors.",
            f"Read with {logical} B sectors every LBA in it would be wrong, so it is shown read-only: "
            f"`losetup --find --show --read-only --sector-size {found_at} IMAGE`, then open the loop device.",
        ),
    )


def hybrid_iso(filesystem: str) -> Finding:
    return Finding(
        HYBRID_ISO,
        f"a {filesystem} filesystem also spans the whole disk: this is a hybrid ISO image",
        (
            "The image is readable both as a CD/DVD filesystem starting at sector 0 and through its partition "
            "table; the table's partitions point into that filesystem.",
            "Changing partitions that overlap the ISO filesystem breaks the image.",
        ),
    )
