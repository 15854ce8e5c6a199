"""The partition list beside the map: one row per partition with its worst finding; moving its cursor moves
the map's, and the map's cursor moves it.

Drawn line by line (Textual's Line API) like the map: a DataTable did the same job but cost the first frame
tens of milliseconds (its import, its styles, a measuring pass and a second layout when idle).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from diskplan.model.extent import State
from diskplan.model.safetext import safe
from diskplan.model.units import human_bytes
from diskplan.ui.cells import MapContent
from diskplan.ui.explain import num
from diskplan.ui.glyphs import Glyphs

HEADINGS = ("#", "start", "size", "name")
# One column of a row: its text and style, or several pieces of text in their styles
Cell = tuple[str, Style] | list[tuple[str, Style]]


class Row(NamedTuple):
    number: int
    start: int
    deleted: bool
    severity: str | None  # the worst finding's, None when there is none
    cells: tuple[str, str, str, str]  # flag and number, start, size, name


STATE_MARKS = (" (new)", " (del)")


def fit_name(name: str, room: int) -> str:
    """A name shortened on purpose when the list is narrow: "~" says it goes on, and "(new)"/"(del)" stay
    whole ("home (d" would hide that home is to be deleted)."""
    if len(name) <= room or room <= 0:
        return name
    mark = next((m for m in STATE_MARKS if name.endswith(m)), "")
    base = name[: len(name) - len(mark)]
    keep = room - len(mark) - 1
    if keep >= 1:
        return base[:keep] + "~" + mark
    return mark.strip()[:room] if mark else name[: room - 1] + "~"


class PartitionList(ScrollView, can_focus=True):
    """The partitions with their worst finding; highlighting one moves the map's cursor to it."""

    DEFAULT_CSS = """
    PartitionList { height: 1fr; background: $surface; overflow-x: hidden; }
    PartitionList > .partition-list--header { text-style: bold; background: $panel; color: $foreground; }
    PartitionList > .partition-list--cursor { background: $block-cursor-blurred-background; }
    PartitionList:focus > .partition-list--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold;
    }
    PartitionList > .partition-list--ok { color: $success; }
    PartitionList > .partition-list--notice { color: $warning; text-style: bold; }
    PartitionList > .partition-list--warning { color: $error; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "partition-list--header",
        "partition-list--cursor",
        "partition-list--ok",
        "partition-list--notice",
        "partition-list--warning",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "previous", show=False),
        Binding("down", "move(1)", "next", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "move(-1000000)", "first", show=False),
        Binding("end", "move(1000000)", "last", show=False),
        Binding("enter", "choose", "go to it on the map", show=False),
    ]

    class Chosen(Message):
        def __init__(self, number: int, start: int, focus_map: bool) -> None:
            super().__init__()
            self.number = number
            self.start = start
            self.focus_map = focus_map

    def __init__(self, glyphs: Glyphs, id: str | None = None) -> None:
        super().__init__(id=id)
        self.glyphs = glyphs
        self._rows: list[Row] = []
        self._widths = [len(label) for label in HEADINGS]
        self.cursor_row = 0

    # --- what is listed -------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def get_row_at(self, index: int) -> tuple[str, str, str, str]:
        return self._rows[index].cells

    def show(self, content: MapContent) -> None:
        geom = content.geometry
        rows: list[Row] = []
        for item in content.partition_items():
            p = item.partition
            assert p is not None
            name = safe(p.name) or (p.role.value if p.role.value != "primary" else "")
            if p.state is State.PROPOSED:
                name = f"{name} (new)".strip()
            elif p.state is State.DELETE:
                name = f"{name} (del)".strip()
            elif p.resized_from is not None:
                name = f"{name} ({'grows' if p.size > p.resized_from else 'shrinks'})".strip()
            elif p.moved_from is not None:
                name = f"{name} (moves)".strip()
            flag = self.glyphs.ok if item.severity is None else \
                self.glyphs.notice if item.severity == "notice" else self.glyphs.problem
            # A number freed by a deletion may be reused by a proposal: both rows are listed.
            rows.append(Row(p.number, p.start, p.state is State.DELETE, item.severity,
                            (f"{flag} {p.number}", f"{num(p.start)}s", human_bytes(p.size * geom.logical), name)))
        self._rows = rows
        self._widths = [max([len(label), *(len(r.cells[i]) for r in rows)]) for i, label in enumerate(HEADINGS)]
        self.cursor_row = min(self.cursor_row, max(0, len(rows) - 1))
        # Only the height: a new width would lay the whole screen out again on each step of the plan, and
        # what is wider than the list is cut anyway.
        self.virtual_size = Size(0, len(rows) + 1)
        self.refresh()

    def follow(self, number: int | None, deleted: bool = False) -> None:
        """Highlight the row of ``number`` without moving the map (the map moved first)."""
        for i, r in enumerate(self._rows):
            if r.number == number and r.deleted == deleted:
                self._set_cursor(i)
                return

    # --- moving -----------------------------------------------------------------------------------------

    def _set_cursor(self, row: int) -> bool:
        row = max(0, min(row, len(self._rows) - 1))
        if row == self.cursor_row:
            return False
        self.cursor_row = row
        visible = max(1, self.scrollable_content_region.height - 1)  # the header stays on top
        top = round(self.scroll_offset.y)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False, immediate=True)
        self.refresh()
        return True

    def _chosen(self, focus_map: bool) -> None:
        if self._rows:
            r = self._rows[self.cursor_row]
            self.post_message(self.Chosen(r.number, r.start, focus_map=focus_map))

    def action_move(self, rows: int) -> None:
        if self._set_cursor(self.cursor_row + rows):
            self._chosen(focus_map=False)

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(1, self.scrollable_content_region.height - 1))

    def action_choose(self) -> None:
        self._chosen(focus_map=True)

    def on_click(self, event: events.Click) -> None:
        if event.y < 1:  # the header
            return
        row = round(self.scroll_offset.y) + event.y - 1
        if row >= len(self._rows):
            return
        event.stop()
        if row == self.cursor_row:  # a click on the highlighted row goes there, as enter does
            self._chosen(focus_map=True)
        elif self._set_cursor(row):
            self._chosen(focus_map=False)

    # --- drawing ----------------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        style = self.rich_style
        if y == 0:
            header = self.get_component_rich_style("partition-list--header")
            return self._strip([(label, header) for label in HEADINGS], header, width)
        row = round(self.scroll_offset.y) + y - 1
        if row >= len(self._rows):
            return Strip.blank(width, style)
        r = self._rows[row]
        base = style
        if row == self.cursor_row:
            base = style + self.get_component_rich_style("partition-list--cursor")
        flag_class = "partition-list--ok" if r.severity is None else (
            "partition-list--notice" if r.severity == "notice" else "partition-list--warning")
        flag_style = base + self.get_component_rich_style(flag_class, partial=True)
        flag, number = r.cells[0].split(" ", 1)
        cells: list[Cell] = [[(flag, flag_style), (" " + number, base)]]
        cells += [(text, base) for text in r.cells[1:-1]]
        room = width - sum(w + 2 for w in self._widths[:-1]) - 1  # the name's, after the other columns
        cells.append((fit_name(r.cells[-1], room), base))
        return self._strip(cells, base, width)

    def _strip(self, cells: Sequence[Cell], fill: Style, width: int) -> Strip:
        """Cells padded to their column's width with a space either side, as a table draws them; what is wider
        than the list is cut (the name, last; the explanation has it whole), no scrollbar takes a row."""
        segments: list[Segment] = []
        for i, cell in enumerate(cells):
            parts = cell if isinstance(cell, list) else [cell]
            used = sum(len(text) for text, _ in parts)
            segments.append(Segment(" ", fill))
            segments.extend(Segment(text, st) for text, st in parts)
            segments.append(Segment(" " * (self._widths[i] - used + 1), fill))
        return Strip(segments).adjust_cell_length(width, fill)
