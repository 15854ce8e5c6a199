"""Findings: what is wrong with where a partition lies, each with a stable code and the arithmetic.

The codes, their severities and what they mean are registered in model.findings.codes (one registry for the
partition findings here, the table findings of model.findings.tablefindings and model.findings.report).
"""

from __future__ import annotations

from collections.abc import Iterable

from diskplan.model.extent import Partition, Role
from diskplan.model.findings.codes import (
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
    START_NOT_PAGE,
    START_NOT_PHYSICAL,
)
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, device_io_hint, libfdisk_grain, libparted_optimum, optimal_grain
from diskplan.model.table import MBR_LIMIT_SECTORS, Table
from diskplan.model.units import human_bytes, human_si
from diskplan.model.value import value

# What the experiments behind diskplan measured (README "Where the numbers come from"), quoted where a
# finding applies: each says what the device, the tool and the workload were.
MEASURED_SSD = (
    "Measured: a Crucial M4 256 GB SSD that reports 512/512 B sectors, fio sequential 4 KiB direct writes "
    "(8 jobs, iodepth 4): ~1,500 IOPS from 34s, ~28,000 from 2048s (19x); reads ~21,400 vs 24,700-30,500 "
    "(mean ~28,700: 1.3x)."
)
MEASURED_AF = (
    "Measured: 2 TB Advanced Format hard disks (512 B logical / 4096 B physical), bonnie++: misaligned file "
    "creation up to 2.6x slower, random deletes 1.6x; sequential throughput barely changed."
)
MEASURED_DOS = (
    "Measured: an OCZ RevoDrive3 X2 PCIe SSD, pg_test_fsync, start 63s vs 2048s: 4 x 4 kB open_sync writes "
    "3,991 -> 4,989 ops/s (+25%); one 16 kB write + fdatasync 9,700 -> 10,500 ops/s (+8%, the flush dominates)."
)
MEASURED_STRIPE = (
    "Measured: an LVM stripe (no parity) over two PCIe SSDs (lvcreate -i 2 -I 8, six parallel dd direct "
    "writes): 2.9 GB/s with the PVs on whole disks, 5.9 GB/s with them on partitions from parted -a optimal "
    "... 1MB; the experiment does not print pe_start, so which boundaries moved is not shown (demo lvm-partition)."
)
RMW_EDGES = (
    "What pays is the size of each I/O, not whether the stream is sequential: every small write that "
    "straddles a block pays its own read-modify-write (the SSD's sequential 4 KiB direct writes were 19x "
    "slower), while large I/Os pay only at their two edges, which is why misaligned hard disks kept their "
    "sequential throughput (written in large pieces) while metadata work (many small writes) slowed."
)
FS_BLOCK = 4096  # the filesystem block Linux filesystems use (it cannot exceed the 4 KiB memory page on x86)


def straddles(unit: int, what: str) -> str:
    """What a start ``unit`` B into ... means for writes, in one sentence: a 4 KiB filesystem block for
    units of 4 KiB or less, a write of the unit's own size for larger ones (a 4 KiB block is then smaller
    than the unit and costs a read-modify-write wherever it lies)."""
    if unit <= FS_BLOCK:
        return f"every {unit} B filesystem block inside it straddles two {what}s"
    return (f"every {unit} B write the partition sends on its own {unit} B boundaries straddles two {what}s "
            f"(a {FS_BLOCK} B filesystem block is smaller than one {what} and costs a read-modify-write wherever "
            "it lies; the misalignment adds a second one to every larger write)")


@value
class Finding:
    """One thing found about a disk or a partition, with its explanation."""
    code: str  # one of model.findings.codes, which gives its severity
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
            f"The partition begins {rem} B into a {pb} B physical block, so {straddles(pb, 'physical block')}.",
            "Writing one of them alone makes the drive read both physical blocks, merge, and write both "
            "back (read-modify-write): two media writes and a read for that write.",
            RMW_EDGES,
            MEASURED_SSD if geom.flash else MEASURED_AF,
        ),
        p.number,
    )


def start_not_page(geom: Geometry, p: Partition) -> Finding:
    """A start off the flash page on a device that reports a smaller physical block (an SSD saying 512/512)."""
    nbytes = p.start * geom.logical
    arith, rem = _offset_arith(geom, nbytes, geom.page)
    pg = geom.page
    return Finding(
        START_NOT_PAGE,
        f"starts {rem} B into a {pg} B flash page (the device reports {geom.physical} B blocks)",
        (
            f"Start: {_start_line(geom, p.start)}; {arith}.",
            f"How starts are judged here: {geom.page_rule()}.",
            f"{pg} B is an assumption about flash, not a number the device gives: SSDs that report "
            f"{geom.physical} B sectors write pages of 4 KiB or more. If its page is larger, say "
            "--physical-block 16384 (or its size); if it is not flash at all (a virtual disk), say --no-ssd.",
            f"So {straddles(pg, 'page')}: writing one alone makes the drive read both pages, merge, and write "
            "both back (read-modify-write).",
            RMW_EDGES,
            MEASURED_SSD,
        ),
        p.number,
    )


