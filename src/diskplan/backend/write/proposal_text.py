"""What a table commit's proposal shows before the user is asked, as lines of parts, each part a text and
its role ("title", "heading", "op:delete", "note", ...): ``diskplan apply`` prints the lines, the
planner's confirmation screen draws them, each giving the roles its own styles. Pure: no output here."""

from __future__ import annotations

from diskplan.backend.write.steps import Proposal
from diskplan.model import ptypes
from diskplan.model.extent import Role, State
from diskplan.model.findings.placement import Finding, analyze
from diskplan.model.safetext import columns
from diskplan.model.units import human_bytes

Part = tuple[str, str]  # (text, role)
Line = tuple[Part, ...]

COLUMNS = ("#", "start", "end", "sectors", "size", "role", "type", "name", "")


def headline(p: Proposal, model_hint: str = "", times: str = "×") -> str:
    """The target, its model and its size. ``model_hint``: the model the caller knows when the target
    cannot say (an image file, a demo). ``times``: "x" where the font may lack "×" (the Linux console's
    code page 437)."""
    model = p.model or model_hint
    return (f"{p.target}{f' ({model})' if model else ''}: {p.sectors} sectors {times} {p.sector_size} B = "
            f"{human_bytes(p.sectors * p.sector_size)}")


def proposal_lines(p: Proposal, model_hint: str = "", times: str = "×") -> list[Line]:
    """Every operation, then the resulting table in exact sectors, what the findings flag in it, then the notes
    (``headline`` says what ``model_hint`` and ``times`` are)."""
    was = p.current.table.label or "no table"
    lines: list[Line] = [
        ((headline(p, model_hint, times), "title"),),
        ((f"now: {was}, {len(p.current.table.partitions)} partition(s); plan: {p.result.label}", ""),),
        (("Operations", "heading"),),
        *(((f"  {op}", f"op:{op.kind}"),) for op in p.operations),
        ((f"Resulting {p.result.label} table", "heading"), (f" (sectors of {p.sector_size} B, end inclusive)", "")),
    ]
    rows = [
        (
            str(q.number),
            str(q.start),
            str(q.end),
            str(q.size),
            human_bytes(q.size * p.sector_size),
            q.role.value,
            "" if q.role is Role.EXTENDED else ptypes.describe(q.type),
            q.name,
            "new" if q.state is State.PROPOSED else "kept",
        )
        for q in sorted(p.result.partitions, key=lambda q: (q.role is Role.LOGICAL, q.number))
    ]
    head, *body = columns(COLUMNS, rows, right=5)
    lines.append(((head, "table-head"),))
    lines += [((row, ""),) for row in body]
    lines += [(("flagged: ", "flag"), (text, "")) for text in flagged(p)]
    lines += [(("note: ", "note"), (note, "")) for note in p.notes]
    return lines


def flagged(p: Proposal) -> list[str]:
    """What the findings say about the partitions this write creates or changes, one line per partition: its
    worst finding with its arithmetic (the explanation's first line), so a layout the planner would flag is not
    written without a word. Partitions kept as they are were on the disk already: not repeated here."""
    written = {q.number for q in p.result.partitions if q.state is State.PROPOSED} | {q.number for q in p.change}
    by_part: dict[int, list[Finding]] = {}
    for f in analyze(p.current.geometry, p.result):  # worst first within each partition
        if f.partition in written:
            by_part.setdefault(f.partition, []).append(f)
    out = []
    for number, found in sorted(by_part.items()):
        f, more = found[0], len(found) - 1
        also = f" (and {more} more finding{'s' if more > 1 else ''}: diskplan check lists them)" if more else ""
        out.append(f"partition {number}: {f.message} [{f.code}, {f.severity}]. {f.explanation[0]}{also}")
    return out
