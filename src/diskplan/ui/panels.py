"""The widgets around the sector map: title bar, legend, status line, partition list, explain and facts."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.visual import VisualType
from textual.widgets import DataTable, Footer, Static

from diskplan.model import demos
from diskplan.model.extent import State
from diskplan.model.findings import Finding
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain
from diskplan.model.plan import History, Plan
from diskplan.model.units import human_bytes
from diskplan.ui.cells import Item, MapContent
from diskplan.ui.explain import Line, facts, num
from diskplan.ui.glyphs import Glyphs
from diskplan.ui.sectormap import SectorMap
from diskplan.ui.target import Target

LINE_STYLE = {
    "heading": "bold",
    "text": "",
    "dim": "$text-muted",
    "good": "$success",
    "notice": "bold $warning",
    "warning": "bold $error",
    "error": "bold $error",
}


def lines_content(lines: list[Line]) -> Content:
    parts: list[str | tuple[str, str]] = []
    for n, line in enumerate(lines):
        if n:
            parts.append("\n")
        parts.append((line.text, LINE_STYLE.get(line.style, "")))
    return Content.assemble(*parts)


class OneLine(Static):
    """A line of fixed size: an update never needs a layout pass (which would repaint the map's scrollbar)."""

    def update(self, content: VisualType = "", *, layout: bool = False) -> None:
        super().update(content, layout=layout)


class KeysFooter(Footer):
    """Textual's footer, recomposed only when the keys it shows change. Textual's own recomposes (every key
    widget again, then a layout) on each focus change, and at start-up once more when the map takes the
    focus, though the map's keys are not shown."""

    _shown: tuple[tuple[str, str, str, bool, str], ...] | None = None

    def _keys(self, screen: Screen[object]) -> tuple[tuple[str, str, str, bool, str], ...]:
        return tuple((b.key, b.description, self.app.get_key_display(b), enabled, tooltip)
                     for (_, b, enabled, tooltip) in screen.active_bindings.values() if b.show)

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self.app.app_focus:  # else Textual's footer only notes that the bindings are ready
            keys = self._keys(screen)
            if self._bindings_ready and keys == self._shown:
                return
            self._shown = keys
        super().bindings_changed(screen)


class TitleBar(OneLine):
    """One line: what is shown, and the zoom."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $panel; color: $text; text-wrap: nowrap; text-overflow: clip; }
    """

    def show(self, title: str, zoom: str, snap: str = "", short_zoom: str = "") -> None:
        """``title`` left; the snapping target and the zoom right. What does not fit goes, least useful first:
        the program's name, then the zoom's detail, then the zoom."""
        width = max(0, self.size.width)
        right_side = [f"{snap} │ {zoom}" if snap else zoom, f"{snap} │ {short_zoom or zoom}" if snap else zoom, snap]
        for right in right_side:
            for left in (f" diskplan │ {title}", f" {title}"):
                room = width - len(left) - len(right) - 1
                if room >= 2:
                    self.update(Content(left + " " * room + right + " "))
                    return
        self.update(Content(f" {title}"))


class Legend(OneLine):
    """What each glyph on the map means, drawn with the map's own styles."""

    DEFAULT_CSS = """
    Legend { height: 1; text-wrap: nowrap; text-overflow: clip; color: $text-muted; }
    """

    def show(self, sector_map: SectorMap, geometry: Geometry | None, grain: Grain | None, *,
             proposed: bool = False, deleting: bool = False) -> None:
        """``proposed``/``deleting``: the plan has such partitions, so their glyphs are explained too."""
        g: Glyphs = sector_map.glyphs
        style = sector_map.get_component_rich_style
        # (glyph, style, word, priority): what does not fit the width goes, lowest priority first.
        keys: list[tuple[str, Style, str, int]] = [
            (" ", style("sectormap--part-0"), "partition", 1 if proposed or deleting else 5),
        ]
        if proposed:
            keys.append((g.proposed, style("sectormap--part-1") + style("sectormap--proposed", partial=True), "new", 9))
        if deleting:
            keys.append((g.deleting, style("sectormap--part-2") + style("sectormap--deleting", partial=True),
                         "delete", 9))
        keys += [
            (g.flagged, style("sectormap--part-0") + style("sectormap--flagged", partial=True), "findings", 8),
            (g.problem, style("sectormap--problem-warning"), "problem", 8),
            (g.metadata, style("sectormap--metadata"), "table", 6),
            (g.free, style("sectormap--free"), "free", 6),
        ]
        if geometry is not None and geometry.physical > geometry.logical:
            keys.append((g.grid_physical, style("sectormap--grid-physical"), f"{human_bytes(geometry.physical)} block",
                         4))
        keys.append((g.grid_mib, style("sectormap--grid-mib"), "1 MiB", 3))
        if geometry is not None and grain is not None:
            mib = (1 << 20) // geometry.logical
            if grain.sectors not in (mib, geometry.sectors_per_physical):
                what = f"{human_bytes(grain.sectors * geometry.logical)} grain"
                keys.append((g.grid_grain, style("sectormap--grid-grain"), what, 7))
        width = self.size.width or 80
        while len(keys) > 1 and 1 + sum(len(w) + 4 for _, _, w, _ in keys) - 2 > width:
            keys.remove(min(keys, key=lambda k: k[3]))
        text = Text(" ")
        for glyph, st, what, _ in keys:
            text.append(glyph, st)
            text.append(f" {what}  ")
        self.update(text)


class StatusLine(OneLine):
    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; color: $text; text-wrap: nowrap; text-overflow: clip; }
    """


def row_key(number: int, deleted: bool) -> str:
    return f"{number}-deleted" if deleted else str(number)


class PartitionList(DataTable[str]):
    """The partitions with their worst finding; highlighting one moves the map's cursor to it."""

    DEFAULT_CSS = """
    PartitionList { height: 1fr; }
    """

    class Chosen(Message):
        def __init__(self, number: int, start: int, focus_map: bool) -> None:
            super().__init__()
            self.number = number
            self.start = start
            self.focus_map = focus_map

    def __init__(self, glyphs: Glyphs, **kw: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)  # type: ignore[arg-type]
        self.glyphs = glyphs
        self._starts: dict[str, tuple[int, int]] = {}  # row key -> (number, start)
        self._syncing = False
        self._follow: str | None = None

    LABELS = (" #", "start", "size", "name")

    def show(self, content: MapContent) -> None:
        geom = content.geometry
        rows: list[tuple[Text, str, str, str]] = []
        self._starts.clear()
        for item in content.partition_items():
            p = item.partition
            assert p is not None
            if item.severity is None:
                flag = Text(self.glyphs.ok, "green")
            else:
                flag = Text(self.glyphs.problem, "bold red" if item.severity != "notice" else "bold yellow")
            name = p.name or (p.role.value if p.role.value != "primary" else "")
            if p.state is State.PROPOSED:
                name = f"{name} (new)".strip()
            elif p.state is State.DELETE:
                name = f"{name} (del)".strip()
            flag.append(f" {p.number}")
            rows.append((flag, f"{num(p.start)}s", human_bytes(p.size * geom.logical), name))
            # A number freed by a deletion may be reused by a proposal: both rows are listed.
            self._starts[row_key(p.number, p.state is State.DELETE)] = (p.number, p.start)
        # Columns sized here, not by the table's own measuring (done on idle, after the first render,
        # which can leave the first frame with label-wide columns).
        self.clear(columns=True)
        for i, label in enumerate(self.LABELS):
            width = max([len(label), *(len(r[i]) for r in rows)])
            self.add_column(label, width=width)
        for row, key in zip(rows, self._starts, strict=True):
            self.add_row(*row, key=key)  # type: ignore[arg-type]

    def follow(self, number: int | None, deleted: bool = False) -> None:
        """Highlight the row of ``number`` without moving the map (the map moved first)."""
        self._follow = None if number is None else row_key(number, deleted)
        # After the table has laid out its new rows (it measures them when idle).
        self.call_after_refresh(self._apply_follow)

    def _apply_follow(self) -> None:
        key = self._follow
        if key is None or key not in self.rows:
            return
        row = self.get_row_index(key)
        if row != self.cursor_row:
            self._syncing = True
            self.move_cursor(row=row, animate=False)
            self.call_after_refresh(self._done_syncing)

    def _done_syncing(self) -> None:
        self._syncing = False

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self._syncing or not self.has_focus or event.row_key.value is None:
            return
        number, start = self._starts[event.row_key.value]
        self.post_message(self.Chosen(number, start, focus_map=False))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is None:
            return
        number, start = self._starts[event.row_key.value]
        self.post_message(self.Chosen(number, start, focus_map=True))