def start_not_grain(geom: Geometry, p: Partition, grain: Grain, table: Table | None = None) -> Finding:
    gbytes = grain.sectors * geom.logical
    nbytes = p.start * geom.logical
    arith, _ = _offset_arith(geom, nbytes, gbytes)
    near = nearby_starts(grain, p.start, table)
    fdisk, parted = libfdisk_grain(geom), libparted_optimum(geom)
    tools = (
        f"fdisk and sfdisk start on {human_bytes(fdisk.sectors * geom.logical)} ({fdisk.sectors}s); "
        f"parted -a optimal on {human_bytes(parted.sectors * geom.logical)} ({parted.sectors}s)."
    )
    striped = striped_hint(geom)
    if striped:
        cost = (
            f"The start is on a physical block, but the device asks for I/O in larger pieces ({striped}). "
            "The device does not say which kind of volume it is: on a striped volume without parity (md RAID 0, "
            "an LVM stripe) an I/O that crosses a chunk boundary is split between two devices; on a parity RAID "
            "(md RAID 5/6, most hardware RAID) a write that misses a full stripe also costs a read-modify-write "
            "of parity (read old data and parity, write both)."
        )
    elif geom.user_grains:
        cost = (
            "The start is on a physical block, but I/O in pieces of your --grain (a stripe, an erase block) "
            "is split at its edges: a striped volume sends such a write to two devices."
        )
    elif geom.flash:
        cost = (
            f"The start is on a {geom.page} B flash page, so no write is split; erase blocks are usually "
            "several MiB, which neither this start nor 1 MiB lines up with unless you give the size with --grain."
        )
    else:
        cost = (
            f"This disk reports {geom.logical}/{geom.physical} B sectors and is not known to be flash: on a hard "
            f"disk whose physical sectors really are {geom.physical} B nothing is measurably slower. An SSD "
            f"that reports {geom.logical}/{geom.physical} still has 4 KiB pages or larger: say --ssd (or "
            "--physical-block 4096)."
        )
    return Finding(
        START_NOT_GRAIN,
        f"starts off the {human_bytes(gbytes)} grain"
        + (f" (nearest boundar{'ies' if ' or ' in near else 'y'} {near})" if near else ""),
        (
            f"Start: {_start_line(geom, p.start)}; grain {grain.sectors} × {geom.logical} B = {gbytes} B; "
            f"{arith}.",
            (f"Aligned starts nearby: {near}. " if near else "No aligned start lies in the usable area nearby. ")
            + tools,
            cost,
            *((MEASURED_STRIPE,) if striped or geom.user_grains else ()),
        ),
        p.number,
    )


def striped_hint(geom: Geometry) -> str:
    """The device's I/O hints that describe a stripe, in words ("minimum I/O 65536 B, optimal I/O 196608 B"),
    or "" when there are none: a minimum I/O of one physical block (every plain disk reports one, a loop
    device 512 B) says nothing about a stripe."""
    hints = [f"{name} {size} B" for name, size in (("minimum I/O", geom.min_io), ("optimal I/O", geom.optimal_io))
             if size > geom.page and device_io_hint(geom)]
    return ", ".join(hints)


def nearby_starts(grain: Grain, lba: int, table: Table | None) -> str:
    """The grain's boundaries either side of ``lba`` that a partition could start on: inside the table's
    usable area (LBA 0 holds the MBR, LBA 1-33 GPT's header and entries), "2048s or 4096s"."""
    lo, hi = (table.first_usable, table.last_usable) if table is not None and table.label else (1, None)
    cands = [c for c in (grain.align_down(lba), grain.align_up(lba)) if c >= lo and (hi is None or c <= hi)]
    return " or ".join(f"{c}s" for c in dict.fromkeys(cands))


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


CYLINDER = 255 * 63  # sectors in one cylinder of the DOS geometry old fdisk used (255 heads, 63 sectors)


def dos_era(geom: Geometry, p: Partition) -> Finding:
    nbytes = p.start * geom.logical
    if p.start == 63:
        how = "Old fdisk (DOS compatibility, CentOS 5's default) started the first partition one track in"
    else:
        how = (f"Old fdisk started partitions on cylinder boundaries (cylinder {p.start // CYLINDER:,} × "
               f"{CYLINDER:,} sectors)")
    arith, rem = _offset_arith(geom, nbytes, FS_BLOCK)
    page = (f"{arith}: no 4 KiB block of the partition lines up with a 4 KiB page." if rem else
            f"{arith}: this start happens to lie on a 4 KiB boundary, but not on the 1 MiB grain today's tools use.")
    first = libfdisk_grain(geom).sectors + geom.offset_sectors
    return Finding(
        DOS_ERA,
        f"DOS-era start at sector {p.start} ({'a track of 63 sectors' if p.start == 63 else 'a cylinder boundary'})",
        (
            f"{how}: {p.start} × {geom.logical} B = {nbytes} B ({human_bytes(nbytes)}), and ended partitions on "
            f"cylinders of 255 × 63 = {CYLINDER:,} sectors.",
            f"{page} Today's fdisk starts the first partition at {first}s "
            f"({human_bytes(libfdisk_grain(geom).sectors * geom.logical)}).",
            MEASURED_DOS,
        ),
        p.number,
    )


def _is_dos_era(p: Partition) -> bool:
    return p.start == 63 or (p.start % CYLINDER == 0 and p.start % 2048 != 0)


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
        start = start_finding(geom, p, grain, table)
        if start is not None:
            found.append(start)
        if physical_matters and (p.end + 1 - grain.offset) % geom.sectors_per_physical:
            found.append(end_not_physical(geom, p))
    found.extend(_pair_findings(geom, live))
    return sorted(found, key=lambda f: (f.partition or 0, SEVERITY_RANK[f.severity]))


def start_finding(geom: Geometry, p: Partition, grain: Grain, table: Table | None = None) -> Finding | None:
    """What is wrong with where ``p`` starts: the worst of missing the physical block, the flash page or the
    grain; None when it starts on the grain."""
    if geom.physical > geom.logical and (p.start - grain.offset) % geom.sectors_per_physical:
        return start_not_physical(geom, p)
    if (p.start - grain.offset) % geom.sectors_per_page:
        return start_not_page(geom, p)
    if not grain.is_aligned(p.start):
        return start_not_grain(geom, p, grain, table)
    return None


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
