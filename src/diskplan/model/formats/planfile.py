"""Plan files: the wanted table as JSON (documented in docs/plans.md), ``sfdisk --dump`` text read as a plan,
and the same plan written as an sfdisk script or as parted commands.

JSON plan, format version 1 (``to_json`` writes every field; ``load_plan`` needs only the starred ones)::

    {
      "format": "diskplan-plan", "version": 1,
      "label": "gpt",*                       gpt or msdos
      "sector_size": 512,                     logical sector size in bytes (default 512; see below)
      "sectors": 2097152,                     device size in sectors, when known
      "first_lba": 34, "last_lba": 2097118,   GPT usable area, when known
      "made_against": "sha256:...",           the disk's table it was made from (model.plan.fingerprint), when known
      "partitions": [*
        {"number": 1, "start": 2048,* "end": 206847, "size": 204800,   sectors, end inclusive; end or size*
         "type": "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", "type_name": "EFI system",
         "name": "EFI", "flags": ["legacy_boot"], "role": "primary",
         "keeps": {"number": 1, "guid": "0E8B5A1C-..."}}   the disk's partition 1, data and all (below)
      ]
    }

``start`` and ``size`` may also be written with a unit ("1MiB", "2048s", "100MB"; see model.sizes); ``type``
may be a name ("EFI system", "swap"), a GUID or an MBR id ("0x83"); ``number`` and ``role`` default from
the order and the type. Unknown keys are refused (a typo must not silently become a default).

A *relative* plan, for disks of any size (model.plan.relplan): ``"size": "50%"`` (of the disk's usable space) or
``"size": "rest"``, and ``start`` left out (the next grain boundary); ``placed_on`` resolves it on each disk.
One that gives no ``sector_size`` and every other amount in bytes ("512MiB") resolves in each disk's own
sectors, 512 or 4096 B; a count of sectors (``204800``, "2048s") means 512-byte ones there, as in any plan
without ``sector_size``, and a disk of another sector size refuses it, saying which entry counts sectors.

``keeps`` says that the entry *is* an existing partition of the disk, which keeps its content: its number
(the same as the entry's: a kept partition keeps its number) and, on GPT, its unique GUID (PARTUUID), so a
plan made for another disk or another table never moves the wrong bytes. Only such an entry may lie
elsewhere or have another size than the partition on the disk: ``diskplan apply`` then moves and resizes
it with its data (backend.move.planmoves). Without ``keeps`` a partition is placed as a new one, and an
existing partition the plan does not keep exactly is deleted, as always.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import unicodedata
from collections.abc import Mapping
from itertools import pairwise

from diskplan.model import labels, ptypes
from diskplan.model.extent import Partition, Role, State
from diskplan.model.formats import sfdisk_script
from diskplan.model.formats.jsontext import as_text
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.labels import LabelError
from diskplan.model.plan import relplan
from diskplan.model.plan.operations import validate
from diskplan.model.plan.plan import Outcome, Plan
from diskplan.model.safetext import UNSAFE, safe
from diskplan.model.sizes import SizeError, UnitFamily, parse_lba, parse_size
from diskplan.model.table import Table, new_table
from diskplan.model.value import field, replace, value

FORMAT = "diskplan-plan"
VERSION = 1
_TOP_KEYS = {"format", "version", "label", "sector_size", "sectors", "first_lba", "last_lba", "partitions", "comment",
             "made_against"}
_PART_KEYS = {"number", "start", "end", "size", "type", "type_name", "name", "flags", "attributes", "role", "comment",
              "keeps"}
_KEEPS_KEYS = {"number", "guid"}
_GUID = re.compile(r"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}")


class PlanFileError(ValueError):
    """The text is not a plan diskplan can use: ``str(exc)`` is one line saying where and why."""

    def __init__(self, message: str) -> None:
        super().__init__(safe(message))  # it may quote the plan: escaped once, wherever it is shown


@value
class Keep:
    """A plan's partition ``number`` is the disk's partition ``number``, whose GPT unique GUID is ``guid``
    ("" on msdos): it keeps its content wherever the plan puts it."""

    number: int
    guid: str = ""


@value
class PlanSpec:
    """The wanted table, independent of any disk: what a plan file holds."""

    label: str  # "gpt" or "msdos"
    sector_size: int = 512
    partitions: tuple[Partition, ...] = ()  # state PROPOSED, attribute flags only, canonical type codes
    sectors: int | None = None  # device size in logical sectors, when known
    first_lba: int | None = None  # GPT usable area, when known
    last_lba: int | None = None
    made_against: str | None = None  # fingerprint of the table it was made from (apply refuses another)
    # What the plan file said that diskplan does not apply (sfdisk's uuid=): said, not part of the table.
    notes: tuple[str, ...] = field(default=(), compare=False)
    # An sfdisk script that leaves starts, sizes or numbers to the disk: ``partitions`` are placed from it
    # on the disk (table_from_spec), as sfdisk would place them there.
    script: sfdisk_script.Script | None = field(default=None, compare=False)
    # A relative plan (sizes in % or "rest", starts left to snapping; model.plan.relplan), in the file's order:
    # ``partitions`` are resolved from it on each disk.
    relative: tuple[relplan.Want, ...] | None = field(default=None, compare=False)
    keeps: tuple[Keep, ...] = ()  # partitions that are the disk's own, their content kept (JSON ``keeps``)
    sector_size_given: bool = field(default=True, compare=False)  # False: the file has none (512 assumed)
    # An sfdisk script: what it leaves out is what sfdisk takes on the disk: without ``sector-size:`` its
    # numbers count the disk's sectors, and a GPT's first-lba is sfdisk's default there (placed_on).
    sfdisk: bool = field(default=False, compare=False)
    # The disk id (sfdisk's label-id: GPT's disk GUID, msdos's signature as "0x1234abcd") and GPT partition
    # number -> unique GUID (uuid=) the plan names.
    label_id: str = field(default="", compare=False)
    guids: tuple[tuple[int, str], ...] = field(default=(), compare=False)

    @property
    def needs_disk(self) -> bool:
        return self.script is not None or self.relative is not None

    @property
    def any_sector_size(self) -> bool:
        """A relative plan with no sector_size and no count of sectors: it resolves in each disk's own."""
        return self.relative is not None and not self.sector_size_given and relplan.counted(self.relative) is None


