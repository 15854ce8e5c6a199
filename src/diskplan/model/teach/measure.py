"""``diskplan measure``: which bytes a measurement touches, the tests it runs, and what its numbers say.

The experiments diskplan grew from timed small direct-I/O writes at an aligned offset and at misaligned
ones: fio with 4 KiB writes from sector 34 and from 2048, pg_test_fsync with 16 KiB writes each followed
by a flush from sector 63 and from 2048. A measurement repeats them inside one byte range that holds
nothing: ``base`` is on a 1 MiB boundary of the disk (so the aligned offset is aligned for any physical
block or flash page up to 1 MiB) and every misaligned offset keeps the residue its LBA had on the disk.
"""

from __future__ import annotations

from statistics import median

from diskplan.model.disk import Disk
from diskplan.model.extent import Extent
from diskplan.model.units import KiB, MiB
from diskplan.model.value import value

FIO_SECONDS = 5  # how long each printed fio line runs


@value
class Test:
    name: str  # "write 4 KiB", ...
    write: bool
    block: int  # bytes per operation
    flush: bool  # fdatasync after each operation (pg_test_fsync), else direct I/O alone (fio)

    def fio(self, filename: str, offset: int, count: int) -> str:
        """The same operations with fio, run for 5 seconds over the same bytes (time_based: fio goes round
        them again), long enough to be timed: ``--size`` alone made a couple of operations, under fio's 1 ms
        resolution."""
        rw = "write" if self.write else "read"
        sync = " --fdatasync=1" if self.flush else ""
        return (f"fio --name=at{offset} --filename={filename} --direct=1 --ioengine=psync --rw={rw} "
                f"--bs={self.block // KiB}k --offset={offset} --size={self.block * count} --time_based "
                f"--runtime={FIO_SECONDS}{sync}")


WRITE_4K = Test("write 4 KiB", True, 4 * KiB, False)
WRITE_16K_FLUSH = Test("write 16 KiB + flush", True, 16 * KiB, True)
READ_4K = Test("read 4 KiB", False, 4 * KiB, False)
READ_16K = Test("read 16 KiB", False, 16 * KiB, False)
WRITE_TESTS = (WRITE_4K, WRITE_16K_FLUSH)
READ_TESTS = (READ_4K, READ_16K)


@value
class Offset:
    label: str
    delta: int  # bytes from the aligned base


def offsets(logical: int) -> tuple[Offset, ...]:
    """Aligned, +512 B, and where a partition starting at LBA 34 (parted, sgdisk) or 63 (DOS) puts its
    first byte relative to a 1 MiB boundary. Direct I/O needs whole logical sectors: on a 4Kn disk +512 B
    cannot be asked for, and LBA 34/63 are 4 KiB-aligned (misaligned only for a larger grain)."""
    out = [Offset("aligned", 0)]
    if 512 % logical == 0:
        out.append(Offset("+512 B", 512))
    out += [Offset("as LBA 34", 34 * logical % MiB), Offset("as LBA 63", 63 * logical % MiB)]
    return tuple(out)


