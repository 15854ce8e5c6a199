"""A demo's lesson as a handout: one self-contained Markdown or HTML page with the lesson, the disk's facts, the
findings with their arithmetic, the exercise, and an SVG of the sector map drawn from the model (not a
terminal screenshot: a small vector drawing prints cleanly).

The SVG has two parts. A bar of the whole disk, each partition a rectangle at its true proportion (its
``data-start``/``data-end`` carry the sectors, so a test can check the drawing against the extents). Then,
for each partition, its first sectors one cell each, with the page (physical block, or flash page) and grain
lines: where a start falls between two page lines, the drawing shows it.
"""

from __future__ import annotations

import base64
import html

from diskplan.model.disk import Disk
from diskplan.model.extent import Partition
from diskplan.model.findings import placement as F
from diskplan.model.findings.placement import Finding
from diskplan.model.findings.stackfindings import offset_mod, with_stack_findings
from diskplan.model.grain import Grain, optimal_grain
from diskplan.model.teach.demos import Scenario
from diskplan.model.teach.exercise import GOALS
from diskplan.model.units import human_bytes, human_si
from diskplan.model.value import value

WIDTH = 760  # the drawing's width in px; a page prints it at full width
LEFT = 10
BAR_Y, BAR_H = 28, 34
CELL = 20  # px per sector in the detail rows
DETAIL_CELLS = 32  # sectors shown around each start
COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f")


@value
class Lesson:
    scenario: Scenario
    disk: Disk
    grain: Grain
    findings: tuple[Finding, ...]


def lesson(s: Scenario) -> Lesson:
    """The demo as the model sees it (no image needed), with its partitions' and layers' findings."""
    disk = with_stack_findings(s.planned_disk())
    grain = optimal_grain(disk.geometry)
    found = tuple(F.analyze(disk.geometry, disk.table, grain)) + disk.findings
    return Lesson(s, disk, grain, tuple(sorted(found, key=lambda f: f.partition or 0)))


# --- the drawing ----------------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _detail_window(start: int, spp: int) -> int:
    """The first sector shown around ``start``: a few whole pages before it, never before LBA 0."""
    before = max(spp * 2, 8)
    lo = max(0, start - before)
    return lo - lo % spp