# --- from and to tables ---------------------------------------------------------------------------------


def spec_from_table(table: Table, geometry: Geometry, keeps: Mapping[int, str] | None = None) -> PlanSpec:
    """The live partitions of ``table`` (read from a disk, or a plan's wanted table) as a plan. ``keeps``:
    number -> GPT unique GUID ("" on msdos) of each partition the plan keeps with its content."""
    try:
        label = labels.check_label(table.label)
    except LabelError as exc:
        raise PlanFileError(str(exc)) from exc
    parts = []
    for p in sorted(table.live, key=lambda p: p.number):
        code = p.type or labels.fold_type(label, "", p.flags) or labels.default_type(label, p.role)
        parts.append(Partition(p.number, p.start, p.end, code, p.name, labels.plan_flags(label, p.flags), p.role,
                               State.PROPOSED))
    gpt = label == "gpt"
    kept = tuple(Keep(p.number, (keeps or {})[p.number]) for p in parts if p.number in (keeps or {}))
    return PlanSpec(label, geometry.logical, tuple(parts), geometry.sectors,
                    table.first_usable if gpt else None, table.last_usable if gpt else None, keeps=kept)


def table_from_spec(spec: PlanSpec, geometry: Geometry, current: Table | None = None) -> Table:
    """The plan as a table on ``geometry`` (all partitions PROPOSED). Raises PlanFileError when it cannot
    be written there: another sector size, partitions past the usable area, overlaps.

    ``current``: the table on the disk. A plan of the same label is written into it (libparted keeps its
    usable area and its entry array, which a GPT made by another tool may size other than 128 entries);
    otherwise the plan gets a new label as libparted makes one."""
    spec = placed_on(spec, geometry, current)
    table = _base_table(spec, geometry, current)
    first = table.first_usable if spec.first_lba is None else spec.first_lba
    last = spec.last_lba
    if last is None or (spec.sectors is not None and spec.sectors != geometry.sectors):
        last = table.last_usable  # a plan made for another disk size: this disk's own GPT end
    if spec.label == "gpt" and not (table.first_usable <= first <= last <= table.last_usable):
        raise PlanFileError(f"the plan's usable area {first}s..{last}s does not fit this disk's GPT "
                            f"({table.first_usable}s..{table.last_usable}s)")
    named = spec.label == "gpt" and (spec.first_lba is not None or spec.last_lba is not None)
    guids = dict(spec.guids)
    parts = tuple(replace(p, uuid=guids[p.number]) if p.number in guids else p for p in spec.partitions)
    table = replace(table, first_usable=first, last_usable=last, usable_named=named,
                    disk_id=spec.label_id).with_partitions(parts)
    problems = validate(table, geometry)
    if problems:
        raise PlanFileError("the plan does not fit this disk: " + "; ".join(problems))
    return table


def _base_table(spec: PlanSpec, geometry: Geometry, current: Table | None) -> Table:
    """The table the plan is written into: the disk's own when it has the plan's label, else a new one."""
    if spec.sector_size != geometry.logical:
        if spec.sector_size_given:
            raise PlanFileError(f"the plan is for {spec.sector_size}-byte sectors; this disk has "
                                f"{geometry.logical}-byte sectors (every position would mean another byte)")
        counts = relplan.counted(spec.relative) if spec.relative is not None else None
        raise PlanFileError(f"the plan gives no sector_size, so its sectors are {spec.sector_size} B; this disk has "
                            f"{geometry.logical}-byte sectors (every position would mean another byte)"
                            + (f"; {counts} is a count of sectors: in bytes (100MiB, 1GB) the plan resolves on "
                               "disks of any sector size" if counts else ""))
    same = current is not None and current.label == spec.label and not current.read_only
    table = replace(current, notes=()) if same and current is not None else new_table(spec.label, geometry)
    if table.last_usable < table.first_usable:
        own = table.first_usable + geometry.sectors - 1 - table.last_usable
        raise PlanFileError(f"this disk has {geometry.sectors} sector(s) of {geometry.logical} B: too small for a "
                            f"{spec.label} table, whose own structures take {own} sectors before any partition")
    return table


def placed_on(spec: PlanSpec, geometry: Geometry, current: Table | None = None) -> PlanSpec:
    """A plan that leaves places to the disk (an sfdisk script without starts, a relative plan) placed on
    this one, its notes saying what each relative size became here; a plan in exact sectors as it is."""
    if spec.sfdisk:
        spec = _sfdisk_defaults(spec, geometry, current)
    if not spec.needs_disk:
        return spec
    if spec.script is not None:  # an sfdisk script for a blank disk: sector sizes are the disk's
        spec = replace(spec, sector_size=geometry.logical)
    if spec.any_sector_size and spec.sector_size != geometry.logical:  # its amounts counted in this disk's sectors
        assert spec.relative is not None
        try:
            wants = relplan.in_sectors_of(spec.relative, geometry.logical)
        except relplan.RelativeError as exc:
            raise PlanFileError(str(exc)) from exc
        spec = replace(spec, sector_size=geometry.logical, relative=wants)
    table = _base_table(spec, geometry, current)
    if spec.script is not None:
        return _placed(spec, spec.script, geometry, table)
    assert spec.relative is not None
    try:
        parts, notes = relplan.resolve(spec.relative, optimal_grain(geometry), table.first_usable, table.last_usable,
                                       geometry.logical)
    except relplan.RelativeError as exc:
        raise PlanFileError(str(exc)) from exc
    return _checked(replace(spec, partitions=parts, sectors=geometry.sectors, relative=None,
                            notes=(*spec.notes, *notes)))


