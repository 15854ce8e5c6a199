"""The planner application: the sector map with its status line, partition list, explanations and facts."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import ClassVar

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Static

from diskplan.model import demos
from diskplan.model.grain import Grain, optimal_grain
from diskplan.model.report import build_report
from diskplan.ui.cells import Item
from diskplan.ui.console import ConsoleCommandPalette, ConsoleGlyphs
from diskplan.ui.explain import blocks_touched, explain, status, zoom_text
from diskplan.ui.glyphs import CONSOLE, UNICODE
from diskplan.ui.panels import ExplainPanel, FactsPanel, Legend, PartitionList, StatusLine, TitleBar, item_number
from diskplan.ui.screens import DemoPicker, DevicePicker, GotoScreen, HelpScreen
from diskplan.ui.sectormap import SectorMap
from diskplan.ui.target import Source, Target

# How the planner starts: ("demo", NAME), ("path", PATH), a ready Target, or None for the device picker.
Start = tuple[str, str] | Target | None


CONSOLE_CSS = """
App.-console {
    SectorMap > .sectormap--gutter { color: ansi_white; }
    SectorMap > .sectormap--free { color: ansi_bright_black; }
    SectorMap > .sectormap--metadata { color: ansi_yellow; }
    SectorMap > .sectormap--container { color: ansi_white; }
    SectorMap > .sectormap--part-0 { background: ansi_blue; color: ansi_bright_white; }
    SectorMap > .sectormap--part-1 { background: ansi_green; color: ansi_black; }
    SectorMap > .sectormap--part-2 { background: ansi_magenta; color: ansi_bright_white; }
    SectorMap > .sectormap--part-3 { background: ansi_cyan; color: ansi_black; }
    SectorMap > .sectormap--part-4 { background: ansi_blue; color: ansi_bright_white; }
    SectorMap > .sectormap--part-5 { background: ansi_green; color: ansi_black; }
    SectorMap > .sectormap--part-6 { background: ansi_magenta; color: ansi_bright_white; }
    SectorMap > .sectormap--part-7 { background: ansi_cyan; color: ansi_black; }
    SectorMap > .sectormap--flagged { color: ansi_black; }
    SectorMap > .sectormap--proposed { color: ansi_bright_white; }
    SectorMap > .sectormap--deleting { color: ansi_bright_red; }
    SectorMap > .sectormap--problem-notice { background: ansi_yellow; color: ansi_black; text-style: bold; }
    SectorMap > .sectormap--problem-warning { background: ansi_red; color: ansi_bright_white; text-style: bold; }
    SectorMap > .sectormap--grid-physical { color: ansi_white; }
    SectorMap > .sectormap--grid-mib { color: ansi_bright_white; }
    SectorMap > .sectormap--grid-grain { color: ansi_bright_yellow; }
    SectorMap > .sectormap--mark { background: ansi_yellow; }
    SectorMap > .sectormap--cursor { background: ansi_white; color: ansi_black; text-style: bold; }
    SectorMap > .sectormap--beyond { color: ansi_black; }
    Input { border: solid ansi_blue; }
    Input:focus { border: solid ansi_bright_blue; }
    TitleBar { background: ansi_blue; color: ansi_bright_white; }
    StatusLine { background: ansi_white; color: ansi_black; }
    #view-tabs { background: ansi_black; }
}
"""


class PlannerApp(App[int]):
    TITLE = "diskplan"

    CSS = (
        """
    Screen { layout: vertical; }
    SectorMap { height: 1fr; min-height: 4; }
    #bottom { height: 40%; min-height: 7; max-height: 18; }
    PartitionList { width: 45%; min-width: 34; max-width: 64; }
    #right { width: 1fr; border-left: solid $primary; }
    #view-tabs { height: 1; padding: 0 1; color: $text-muted; }
    #views { height: 1fr; }
    """
        + CONSOLE_CSS
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("g", "goto", "go to", show=False),
        Binding("i", "toggle_facts", "facts"),
        Binding("e", "view('explain')", "explain", show=False),
        Binding("d", "demos", "demos"),
        Binding("o", "devices", "devices", show=False),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        source: Source | None = None,
        start: Start = None,
        *,
        console: bool = False,
        lister: Callable[[], list] | None = None,  # type: ignore[type-arg]
        watch_devices: bool = True,
    ) -> None:
        super().__init__()
        self.source = source
        self.start = start
        self.console_profile = console
        self.glyphs = CONSOLE if console else UNICODE
        self.lister = lister
        self.watch_devices = watch_devices
        self.target: Target | None = None
        self.grain: Grain | None = None
        self._item_index: tuple[int, int] | None = None
        self._lesson_open = False
        self._opened_at = 0
        self._console_glyphs = ConsoleGlyphs()
        if console:
            self.theme = "ansi-dark"

    def _handle_exception(self, error: Exception) -> None:
        """No traceback reaches the user: one line instead (Textual would print a full traceback with
        locals). DISKPLAN_DEBUG=1 restores Textual's report."""
        if os.environ.get("DISKPLAN_DEBUG"):
            super()._handle_exception(error)
            return
        self._return_code = 1
        if self._exception is None:  # Pilot re-raises it in tests
            self._exception = error
            self._exception_event.set()
        detail = " ".join(str(error).split()) or type(error).__name__
        self._exit_renderables.append(
            f"diskplan: internal error: {detail} (nothing was written; run with DISKPLAN_DEBUG=1 for details)"
        )
        self._close_messages_no_wait()

    # --- layout ---------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TitleBar(id="titlebar")
        yield SectorMap(self.glyphs, id="map")
        yield Legend(id="legend")
        yield StatusLine(id="status")
        with Horizontal(id="bottom"):
            yield PartitionList(self.glyphs, id="partitions")
            with Vertical(id="right"):
                yield Static(id="view-tabs")
                with ContentSwitcher(initial="explain", id="views"):
                    yield ExplainPanel(id="explain")
                    yield FactsPanel(id="facts")
        yield Footer()

    @property
    def sector_map(self) -> SectorMap:
        return self.query_one("#map", SectorMap)

    def on_mount(self) -> None:
        if self.console_profile:
            self.add_class("-console")
            self._console_glyphs.apply()
        self._show_tabs("explain")
        self.query_one(TitleBar).show("", "")
        start = self.start
        if isinstance(start, Target):
            self.call_after_refresh(self.show_target, start)
        elif start is None:
            self.action_devices()
        elif start[0] == "demo":
            self.open_demo(start[1])
        else:
            self.open_path(start[1])

    def on_unmount(self) -> None:
        self._console_glyphs.restore()

    # --- opening disks --------------------------------------------------------------------------------

    def open_demo(self, name: str) -> None:
        if self.source is None:
            return
        source = self.source
        self._load(lambda: source.open_demo(name), f"Building the demo disk {name}...")

    def open_path(self, path: str) -> None:
        if self.source is None:
            return
        source = self.source
        self._load(lambda: source.open_path(path), f"Reading {path}...")

    def _load(self, opener: Callable[[], Target], what: str) -> None:
        self.query_one(StatusLine).update(" " + what)
        self._load_worker(opener, what)

    @work(thread=True, exclusive=True, group="load")
    def _load_worker(self, opener: Callable[[], Target], what: str) -> None:
        try:
            target = opener()
        except Exception as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self.call_from_thread(self._load_failed, reason)
        else:
            self.call_from_thread(self.show_target, target)

    def _load_failed(self, reason: str) -> None:
        self.notify(reason, title="Could not open", severity="error", timeout=10)
        if self.target is None:
            self.query_one(StatusLine).update(" Nothing open. d: a demo disk   o: choose a device   q: quit")
        else:
            self._update_status()

    def show_target(self, target: Target) -> None:
        """Show a disk: the map, the list, the facts."""
        self.target = target
        disk = target.disk
        self.grain = optimal_grain(disk.geometry)
        self._item_index = None
        self._lesson_open = False
        report = build_report(disk, self.grain)
        smap = self.sector_map
        smap.show(disk.geometry, disk.table, self.grain, [f for r in report.partitions for f in r.findings])
        self.query_one(FactsPanel).show(target, self.grain, report.table_findings)
        self.query_one(Legend).show(smap, disk.geometry, self.grain)
        self._update_title()
        self._opened_at = smap.cursor_lba
        self._on_cursor(smap.cursor_lba, smap.cursor_item)
        # A demo opens on its lesson; the first cursor move switches to the explanation of what is under it.
        self._lesson_open = bool(target.demo)
        self.action_view("facts" if target.demo else "explain")
        if target.note:
            self.notify(target.note, title=target.title, severity="warning", timeout=8)
        if os.environ.get("DISKPLAN_BENCH") == "first-frame":  # scripts/bench.py: time to the first full frame
            self.call_after_refresh(self.exit)
        serious = [f for f in report.table_findings if f.severity != "notice"]
        if serious:
            more = f" (+{len(serious) - 1} more: press i)" if len(serious) > 1 else " (press i)"
            self.notify(serious[0].message + more, title="About this table", severity="warning", timeout=10)

    # --- reacting to the map --------------------------------------------------------------------------

    @on(SectorMap.CursorMoved)
    def _cursor_moved(self, event: SectorMap.CursorMoved) -> None:
        self._on_cursor(event.lba, event.item)

    @on(SectorMap.TableChanged)
    def _table_changed(self, event: SectorMap.TableChanged) -> None:
        self.query_one(PartitionList).show(event.content)
        self._item_index = None  # what is under the cursor must be explained again
        smap = self.sector_map
        self._on_cursor(smap.cursor_lba, smap.cursor_item)

    @on(SectorMap.ZoomChanged)
    def _zoom_changed(self, event: SectorMap.ZoomChanged) -> None:
        self._update_title()

    def on_resize(self) -> None:
        self.call_after_refresh(self._update_title)

    def _on_cursor(self, lba: int, item: Item | None) -> None:
        if self.target is None or self.grain is None:
            return
        if self._lesson_open and lba != self._opened_at:
            self._lesson_open = False
            self.action_view("explain")
        self._update_status()
        smap = self.sector_map
        index = (smap.version, smap.content.item_index_at(lba) if smap.content else -1)
        if index == self._item_index:
            return
        self._item_index = index
        geom = self.target.disk.geometry
        disk = self.target.disk
        self.query_one(ExplainPanel).show(explain(item, geom, self.grain, disk.table, disk.filesystem))
        self.query_one(PartitionList).follow(item_number(item))
        if item is not None and item.partition is not None:
            ext, _, _ = blocks_touched(geom, item.partition.start)
            smap.set_marks((ext,))
        else:
            smap.set_marks(())

    def _update_status(self) -> None:
        if self.target is None:
            return
        smap = self.sector_map
        text = status(self.target.disk.geometry, smap.cursor_lba, smap.cursor_item, self.glyphs.separator)
        self.query_one(StatusLine).update(text)

    def _update_title(self) -> None:
        if self.target is None:
            return
        zoom = zoom_text(self.target.disk.geometry, self.sector_map.spc)
        self.query_one(TitleBar).show(self.target.title, zoom)

    @on(PartitionList.Chosen)
    def _chosen(self, event: PartitionList.Chosen) -> None:
        self.sector_map.move_to(event.start)
        if event.focus_map:
            self.sector_map.focus()

    # --- actions --------------------------------------------------------------------------------------

    def _show_tabs(self, current: str) -> None:
        parts = []
        for key, name, ident in (("e", "Explain", "explain"), ("i", "Disk facts", "facts")):
            text = f" {name} ({key}) "
            parts.append(f"[b reverse]{text}[/]" if ident == current else f"[dim]{text}[/]")
        self.query_one("#view-tabs", Static).update(" ".join(parts))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Planner actions only where the planner is, not on the device picker (before a disk is open
        they do nothing; hiding them then would make the footer recompose once the disk arrives)."""
        if action in ("goto", "toggle_facts", "view"):
            return not isinstance(self.screen, DevicePicker)
        return True

    def action_view(self, name: str) -> None:
        switcher = self.query_one(ContentSwitcher)
        if switcher.current == name:
            return
        switcher.current = name
        self._show_tabs(name)

    def action_toggle_facts(self) -> None:
        if self.target is None:
            return
        current = self.query_one(ContentSwitcher).current
        self.action_view("explain" if current == "facts" else "facts")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.glyphs))

    def action_goto(self) -> None:
        if self.target is None:
            return
        disk = self.target.disk

        def go(lba: int | None) -> None:
            if lba is not None:
                self.sector_map.move_to(lba)

        self.push_screen(GotoScreen(disk.geometry, disk.table), go)

    def action_demos(self) -> None:
        def chosen(name: str | None) -> None:
            if name:
                self.open_demo(name)

        self.push_screen(DemoPicker(self.target.demo if self.target else None), chosen)

    def action_devices(self) -> None:
        from diskplan.discovery.udev import list_disks

        def chosen(value: str | None) -> None:
            if value is None:
                return
            if value.startswith("demo:"):
                self.action_demos()
            else:
                self.open_path(value)

        picker = DevicePicker(self.lister or list_disks, watch=self.watch_devices, can_go_back=self.target is not None)
        self.push_screen(picker, chosen)

    def action_command_palette(self) -> None:
        if not self.console_profile:
            super().action_command_palette()
        elif self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(ConsoleCommandPalette(id="--command-palette", placeholder="Search for commands"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        smap = self.sector_map
        yield SystemCommand("Help", "Keys and map symbols", self.action_help)
        yield SystemCommand("Go to...", "Move the cursor to an LBA, a size, a percentage or a partition",
                            self.action_goto)
        yield SystemCommand("Zoom: whole disk", "Fit the whole disk on the screen", smap.action_zoom_fit)
        yield SystemCommand("Zoom: one sector per cell", "The finest zoom", smap.action_zoom_sector)
        yield SystemCommand("Zoom in", "Half as many sectors per cell", lambda: smap.action_zoom(-1))
        yield SystemCommand("Zoom out", "Twice as many sectors per cell", lambda: smap.action_zoom(1))
        yield SystemCommand("Next finding", "Jump to the next '!' on the map", lambda: smap.action_problem(1))
        yield SystemCommand("Next partition", "Jump to the next partition start", lambda: smap.action_jump(1))
        yield SystemCommand("Show disk facts", "Sector sizes, I/O hints, grains", lambda: self.action_view("facts"))
        yield SystemCommand("Show explanation", "Why what is under the cursor matters",
                            lambda: self.action_view("explain"))
        yield SystemCommand("Choose a device", "The disks on this machine", self.action_devices)
        yield SystemCommand("Demo disks", "The built-in demo scenarios", self.action_demos)
        for s in demos.SCENARIOS:
            yield SystemCommand(f"Demo: {s.name}", s.title, lambda name=s.name: self.open_demo(name))
        yield SystemCommand("Quit", "Leave diskplan (nothing is written)", self.exit)
