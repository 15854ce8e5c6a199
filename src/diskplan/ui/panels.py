"""The widgets around the sector map: title bar, legend, status line, partition list, explain and facts."""

from __future__ import annotations

from typing import ClassVar, NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.geometry import Region
from textual.screen import Screen
from textual.visual import VisualType
from textual.widget import Widget
from textual.widgets import Static

from diskplan.model.findings.placement import Finding
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain
from diskplan.model.plan.history import History
from diskplan.model.plan.plan import Plan
from diskplan.model.safetext import safe
from diskplan.model.teach import demos
from diskplan.model.units import human_bytes, human_duration
from diskplan.ui.cells import Item
from diskplan.ui.explain import Line, facts, shorten, terminal_options
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


class FooterEntry(NamedTuple):
    key: str
    display: str
    description: str
    enabled: bool


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


class KeysFooter(Widget, can_focus=False):
    """The keys of the moment on one line, as Textual's Footer shows them (the command palette's key on the
    right), but one widget: it is drawn with the first frame and repaints one line when the keys change,
    where Textual's composes a widget per key once focus settles, then lays the screen out again.
    A click on a key presses it."""

    DEFAULT_CSS = """
    KeysFooter { dock: bottom; height: 1; background: $footer-background; color: $footer-foreground; }
    KeysFooter > .keys-footer--key {
        color: $footer-key-foreground; background: $footer-key-background; text-style: bold;
    }
    KeysFooter > .keys-footer--description {
        color: $footer-description-foreground; background: $footer-description-background;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keys-footer--key", "keys-footer--description"}

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[FooterEntry, ...] = ()
        self._spans: list[tuple[int, int, FooterEntry]] = []  # x0, x1 (exclusive), the key drawn there

    @property
    def shown(self) -> tuple[FooterEntry, ...]:
        """What the last frame shows: (key, display, description, enabled) each, the palette's last."""
        return self._shown

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _entries(self) -> tuple[FooterEntry, ...]:
        app = self.app
        active = self.screen.active_bindings
        by_action: dict[str, FooterEntry] = {}  # a binding of several keys ("x,delete") shows its first
        for _, b, enabled, _ in active.values():
            if b.show and b.action not in by_action:
                by_action[b.action] = FooterEntry(b.key, app.get_key_display(b), b.description, enabled)
        keys = list(by_action.values())
        palette = active.get(app.COMMAND_PALETTE_BINDING) if app.ENABLE_COMMAND_PALETTE else None
        if palette is not None:
            _, b, enabled, _ = palette
            keys.append(FooterEntry(b.key, app.get_key_display(b), b.description, enabled))
        return tuple(keys)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self._entries() != self._shown:
            self.refresh()

    def render(self) -> Text:
        entries = self._shown = self._entries()
        key_style = self.get_component_rich_style("keys-footer--key")
        desc_style = self.get_component_rich_style("keys-footer--description")
        palette = entries[-1:] if self.app.ENABLE_COMMAND_PALETTE and entries else ()
        keys = entries[: len(entries) - len(palette)]
        width = self.size.width
        text = Text(no_wrap=True, overflow="crop")
        self._spans = []
        right = Text()
        for e in palette:
            right.append(f" {e.display} ", key_style)
            right.append(f"{e.description} ", desc_style)
        for e in keys:
            chunk = Text.assemble((f" {e.display} ", key_style), (f"{e.description} ", desc_style))
            if not e.enabled:
                chunk.stylize("dim")
            if text.cell_len + chunk.cell_len > width - right.cell_len and text.cell_len:
                break  # what does not fit goes (Textual's footer would scroll it out of sight)
            self._spans.append((text.cell_len, text.cell_len + chunk.cell_len, e))
            text.append_text(chunk)
        if palette:
            gap = max(1, width - text.cell_len - right.cell_len)
            text.append(" " * gap)
            self._spans.append((text.cell_len, text.cell_len + right.cell_len, palette[0]))
            text.append_text(right)
        return text

    def on_click(self, event: events.Click) -> None:
        for x0, x1, entry in self._spans:
            if x0 <= event.x < x1:
                if entry.enabled:
                    self.app.simulate_key(entry.key)
                else:
                    self.app.bell()
                return


class TitleBar(OneLine):
    """One line: what is shown, and the zoom."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $panel; color: $text; text-wrap: nowrap; text-overflow: clip; }
    """

    def show(self, title: str, zoom: str, snap: str = "", short_zoom: str = "") -> None:
        """``title`` left; the snapping target and the zoom right. What does not fit goes, least useful first:
        the program's name, then the zoom's detail, then the zoom."""
        title = safe(title)  # a path or a model string
        width = max(0, self.size.width)
        right_side = [f"{snap} │ {zoom}" if snap else zoom, f"{snap} │ {short_zoom or zoom}" if snap else zoom, snap]
        for right in right_side:
            for left in (f" diskplan │ {title}", f" {title}"):
                room = width - len(left) - len(right) - 1
                if room >= 2:
                    self.update(Content(left + " " * room + right + " "))
                    return
        self.update(Content(f" {title}"))