def save_plan(plan: Plan, made_against: str | None = None, guids: Mapping[int, str] | None = None) -> str:
    """The plan's wanted table as a JSON plan file (what the UI saves); ``made_against``: the fingerprint
    of ``plan.base`` on its disk. Every partition of the disk the plan still holds is written with
    ``keeps`` (``guids``: number -> GPT unique GUID, as on the disk), so a data move the plan holds is
    applied as a move (``diskplan apply``), never as a deletion and a new partition. On GPT a partition
    whose GUID is unknown (a demo disk) gets no ``keeps``, and a plan that moves one is refused: it could
    not say which partition it moves."""
    guids = guids or {}
    msdos = plan.base.label == "msdos"  # no GUIDs: keeps by number (and made_against) alone
    kept = {p.number: guids.get(p.number, "") for p in plan.table.live
            if p.state is State.EXISTING and (msdos or guids.get(p.number))}
    unknown = [op.number for op in plan.changes() if op.kind == "move" and op.number not in kept]
    if unknown:
        raise PlanFileError(f"the GPT unique GUID of partition {unknown[0]} is unknown, so the plan file could not "
                            "say which partition it moves: write the moves (w), or undo them before saving")
    return to_json(replace(spec_from_table(plan.table, plan.geometry, kept), made_against=made_against))


def load_into(plan: Plan, text: str) -> Outcome:
    """A plan file (JSON or sfdisk dump) made the wanted table of ``plan``: an undoable step, refused with
    the reason when the text is not a plan or does not fit this disk."""
    try:
        spec = placed_on(load_plan(text), plan.geometry, plan.base)
        table = table_from_spec(spec, plan.geometry, plan.base)
    except PlanFileError as exc:
        return Outcome(plan, plan, False, str(exc))
    moving = [k.number for k in spec.keeps if (q := plan.base.by_number(k.number)) is not None
              and (w := table.by_number(k.number)) is not None and (q.start, q.end) != (w.start, w.end)]
    if moving:  # the planner would read it as a deletion and a new partition: its data left behind
        return Outcome(plan, plan, False, f"this plan moves or resizes partition {moving[0]} with its data: "
                       "`diskplan apply PLAN DISK` applies it (the planner loads plans that move no data)")
    outcome = plan.adopt(table)
    return replace(outcome, message="; ".join((outcome.message, *spec.notes))) if spec.notes else outcome


# --- JSON -----------------------------------------------------------------------------------------------


def _keeps_json(k: Keep) -> dict[str, object]:
    return {"number": k.number, **({"guid": k.guid} if k.guid else {})}


def to_json(spec: PlanSpec) -> str:
    keeps = {k.number: k for k in spec.keeps}
    doc: dict[str, object] = {"format": FORMAT, "version": VERSION, "label": spec.label}
    if not spec.any_sector_size:  # a plan for any sector size stays one
        doc["sector_size"] = spec.sector_size
    for key in ("sectors", "first_lba", "last_lba", "made_against"):
        if getattr(spec, key) is not None:
            doc[key] = getattr(spec, key)
    doc["partitions"] = _relative_entries(spec.relative) if spec.relative is not None else [
        {
            "number": p.number,
            "start": p.start,
            "end": p.end,
            "size": p.size,
            "type": p.type,
            "type_name": ptypes.describe(p.type),
            "name": p.name,
            "flags": list(p.flags),
            "role": p.role.value,
            **({"keeps": _keeps_json(keeps[p.number])} if p.number in keeps else {}),
        }
        for p in sorted(spec.partitions, key=lambda p: p.number)
    ]
    text = as_text(doc, ascii=False)
    # Readable names in any script, but JSON's own \uXXXX for what a terminal acts on: json escapes only
    # C0 controls, and a C1 control or a bidi override in a name would reach the terminal as it is.
    return "".join(json.dumps(ch)[1:-1] if ch != "\n" and unicodedata.category(ch) in UNSAFE else ch
                   for ch in text) + "\n"


def _relative_entries(wants: tuple[relplan.Want, ...]) -> list[dict[str, object]]:
    """A relative plan's partitions as the file gave them: in its order, sizes as written, starts only if given."""
    out: list[dict[str, object]] = []
    for w in wants:
        p = w.part
        entry: dict[str, object] = {"number": p.number}
        if w.start is not None:
            entry["start"] = w.start_given or w.start
        entry["size"] = w.size.text if w.size.sectors is None or w.size.given else w.size.sectors
        entry.update({"type": p.type, "type_name": ptypes.describe(p.type), "name": p.name, "flags": list(p.flags),
                      "role": p.role.value})
        out.append(entry)
    return out


MAX_NUMBER = sfdisk_script.MAX_NUMBER  # GPT and libparted count sectors in 64 bits: one limit for both formats


def _shown(value: object) -> str:
    """A value from the plan for a message: its repr, cut short (a message stays one readable line)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:36] + "..."


def _int(value: object, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_NUMBER:
        raise PlanFileError(f"{where} must be a whole number from {minimum} to 2^64-1, not {_shown(value)}")
    return value


def _sectors(value: object, where: str, geom: Geometry, *, position: bool) -> int:
    if isinstance(value, str):
        try:
            return (parse_lba if position else parse_size)(value, geom).sectors
        except SizeError as exc:
            raise PlanFileError(f"{where}: {exc}") from exc
    return _int(value, where, minimum=0 if position else 1)


def _in_bytes(value: object, geom: Geometry, *, position: bool) -> str:
    """``value`` as written when it is an amount in bytes ("512MiB"), which a relative plan counts in each
    disk's own sectors; "" for a count of sectors. ``value`` was read by _sectors already."""
    if not isinstance(value, str):
        return ""
    family = (parse_lba if position else parse_size)(value, geom).family
    return "" if family in (UnitFamily.SECTORS, UnitFamily.PERCENT) else value.strip()


