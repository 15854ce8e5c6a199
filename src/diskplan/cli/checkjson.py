"""``diskplan check --json``'s objects: the report as JSON, what the other tools would say, and each GPT
partition's unique GUID and attribute bits from the raw entries (docs/check.md documents them)."""

from __future__ import annotations

from diskplan.backend.raw.gptattrs import raw_entries
from diskplan.backend.raw.gptcheck import check_gpt
from diskplan.model.findings.report import Report, report_json
from diskplan.model.findings.toolsay import tools_say
from diskplan.model.geometry import Geometry


def tools_json(report: Report, reported: Geometry) -> dict[str, object]:
    """``check --json``: each partition gets a ``tools`` object (docs/check.md)."""
    out = report_json(report)
    says = tools_say(reported, report.disk.table)
    partitions = out["partitions"]
    assert isinstance(partitions, list)  # report_json's dicts, one per partition
    for p in partitions:
        p["tools"] = says[int(p["number"])].as_json()
    return out


def _raw_entries(report: Report, doc: dict[str, object]) -> None:
    """Each GPT partition's unique GUID and its 64 attribute bits, from the raw entries (libparted gives neither)."""
    disk = report.disk
    if disk.table.label != "gpt":
        return
    entries = raw_entries(disk.table, check_gpt(disk.source, disk.geometry.logical, disk.geometry.sectors))
    partitions = doc["partitions"]
    assert isinstance(partitions, list)
    for part in partitions:
        e = entries.get(part["number"])
        if e is not None:
            part["guid"], part["attribute_bits"] = e.part_guid, f"0x{e.attributes:016x}"


def json_result(one: tuple[Report | None, Geometry | None, str]) -> tuple[int, dict[str, object] | None, str]:
    """(exit status, the report's JSON object or None, why it could not be read)."""
    report, reported, error = one
    if report is None or reported is None:
        return 2, None, error
    doc = tools_json(report, reported)
    _raw_entries(report, doc)
    return (1 if report.all_findings else 0), doc, ""