def span(logical: int, count: int) -> int:
    """Bytes a measurement needs from its base: the largest offset plus ``count`` of the largest block,
    rounded up to 1 MiB."""
    need = max(o.delta for o in offsets(logical)) + count * max(t.block for t in (*WRITE_TESTS, *READ_TESTS))
    return -(-need // MiB) * MiB


def ranges_written(base: int, logical: int, count: int) -> list[tuple[int, int]]:
    """Every byte range [start, end) the write tests touch: what a test of this command checks."""
    return [(base + o.delta, base + o.delta + count * t.block) for t in WRITE_TESTS for o in offsets(logical)]


def ranges_read(base: int, logical: int, count: int) -> list[tuple[int, int]]:
    """The byte ranges [start, end) the read tests read, merged where they overlap, in order."""
    spans = sorted((base + o.delta, base + o.delta + count * t.block) for t in READ_TESTS for o in offsets(logical))
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def place_in(free: list[Extent], logical: int, need: int) -> tuple[int, int] | None:
    """The byte range [start, start + need) in the first free extent (in sectors) that holds it from a
    1 MiB boundary, or None."""
    for ext in free:
        lo = -(-(ext.start * logical) // MiB) * MiB
        if lo + need <= (ext.end + 1) * logical:
            return lo, lo + need
    return None


@value
class Result:
    test: Test
    offset: Offset
    iops: tuple[float, ...]  # one per round

    @property
    def median(self) -> float:
        return median(self.iops)


def ratio_text(aligned: Result, other: Result) -> str:
    """How many times slower ``other`` was, from the medians, with the spread of the per-round ratios."""
    per_round = [a / o for a, o in zip(aligned.iops, other.iops, strict=True) if o > 0]
    if not per_round or other.median <= 0:
        return "no operations completed"
    return (f"aligned/this = {aligned.median / other.median:.2f}x "
            f"(rounds {min(per_round):.2f}-{max(per_round):.2f})")


def spread_text(r: Result) -> str:
    lo, hi = min(r.iops), max(r.iops)
    return f"{r.median:,.0f} IOPS (rounds {lo:,.0f}-{hi:,.0f})"


def free_range(disk: Disk, need: int, at: int | None = None) -> tuple[int, int] | None:
    """A byte range of ``need`` bytes in the table's free space, clear of every metadata region. ``at``: an
    LBA (the planner's cursor): only the free region holding it, from the first 1 MiB boundary at or after
    ``at`` when the range fits there, else from the region's first; None when ``at`` is not free."""
    t, ss = disk.table, disk.geometry.logical
    free = [e for e in t.free_regions() if not any(e.overlaps(m.extent) for m in t.metadata if m.kind != "free")]
    if at is None:
        return place_in(free, ss, need)
    here = [e for e in free if e.start <= at <= e.end]
    return (place_in([Extent(at, e.end) for e in here], ss, need) or place_in(here, ss, need)) if here else None


def read_range(size: int, need: int, at_byte: int) -> tuple[int, int] | None:
    """Where a read-only measurement reads ``need`` bytes of a ``size``-byte disk: from the 1 MiB boundary
    at or before ``at_byte``, moved back so it ends on the disk; None for a disk smaller than ``need``."""
    if need > size:
        return None
    base = min(at_byte // MiB * MiB, (size - need) // MiB * MiB)
    return base, base + need


def byte_range(path: str, base: int, end: int, logical: int) -> str:
    """The bytes a measurement touches, as the command and the planner say it (numbers grouped)."""
    return (f"bytes {base:,}-{end - 1:,} of {path} (LBA {base // logical:,}-{(end - 1) // logical:,}, "
            f"{(end - base) // MiB} MiB)")


@value
class Row:
    """A line of a measurement's report: a heading, or a line under one, labelled with its offset ("+512 B";
    "" for a fio command line, which stays as it is typed: no grouped numbers)."""

    text: str
    label: str = ""
    heading: bool = False

    @property
    def line(self) -> str:
        """The whole line the command prints."""
        if self.heading:
            return self.text
        return f"  {self.label:<10} {self.text}" if self.label else f"  {self.text}"


def report(results: list[Result], filename: str, base: int, count: int) -> list[Row]:
    """Each test's offsets with IOPS and spread, the misaligned ones with their ratio to the aligned one, then
    the equivalent fio command lines."""
    out: list[Row] = []
    tests = list(dict.fromkeys(r.test for r in results))
    digits = max((len(f"{base + r.offset.delta:,}") for r in results), default=0)  # the IOPS in one column
    for test in tests:
        mine = [r for r in results if r.test is test]
        aligned = mine[0]
        out.append(Row(f"{test.name}:", heading=True))
        for r in mine:
            text = f"byte {base + r.offset.delta:>{digits},}: {spread_text(r)}"
            if r is not aligned:
                text += f"; {ratio_text(aligned, r)}"
            out.append(Row(text, r.offset.label))
    out.append(Row("the same with fio (one job per line):", heading=True))
    for test in tests:
        out += [Row(test.fio(filename, base + r.offset.delta, count)) for r in results if r.test is test]
    return out