def _from_json(text: str) -> PlanSpec:
    try:
        doc = json.loads(text)
        json.dumps(doc, ensure_ascii=False).encode("utf-8")  # every string is text (see below)
    except json.JSONDecodeError as exc:
        raise PlanFileError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from exc
    except RecursionError as exc:
        raise PlanFileError("not a plan: its JSON is nested too deeply") from exc
    except UnicodeEncodeError as exc:  # "\ud800" in JSON: a lone UTF-16 surrogate, which is no character
        bad = ascii(exc.object[exc.start : exc.end])[1:-1]
        raise PlanFileError(f"not a plan: it holds {bad}, half of a UTF-16 pair, which is not text") from exc
    except ValueError as exc:  # Python's limit on the digits of an integer
        raise PlanFileError(f"not a plan: a number in it has more than {sys.get_int_max_str_digits()} "
                            "digits") from exc
    if not isinstance(doc, dict):
        raise PlanFileError("a JSON plan is an object with label and partitions")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise PlanFileError(f"unknown key {unknown[0]!r} in the plan (keys: {', '.join(sorted(_TOP_KEYS))})")
    if doc.get("format", FORMAT) != FORMAT:
        raise PlanFileError(f"this JSON is a {_shown(doc.get('format'))}, not a diskplan plan")
    version = doc.get("version", VERSION)
    if version != VERSION:
        raise PlanFileError(f"plan format version {_shown(version)}: this diskplan reads version {VERSION}")
    if "label" not in doc or "partitions" not in doc:
        raise PlanFileError("a plan needs a label and a partitions list")
    if not isinstance(doc["label"], str):
        raise PlanFileError("label must be \"gpt\" or \"msdos\"")
    try:
        label = labels.check_label(doc["label"])
    except LabelError as exc:
        raise PlanFileError(str(exc)) from exc
    ss = _int(doc.get("sector_size", 512), "sector_size", minimum=512)
    if ss & (ss - 1):
        raise PlanFileError(f"sector_size must be a power of two, not {ss}")
    geom = Geometry(sectors=1, logical=ss, physical=ss)
    extra = {k: _int(doc[k], k, minimum=1) if doc.get(k) is not None else None
             for k in ("sectors", "first_lba", "last_lba")}
    raw = doc["partitions"]
    if not isinstance(raw, list):
        raise PlanFileError("partitions must be a list")
    _countable(label, len(raw))
    parts: list[Partition] = []
    wants: list[relplan.Want] = []
    keeps: list[Keep] = []
    for i, item in enumerate(raw, 1):
        where = f"partition entry {i}"
        if not isinstance(item, dict):
            raise PlanFileError(f"{where} must be an object")
        unknown = sorted(set(item) - _PART_KEYS)
        if unknown:
            raise PlanFileError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_PART_KEYS))})")
        share = _share(item.get("size"), f"{where}: size")
        if share is not None or "start" not in item:  # a relative entry: resolved on each disk
            if "end" in item or "size" not in item:
                raise PlanFileError(f"{where}: without a start, or with a size in % or \"rest\", give a size and "
                                    "no end (the end follows on each disk)")
            start_at = _sectors(item["start"], f"{where}: start", geom, position=True) if "start" in item else None
            size_of = share or relplan.Size(sectors=_sectors(item["size"], f"{where}: size", geom, position=False),
                                            given=_in_bytes(item["size"], geom, position=False))
            wants.append(relplan.Want(_entry_partition(label, where, item, 0, 0), where, start_at, size_of,
                                      _in_bytes(item.get("start"), geom, position=True)))
            continue
        if "end" not in item and "size" not in item:
            raise PlanFileError(f"{where} needs a start and an end or a size")
        start = _sectors(item["start"], f"{where}: start", geom, position=True)
        end = _int(item["end"], f"{where}: end") if "end" in item else None
        size = _sectors(item["size"], f"{where}: size", geom, position=False) if "size" in item else None
        if end is None:
            assert size is not None
            end = start + size - 1
        elif size is not None and size != end - start + 1:
            raise PlanFileError(f"{where}: start {start}, end {end} and size {size} disagree "
                                f"(end - start + 1 = {end - start + 1})")
        if end < start:
            raise PlanFileError(f"{where}: end {end} is before start {start}")
        part = _entry_partition(label, where, item, start, end)
        parts.append(part)
        size_given = _in_bytes(item.get("size"), geom, position=False) if "end" not in item else ""
        wants.append(relplan.Want(part, where, start, relplan.Size(sectors=part.size, given=size_given),
                                  _in_bytes(item["start"], geom, position=True)))
        if "keeps" in item:
            keeps.append(_keep(item["keeps"], part.number if "number" in item else None, label, where))
    against = doc.get("made_against")
    if against is not None and not isinstance(against, str):
        raise PlanFileError(f"made_against must be a string (a sha256: fingerprint), not a {type(against).__name__}")
    if any(w.relative for w in wants):
        if keeps:
            raise PlanFileError("keeps names partitions of one disk, in its sectors: a relative plan (sizes in % "
                                "or \"rest\", starts left out) cannot keep a partition's content")
        return replace(_relative_spec(label, ss, tuple(wants), against), sector_size_given="sector_size" in doc)
    return _checked(PlanSpec(label, ss, _numbered(label, parts), extra["sectors"], extra["first_lba"],
                             extra["last_lba"], against, keeps=tuple(keeps), sector_size_given="sector_size" in doc))


def _keep(value: object, number: int | None, label: str, where: str) -> Keep:
    """A partition entry's ``keeps``: which partition of the disk it is (see the module's doc)."""
    if not isinstance(value, dict):
        raise PlanFileError(f"{where}: keeps must be an object like {{\"number\": 2, \"guid\": \"...\"}}")
    unknown = sorted(set(value) - _KEEPS_KEYS)
    if unknown:
        raise PlanFileError(f"{where}: keeps: unknown key {unknown[0]!r} (keys: guid, number)")
    if "number" not in value:
        raise PlanFileError(f"{where}: keeps needs the number of the partition on the disk")
    kept = _int(value["number"], f"{where}: keeps: number", minimum=1)
    if number is None or kept != number:
        raise PlanFileError(f"{where}: keeps partition {kept}, so it must have number {kept} too (a partition "
                            "that keeps its content keeps its number)")
    guid = value.get("guid", "")
    if not isinstance(guid, str) or (guid and _GUID.fullmatch(guid.upper()) is None):
        raise PlanFileError(f"{where}: keeps: guid must be a GPT unique GUID like "
                            f"0E8B5A1C-4D2F-4B8E-9C11-2A3B4C5D6E7F, not {_shown(guid)}")
    if guid and label != "gpt":
        raise PlanFileError(f"{where}: keeps: an msdos partition has no GUID (give its number only)")
    return Keep(kept, guid.upper())


