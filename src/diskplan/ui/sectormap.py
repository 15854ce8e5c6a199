"""The sector map: rows of cells, each cell a run of sectors, drawn through Textual's Line API.

Only visible rows are rendered, each through ``MapContent.row`` (bisect over sorted segments), and
rendered rows are kept in an LRU cache keyed on everything that changes a row. Moving the cursor
repaints two rows; a drag step (``patch_table``) repaints the rows where the dragged edges were and are.
Equal neighbouring cells are drawn as one segment: Textual writes every segment with its full style, so a
row of 64 separately styled cells costs ~2.9 KB on the terminal and a run of equal ones ~0.3 KB.
``hit_at`` turns a position into the cell's LBAs by arithmetic, and the mouse handlers post typed
messages with them (the planning interactions handle those messages).

What to draw is a ``Table`` (``show`` / ``set_table`` / ``patch_table``): a plan's wanted table.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import ceil
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from diskplan.model.extent import Extent, Partition, State
from diskplan.model.findings.placement import Finding, analyze
from diskplan.model.findings.stackfindings import DataStart
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, optimal_grain
from diskplan.model.table import Table
from diskplan.model.value import value
from diskplan.ui.cells import EBR_GAP, Cell, Grid, Item, Kind, MapContent
from diskplan.ui.glyphs import UNICODE, Glyphs, part_char

MIN_COLS = 8


# Partition fills and the overlays drawn on them. Not CSS component classes: Textual styles every component
# class of a widget again at each restyle (mount, screen resume, focus), and with these 17 among them that
# was a quarter of all the work the planner did before its first frame. The console's are the 16 ANSI colours.
PALETTE: Mapping[str, Style] = {
    "sectormap--part-0": Style(bgcolor="#2f6db5", color="#dfe9f5"),
    "sectormap--part-1": Style(bgcolor="#3d8a3d", color="#e2f0e2"),
    "sectormap--part-2": Style(bgcolor="#8a4fa8", color="#eee2f5"),
    "sectormap--part-3": Style(bgcolor="#2c8c8c", color="#dff2f2"),
    "sectormap--part-4": Style(bgcolor="#a0662a", color="#f5e9dc"),
    "sectormap--part-5": Style(bgcolor="#5a62b8", color="#e3e5f7"),
    "sectormap--part-6": Style(bgcolor="#7f8a2a", color="#f0f2dc"),
    "sectormap--part-7": Style(bgcolor="#a8466b", color="#f7e0e9"),
    "sectormap--flagged": Style(color="#151515"),
    "sectormap--proposed": Style(color="#ffffff"),
    "sectormap--deleting": Style(color="#ff8080"),
    "sectormap--problem-notice": Style(bgcolor="#d7af00", color="#000000", bold=True),
    "sectormap--problem-warning": Style(bgcolor="#d70000", color="#ffffff", bold=True),
    "sectormap--grid-physical": Style(color="#b8b8b8"),
    "sectormap--grid-mib": Style(color="#ffffff"),
    "sectormap--grid-grain": Style(color="#ffd75f"),
    "sectormap--layer": Style(color="#ffffff", bold=True),
}
_CONSOLE_PARTS = (("blue", "bright_white"), ("green", "black"), ("magenta", "bright_white"), ("cyan", "black"))
CONSOLE_PALETTE: Mapping[str, Style] = {
    **{f"sectormap--part-{i}": Style(bgcolor=bg, color=fg)
       for i, (bg, fg) in enumerate(_CONSOLE_PARTS * (MapContent.SLOTS // len(_CONSOLE_PARTS)))},
    "sectormap--flagged": Style(color="black"),
    "sectormap--proposed": Style(color="bright_white"),
    "sectormap--deleting": Style(color="bright_red"),
    "sectormap--problem-notice": Style(bgcolor="yellow", color="black", bold=True),
    "sectormap--problem-warning": Style(bgcolor="red", color="bright_white", bold=True),
    "sectormap--grid-physical": Style(color="white"),
    "sectormap--grid-mib": Style(color="bright_white"),
    "sectormap--grid-grain": Style(color="bright_yellow"),
    "sectormap--layer": Style(color="bright_white", bold=True),
}

# Without colour (NO_COLOR, a monochrome terminal, --no-color): partitions on the disk are reversed, proposed and
# deleted ones plain; each cell carries the partition's character (glyphs.part_char). The cursor reverses its
# cell again (SectorMap._compose_style), so it shows on any cell.
MONO_PALETTE: Mapping[str, Style] = {
    **{f"sectormap--part-{i}": Style(reverse=True) for i in range(MapContent.SLOTS)},
    "sectormap--flagged": Style(),
    "sectormap--proposed": Style(reverse=False),
    "sectormap--deleting": Style(reverse=False),
    "sectormap--problem-notice": Style(bold=True),
    "sectormap--problem-warning": Style(bold=True),
    "sectormap--grid-physical": Style(),
    "sectormap--grid-mib": Style(),
    "sectormap--grid-grain": Style(),
    "sectormap--mark": Style(underline=True),
    "sectormap--layer": Style(),  # its glyph tells it; a misplaced one is bold (the problem styles)
}
CURSOR = "sectormap--cursor"


@value
class Hit:
    """Where the mouse is on the map: the cell's first and last LBA (the LBA is the cell's first)."""

    lba: int
    last: int
    x: int
    y: int

    @property
    def cell(self) -> Extent:
        return Extent(self.lba, self.last)


class SectorMap(ScrollView, can_focus=True):
    """A disk at any zoom, from the whole disk down to one logical sector per cell."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "sectormap--gutter",
        "sectormap--free",
        "sectormap--metadata",
        "sectormap--container",
        "sectormap--mark",
        "sectormap--selected",
        "sectormap--cursor",
        "sectormap--beyond",
    }

    DEFAULT_CSS = """
    SectorMap {
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
        background: $surface;
        & > .sectormap--gutter { color: $text-muted; }
        & > .sectormap--free { color: $text-disabled; }
        & > .sectormap--metadata { color: $warning-darken-1; }
        & > .sectormap--container { color: $text-muted; }
        & > .sectormap--mark { background: #d7875f; }
        & > .sectormap--selected { text-style: bold; }
        & > .sectormap--cursor { background: #ffffff; color: #000000; text-style: bold; }
        & > .sectormap--beyond { color: $text-disabled; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "cursor(-1, 0)", "cell left", show=False),
        Binding("right", "cursor(1, 0)", "cell right", show=False),
        Binding("up", "cursor(0, -1)", "row up", show=False),
        Binding("down", "cursor(0, 1)", "row down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "edge(0)", "start of disk", show=False),
        Binding("end", "edge(1)", "end of disk", show=False),
        Binding("plus,equals_sign", "zoom(-1)", "zoom in", key_display="+", show=False),
        Binding("minus", "zoom(1)", "zoom out", key_display="-", show=False),
        Binding("0", "zoom_fit", "whole disk", show=False),
        Binding("1", "zoom_sector", "1 sector/cell", show=False),
        Binding("right_square_bracket", "jump(1)", "next partition", key_display="]", show=False),
        Binding("left_square_bracket", "jump(-1)", "previous partition", key_display="[", show=False),
        Binding("full_stop", "boundary(1)", "next boundary", key_display=".", show=False),
        Binding("comma", "boundary(-1)", "previous boundary", key_display=",", show=False),
        Binding("exclamation_mark,f", "problem(1)", "next finding", key_display="f", show=False),
    ]

    # --- messages -----------------------------------------------------------------------------------

    class CursorMoved(Message):
        """The cursor moved (keys, mouse, or a program). ``item`` is what lies under it."""

        def __init__(self, sector_map: SectorMap, lba: int, item: Item | None) -> None:
            super().__init__()
            self.sector_map = sector_map
            self.lba = lba
            self.item = item

        @property
        def control(self) -> SectorMap:
            return self.sector_map

    class ZoomChanged(Message):
        def __init__(self, sector_map: SectorMap, spc: int) -> None:
            super().__init__()
            self.sector_map = sector_map
            self.spc = spc

        @property
        def control(self) -> SectorMap:
            return self.sector_map

    class TableChanged(Message):
        """``show`` or ``set_table`` gave the map new content (``content`` holds items and findings)."""

        def __init__(self, sector_map: SectorMap, content: MapContent) -> None:
            super().__init__()
            self.sector_map = sector_map
            self.content = content

        @property
        def control(self) -> SectorMap:
            return self.sector_map

    class _MouseMessage(Message):
        def __init__(self, sector_map: SectorMap, hit: Hit, event: events.MouseEvent) -> None:
            super().__init__()
            self.sector_map = sector_map
            self.hit = hit
            self.lba = hit.lba
            self.button = event.button
            self.shift = event.shift
            self.ctrl = event.ctrl
            self.meta = event.meta

        @property
        def control(self) -> SectorMap:
            return self.sector_map

    class MapMouseDown(_MouseMessage):
        """A button went down on a cell (the map captures the mouse until it goes up)."""

    class MapMouseMove(_MouseMessage):
        """While a button is held, the mouse entered another cell (LBA clamped to the disk)."""

    class MapMouseUp(_MouseMessage):
        """The button was released; ``hit`` is the cell under the mouse, clamped to the disk."""

    class CellClicked(_MouseMessage):
        """Down and up on the same cell."""

    # --- state ----------------------------------------------------------------------------------------

    def __init__(self, glyphs: Glyphs = UNICODE, palette: Mapping[str, Style] = PALETTE, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.glyphs = glyphs
        self.palette = palette
        self.content: MapContent | None = None
        self.cursor_lba = 0
        self.spc = 1  # sectors per cell
        self.cols = 64
        self.label_width = 0
        self.selected: int | None = None  # partition number
        self.marks: tuple[Extent, ...] = ()
        self._version = 0
        self._style_version = 0
        self._cache: LRUCache[tuple[object, ...], Strip] = LRUCache(1024)
        self._styles: dict[tuple[object, ...], Style] = {}
        self._pressed: Hit | None = None
        self._last_hit: Hit | None = None
        self._want_fit = True

    # --- public API -----------------------------------------------------------------------------------

    @property
    def geometry(self) -> Geometry | None:
        return self.content.geometry if self.content else None

    @property
    def table(self) -> Table | None:
        return self.content.table if self.content else None

    def show(self, geometry: Geometry, table: Table, grain: Grain | None = None,
             findings: list[Finding] | tuple[Finding, ...] | None = None, *, cursor: int | None = None,
             data_starts: tuple[DataStart, ...] = ()) -> None:
        """Show a (new) disk: whole disk zoom, cursor at ``cursor`` (default: the first finding, else the first
        partition, else LBA 0). ``data_starts``: the disk's layer data starts as read, kept for its later tables."""
        grain = grain or optimal_grain(geometry)
        found = analyze(geometry, table, grain) if findings is None else findings
        self._set_content(MapContent(geometry, table, found, grain, data_starts))
        self._want_fit = True
        self._relayout()
        assert self.content is not None
        first = self.content.next_start(-1, problems_only=True)
        if first is None:
            first = self.content.next_start(-1)
        self.move_to(cursor if cursor is not None else (first or 0), force=True)

    def set_table(self, table: Table, findings: list[Finding] | tuple[Finding, ...] | None = None,
                  grain: Grain | None = None) -> None:
        """The same disk with another table (a plan's proposal): keeps zoom, scroll and cursor."""
        if self.content is None:
            raise RuntimeError("show() a disk before set_table()")
        geometry = self.content.geometry
        grain = grain or self.content.grain
        found = analyze(geometry, table, grain) if findings is None else findings
        self._set_content(MapContent(geometry, table, found, grain, self.content.data_starts))
        self.refresh()
        self._announce()

    def patch_table(self, table: Table, changed: Mapping[int, tuple[Partition, tuple[Finding, ...]]]) -> None:
        """One drag step: the live partitions ``changed`` (number -> (partition, findings)) moved or resized,
        ``table`` is the table now. Repaints only the rows where an edge was or now is, and the rows in
        between (no TableChanged: the list follows when the drag ends)."""
        if self.content is None:
            raise RuntimeError("show() a disk before patch_table()")
        old = self.content
        self.content = new = old.patched(table, changed)
        self._version += 1
        for number in changed:
            before, after = old.item_of(number), new.item_of(number)
            if before is None or after is None:
                continue
            o, e = before.extent, after.extent
            if before.severity != after.severity and after.state is not State.PROPOSED:
                self._refresh_extent(Extent(min(o.start, e.start), max(o.end, e.end)))  # its fill changes
                continue
            for a, b in ((o.start, e.start), (o.end, e.end)):
                self._refresh_extent(Extent(min(a, b), max(a, b)))
        if old.layer_lbas != new.layer_lbas:
            for lba in set(old.layer_lbas).symmetric_difference(new.layer_lbas):
                self._refresh_extent(Extent(lba, lba))

    def select(self, number: int | None) -> None:
        """Highlight partition ``number`` (None: nothing): bold, and its first and last cells bracketed."""
        if number != self.selected:
            old, self.selected = self.selected, number
            for n in (old, number):
                item = self.content.item_of(n) if self.content is not None and n is not None else None
                if item is not None:
                    self._refresh_extent(item.extent)

    def set_marks(self, marks: tuple[Extent, ...]) -> None:
        """Extents drawn with the mark style (the selected partition's first filesystem block, a drag's
        requested position...)."""
        if marks != self.marks:
            old = self.marks
            self.marks = marks
            if len(old) == len(marks) == 1 and old[0].overlaps(marks[0]):
                # A drag's requested extent moved: only the cells between the old and new edges change.
                a, b = old[0], marks[0]
                for x, y in ((a.start, b.start), (a.end, b.end)):
                    self._refresh_extent(Extent(min(x, y), max(x, y)))
                return
            for ext in (*old, *marks):
                self._refresh_extent(ext)

    def item_at(self, lba: int) -> Item | None:
        return self.content.item_at(lba) if self.content else None

    @property
    def cursor_item(self) -> Item | None:
        return self.item_at(self.cursor_lba)

    def move_to(self, lba: int, *, force: bool = False) -> None:
        """Put the cursor on ``lba`` (clamped to the disk) and scroll it into view."""
        if self.content is None:
            return
        lba = max(0, min(lba, self.content.sectors - 1))
        if lba == self.cursor_lba and not force:
            return
        old = self.cursor_lba
        self.cursor_lba = lba
        if not self._scroll_into_view(self._row_of(lba)):
            self._refresh_extent(Extent(old, old))  # the two cursor cells only
            self._refresh_extent(Extent(lba, lba))
        self._announce()

    def zoom_to(self, spc: int) -> None:
        """Show ``spc`` sectors per cell, keeping the cursor's row where it is on the screen."""
        if self.content is None:
            return
        spc = max(1, min(spc, self.fit_spc))
        if spc == self.spc:
            return
        screen_row = self._row_of(self.cursor_lba) - round(self.scroll_offset.y)
        self.spc = spc
        self._want_fit = spc == self.fit_spc
        self._update_virtual_size()
        target = self._row_of(self.cursor_lba) - screen_row
        self.scroll_to(y=max(0, min(target, self.max_scroll_y)), animate=False, immediate=True)
        self.refresh()
        self.post_message(self.ZoomChanged(self, spc))

    @property
    def fit_spc(self) -> int:
        """Sectors per cell that fit the whole disk on the visible rows."""
        if self.content is None:
            return 1
        rows = max(1, self.scrollable_content_region.height)
        return max(1, ceil(self.content.sectors / (self.cols * rows)))

    def zoom_levels(self) -> list[int]:
        """1, 2, 4, ... up to the whole-disk zoom."""
        fit, levels, p = self.fit_spc, [], 1
        while p < fit:
            levels.append(p)
            p *= 2
        return [*levels, fit]

    def hit_at(self, x: int, y: int, *, clamp: bool = False) -> Hit | None:
        """The cell at content offset (x, y); with ``clamp``, the nearest cell on the disk."""
        if self.content is None:
            return None
        col = x - self.label_width
        row = y + round(self.scroll_offset.y)
        if not clamp and (col < 0 or col >= self.cols or row < 0):
            return None
        col = max(0, min(col, self.cols - 1))
        row = max(0, row)
        lba = (row * self.cols + col) * self.spc
        if lba >= self.content.sectors:
            if not clamp:
                return None
            lba = (self.content.sectors - 1) // self.spc * self.spc
        last = min(lba + self.spc - 1, self.content.sectors - 1)
        return Hit(lba, last, x, y)

    # --- layout ---------------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Changes whenever the content does: (version, item index) identifies what is under the cursor."""
        return self._version

    def _set_content(self, content: MapContent) -> None:
        self.content = content
        self._version += 1
        self._cache.clear()
        self.post_message(self.TableChanged(self, content))

    def _row_of(self, lba: int) -> int:
        return lba // self.spc // self.cols

    @property
    def rows(self) -> int:
        if self.content is None:
            return 0
        return ceil(self.content.sectors / (self.spc * self.cols))

    def _relayout(self) -> None:
        """Pick cells per row and the gutter from the width; the zoom that shows the whole disk."""
        width = self.scrollable_content_region.width
        if self.content is None or width <= 0:
            return
        self.label_width = len(f"{self.content.sectors - 1:,}") + 2
        avail = max(MIN_COLS, width - self.label_width)
        # A multiple of 8 keeps 4 KiB physical blocks (8 sectors of 512 B) in columns at sector zoom.
        self.cols = max(MIN_COLS, avail // 8 * 8)
        if self._want_fit:
            self.spc = self.fit_spc
        else:
            self.spc = min(self.spc, self.fit_spc)
        self._update_virtual_size()

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        """A new size, during the layout: the cells are laid out for it before the frame is drawn (on_resize
        comes after that frame, which would show a disk shown before its first layout at the wrong zoom)."""
        resized = super()._size_updated(size, virtual_size, container_size, layout)
        if resized and self.content is not None:
            self._fit_to_size()
        return resized

    def _fit_to_size(self) -> bool:
        """Cells, zoom and scroll for the current size; True when any of them changed."""
        before = (self.label_width, self.cols, self.spc, round(self.scroll_offset.y))
        self._relayout()
        moved = self._scroll_into_view(self._row_of(self.cursor_lba))
        return moved or before != (self.label_width, self.cols, self.spc, round(self.scroll_offset.y))

    def _update_virtual_size(self) -> None:
        size = Size(self.label_width + self.cols, self.rows)
        if size == self.virtual_size:
            return
        # Textual lays the whole screen out again when a virtual size changes, because scrollbars may come
        # or go; the map's vertical one is always shown (overflow-y: scroll), so only the map is redrawn.
        scroll_update = getattr(self, "_scroll_update", None)  # Textual's own, private: else its public way
        if scroll_update is None:
            self.virtual_size = size
            return
        self.set_reactive(SectorMap.virtual_size, size)
        scroll_update(size)
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        # Usually done already, during the layout (_size_updated): then the layout has drawn the map.
        if self.content is not None and self._fit_to_size():
            self.refresh()

    def _scroll_into_view(self, row: int) -> bool:
        """Scroll so ``row`` is visible; True when the view moved (everything repaints then)."""
        top = round(self.scroll_offset.y)
        height = max(1, self.scrollable_content_region.height)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
            return True
        if row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False, immediate=True)
            return True
        return False

    def _refresh_extent(self, ext: Extent) -> None:
        """Repaint exactly the visible cells holding ``ext``: Textual then writes only those spans of the
        lines (a whole-line refresh would send the whole row and the scrollbar's cell)."""
        if self.content is None:
            return
        top = round(self.scroll_offset.y)
        height = self.scrollable_content_region.height
        c0, c1 = ext.start // self.spc, ext.end // self.spc
        cols, x0 = self.cols, self.label_width
        for row in range(max(c0 // cols, top), min(c1 // cols, top + height - 1) + 1):
            lo = c0 - row * cols if row == c0 // cols else 0
            hi = c1 - row * cols if row == c1 // cols else cols - 1
            self.refresh(Region(x0 + lo, row - top, hi - lo + 1, 1))

    def _announce(self) -> None:
        self.post_message(self.CursorMoved(self, self.cursor_lba, self.cursor_item))

    # --- actions --------------------------------------------------------------------------------------

    def action_cursor(self, dx: int, dy: int) -> None:
        cell = self.cursor_lba // self.spc + dx + dy * self.cols
        if self.content is not None and 0 <= cell * self.spc < self.content.sectors:
            self.move_to(cell * self.spc)

    def action_page(self, direction: int) -> None:
        height = max(1, self.scrollable_content_region.height)
        cell = self.cursor_lba // self.spc + direction * height * self.cols
        if self.content is not None:
            last_cell = (self.content.sectors - 1) // self.spc
            self.move_to(max(0, min(cell, last_cell)) * self.spc)

    def action_edge(self, end: int) -> None:
        if self.content is not None:
            self.move_to(self.content.sectors - 1 if end else 0)

    def action_zoom(self, direction: int) -> None:
        levels = self.zoom_levels()
        if direction < 0:
            finer = [x for x in levels if x < self.spc]
            if finer:
                self.zoom_to(finer[-1])
        else:
            coarser = [x for x in levels if x > self.spc]
            if coarser:
                self.zoom_to(coarser[0])

    def action_zoom_fit(self) -> None:
        self.zoom_to(self.fit_spc)

    def action_zoom_sector(self) -> None:
        self.zoom_to(1)

    def action_jump(self, direction: int) -> None:
        self._jump(direction, partitions_only=True)

    def action_boundary(self, direction: int) -> None:
        self._jump(direction, partitions_only=False)

    def action_problem(self, direction: int) -> None:
        if not self._jump(direction, problems_only=True):
            self.notify("No more findings in that direction.", timeout=2)

    def _jump(self, direction: int, **kw: bool) -> bool:
        if self.content is None:
            return False
        here = self.cursor_lba
        # From inside a partition, "previous" first goes to its own start.
        target = self.content.next_start(here, **kw) if direction > 0 else self.content.prev_start(here, **kw)
        if target is None:
            return False
        self.move_to(target)
        return True

    # --- mouse ----------------------------------------------------------------------------------------

    def _hit(self, event: events.MouseEvent, clamp: bool) -> Hit | None:
        offset = event.get_content_offset_capture(self) if clamp else event.get_content_offset(self)
        if offset is None:
            return None
        return self.hit_at(offset.x, offset.y, clamp=clamp)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        hit = self._hit(event, clamp=False)
        if hit is None:
            return
        event.stop()
        self.focus()
        self._pressed = self._last_hit = hit
        self.capture_mouse()
        self.move_to(hit.lba)
        self.post_message(self.MapMouseDown(self, hit, event))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._pressed is None:
            return
        event.stop()
        hit = self._hit(event, clamp=True)
        if hit is None or (self._last_hit is not None and hit.lba == self._last_hit.lba):
            return
        self._last_hit = hit
        self.post_message(self.MapMouseMove(self, hit, event))

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._pressed is None:
            return
        event.stop()
        self.release_mouse()
        pressed, self._pressed = self._pressed, None
        hit = self._hit(event, clamp=True) or self._last_hit or pressed
        self.post_message(self.MapMouseUp(self, hit, event))
        if hit.lba == pressed.lba:
            self.post_message(self.CellClicked(self, hit, event))

    # --- drawing --------------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._style_version += 1
        self._cache.clear()

    def _style(self, *key: object) -> Style:
        """Styles composed once per combination: base kind/slot, fill, overlays."""
        style = self._styles.get(key)
        if style is None:
            style = self._compose_style(*key)
            self._styles[key] = style
        return style

    def _compose_style(self, *key: object) -> Style:
        base, *overlays = key
        style = self.style_of(str(base))
        mono = self.glyphs.mono
        for name in overlays:
            if name and not (mono and name == CURSOR):
                style += self.style_of(str(name), partial=True)
        if mono and CURSOR in overlays:  # reverse video whatever the cell is: the one mark needing no colour
            style += Style(reverse=not style.reverse, bold=True)
        return style

    def style_of(self, name: str, *, partial: bool = False) -> Style:
        """A named style of the map's: a fill or overlay from its palette, else one of its component classes."""
        fixed = self.palette.get(name)
        return fixed if fixed is not None else self.get_component_rich_style(name, partial=partial)

    def _row_extras(self, row: int) -> tuple[int, tuple[Extent, ...], int | None]:
        """What besides the row index changes this row's drawing."""
        first = row * self.cols * self.spc
        last = first + self.cols * self.spc - 1
        cursor = self.cursor_lba // self.spc % self.cols if self._row_of(self.cursor_lba) == row else -1
        marks = tuple(m for m in self.marks if m.start <= last and m.end >= first)
        sel: int | None = None
        if self.selected is not None and self.content is not None:
            index = self.content.live_index(self.selected)
            if index is not None:
                ext = self.content.items[index].extent
                if ext.start <= last and ext.end >= first:
                    sel = index
        return cursor, marks, sel

    def render_line(self, y: int) -> Strip:
        row = y + round(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        if self.content is None or row >= self.rows or row < 0:
            return Strip.blank(width, self.rich_style)
        extras = self._row_extras(row)
        key = (row, self.spc, self.cols, self.label_width, width, self._version, self._style_version, self.glyphs.name,
               *extras)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(row, width, *extras)
            self._cache[key] = strip
        return strip

    def _render_row(self, row: int, width: int, cursor: int, marks: tuple[Extent, ...], sel: int | None) -> Strip:
        assert self.content is not None
        content, g, spc = self.content, self.glyphs, self.spc
        first = row * self.cols * spc
        label = f"{first:,}".rjust(self.label_width - 1) + " "
        segments = [Segment(label, self.get_component_rich_style("sectormap--gutter"))]
        cells = content.row(first, spc, self.cols)
        # Only the cursor's, a mark's and the selection's edge columns depend on where a cell is: any other
        # cell draws as every cell equal to it does (a whole-disk row is a few runs of equal cells).
        last = first + len(cells) * spc - 1
        special = {cursor}
        for m in marks:
            if m.start <= last and m.end >= first:
                special.update(range((max(m.start, first) - first) // spc, (min(m.end, last) - first) // spc + 1))
        if sel is not None:
            ext = content.items[sel].extent
            special.update((lba - first) // spc for lba in (ext.start, ext.end) if first <= lba <= last)
        drawn: dict[Cell, tuple[str, Style]] = {}
        run: list[str] = []
        run_style: Style | None = None
        for col, cell in enumerate(cells):
            lo = first + col * spc
            if col in special:
                glyph, style = self._cell(cell, lo, lo + spc - 1, col == cursor, marks, sel, g)
            else:
                hit = drawn.get(cell)
                if hit is None:
                    hit = drawn[cell] = self._cell(cell, lo, lo + spc - 1, False, marks, sel, g)
                glyph, style = hit
            if style is not run_style and run:
                segments.append(Segment("".join(run), run_style))
                run = []
            run.append(glyph)
            run_style = style
        if run:
            segments.append(Segment("".join(run), run_style))
        strip = Strip(segments, self.label_width + len(cells))
        return strip.adjust_cell_length(width, self.rich_style)

    def _cell(self, cell: Cell, lo: int, hi: int, is_cursor: bool, marks: tuple[Extent, ...],
              sel: int | None, g: Glyphs) -> tuple[str, Style]:
        """``sel``: the item index of the selected partition, when it lies in this row."""
        cursor = CURSOR if is_cursor else ""
        if cell.item < 0:
            return " ", self._style("sectormap--beyond", cursor)
        assert self.content is not None
        item = self.content.items[cell.item]
        fill_style = ""
        if item.kind is Kind.PARTITION:
            base = f"sectormap--part-{item.slot}"
            if item.state is State.PROPOSED:
                glyph, fill_style = g.proposed, "sectormap--proposed"
            elif item.state is State.DELETE:
                glyph, fill_style = g.deleting, "sectormap--deleting"
            elif item.severity is not None:
                glyph, fill_style = g.flagged, "sectormap--flagged"
            else:
                glyph = g.partition
            if g.mono and item.state is not State.DELETE and item.partition is not None:
                glyph = part_char(item.partition.number)
        elif item.kind is Kind.METADATA and item.region is not None and item.region.kind == EBR_GAP:
            base, glyph = "sectormap--container", g.free
        elif item.kind is Kind.METADATA:
            base, glyph = "sectormap--metadata", g.metadata
        elif item.kind is Kind.CONTAINER:
            base, glyph = "sectormap--container", g.free
        else:
            base, glyph = "sectormap--free", g.free
        grid = ""
        if cell.grid is Grid.GRAIN:
            glyph, grid = g.grid_grain, "sectormap--grid-grain"
        elif cell.grid is Grid.MIB:
            glyph, grid = g.grid_mib, "sectormap--grid-mib"
        elif cell.grid is Grid.PHYSICAL:
            glyph, grid = g.grid_physical, "sectormap--grid-physical"
        selected = ""
        layer = ""
        if cell.layer:  # a layer's data start: over a gridline, under a selection's bracket and a finding
            glyph = g.layer
            layer = ("sectormap--layer", "sectormap--problem-notice", "sectormap--problem-warning")[cell.layer - 1]
        if sel is not None:
            # The brackets mark the selected partition's edges even in a cell another item owns.
            ext = self.content.items[sel].extent
            if lo <= ext.start <= hi and ext.end > hi:
                glyph = g.sel_start
            elif lo <= ext.end <= hi and ext.start < lo:
                glyph = g.sel_end
            if cell.item == sel:
                selected = "sectormap--selected"
        problem = ""
        if cell.problem:
            glyph = g.problem if cell.problem > 1 else g.notice
            problem = "sectormap--problem-warning" if cell.problem > 1 else "sectormap--problem-notice"
        mark = "sectormap--mark" if any(m.start <= hi and m.end >= lo for m in marks) else ""
        return glyph, self._style(base, fill_style, grid, mark, layer, problem, selected, cursor)
