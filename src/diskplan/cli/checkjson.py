"""``diskplan check --json``'s objects: the report as JSON, what the other tools would say, and each GPT
partition's unique GUID and attribute bits from the raw entries (docs/check.md documents them)."""

from __future__ import annotations

try:  # the C function json.encoder wraps: importing the json package (its decoder's regexes) costs check ~2 ms
    from _json import encode_basestring_ascii as _quoted
except ImportError:  # an interpreter without the _json accelerator
    from json.encoder import encode_basestring_ascii as _quoted

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


def as_text(doc: object) -> str:
    """``json.dumps(doc, indent=2)``, character for character, at about twice its speed: with an indent, json
    leaves its C encoder for a Python one of generators, ~4 ms of a 128-partition check. Only what json
    itself takes without a ``default``."""
    out: list[str] = []
    put = out.append

    def write(o: object, indent: str) -> None:
        if isinstance(o, str):
            put(_quoted(o))
        elif o is None:
            put("null")
        elif o is True:
            put("true")
        elif o is False:
            put("false")
        elif isinstance(o, int):
            put(int.__repr__(o))
        elif isinstance(o, float):
            put(_float(o))
        elif isinstance(o, dict):
            if not o:
                put("{}")
                return
            inner, sep = indent + "  ", "{"
            for key, value in o.items():
                put(sep + inner)
                put(_quoted(key if isinstance(key, str) else _key(key)))
                put(": ")
                write(value, inner)
                sep = ","
            put(indent + "}")
        elif isinstance(o, list | tuple):
            if not o:
                put("[]")
                return
            inner, sep = indent + "  ", "["
            for value in o:
                put(sep + inner)
                write(value, inner)
                sep = ","
            put(indent + "]")
        else:
            raise TypeError(f"{type(o).__name__} is not JSON")

    write(doc, "\n")
    return "".join(out)


def _key(key: object) -> str:
    """json's spelling of a dict key that is not a string."""
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _float(x: float) -> str:
    """json's spelling of a float."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return float.__repr__(x)