def _share(value: object, where: str) -> relplan.Size | None:
    if not isinstance(value, str):
        return None
    try:
        return relplan.parse_share(value, where)
    except relplan.RelativeError as exc:
        raise PlanFileError(str(exc)) from exc


def _entry_partition(label: str, where: str, item: dict[str, object], start: int, end: int) -> Partition:
    flags = item.get("flags", [])
    name = item.get("name", "")
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise PlanFileError(f"{where}: flags must be a list of strings")
    if "attributes" in item:
        flags = [*flags, *_attributes(label, item["attributes"], where)]
    if not isinstance(name, str):
        raise PlanFileError(f"{where}: name must be a string")
    number = _int(item["number"], f"{where}: number", minimum=1) if "number" in item else None
    return _partition(label, where, number, start, end, item.get("type", ""), name, flags, item.get("role"))


def _relative_spec(label: str, ss: int, wants: tuple[relplan.Want, ...], against: str | None) -> PlanSpec:
    """A plan with relative sizes or starts: numbered, checked for what no disk can resolve, kept in order."""
    numbered = _numbers(label, [w.part for w in wants])
    seen: set[int] = set()
    for w, p in zip(wants, numbered, strict=True):
        if p.number in seen:
            raise PlanFileError(f"{w.where}: partition number {p.number} is used twice")
        seen.add(p.number)
    wants = tuple(replace(w, part=p) for w, p in zip(wants, numbered, strict=True))
    try:
        relplan.check(wants)
    except relplan.RelativeError as exc:
        raise PlanFileError(str(exc)) from exc
    # The table's own rules (numbering, four msdos primaries, one active) hold on any disk: checked on
    # placeholders of one sector each, in the file's order, as exact plans are checked when read.
    _checked(PlanSpec(label, ss, tuple(replace(p, start=1 + i, end=1 + i) for i, p in enumerate(numbered))))
    return PlanSpec(label, ss, (), None, None, None, against, relative=wants)


def _attributes(label: str, value: object, where: str) -> list[str]:
    """GPT attribute bits as ``check --json`` prints them ("0x9000000000000000", or a number) or as sfdisk
    writes them ("RequiredPartition GUID:60,63"): the flags they name."""
    if label != "gpt":
        raise PlanFileError(f"{where}: attributes are GPT's (msdos has the boot flag)")
    if isinstance(value, str) and re.fullmatch(r"0[xX][0-9A-Fa-f]{1,16}", value.strip()):
        value = int(value.strip(), 16)
    if isinstance(value, str):
        return _gpt_attrs(value, f"{where}: attributes")
    bits = _int(value, f"{where}: attributes")
    if bits & ~labels.GPT_PLANNED_BITS:
        rest = bits & ~labels.GPT_PLANNED_BITS
        raise PlanFileError(f"{where}: attributes 0x{bits:x} set bit {rest.bit_length() - 1}, which no plan sets "
                            "(bits 3-47 are reserved; a write keeps them as they are)")
    return list(labels.gpt_attribute_flags(bits))


def _partition(label: str, where: str, number: int | None, start: int, end: int, ptype: object, name: str,
               flags: list[str], role: object) -> Partition:
    try:
        if role is not None and (not isinstance(role, str) or role not in {r.value for r in Role}):
            raise LabelError(f"role must be primary, extended or logical, not {_shown(role)}")
        wanted_role = Role(role) if role is not None else None
        if not isinstance(ptype, str):
            raise LabelError(f"type must be a string, not {_shown(ptype)}")
        code = labels.type_code(label, ptype) if ptype else labels.default_type(label, wanted_role or Role.PRIMARY)
        derived = labels.role_for_type(label, code, number or 0)
        if wanted_role is Role.LOGICAL and derived is Role.PRIMARY and number is None:
            derived = Role.LOGICAL
        if wanted_role is not None and wanted_role is not derived:
            raise LabelError(f"role {wanted_role.value} does not match type {code} and number {number}")
        return Partition(number or 0, start, end, code, labels.check_name(label, name),
                         labels.check_flags(label, flags), derived, State.PROPOSED)
    except LabelError as exc:
        raise PlanFileError(f"{where}: {exc}") from exc


def _numbered(label: str, parts: list[Partition]) -> tuple[Partition, ...]:
    """Give partitions without a number the lowest free one (msdos logicals from 5), sorted by number."""
    return tuple(sorted(_numbers(label, parts), key=lambda p: p.number))


def _numbers(label: str, parts: list[Partition]) -> list[Partition]:
    used = {p.number for p in parts if p.number}
    # The lowest free number only grows as numbers are handed out: each search starts where the last one of
    # its kind ended (not from 1 again, which made 200,000 unnumbered entries quadratic).
    lowest = {labels.FIRST_LOGICAL: labels.FIRST_LOGICAL, 1: 1}
    out = []
    for p in parts:
        if not p.number:
            first = labels.FIRST_LOGICAL if p.role is Role.LOGICAL else 1
            n = lowest[first]
            while n in used:
                n += 1
            lowest[first] = n
            used.add(n)
            p = replace(p, number=n)
        out.append(p)
    return out


GPT_ENTRIES = 128  # what a plan's GPT holds (_checked's table)