def sector_map_svg(le: Lesson) -> str:
    geom, table = le.disk.geometry, le.disk.table
    live = sorted(table.live, key=lambda p: p.start)
    scale = (WIDTH - 2 * LEFT) / geom.sectors
    out: list[str] = []
    title = f"{le.scenario.name}: {geom.sectors:,} sectors × {geom.logical} B = {human_bytes(geom.size_bytes)}"
    out.append(f'<text x="{LEFT}" y="18" class="title">{_e(title)}</text>')
    out.append(f'<rect class="disk" x="{LEFT}" y="{BAR_Y}" width="{WIDTH - 2 * LEFT}" height="{BAR_H}" '
               f'data-sectors="{geom.sectors}"/>')
    if table.label is not None:
        for lo, hi in ((0, table.first_usable - 1), (table.last_usable + 1, geom.sectors - 1)):
            if hi >= lo:
                out.append(_bar_rect("metadata", lo, hi, scale, "#bbbbbb", f"{table.label} table: LBA {lo}-{hi}"))
    for i, p in enumerate(live):
        out.append(_bar_rect("partition", p.start, p.end, scale, COLOURS[i % len(COLOURS)],
                             f"partition {p.number}: {p.start}s-{p.end}s ({human_bytes(p.size * geom.logical)})",
                             p.number))
        x, w = LEFT + p.start * scale, p.size * scale
        if w >= 12:  # a sliver has its number in the rows below
            out.append(f'<text x="{x + 3:.2f}" y="{BAR_Y + BAR_H / 2 + 4}" class="label">{p.number}</text>')
    spp = geom.sectors_per_page
    legend = (f"Below, one cell per sector: black lines begin {geom.page} B pages ({spp} sector"
              f"{'s' if spp > 1 else ''}), red lines the {human_bytes(le.grain.sectors * geom.logical)} grain; "
              "grey: the table")
    out.append(f'<text x="{LEFT}" y="{BAR_Y + BAR_H + 18}" class="note">{_e(legend)}</text>')
    y = BAR_Y + BAR_H + 44
    for i, p in enumerate(live):
        y = _detail(out, le, p, COLOURS[i % len(COLOURS)], y, spp)
    height = y + 6
    style = ("<style>.title{font:bold 13px sans-serif}.label{font:11px sans-serif;fill:#fff}"
             ".note{font:11px sans-serif;fill:#222}.disk{fill:#f4f4f4;stroke:#888}"
             ".page{stroke:#222;stroke-width:2}.grain{stroke:#d62728;stroke-width:3}"
             ".sector{stroke:#ccc;stroke-width:1}</style>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{_e(title)}">{style}' + "".join(out) + "</svg>")


def _bar_rect(kind: str, lo: int, hi: int, scale: float, colour: str, tip: str, number: int = 0) -> str:
    x, w = LEFT + lo * scale, max(1.0, (hi - lo + 1) * scale)  # a sliver stays visible
    num = f' data-number="{number}"' if number else ""
    return (f'<rect class="{kind}" x="{x:.2f}" y="{BAR_Y}" width="{w:.2f}" height="{BAR_H}" fill="{colour}" '
            f'data-start="{lo}" data-end="{hi}"{num}><title>{_e(tip)}</title></rect>')


def _detail(out: list[str], le: Lesson, p: Partition, colour: str, y: int, spp: int) -> int:
    """Partition ``p``'s first sectors, one cell each, with page and grain lines; returns the next row's y."""
    geom = le.disk.geometry
    lo = _detail_window(p.start, spp)
    nbytes = p.start * geom.logical
    arith, rem = offset_mod(geom, nbytes, geom.page)
    verdict = "between two page lines" if rem else "on a page line"
    note = f"Partition {p.number} starts at LBA {p.start:,} = byte {nbytes:,} ({human_si(nbytes)}): {verdict}"
    out.append(f'<text x="{LEFT}" y="{y}" class="note">{_e(note)}</text>')
    y += 6
    cells = []
    for k in range(DETAIL_CELLS):
        lba = lo + k
        if lba >= geom.sectors:
            break
        x = LEFT + k * CELL
        table = le.disk.table
        inside = p.start <= lba <= p.end
        fill = colour if inside else "#bbbbbb" if table.label and not table.first_usable <= lba else "#f4f4f4"
        cells.append(f'<rect class="sector" x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{fill}" '
                     f'data-lba="{lba}"/>')
        if lba == 0 or geom.page_of(lba) != geom.page_of(lba - 1):  # a page begins here
            cls = "grain" if le.grain.is_aligned(lba) else "page"
            cells.append(f'<line class="{cls}" x1="{x}" y1="{y - 3}" x2="{x}" y2="{y + CELL + 3}" data-lba="{lba}"/>')
    out.extend(cells)
    on_grain, _ = offset_mod(geom, nbytes, le.grain.sectors * geom.logical)
    span = f"LBA {lo:,} … {lo + DETAIL_CELLS - 1:,}; {arith}; {on_grain}"
    out.append(f'<text x="{LEFT}" y="{y + CELL + 14}" class="note">{_e(span)}</text>')
    return y + CELL + 34


# --- the page -------------------------------------------------------------------------------------


def _facts(le: Lesson) -> list[tuple[str, str]]:
    g, t = le.disk.geometry, le.disk.table
    rows = [
        ("Sectors", f"{g.sectors:,} × {g.logical} B = {human_bytes(g.size_bytes)} ({human_si(g.size_bytes)})"),
        ("Physical block", f"{g.physical} B"),
        ("Starts judged by", g.page_rule()),
        ("Grain", f"{le.grain.sectors:,}s = {human_bytes(le.grain.sectors * g.logical)}"),
        ("Table", t.label or "none"),
    ]
    if g.optimal_io or g.min_io:
        rows.insert(2, ("Minimum / optimal I/O", f"{g.min_io:,} B / {g.optimal_io:,} B"))
    return rows


def _partition_rows(le: Lesson) -> list[tuple[str, ...]]:
    ls = le.disk.geometry.logical
    return [(str(p.number), f"{p.start:,}", f"{p.end:,}", f"{p.size:,}", human_bytes(p.size * ls), p.name)
            for p in sorted(le.disk.table.live, key=lambda p: p.start)]


def _finding_head(f: Finding) -> str:
    where = f"partition {f.partition}" if f.partition else "the disk"
    return f"{f.severity} [{f.code}] {where}: {f.message}"


def markdown(le: Lesson) -> str:
    s = le.scenario
    goal = GOALS.get(s.name)
    out = [f"# {s.title}", "", f"Demo `{s.name}`: open it with `diskplan --demo {s.name}`"
           + (f", or as an exercise with `diskplan --demo {s.name} --exercise`." if goal else "."), "", "## Lesson", ""]
    out += [f"- {line}" for line in s.lesson]
    out += ["", "## The disk", "", "| | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in _facts(le)]
    if le.disk.table.live:
        out += ["", "| # | start | end | sectors | size | name |", "|---|---:|---:|---:|---:|---|"]
        out += ["| " + " | ".join(row) + " |" for row in _partition_rows(le)]
    svg = base64.b64encode(sector_map_svg(le).encode()).decode()
    out += ["", "## The sector map", "", f"![The sector map of {s.name}](data:image/svg+xml;base64,{svg})", "",
            "## Findings and their arithmetic", ""]
    if not le.findings:
        out += ["No findings: every start is on the grain.", ""]
    for f in le.findings:
        out += [f"### {_finding_head(f)}", ""] + [f"- {line}" for line in f.explanation] + [""]
    if goal:
        out += ["## Exercise: fix this layout", ""] + [f"- {line}" for line in goal.task]
        out += ["", "Walk-through:", ""] + [f"{i}. {st.text}" for i, st in enumerate(goal.steps, 1)]
        if goal.measured:
            out += ["", f"When it is right: {goal.measured}"]
    return "\n".join(out).rstrip() + "\n"


def page_html(le: Lesson) -> str:
    s = le.scenario
    goal = GOALS.get(s.name)
    body = [f"<h1>{_e(s.title)}</h1>",
            f"<p>Demo <code>{_e(s.name)}</code>: open it with <code>diskplan --demo {_e(s.name)}</code>"
            + (f", or as an exercise with <code>diskplan --demo {_e(s.name)} --exercise</code>." if goal else ".")
            + "</p>", "<h2>Lesson</h2>", "<ul>", *(f"<li>{_e(x)}</li>" for x in s.lesson), "</ul>",
            "<h2>The disk</h2>", "<table>", *(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in _facts(le)),
            "</table>"]
    if le.disk.table.live:
        head = ("#", "start", "end", "sectors", "size", "name")
        body += ["<table class='parts'>", "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>",
                 *("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in _partition_rows(le)),
                 "</table>"]
    body += ["<h2>The sector map</h2>", sector_map_svg(le), "<h2>Findings and their arithmetic</h2>"]
    if not le.findings:
        body.append("<p>No findings: every start is on the grain.</p>")
    for f in le.findings:
        body += [f"<h3>{_e(_finding_head(f))}</h3>", "<ul>", *(f"<li>{_e(x)}</li>" for x in f.explanation), "</ul>"]
    if goal:
        body += ["<h2>Exercise: fix this layout</h2>", "<ul>", *(f"<li>{_e(x)}</li>" for x in goal.task), "</ul>",
                 "<p>Walk-through:</p>", "<ol>", *(f"<li>{_e(st.text)}</li>" for st in goal.steps), "</ol>"]
        if goal.measured:
            body.append(f"<p>When it is right: {_e(goal.measured)}</p>")
    css = ("body{font:15px/1.45 sans-serif;max-width:52em;margin:2em auto;padding:0 1em;color:#222}"
           "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}"
           "code{background:#f2f2f2;padding:0 3px}svg{max-width:100%;height:auto}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(s.title)}</title><style>{css}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
