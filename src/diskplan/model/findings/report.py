"""The alignment report for a whole disk: what ``diskplan check`` prints and the UI lists."""

from __future__ import annotations

from diskplan.model.disk import Disk, content_phrase
from diskplan.model.extent import Partition
from diskplan.model.findings.codes import (
    LIBPARTED_SAID,
    NO_TABLE,
    READ_ONLY_LABEL,
    SECTOR_SIZE_MISMATCH,
    SEVERITY_RANK,
    UNREADABLE,
    WHOLE_DISK_FS,
)
from diskplan.model.findings.placement import Finding, analyze
from diskplan.model.findings.stackfindings import layers_json
from diskplan.model.grain import Grain, optimal_grain
from diskplan.model.ptypes import describe
from diskplan.model.value import value


@value
class PartitionReport:
    """One partition's alignment and its findings."""
    partition: Partition
    aligned_physical: bool
    aligned_grain: bool
    findings: tuple[Finding, ...]
    aligned_page: bool = True  # on the flash page a start is judged against (the physical block when not flash)


@value
class Report:
    """A disk's whole check: its grain, each partition's report and the table's findings."""
    disk: Disk
    grain: Grain
    partitions: tuple[PartitionReport, ...]
    table_findings: tuple[Finding, ...]

    @property
    def all_findings(self) -> list[Finding]:
        return [*self.table_findings, *(f for p in self.partitions for f in p.findings)]


def _table_findings(disk: Disk) -> list[Finding]:
    out: list[Finding] = []
    t = disk.table
    if t.label is None:
        if disk.filesystem:
            out.append(
                Finding(
                    WHOLE_DISK_FS,
                    f"{content_phrase(disk.filesystem)} fills the whole disk: there is no partition table",
                    (f"Creating a partition table here would destroy {content_phrase(disk.filesystem)}.",),
                )
            )
        elif not any(f.code in (UNREADABLE, SECTOR_SIZE_MISMATCH) for f in disk.findings):
            out.append(Finding(NO_TABLE, "no partition table was found", ()))
    if t.read_only:
        out.append(Finding(READ_ONLY_LABEL, t.read_only, ("diskplan shows this table but will not write it.",)))
    for m in disk.messages:
        out.append(Finding(LIBPARTED_SAID, m, ("libparted said this while reading the table.",)))
    numbers = {p.number for p in t.partitions}
    out.extend(f for f in disk.findings if f.partition not in numbers)  # the reader's (tablefindings.py)
    return out


def table_findings(disk: Disk) -> tuple[Finding, ...]:
    """The table-level findings alone, errors first (what the planner's facts panel shows): no need to
    analyse every partition for them."""
    return tuple(sorted(_table_findings(disk), key=lambda f: SEVERITY_RANK[f.severity]))


def build_report(disk: Disk, grain: Grain | None = None) -> Report:
    geom = disk.geometry
    grain = grain or optimal_grain(geom)
    findings = analyze(geom, disk.table, grain) + [f for f in disk.findings if f.partition is not None]
    findings.sort(key=lambda f: (f.partition or 0, SEVERITY_RANK[f.severity]))
    reports = []
    for p in disk.table.partitions:
        mine = tuple(f for f in findings if f.partition == p.number)
        reports.append(
            PartitionReport(
                p,
                aligned_physical=(p.start - grain.offset) % geom.sectors_per_physical == 0,
                aligned_grain=grain.is_aligned(p.start),
                findings=mine,
                aligned_page=(p.start - grain.offset) % geom.sectors_per_page == 0,
            )
        )
    table_level = _table_findings(disk) + [f for f in findings if f.partition is None]
    table_level.sort(key=lambda f: SEVERITY_RANK[f.severity])  # stable: errors first, then in reading order
    return Report(disk, grain, tuple(reports), tuple(table_level))


CHECK_FORMAT = "diskplan-check"
CHECK_VERSION = 1


def report_json(report: Report) -> dict[str, object]:
    """The stable ``diskplan check --json`` object (documented in docs/check.md)."""
    disk, geom = report.disk, report.disk.geometry
    return {
        "format": CHECK_FORMAT,
        "version": CHECK_VERSION,
        "target": disk.source,
        "logical_sector_size": geom.logical,
        "physical_block_size": geom.physical,
        "alignment_offset": geom.alignment_offset,
        "minimum_io_size": geom.min_io,
        "optimal_io_size": geom.optimal_io,
        "model": geom.model,
        "serial": geom.serial,
        "flash": geom.flash,
        "page_size": geom.page,
        "page_rule": geom.page_rule(),
        "grain_sectors": report.grain.sectors,
        "grain_offset": report.grain.offset,
        "sectors": geom.sectors,
        "table": disk.table.label,
        "partitions": [
            {
                "number": r.partition.number,
                "start": r.partition.start,
                "end": r.partition.end,
                "size": r.partition.size,
                "type": r.partition.type,
                "type_name": describe(r.partition.type),
                "name": r.partition.name,
                "role": r.partition.role.value,
                "flags": list(r.partition.flags),
                "aligned_physical": r.aligned_physical,
                "aligned_page": r.aligned_page,
                "aligned_grain": r.aligned_grain,
                "findings": [f.as_json() for f in r.findings],
                "layers": layers_json(geom, r.partition.start, disk.stack(r.partition.number)),
            }
            for r in report.partitions
        ],
        "layers": layers_json(geom, 0, disk.stack(0)) if disk.table.label is None else [],
        "findings": [f.as_json() for f in report.table_findings],
        "read_only": disk.table.read_only or None,
        "filesystem": disk.filesystem or None,
        "repair": _repair_json(disk),
        "views": [
            {
                "table": v.label,
                "note": v.read_only,
                "partitions": [
                    {"number": p.number, "start": p.start, "end": p.end, "size": p.size, "type": p.type}
                    for p in v.partitions
                ],
            }
            for v in disk.views
        ],
    }


def _repair_json(disk: Disk) -> dict[str, object] | None:
    r = disk.repair
    if r is None:
        return None
    return {
        "good": r.good,
        "rewrite": r.rewrite,
        "header_lba": r.header_lba,
        "entries_lba": r.entries_lba,
        "entries_sectors": r.entries_sectors,
        "reason": r.reason,
        "summary": r.summary,
    }