def _countable(label: str, entries: int) -> None:
    """The cheap refusal, said before any entry is read: more entries than a GPT has numbers (a 3.4 MB plan
    of 200,000 entries is under the plan-file cap)."""
    if label == "gpt" and entries > GPT_ENTRIES:
        raise PlanFileError(f"the plan is not a valid table: GPT partition numbers go from 1 to {GPT_ENTRIES} "
                            f"(the plan has {entries} entries)")


def _checked(spec: PlanSpec) -> PlanSpec:
    """Problems a plan has on any disk: overlaps, numbering, msdos rules."""
    first = spec.first_lba or 1
    last = spec.last_lba or max([p.end for p in spec.partitions] + [first])
    if spec.sectors is not None and last >= spec.sectors:
        raise PlanFileError(f"the plan reaches sector {last}, past the end of its {spec.sectors}-sector disk")
    table = Table(spec.label, first, last, max_partitions=GPT_ENTRIES).with_partitions(spec.partitions)
    geom = Geometry(sectors=spec.sectors or last + 1, logical=spec.sector_size, physical=spec.sector_size)
    problems = validate(table, geom)
    if problems:
        raise PlanFileError("the plan is not a valid table: " + "; ".join(problems))
    return spec


# --- sfdisk scripts and dumps -----------------------------------------------------------------------------

_DIGITS = re.compile(r"[0-9]+")  # ASCII only: int() would also take "２０４８" and "2_048"


def _sfdisk_number(value: str, what: str, where: str) -> int:
    if _DIGITS.fullmatch(value) is None:
        raise PlanFileError(f"{where}: {what} must be a number of sectors in ASCII digits, not {_shown(value)}")
    if len(value) > 20 or int(value) > MAX_NUMBER:
        raise PlanFileError(f"{where}: {what} {value[:24]}... is past 2^64-1")
    return int(value)


def _escape(name: str) -> str:
    out: list[str] = []
    for ch in name:
        if ch in '"\\' or not ch.isprintable() or ord(ch) > 126:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
        else:
            out.append(ch)
    return "".join(out)


def _gpt_attrs(text: str, where: str) -> list[str]:
    """sfdisk's ``attrs=`` words and bit numbers, read as libfdisk reads them (sfdisk_script.attribute_bits)."""
    try:
        return list(labels.gpt_attribute_flags(sfdisk_script.attribute_bits(text, where)))
    except sfdisk_script.ScriptError as exc:
        raise PlanFileError(str(exc)) from exc


def _from_sfdisk(text: str) -> PlanSpec:
    try:
        script = sfdisk_script.parse(text)
    except sfdisk_script.ScriptError as exc:
        raise PlanFileError(str(exc)) from exc
    header = script.header
    try:
        label = labels.check_label(script.label)
    except LabelError as exc:
        raise PlanFileError(str(exc)) from exc
    _countable(label, len(script.lines))
    number = {k: _sfdisk_number(header[k], k, "header") if k in header else None
              for k in ("sector-size", "first-lba", "last-lba", "table-length")}
    ss = number["sector-size"] or 512
    if ss < 512 or ss & (ss - 1):
        raise PlanFileError(f"sector-size {ss} is not a power of two of at least 512")
    gpt = label == "gpt"
    with_uuid = [line.number or 0 for line in script.lines if line.uuid and not gpt]
    notes = (*script.notes, *_dump_notes(header, with_uuid, number["table-length"]))
    try:
        label_id = sfdisk_script.label_id(label, header["label-id"]) if "label-id" in header else ""
        guids = sfdisk_script.line_guids(script) if gpt else {}
    except sfdisk_script.ScriptError as exc:
        raise PlanFileError(str(exc)) from exc
    first, last = (number["first-lba"], number["last-lba"]) if gpt else (None, None)
    given = "sector-size" in header  # without it sfdisk reads the numbers in the disk's sectors (placed_on)
    if not all(line.fixed for line in script.lines):  # placed on the disk, as sfdisk would place it
        notes = (*notes, "the script leaves starts, sizes or numbers to the disk: they are placed as sfdisk places "
                 "them there (1 MiB alignment, the rest of the free space)")
        return PlanSpec(label, ss, (), None, first, last, notes=notes, script=script, sfdisk=True, label_id=label_id,
                        sector_size_given=given)  # (the uuid= of each line is taken when it is placed: _placed)
    parts = [_script_partition(label, line, line.number or 0, line.start.value if line.start else 0,
                               (line.start.value if line.start else 0) + (line.size.value if line.size else 0) - 1,
                               line.type)
             for line in script.lines]
    named = tuple((p.number, guids[line.lineno]) for line, p in zip(script.lines, parts, strict=True)
                  if line.lineno in guids)
    return _checked(PlanSpec(label, ss, _numbered(label, parts), None, first, last, notes=notes, sfdisk=True,
                             label_id=label_id, sector_size_given=given, guids=named))


def _sfdisk_defaults(spec: PlanSpec, geometry: Geometry, current: Table | None) -> PlanSpec:
    """What an sfdisk script leaves out, as sfdisk takes it on this disk: without sector-size: its numbers
    count the disk's sectors; a new GPT without first-lba: starts its usable area where sfdisk's new GPT
    does, at the first aligned sector (2048 with 512-byte sectors, 256 with 4096), when no partition of the
    script lies before it. A GPT on the disk keeps its usable area (libparted writes into it)."""
    if not spec.sector_size_given and spec.sector_size != geometry.logical:
        spec = replace(spec, sector_size=geometry.logical)
    if spec.label != "gpt" or spec.first_lba is not None or (
            current is not None and current.label == "gpt" and not current.read_only):
        return spec
    new = new_table("gpt", geometry)
    disk = sfdisk_script.Disk(geometry.sectors, geometry.logical, geometry.physical,
                              geometry.optimal_io or geometry.min_io, new.first_usable, new.last_usable)
    first = max(new.first_usable, disk.first_lba)
    if first >= new.last_usable:
        return spec
    early = next((p for p in spec.partitions if p.start < first), None)
    if early is not None:  # sfdisk: "Sector N already used."
        raise PlanFileError(f"partition {early.number} starts at {early.start}, before sfdisk's new GPT's first usable "
                            f"sector {first}, and sfdisk refuses it (a first-lba: line in the script moves that)")
    return replace(spec, first_lba=first)


