"""What writing a plan does to a table, worked out before anything is written: the operations (new
label, delete N, create N at start..end, change N, rewrite an EBR, keep N), the table the disk will hold,
what makes a plan unwritable, and how a table read back differs from the plan. Pure: the backend's commit
uses it, and a UI can show the same list while the user plans.

libparted's rules are built in here because they decide the outcome: a kept partition (same number,
start, end and role) is never deleted and re-added; msdos logical partitions are renumbered 5, 6, … in
the order of their EBR chain when one is deleted, and new ones are appended, so when that cannot give the
plan's numbers every logical partition is re-added in the plan's order (only EBRs are written: their data
stays where it is).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from diskplan.model import labels, ptypes
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.repair import GptRepair
from diskplan.model.table import Table

DEFAULT_TYPE = {label: labels.default_type(label) for label in labels.LABELS}  # what libparted gives
ATTRIBUTE_FLAGS = {"gpt": ("hidden", "legacy_boot"), "msdos": ("boot",)}  # flags libparted 3.5 can set


@dataclass(frozen=True)
class Operation:
    kind: str  # "label", "delete", "create", "change", "rewrite", "keep", "repair"
    number: int = 0
    start: int = 0
    end: int = 0
    detail: str = ""

    def __str__(self) -> str:
        where = f"{self.start}..{self.end}"
        text = {
            "label": f"new {self.detail} label (every old partition is removed)",
            "delete": f"delete {self.number} ({where})",
            "create": f"create {self.number} at {where}",
            "change": f"change {self.number} ({where})",
            "rewrite": f"rewrite the EBR of logical {self.number} at {where} (its data is not touched)",
            "keep": f"keep {self.number} at {where} (untouched)",
            "repair": f"repair: write sector{'s ' + where if self.end > self.start else ' ' + str(self.start)}",
        }[self.kind]
        return f"{text}: {self.detail}" if self.detail and self.kind != "label" else text


def repair_operations(repair: GptRepair | None, table: Table, sector_size: int) -> tuple[Operation, ...]:
    """A repair as operations: one "repair" per run of sectors it writes (which copy, from which), then
    "keep" for every partition of ``table`` (the one on the disk: a repair changes none of them)."""
    runs = repair.runs(sector_size) if repair is not None else ()
    out = [Operation("repair", 0, e.start, e.end, what) for e, what in runs]
    out += [Operation("keep", p.number, p.start, p.end) for p in sorted(table.partitions, key=lambda p: p.number)]
    return tuple(out)


def type_key(label: str, text: str) -> str:
    """One spelling per type, so "Linux swap", "0657FD6D-…" and "swap" compare equal on GPT, and
    "0x82", "82" and "Linux swap" on msdos."""
    if not text:
        return ""
    t = ptypes.lookup(text)
    if label == "gpt":
        return (t.gpt if t and t.gpt else text).upper()
    if t is not None and t.mbr is not None:
        return f"0x{t.mbr:02x}"
    try:
        return f"0x{int(text, 16):02x}"
    except ValueError:
        return text.lower()


def _flags(label: str, p: Partition) -> set[str]:
    """The attribute flags that count (libparted also lists types as flags: "swap", "esp", ...)."""
    return set(p.flags) & set(ATTRIBUTE_FLAGS.get(label, ()))


def differences(expected: Table, found: Table) -> list[str]:
    """Every way ``found`` (read back from the disk) differs from ``expected``: sector-exact extents,
    numbers, roles; types where the plan names one; GPT names; attribute flags."""
    out = []
    label = expected.label or ""
    if found.label != label:
        return [f"the disk holds a {found.label or 'no'} label, not {label}"]
    want = {p.number: p for p in expected.live}
    got = {p.number: p for p in found.partitions}
    for n in sorted(set(want) | set(got)):
        w, g = want.get(n), got.get(n)
        if g is None and w is not None:
            out.append(f"partition {n} ({w.start}..{w.end}) is missing")
        elif w is None and g is not None:
            out.append(f"partition {n} ({g.start}..{g.end}) is not in the plan")
        elif w is not None and g is not None:
            if (w.start, w.end) != (g.start, g.end):
                out.append(f"partition {n} is at {g.start}..{g.end}, not {w.start}..{w.end}")
            if w.role is not g.role:
                out.append(f"partition {n} is {g.role.value}, not {w.role.value}")
            if w.role is not Role.EXTENDED and w.type and type_key(label, w.type) != type_key(label, g.type):
                out.append(f"partition {n} has type {ptypes.describe(g.type)}, not {ptypes.describe(w.type)}")
            if label == "gpt" and w.name != g.name:
                out.append(f"partition {n} is named {g.name!r}, not {w.name!r}")
            if _flags(label, w) != _flags(label, g):
                have = ", ".join(sorted(_flags(label, g))) or "none"
                out.append(f"partition {n} has flags {have}, not {', '.join(sorted(_flags(label, w))) or 'none'}")
    return out


# --- planning ---------------------------------------------------------------------------------------


def problems(label: str, live: list[Partition], usable: Extent, sectors: int, max_parts: int) -> list[str]:
    """What makes ``live`` (the partitions to hold) unwritable as a ``label`` table."""
    out = []
    for p in live:
        if p.end < p.start:
            out.append(f"partition {p.number} ends before it starts")
        elif not p.extent.within(usable) and p.end > sectors - 1:
            out.append(f"partition {p.number} ({p.start}..{p.end}) ends past the last sector {sectors - 1}")
        elif not p.extent.within(usable):
            out.append(
                f"partition {p.number} ({p.start}..{p.end}) lies outside the usable area "
                f"{usable.start}..{usable.end} of a {label} table"
            )
    numbers = [p.number for p in live]
    for n in sorted({n for n in numbers if numbers.count(n) > 1}):
        out.append(f"two partitions are numbered {n}")
    if label == "gpt":
        out += [f"partition number {p.number} is not in 1..{max_parts}" for p in live if not 0 < p.number <= max_parts]
        out += [f"partition {p.number}: GPT has no {p.role.value} ones" for p in live if p.role is not Role.PRIMARY]
    else:
        outer = [p for p in live if p.role is not Role.LOGICAL]
        out += [f"partition {p.number}: msdos numbers primary partitions 1..4" for p in outer if not 1 <= p.number <= 4]
        ext = [p for p in live if p.role is Role.EXTENDED]
        if len(ext) > 1:
            out.append("msdos allows one extended partition")
        logicals = sorted((p for p in live if p.role is Role.LOGICAL), key=lambda p: p.number)
        if logicals and not ext:
            out.append("logical partitions need an extended partition")
        for p in logicals:
            if ext and not (ext[0].start < p.start and p.end <= ext[0].end):
                out.append(f"logical partition {p.number} is not inside the extended partition")
        if [p.number for p in logicals] != list(range(5, 5 + len(logicals))):
            out.append("msdos numbers logical partitions 5, 6, … without gaps (the order of their EBR chain)")
    groups = [[p for p in live if p.role is not Role.LOGICAL], [p for p in live if p.role is Role.LOGICAL]]
    for group in groups:
        ordered = sorted(group, key=lambda p: p.start)
        for a, b in itertools.pairwise(ordered):
            if a.extent.overlaps(b.extent):
                out.append(f"partitions {a.number} and {b.number} overlap")
    return out


def unwritable_flags(label: str, base: Table, live: list[Partition]) -> list[str]:
    """Attribute flags the plan sets or clears that libparted 3.5 cannot write (it writes only
    ATTRIBUTE_FLAGS): refused up front, so a confirmed change is never silently dropped."""
    attributes = set(labels.GPT_ATTRIBUTES if label == "gpt" else labels.MSDOS_FLAGS)
    on_disk = {(q.number, q.start, q.end): q for q in base.partitions if q.state is not State.PROPOSED}
    out = []
    for p in live:
        old = on_disk.get((p.number, p.start, p.end))
        have = set(old.flags) & attributes if old else set()
        changed = (set(p.flags) & attributes) ^ have
        for flag in sorted(changed - set(ATTRIBUTE_FLAGS.get(label, ()))):
            out.append(f"partition {p.number}: libparted 3.5 cannot set the {flag} flag "
                       f"(it writes {', '.join(ATTRIBUTE_FLAGS.get(label, ())) or 'none'})")
    return out


def _attributes_differ(label: str, old: Partition, new: Partition) -> list[str]:
    out = []
    if new.type and type_key(label, new.type) != type_key(label, old.type):
        out.append(f"type {ptypes.describe(old.type) or '?'} -> {ptypes.describe(new.type)}")
    if label == "gpt" and new.name != old.name:
        out.append(f"name {old.name!r} -> {new.name!r}")
    for flag in ATTRIBUTE_FLAGS.get(label, ()):
        if (flag in new.flags) != (flag in old.flags):
            out.append(f"{flag} flag " + ("on" if flag in new.flags else "off"))
    return out


@dataclass
class Changes:
    """How a table becomes the planned one. Partitions are model Partitions; ``change`` pairs the one on
    disk with the plan's, and says what differs."""

    label: str
    fresh: bool  # a new label: libparted starts from an empty table
    delete: list[Partition] = field(default_factory=list)
    create: list[Partition] = field(default_factory=list)
    change: list[tuple[Partition, Partition, list[str]]] = field(default_factory=list)
    keep: list[Partition] = field(default_factory=list)
    rewrite: list[Partition] = field(default_factory=list)  # logical ones re-added in place: only EBRs written

    @property
    def any(self) -> bool:
        return bool(self.fresh or self.delete or self.create or self.change or self.rewrite)

    @property
    def protect(self) -> tuple[Extent, ...]:
        """Where data the plan keeps lives (never backed up, never written)."""
        held = [*self.keep, *(old for old, _, _ in self.change), *self.rewrite]
        return tuple(p.extent for p in held if p.role is not Role.EXTENDED)

    @property
    def operations(self) -> tuple[Operation, ...]:
        out: list[Operation] = []
        rewritten = {(p.start, p.end) for p in self.rewrite}
        if self.fresh:
            out.append(Operation("label", detail=self.label))
        for p in sorted(self.delete, key=lambda p: -p.number):
            if (p.start, p.end) in rewritten:
                continue
            what = p.role.value if p.role is not Role.PRIMARY else ptypes.describe(p.type) or "partition"
            out.append(Operation("delete", p.number, p.start, p.end, what))
        for p in sorted(self.create, key=lambda p: p.number):
            what = ptypes.describe(p.type or DEFAULT_TYPE[self.label])
            what = {Role.EXTENDED: "extended", Role.LOGICAL: f"logical, {what}"}.get(p.role, what)
            detail = f"{p.size} sectors, {what}" + (f", {p.name!r}" if p.name else "")
            out.append(Operation("create", p.number, p.start, p.end, detail))
        out += [Operation("rewrite", p.number, p.start, p.end) for p in sorted(self.rewrite, key=lambda p: p.number)]
        out += [Operation("change", new.number, new.start, new.end, ", ".join(why)) for _, new, why in self.change]
        for p in sorted(self.keep, key=lambda p: p.number):
            was = dict(p.extra).get("was")
            out.append(Operation("keep", p.number, p.start, p.end, f"was number {was}" if was else ""))
        return tuple(out)

    def result(self, base: Table) -> Table:
        """The table the disk will hold, as the reader will report it: ``base`` with these partitions
        (kept ones EXISTING as they are, new ones PROPOSED with the type libparted gives by default)."""
        parts = [replace(p, state=State.EXISTING) for p in self.keep]
        for old, new, _ in self.change:
            parts.append(replace(old, number=new.number, type=new.type or old.type, name=new.name, flags=new.flags))
        parts += [replace(p, state=State.EXISTING) for p in self.rewrite]
        for p in self.create:
            default = "" if p.role is Role.EXTENDED else DEFAULT_TYPE[self.label]
            parts.append(replace(p, type=p.type or default, state=State.PROPOSED))
        return replace(base, label=self.label, partitions=tuple(sorted(parts, key=lambda p: (p.start, p.number))))