class TextPanel(VerticalScroll, can_focus=True):
    """A scrolling panel of text under the map: one Static, scrolled with the arrows when focused."""

    DEFAULT_CSS = """
    TextPanel { height: 1fr; padding: 0 1; }
    TextPanel > Static { width: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "scroll up", show=False),
        Binding("down", "scroll_down", "scroll down", show=False),
    ]
    TEXT_ID = "panel-text"

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(id=self.TEXT_ID)

    def set_text(self, content: Content) -> None:
        self.query_one(f"#{self.TEXT_ID}", Static).update(content)


CHANGE_MARK = {"repair": "!", "label": "*", "delete": "-", "create": "+"}


class ChangesPanel(TextPanel):
    """The pending changes against the table on disk, the snapping target, and what undo/redo would do."""

    TEXT_ID = "changes-text"

    def show(self, plan: Plan, history: History, writable: str = "") -> None:
        """``writable``: why the plan cannot be written from here ("" when it can)."""
        changes = plan.changes()
        parts: list[str | tuple[str, str]] = []
        if changes:
            n = len(changes)
            parts.append((f"{n} pending change{'s' if n != 1 else ''}", "bold"))
            parts.append((" (w writes them)\n" if not writable else f" ({writable})\n", "$text-muted"))
            for c in changes:
                parts.append((f"{CHANGE_MARK.get(c.kind, '~')} ", "bold"))
                parts.append(f"{c.text}\n")
        else:
            parts.append(("No pending changes", "bold"))
            parts.append(": the plan is the table on the disk.\n")
            parts.append(("n proposes a partition in free space, x marks one for deletion, L makes a new "
                          "label.\n", "$text-muted"))
        g = plan.grain
        ss = plan.geometry.logical
        parts.append(("\nSnapping ", "bold"))
        parts.append(f"{plan.target.value}: {g.sectors:,} sectors ({human_bytes(g.sectors * ss)})"
                     + (f", offset {g.offset}s" if g.offset else ""))
        parts.append((" (s changes it, a re-snaps proposals)\n", "$text-muted"))
        parts.append(("Undo ", "bold"))
        parts.append((history.undo_message or "-") + "\n")
        parts.append(("Redo ", "bold"))
        parts.append((history.redo_message or "-") + "\n")
        self.set_text(Content.assemble(*parts))


class ExplainPanel(TextPanel):
    """Why what lies under the cursor matters: the arithmetic of its findings, in plain words."""

    TEXT_ID = "explain-text"

    def show(self, lines: list[Line]) -> None:
        self.set_text(lines_content(lines))
        self.scroll_home(animate=False)


class FactsPanel(TextPanel):
    """The device facts (and a demo's lesson)."""

    TEXT_ID = "facts-text"

    def show(self, target: Target, grain: Grain, table_findings: tuple[Finding, ...] = ()) -> None:
        parts: list[str | tuple[str, str]] = []
        for f in table_findings:
            parts.append((f"{f.severity.upper()}: {f.message} [{f.code}]\n", LINE_STYLE.get(f.severity, "")))
            parts.extend(f"  {line}\n" for line in f.explanation)
        if table_findings:
            parts.append("\n")
        if target.demo:
            title = demos.find(target.demo).title
            parts.append((f"Demo {target.demo}: {title}\n", "bold"))
            for line in target.lesson:
                parts.append(line + "\n")
            parts.append(("Move the cursor (arrows, ] [) and the explanation (e) follows it.\n\n", "$text-muted"))
        if target.note:
            parts.append((f"Note: {target.note}\n\n", "$warning"))
        rows = facts(target.disk, grain)
        if target.disk.table.read_only:
            rows.append(("Read-only", target.disk.table.read_only))
        width = max(len(k) for k, _ in rows) + 1
        for label, value in rows:
            parts.append((label.ljust(width), "$text-muted"))
            parts.append(value + "\n")
        self.set_text(Content.assemble(*parts))


def item_number(item: Item | None) -> int | None:
    return item.number if item is not None else None