def _script_partition(label: str, line: sfdisk_script.Line, number: int, start: int, end: int,
                      code: str | None, role: Role | None = None) -> Partition:
    where = f"line {line.lineno}"
    if end < start:
        raise PlanFileError(f"{where}: partition {number} has size {end - start + 1}")
    flags = ["boot"] if line.bootable else []
    if line.attrs:
        flags += _gpt_attrs(line.attrs, where) if label == "gpt" else []
    return _partition(label, where, number, start, end, code or "", line.name, flags,
                      role.value if role is Role.LOGICAL else None)


def _placed(spec: PlanSpec, script: sfdisk_script.Script, geometry: Geometry, table: Table) -> PlanSpec:
    """The script's partitions where sfdisk puts them on this disk."""
    disk = sfdisk_script.Disk(geometry.sectors, geometry.logical, geometry.physical,
                              geometry.optimal_io or geometry.min_io, table.first_usable, table.last_usable)
    try:
        placed = sfdisk_script.place(script, disk)
    except sfdisk_script.ScriptError as exc:
        raise PlanFileError(str(exc)) from exc
    parts = [_script_partition(spec.label, line, p.number, p.start, p.end, p.type, p.role)
             for line, p in placed.partitions]
    said = f"{len(parts)} partition{'s' if len(parts) != 1 else ''}: {_numbers_text([p.number for p in parts])}"
    notes = (*spec.notes, *placed.notes, f"the sfdisk script placed on this disk as sfdisk places it ({said})")
    guids = sfdisk_script.line_guids(script) if spec.label == "gpt" else {}
    return _checked(replace(spec, partitions=_numbered(spec.label, parts), sectors=geometry.sectors, script=None,
                            notes=notes, guids=tuple((p.number, guids[line.lineno]) for line, p in placed.partitions
                                                     if line.lineno in guids)))


def _dump_notes(header: dict[str, str], with_uuid: list[int], entries: int | None) -> tuple[str, ...]:
    """What a script says that diskplan does not write, said."""
    notes = []
    if with_uuid:  # (on GPT uuid= is written: backend.raw.gptpatch)
        notes.append(f"uuid= of partition{'s' if len(with_uuid) > 1 else ''} {_numbers_text(with_uuid)} is not "
                     "applied: an msdos entry has no GUID")
    if entries is not None and entries != 128 and header.get("label") == "gpt":
        notes.append(f"table-length {entries} is not applied: libparted writes a new GPT with 128 entries")
    return tuple(notes)


def not_carried(spec: PlanSpec, fmt: str) -> tuple[str, ...]:
    """What ``export`` leaves out of ``fmt`` that an sfdisk script says (apply takes it): the ids it names,
    and that without sector-size: its numbers count the disk's sectors (the output says 512 B)."""
    out = []
    if spec.sfdisk and not spec.sector_size_given:
        out.append(f"the script gives no sector-size, so sfdisk counts its numbers in the disk's sectors: the {fmt} "
                   f"output says {spec.sector_size}-byte sectors")
    if spec.label_id:
        out.append(f"label-id {spec.label_id} is not carried into the {fmt} output")
    if spec.guids:
        numbers = [n for n, _ in spec.guids]
        out.append(f"uuid= of partition{'s' if len(numbers) > 1 else ''} {_numbers_text(numbers)} is not carried into "
                   f"the {fmt} output")
    return tuple(out)


def _numbers_text(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:8]))
    return shown + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")