def plan_changes(label: str, current: Table, live: list[Partition], fresh: bool) -> Changes:
    """Compare the table on disk with the partitions the plan holds (``fresh``: under a new label)."""
    ops = Changes(label, fresh)
    if fresh:
        ops.delete = list(current.partitions)
        ops.create = list(live)
        return ops
    cur = list(current.partitions)
    want_outer = {(p.number, p.start, p.end, p.role): p for p in live if p.role is not Role.LOGICAL}
    for p in (p for p in cur if p.role is not Role.LOGICAL):
        w = want_outer.pop((p.number, p.start, p.end, p.role), None)
        if w is None:
            ops.delete.append(p)
            continue
        why = _attributes_differ(label, p, w) if p.role is not Role.EXTENDED else []
        (ops.change.append((p, w, why)) if why else ops.keep.append(p))
    ops.create += list(want_outer.values())
    # Logical partitions: libparted renumbers the rest when one is deleted and appends new ones, and the
    # EBR chain follows the numbers. Keep them when that yields the plan's numbers, else re-add them all.
    cur_log = sorted((p for p in cur if p.role is Role.LOGICAL), key=lambda p: p.number)
    want_log = sorted((p for p in live if p.role is Role.LOGICAL), key=lambda p: p.number)
    ext_kept = any(p.role is Role.EXTENDED for p in ops.keep)
    by_extent = {(p.start, p.end): p for p in want_log}
    kept = [p for p in cur_log if (p.start, p.end) in by_extent] if ext_kept else []
    new = [p for p in want_log if (p.start, p.end) not in {(k.start, k.end) for k in kept}]
    simulated = {(p.start, p.end): 5 + i for i, p in enumerate(kept)}
    simulated.update({(p.start, p.end): 5 + len(kept) + i for i, p in enumerate(new)})
    if not all(simulated[(p.start, p.end)] == p.number for p in want_log):
        kept = []  # re-add every logical partition in the plan's order (their data stays where it is)
    kept_extents = {(p.start, p.end) for p in kept}
    old = {(p.start, p.end): p for p in cur_log}
    ops.delete += [p for p in cur_log if (p.start, p.end) not in kept_extents]
    for w in want_log:
        where = (w.start, w.end)
        if where in kept_extents:
            q = old[where]
            why = _attributes_differ(label, q, w)
            renumbered = replace(q, number=w.number, extra=(("was", str(q.number)),) if q.number != w.number else ())
            (ops.change.append((q, w, why)) if why else ops.keep.append(renumbered))
        elif where in old:
            q = old[where]  # re-added at the same place: keeps its type and flags unless the plan says
            flags = w.flags or tuple(sorted(_flags(label, q)))
            ops.rewrite.append(replace(w, type=w.type or q.type, flags=flags))
        else:
            ops.create.append(w)
    return ops
