"""Findings: what is wrong with where a partition lies, each with a stable code and the arithmetic.

The codes, their severities and what they mean are registered in model.codes (one registry for the
partition findings here, the table findings of model.tablefindings and model.report).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from diskplan.model.codes import (
    CODES,
    DOS_ERA,
    END_NOT_PHYSICAL,
    MBR_LIMIT,
    OUTSIDE_USABLE,
    OVERLAP,
    PAST_END,
    SEVERITY_RANK,
    SHARED_BLOCK,
    START_NOT_GRAIN,
    START_NOT_PHYSICAL,
)
from diskplan.model.extent import Partition, Role
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, optimal_grain
from diskplan.model.table import MBR_LIMIT_SECTORS, Table
from diskplan.model.units import human_bytes, human_si

# What the seed experiments measured (shared/design/background.md), quoted where a finding applies.
SEED_SSD = "Seed 000: an SSD with GPT from 34s did ~1,500 random 4 KiB write IOPS; from 2048s, ~28,000 (19x)."
SEED_AF = (
    "Seed 002: on 512e 'Advanced Format' HDDs, bonnie++ file creation was up to 2.6x slower misaligned."
)
SEED_DOS = "Seed 003: moving a PCIe SSD's partition from 63s to 2048s took fdatasync from 9,700 to 10,500 ops/s."
SEED_STRIPE = "Seed 004: an LVM stripe over two SSDs wrote 2.9 GB/s misaligned and 5.9 GB/s on a 1 MiB start."


@dataclass(frozen=True)
class Finding:
    code: str  # one of model.codes, which gives its severity
    message: str  # one line
    explanation: tuple[str, ...]  # the arithmetic and what it costs, in plain words
    partition: int | None = None  # partition number, or None for the table

    @property
    def severity(self) -> str:
        return CODES[self.code].severity

    def as_json(self) -> dict[str, object]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


def _offset_arith(geom: Geometry, nbytes: int, modulus: int) -> tuple[str, int]:
    off = geom.alignment_offset % modulus
    if off:
        rem = (nbytes - off) % modulus
        return f"({nbytes} B − {off} B alignment offset) mod {modulus} = {rem}", rem
    rem = nbytes % modulus
    return f"{nbytes} B mod {modulus} = {rem}", rem


def _start_line(geom: Geometry, lba: int) -> str:
    return f"{lba} × {geom.logical} B = {lba * geom.logical} B ({human_si(lba * geom.logical)})"


def start_not_physical(geom: Geometry, p: Partition) -> Finding:
    nbytes = p.start * geom.logical
    arith, rem = _offset_arith(geom, nbytes, geom.physical)
    pb = geom.physical
    block = geom.physical_block_of(p.start)
    return Finding(
        START_NOT_PHYSICAL,
        f"starts {rem} B into physical block {block} ({pb} B blocks)",
        (
            f"Start: {_start_line(geom, p.start)}; {arith}.",
            f"The partition begins {rem} B into a {pb} B physical block, so every {pb} B filesystem block "
            f"inside it straddles two physical blocks.",
            "Writing one such block makes the drive read both physical blocks, merge, and write both "
            "back (read-modify-write): two media writes and a read for every write.",
            SEED_SSD if not geom.rotational else SEED_AF,
        ),
        p.number,
    )


def start_not_grain(geom: Geometry, p: Partition, grain: Grain) -> Finding:
    gbytes = grain.sectors * geom.logical
    nbytes = p.start * geom.logical
    arith, _ = _offset_arith(geom, nbytes, gbytes)
    prev, nxt = grain.align_down(p.start), grain.align_up(p.start)
    cost = (
        "On this disk it costs no read-modify-write (the start is on a physical block), but I/O that the "
        "device wants in grain-sized pieces (RAID stripes, SSD erase blocks) is split at the edges."
    )
    if geom.physical == geom.logical and not geom.user_grains and not geom.optimal_io:
        cost = (
            f"This disk reports {geom.logical}/{geom.physical} B sectors, so nothing is measurably slower "
            "(seed 002): it matters only if the device's real page is larger; say so with --physical-block."
        )
    return Finding(
        START_NOT_GRAIN,
        f"starts off the {human_bytes(gbytes)} grain (nearest boundaries {prev}s and {nxt}s)",
        (
            f"Start: {_start_line(geom, p.start)}; grain {grain.sectors} × {geom.logical} B = {gbytes} B; "
            f"{arith}.",
            f"Aligned starts nearby: {prev}s or {nxt}s. Modern tools (parted -a optimal, fdisk, sfdisk) "
            f"start partitions on a 1 MiB grain.",
            cost,
            # A stripe or erase block: what seed 004 measured when starts missed the stripe.
            *((SEED_STRIPE,) if geom.optimal_io or geom.user_grains else ()),
        ),
        p.number,
    )


def end_not_physical(geom: Geometry, p: Partition) -> Finding:
    after = (p.end + 1) * geom.logical
    arith, rem = _offset_arith(geom, after, geom.physical)
    return Finding(
        END_NOT_PHYSICAL,
        f"ends {rem} B into a physical block",
        (
            f"End: LBA {p.end}, so the next partition could start at {p.end + 1} × {geom.logical} B = "
            f"{after} B; {arith}.",
            "The last physical block is shared with whatever follows; a partition whose size is a whole "
            "number of physical blocks leaves the next one aligned too.",
        ),
        p.number,
    )


def shared_block(geom: Geometry, a: Partition, b: Partition) -> Finding:
    block = geom.physical_block_of(b.start)
    return Finding(
        SHARED_BLOCK,
        f"shares physical block {block} with partition {a.number}",
        (
            f"Partition {a.number} ends at LBA {a.end} and partition {b.number} starts at LBA {b.start}; "
            f"both lie in physical block {block} ({geom.physical} B = {geom.sectors_per_physical} sectors).",
            "A write to either partition's edge rewrites the other's sectors in the same block "
            "(read-modify-write), and a torn write can damage both.",
        ),
        b.number,
    )


def overlap(a: Partition, b: Partition) -> Finding:
    lo, hi = max(a.start, b.start), min(a.end, b.end)
    return Finding(
        OVERLAP,
        f"overlaps partition {a.number} at sectors {lo}..{hi}",
        (
            f"Partition {a.number} is {a.start}..{a.end} and partition {b.number} is {b.start}..{b.end}: "
            f"{hi - lo + 1} sectors belong to both.",
            "Writing to one destroys the other. No tool should have created this.",
        ),
        b.number,
    )


def outside_usable(table: Table, p: Partition) -> Finding:
    return Finding(
        OUTSIDE_USABLE,
        f"lies outside the usable area {table.first_usable}..{table.last_usable}",
        (
            f"The {table.label} table lets partitions use sectors {table.first_usable}..{table.last_usable}; "
            f"this one is {p.start}..{p.end}.",
            "Sectors outside that range hold the table itself: writing there damages the table.",
        ),
        p.number,
    )


def past_end(geom: Geometry, p: Partition) -> Finding:
    return Finding(
        PAST_END,
        f"ends at LBA {p.end}, past the end of the disk (last LBA {geom.last_lba})",
        (
            f"The disk has {geom.sectors} sectors (0..{geom.last_lba}); the partition claims {p.end - geom.last_lba} "
            "sectors that do not exist.",
            "This usually means the table was copied from a larger disk, or the image was truncated.",
        ),
        p.number,
    )


def mbr_limit(geom: Geometry, p: Partition) -> Finding:
    return Finding(
        MBR_LIMIT,
        f"reaches past MBR's limit of {MBR_LIMIT_SECTORS} sectors ({human_bytes(MBR_LIMIT_SECTORS * geom.logical)})",
        (
            f"MBR stores starts and sizes in 32 bits: at most {MBR_LIMIT_SECTORS - 1} × {geom.logical} B.",
            f"This partition ends at LBA {p.end}; use a GPT label to use the whole disk.",
        ),
        p.number,
    )


def dos_era(geom: Geometry, p: Partition) -> Finding:
    nbytes = p.start * geom.logical
    return Finding(
        DOS_ERA,
        f"DOS-era start at sector {p.start} (a track of 63 sectors)",
        (
            f"Old fdisk started the first partition one track in: {p.start} × {geom.logical} B = {nbytes} B "
            f"({human_bytes(nbytes)}), and aligned partitions to cylinders of 255 × 63 sectors.",
            f"{nbytes} mod 4096 = {nbytes % 4096}: no 4 KiB page lines up. Today's fdisk starts at 2048s (1 MiB).",
            SEED_DOS,
        ),
        p.number,
    )


def _is_dos_era(p: Partition) -> bool:
    return p.start == 63 or (p.start % 16065 == 0 and p.start % 2048 != 0)


def analyze(geom: Geometry, table: Table, grain: Grain | None = None) -> list[Finding]:
    """Every finding for the live partitions of ``table`` on ``geom``, in partition order."""
    grain = grain or optimal_grain(geom)
    found: list[Finding] = []
    live = sorted(table.live, key=lambda p: (p.start, p.number))
    physical_matters = geom.physical > geom.logical
    for p in live:
        if p.end > geom.last_lba:
            found.append(past_end(geom, p))
        elif table.label is not None and not (table.first_usable <= p.start and p.end <= table.last_usable):
            found.append(outside_usable(table, p))
        if table.label == "msdos" and p.end >= MBR_LIMIT_SECTORS:
            found.append(mbr_limit(geom, p))
        if p.role is Role.EXTENDED:
            continue  # a container: its logical partitions are checked one by one
        if table.label == "msdos" and _is_dos_era(p):
            found.append(dos_era(geom, p))
        start_on_physical = (p.start - grain.offset) % geom.sectors_per_physical == 0
        if physical_matters and not start_on_physical:
            found.append(start_not_physical(geom, p))
        elif not grain.is_aligned(p.start):
            found.append(start_not_grain(geom, p, grain))
        if physical_matters and (p.end + 1 - grain.offset) % geom.sectors_per_physical:
            found.append(end_not_physical(geom, p))
    found.extend(_pair_findings(geom, live))
    return sorted(found, key=lambda f: (f.partition or 0, SEVERITY_RANK[f.severity]))


def _pair_findings(geom: Geometry, live: list[Partition]) -> Iterable[Finding]:
    # Neighbours by start: overlaps between data partitions, and blocks shared across a boundary.
    data = [p for p in live if p.role is not Role.EXTENDED]
    spp = geom.sectors_per_physical
    for i, a in enumerate(data):
        for b in data[i + 1 :]:
            if b.start > a.end:
                if spp > 1 and geom.physical_block_of(a.end) == geom.physical_block_of(b.start):
                    yield shared_block(geom, a, b)
                break
            yield overlap(a, b)
    extended = [p for p in live if p.role is Role.EXTENDED]
    for i, a in enumerate(extended):
        for b in extended[i + 1 :]:
            if a.extent.overlaps(b.extent):
                yield overlap(a, b)
    for e in extended:
        for p in live:
            if p.role is Role.PRIMARY and p.extent.overlaps(e.extent):
                yield overlap(e, p)


def worst(findings: Iterable[Finding]) -> str | None:
    ranks = [SEVERITY_RANK[f.severity] for f in findings]
    if not ranks:
        return None
    return next(s for s, r in SEVERITY_RANK.items() if r == min(ranks))