class StatusLine(Widget):
    """Two lines under the map: what each glyph on it means (drawn with the map's own styles), and the status:
    what lies under the cursor, or what the last step did. One widget: each was a widget of its own, and every
    widget costs the first frame its styling and layout."""

    DEFAULT_CSS = """
    StatusLine { height: 2; }
    StatusLine > .status-line--legend { color: $text-muted; }
    StatusLine > .status-line--status { background: $panel; color: $text; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"status-line--legend", "status-line--status"}

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._legend = Text()
        self._status = ""

    def update(self, status: str) -> None:
        """The status line's text (plain: no markup)."""
        if getattr(self.app, "console_profile", False):  # the model's arithmetic (×, −) as in the panels
            status = status.translate(CP437_TEXT)
        if status != self._status:
            self._status = status
            self.refresh(Region(0, 1, self.size.width, 1))  # that line alone: a drag step sends no legend

    def render(self) -> Text:
        width = self.size.width
        legend = Text(style=self.get_component_rich_style("status-line--legend"), no_wrap=True, end="")
        legend.append_text(self._legend)
        legend.truncate(width)
        status = Text(shorten(self._status, width), style=self.get_component_rich_style("status-line--status"),
                      no_wrap=True, end="")
        status.truncate(width, pad=True)
        return Text("\n", no_wrap=True).join((legend, status))

    def show_legend(self, sector_map: SectorMap, geometry: Geometry | None, grain: Grain | None, *,
                    proposed: bool = False, deleting: bool = False) -> None:
        """``proposed``/``deleting``: the plan has such partitions, so their glyphs are explained too."""
        g: Glyphs = sector_map.glyphs
        style = sector_map.style_of
        # (glyph, style, word, priority): what does not fit the width goes, lowest priority first.
        keys: list[tuple[str, Style, str, int]] = [
            ("1" if g.mono else " ", style("sectormap--part-0"), "partition", 1 if proposed or deleting else 5),
        ]
        if proposed:
            keys.append(("2" if g.mono else g.proposed,
                         style("sectormap--part-1") + style("sectormap--proposed", partial=True), "new", 9))
        if deleting:
            keys.append((g.deleting, style("sectormap--part-2") + style("sectormap--deleting", partial=True),
                         "delete", 9))
        if not g.mono:  # without colour a partition's cells carry its character, not a fill
            keys.append((g.flagged, style("sectormap--part-0") + style("sectormap--flagged", partial=True),
                         "findings", 8))
        keys.append((g.problem, style("sectormap--problem-warning"), "problem", 8))
        if g.notice != g.problem:
            keys.append((g.notice, style("sectormap--problem-notice"), "notice", 8))
        if sector_map.content is not None and sector_map.content.layer_lbas:  # LVM, LUKS, md inside a partition
            keys.append((g.layer, style("sectormap--part-0") + style("sectormap--layer", partial=True), "layer data",
                         7))
        keys += [
            (g.metadata, style("sectormap--metadata"), "table", 6),
            (g.free, style("sectormap--free"), "free", 6),
        ]
        if geometry is not None and geometry.page > geometry.logical:
            # the map draws the page a start is judged against: on flash an assumed 4 KiB page even when the
            # device reports 512 B blocks (the ssd-gpt-34 demo), else the physical block
            unit = "page" if geometry.page > geometry.physical else "block"
            keys.append((g.grid_physical, style("sectormap--grid-physical"), f"{human_bytes(geometry.page)} {unit}",
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
        self._legend = text
        self.refresh(Region(0, 0, self.size.width, 1))


VIEWS = ("explain", "facts", "changes")
CHANGE_MARK = {"repair": "!", "label": "*", "delete": "-", "create": "+", "rewrite": "~", "change": "~",
               "keep": "=", "move": ">", "resize": ">"}


# The model's texts use a few characters the Linux console's CP437 font lacks: one for one (spans keep their places).
CP437_TEXT = str.maketrans({"×": "x", "−": "-", "—": "-", "…": "~", "→": ">", "←": "<", "✓": "√"})


class ViewsPanel(VerticalScroll, can_focus=True):
    """The text under the map, one view at a time: the explanation of what is under the cursor, the disk's
    facts (and a demo's lesson), the pending changes; the views' names are its border's title. One scrolling
    Static whose text is swapped: three panels in a switcher would be composed, styled and laid out at
    start-up though two are hidden. The scrollbar's gutter is kept, so a long text does not wrap again (and
    lay the screen out again) when its scrollbar appears."""

    DEFAULT_CSS = """
    ViewsPanel {
        height: 1fr; padding: 0 1; scrollbar-gutter: stable;
        border-left: solid $primary; border-top: solid $primary;
        border-title-align: left; border-title-color: $text-muted; border-title-style: none;
    }
    ViewsPanel > Static { width: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "scroll up", show=False),
        Binding("down", "scroll_down", "scroll down", show=False),
    ]

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.current = "explain"
        self._texts: dict[str, Content] = dict.fromkeys(VIEWS, Content(""))
        self._scrolled: dict[str, float] = dict.fromkeys(VIEWS, 0.0)  # each view keeps its place

    def compose(self) -> ComposeResult:
        yield Static(id="views-text")

    def text(self, view: str) -> str:
        """A view's text, shown or not."""
        return self._texts[view].plain

    def switch(self, view: str) -> None:
        if view == self.current:
            return
        self._scrolled[self.current] = self.scroll_y
        self.current = view
        self.query_one("#views-text", Static).update(self._texts[view])
        self.call_after_refresh(self.scroll_to, y=self._scrolled[view], animate=False)

    def _set(self, view: str, content: Content, *, home: bool = False) -> None:
        if getattr(self.app, "console_profile", False):  # the console font has no ×, −, —, …
            content = Content(content.plain.translate(CP437_TEXT), list(content.spans))
        self._texts[view] = content
        if home:
            self._scrolled[view] = 0.0
        if view == self.current:
            self.query_one("#views-text", Static).update(content)
            if home:
                self.scroll_home(animate=False)

    def show_explanation(self, lines: list[Line]) -> None:
        """Why what lies under the cursor matters: the arithmetic of its findings, in plain words."""
        self._set("explain", lines_content(lines), home=True)

    def show_changes(self, plan: Plan, history: History, writable: str = "",
                     rate: tuple[float, str] = (200e6, "a disk of unknown speed")) -> None:
        """The pending changes against the table on disk, the snapping target, and what undo/redo would do.
        ``writable``: why the plan cannot be written from here ("" when it can); ``rate``: the bytes/s a
        data move is estimated at, and what that assumes (backend.move.devspeed)."""
        changes = plan.changes()  # the operations the write dialog lists and the commit executes
        parts: list[str | tuple[str, str]] = []
        if changes:
            n = len(changes)
            parts.append((f"{n} pending change{'s' if n != 1 else ''}", "bold"))
            parts.append((" (w writes them)\n" if not writable else f" ({writable})\n", "$text-muted"))
            for c in changes:
                parts.append((f"{CHANGE_MARK.get(c.kind, '~')} ", "bold"))
                parts.append(f"{c}\n")
            moved = sum(c.nbytes for c in changes if c.moves_data)
            if moved:
                seconds = 3 * moved / rate[0]  # read, write, read back
                parts.append(("data moved: ", "bold $warning"))
                speed = human_bytes(int(rate[0]))
                parts.append(f"{human_bytes(moved)}, about {human_duration(seconds)} (an estimate: {speed}/s assumed "
                             f"for {rate[1]}; each byte is read, written and read back)\n")
                parts.append(("the partitions moved must not be mounted; a move is journalled and resumable\n",
                              "$text-muted"))
            if any(c.kind == "resize" for c in changes):
                parts.append(("resized by the filesystem's own tool (not journalled: keep the power on); the "
                              "partitions resized must not be mounted\n", "$text-muted"))
            for why in plan.problems():
                parts.append(("cannot be written: ", "bold $warning"))
                parts.append(f"{why}\n")
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
        self._set("changes", Content.assemble(*parts))

    def show_facts(self, target: Target, grain: Grain, table_findings: tuple[Finding, ...] = (),
                   exercise: list[tuple[str, str]] | None = None) -> None:
        """The device facts (and a demo's lesson; ``exercise``: its goal and verdict, (text, style) lines)."""
        parts: list[str | tuple[str, str]] = []
        served = getattr(self.app, "served", False)  # the options the texts name are the terminal planner's
        parts.extend(exercise or ())  # first: the goal, in its own words (no disk strings in them)
        for f in table_findings:
            parts.append((f"{f.severity.upper()}: {safe(f.message)} [{f.code}]\n", LINE_STYLE.get(f.severity, "")))
            parts.extend(f"  {safe(line)}\n" for line in f.explanation)
            if served and (said := terminal_options(" ".join(f.explanation))):
                parts.append((f"  {said}\n", "$text-muted"))
        if table_findings:
            parts.append("\n")
        if target.demo:
            title = demos.find(target.demo).title
            parts.append((f"Demo {target.demo}: {title}\n", "bold"))
            for line in target.lesson:
                parts.append(line + "\n")
            if served and (said := terminal_options(" ".join(target.lesson))):
                parts.append((said + "\n", "$text-muted"))
            parts.append(("Move the cursor (arrows, ] [) and the explanation (e) follows it.\n\n", "$text-muted"))
        if target.note:
            parts.append((f"Note: {safe(target.note)}\n\n", "$warning"))
        rows = facts(target.disk, grain, served=served)
        if target.disk.table.read_only:
            rows.append(("Read-only", target.disk.table.read_only))
        width = max(len(k) for k, _ in rows) + 1
        for label, value in rows:
            parts.append((label.ljust(width), "$text-muted"))
            parts.append(value + "\n")
        self._set("facts", Content.assemble(*parts), home=True)


def item_number(item: Item | None) -> int | None:
    return item.number if item is not None else None