def load_plan(text: str) -> PlanSpec:
    """A plan from a diskplan JSON plan or an ``sfdisk --dump`` text (told apart by the first character)."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise PlanFileError("the plan is empty")
    if stripped.startswith(("{", "[")):
        return _from_json(stripped)
    if "\0" in text:
        raise PlanFileError("this is binary data, not a plan (a disk image is a TARGET, not a PLAN)")
    try:
        return _from_sfdisk(text)
    except PlanFileError as exc:
        if re.search(r"^\s*(label|unit|device)\s*:|^\s*\S+\s*:\s*start\s*=", text, re.MULTILINE | re.IGNORECASE):
            raise
        raise PlanFileError(f"not a plan: expected a diskplan JSON plan or an sfdisk script ({exc})") from exc


# --- sfdisk script --------------------------------------------------------------------------------------


def _last_lba(spec: PlanSpec) -> int | None:
    if spec.last_lba is not None or spec.sectors is None:
        return spec.last_lba
    return new_table(spec.label, Geometry(spec.sectors, spec.sector_size, spec.sector_size)).last_usable


def sfdisk_ebr_problem(spec: PlanSpec) -> str:
    """Why sfdisk may refuse this plan's logical partitions, or "".

    libfdisk puts each logical partition's EBR one grain (first-lba, 1 MiB on most disks) before it, unless
    the first logical partition starts within that grain of the extended partition's start (then one sector
    is enough). libparted always needs only one sector, so such a plan is fine for parted."""
    ext = next((p for p in spec.partitions if p.role is Role.EXTENDED), None)
    logicals = sorted((p for p in spec.partitions if p.role is Role.LOGICAL), key=lambda p: p.start)
    grain = max(1, (1 << 20) // spec.sector_size)
    if ext is None or not logicals or logicals[0].start < ext.start + grain:
        return ""
    for a, b in pairwise(logicals):
        if b.start - a.end - 1 < grain:
            return (f"sfdisk keeps {grain} sectors (1 MiB) before each logical partition when the first one starts "
                    f"that far into the extended partition; partition {b.number} has {b.start - a.end - 1}: "
                    "sfdisk may refuse this script (the parted commands need one sector)")
    return ""


def to_sfdisk(spec: PlanSpec, device_name: str) -> str:
    """An sfdisk script (the ``sfdisk --dump`` format): ``sfdisk DEVICE < script`` writes exactly this table."""
    lines = [f"# diskplan plan: {spec.label} table, {spec.sector_size}-byte sectors. Apply with:",
             f"#   sfdisk {shlex.quote(device_name)} < this-file   (replaces the partition table)",
             f"label: {'dos' if spec.label == 'msdos' else 'gpt'}", "unit: sectors"]
    if spec.label == "gpt":
        first = spec.first_lba
        if first is None and spec.sectors is not None:
            first = new_table("gpt", Geometry(spec.sectors, spec.sector_size, spec.sector_size)).first_usable
        last = _last_lba(spec)
        lines += [f"first-lba: {first}"] if first is not None else []
        lines += [f"last-lba: {last}"] if last is not None else []
    problem = sfdisk_ebr_problem(spec)
    if problem:
        lines.insert(2, f"# WARNING: {problem}")
    lines += [f"sector-size: {spec.sector_size}", ""]
    for p in sorted(spec.partitions, key=lambda p: (p.role is Role.LOGICAL, p.number)):
        fields = [f"start={p.start:>12}", f"size={p.size:>12}"]
        if spec.label == "gpt":
            fields.append(f"type={p.type}")
            if p.name:
                fields.append(f'name="{_escape(p.name)}"')
            words = [labels.GPT_ATTRIBUTES[f] for f in p.flags]
            named = [w for w in words if not w.startswith("GUID:")]
            bits = sorted(int(w[5:]) for w in words if w.startswith("GUID:"))
            if bits:
                named.append("GUID:" + ",".join(map(str, bits)))  # sfdisk's own spelling: GUID:60,62,63
            if named:
                fields.append(f'attrs="{" ".join(named)}"')
        else:
            fields.append(f"type={int(p.type, 16):x}")
            if "boot" in p.flags:
                fields.append("bootable")
        lines.append(f"{labels.partition_node(device_name, p.number)} : {', '.join(fields)}")
    return "\n".join(lines) + "\n"


# --- parted commands ------------------------------------------------------------------------------------


def parted_word(text: str) -> str | None:
    """``text`` as one parted token: parted splits its arguments again and only knows quotes, no escapes."""
    if not text.isprintable():
        return None  # a control character would reach the shell and the terminal as it is
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    return None


PARTED_FLAGS = ("boot", "legacy_boot", "hidden")  # the flags parted 3.5's `set` knows, of those a plan carries


def parted_recipe(label: str, code: str) -> tuple[str, list[str], list[str]] | None:
    """How parted 3.5 writes type ``code``: (fs-type for mkpart, flags to set on, flags to set off); it
    cannot set a GUID or an id directly, only through these."""
    if labels.is_extended_type(code):
        return ("", [], ["lba"] if int(code, 16) == 0x05 else []) if int(code, 16) in (0x05, 0x0F) else None
    known = ptypes.lookup(code)
    if known is None or (label == "gpt" and known.gpt != code) or (
            label == "msdos" and (known.mbr is None or f"0x{known.mbr:02x}" != code)):
        return None
    if label == "msdos":
        # msdos has no msftdata/msftres/bios_grub/linux-home flags: the fs type alone gives 07, 0c, 83, 82.
        if known.fs and known.flag in (None, "msftdata", "lba", "swap"):
            return known.fs, [], []
        return ("ext2", [known.flag], []) if known.flag else None
    if known.flag in (None, "swap", "msftdata") and known.fs:
        return known.fs, [], []
    return "ext2", [known.flag] if known.flag else [], []


def to_parted(spec: PlanSpec, device: str) -> str:
    """A shell script of ``parted -s`` commands in exact sectors that writes this table on ``device``.

    parted numbers new partitions itself (the lowest free number; logical ones by position), so numbers
    that parted cannot reproduce are noted; so are types and flags parted 3.5 cannot set."""
    dev = shlex.quote(device)
    run = f"parted -s -a none {dev} unit s"
    lines = ["#!/bin/sh",
             f"# diskplan plan: {spec.label} table, {spec.sector_size}-byte sectors, exact sectors (unit s, -a none).",
             f"# WARNING: mklabel replaces the whole partition table on {device}.",
             "set -e",
             f"{run} mklabel {spec.label}"]
    order = sorted(spec.partitions, key=lambda p: (p.role is Role.LOGICAL, p.start if p.role is Role.LOGICAL
                                                   else p.number))
    given: set[int] = set()
    logical_next = labels.FIRST_LOGICAL
    for p in order:
        if p.role is Role.LOGICAL:
            number = logical_next
            logical_next += 1
        else:
            number = next(n for n in range(1, 1000) if n not in given)
        given.add(number)
        if number != p.number:
            lines.append(f"# parted will number partition {p.number} as {number}")
        recipe = parted_recipe(spec.label, p.type)
        if recipe is None:
            lines.append(f"# parted 3.5 cannot set type {p.type} ({ptypes.describe(p.type)}) on partition {number}; "
                         "use the sfdisk script, or parted >= 3.6: type N ID")
            recipe = ("", [], [])
        fs, on, off = recipe
        if spec.label == "gpt":
            word = parted_word(p.name)
            if word is None:
                lines.append(f"# parted cannot quote the name {p.name!r}: partition {number} is left unnamed")
                word = '""'
            kind = shlex.quote(word)
        else:
            kind = p.role.value
        fs_word = f" {shlex.quote(fs)}" if fs else ""
        lines.append(f"{run} mkpart {kind}{fs_word} {p.start}s {p.end}s")
        flag_on = list(on)
        for f in p.flags:
            if f in PARTED_FLAGS:
                flag_on.append(f)
            else:
                lines.append(f"# parted 3.5 cannot set {labels.GPT_ATTRIBUTES.get(f, f)} on partition {number}; "
                             "use the sfdisk script")
        for f in flag_on:
            lines.append(f"{run} set {number} {f} on")
        for f in off:
            lines.append(f"{run} set {number} {f} off")
    return "\n".join(lines) + "\n"
