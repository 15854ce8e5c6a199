"""The planner application: the sector map with its status line, partition list, explanations, facts and
pending changes. What changes the plan lives in plan_actions.py and the mixins it puts together
(plan_base.py, move_actions.py, plan_files.py, write_actions.py), which need only their ``PlannerView`` of
this app; disks are opened in opening.py; this module lays out the screen, follows the cursor and shows what
each step did."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.containers import Horizontal
from textual.filter import Monochrome, NoColor
from textual.screen import Screen

from diskplan.model.exitstatus import stopped
from diskplan.model.extent import Role, State
from diskplan.model.grain import Grain, SnapTarget
from diskplan.model.plan.plan import Outcome
from diskplan.model.safetext import safe
from diskplan.model.teach import demos
from diskplan.model.units import human_bytes
from diskplan.ui import textual_private
from diskplan.ui.cells import Item, MapContent
from diskplan.ui.console import ConsoleCommandPalette, ConsoleGlyphs
from diskplan.ui.exercise_mode import ExerciseActions
from diskplan.ui.explain import blocks_touched, explain, layers_here, plan_hints, status, zoom_text
from diskplan.ui.glyphs import CONSOLE, UNICODE, without_colour
from diskplan.ui.opening import DiskOpening
from diskplan.ui.panels import (
    CP437_TEXT,
    KeysFooter,
    StatusLine,
    TitleBar,
    ViewsPanel,
    item_number,
)
from diskplan.ui.partlist import PartitionList
from diskplan.ui.plan_actions import PlanActions
from diskplan.ui.plan_base import default_host
from diskplan.ui.planning import (
    DragKind,
    Preview,
    Session,
    drag_text,
    judging_grain,
    limits_text,
    repair_hint,
    requested_extent,
)
from diskplan.ui.sectormap import CONSOLE_PALETTE, MONO_PALETTE, PALETTE, SectorMap
from diskplan.ui.target import Source, Target, why_not_writable

if TYPE_CHECKING:  # the commit, the pickers and the help are imported when first used, not before the first frame
    from textual.notifications import SeverityLevel
    from textual.theme import Theme

    from diskplan.backend.write.steps import Host
    from diskplan.discovery.udev import DiskInfo
    from diskplan.ui.settings import Settings

VIEW_TABS = (("e", "Explain", "explain"), ("i", "Facts", "facts"), ("c", "Changes", "changes"))

# How the planner starts: ("demo", NAME), ("path", PATH), a ready Target, or None for the device picker.
Start = tuple[str, str] | Target | None


CONSOLE_CSS = """
App.-console {
    SectorMap > .sectormap--gutter { color: ansi_white; }
    SectorMap > .sectormap--free { color: ansi_bright_black; }
    SectorMap > .sectormap--metadata { color: ansi_yellow; }
    SectorMap > .sectormap--container { color: ansi_white; }
    SectorMap > .sectormap--mark { background: ansi_yellow; }
    SectorMap > .sectormap--cursor { background: ansi_white; color: ansi_black; text-style: bold; }
    SectorMap > .sectormap--beyond { color: ansi_black; }
    GotoScreen Input { border: solid ansi_blue; }
    GotoScreen Input:focus { border: solid ansi_bright_blue; }
    .form Input.field { background: ansi_black; color: ansi_bright_white; }
    .form Input.field:focus { background: ansi_blue; }
    OptionList > .option-list--option-highlighted { text-style: reverse bold; }
    PartitionList > .partition-list--cursor { text-style: reverse; }
    PartitionList:focus > .partition-list--cursor { text-style: reverse bold; }
    TitleBar { background: ansi_blue; color: ansi_bright_white; }
    StatusLine > .status-line--status { background: ansi_white; color: ansi_black; }
}
"""

# Without colour: what a colour alone marked (the highlighted option, the list's row, the picker's row, the
# status line) is reversed instead.
MONO_CSS = """
App.-mono {
    OptionList > .option-list--option-highlighted { text-style: reverse bold; }
    PartitionList > .partition-list--cursor { text-style: reverse; }
    PartitionList:focus > .partition-list--cursor { text-style: reverse bold; }
    DataTable > .datatable--cursor { text-style: reverse bold; }
    StatusLine > .status-line--status { text-style: reverse; }
    TitleBar { text-style: reverse; }
    .form Input.field:focus { text-style: underline; }
}
"""


class PlannerApp(PlanActions, DiskOpening, ExerciseActions, App[int]):
    TITLE = "diskplan"

    CSS = """
    Screen { layout: vertical; }
    SectorMap { height: 1fr; min-height: 4; }
    #bottom { height: 40%; min-height: 7; max-height: 18; }
    PartitionList { width: 45%; min-width: 34; max-width: 64; }
    #views { width: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("n", "new_partition", "new"),
        Binding("m", "move", "move"),
        Binding("r", "resize", "resize"),
        Binding("x,delete", "delete", "delete", key_display="x"),
        Binding("u,ctrl+z", "undo", "undo", key_display="u"),
        Binding("ctrl+y,U", "redo", "redo", show=False),
        Binding("w", "write", "write"),
        Binding("R", "repair", "repair GPT"),  # shown only while the disk offers a repair
        Binding("M", "resume_move", "finish the move"),  # shown only while a move journal is unfinished
        Binding("A", "realign", "realign", show=False),
        Binding("q", "quit", "quit"),
        Binding("t", "edit_partition", "type, name, flags", show=False),
        Binding("L", "new_label", "new label", show=False),
        Binding("s", "snap", "snapping", show=False),
        Binding("a", "fix_layout", "fix my layout", show=False),
        Binding("C", "clear_plan", "clear all", show=False),
        Binding("ctrl+s", "save_plan", "save plan", show=False),
        Binding("ctrl+o", "load_plan", "load plan", show=False),
        Binding("c", "view('changes')", "changes", show=False),
        Binding("g", "goto", "go to", show=False),
        Binding("i", "view('facts')", "facts", show=False),
        Binding("e", "view('explain')", "explain", show=False),
        Binding("d", "demos", "demos", show=False),
        Binding("o", "devices", "devices", show=False),
        Binding("ctrl+l", "redraw", "redraw the screen", show=False),
        Binding("b", "measure", "measure here", show=False),
        Binding("B", "measure(True)", "measure reads here", show=False),
        Binding("S", "stack", "plan the stack", show=False),
        # Moving or resizing with the keys (m, r): these win over the map's own keys while it lasts.
        Binding("left", "nudge(-1)", "1 grain", key_display="<- ->", priority=True),
        Binding("right", "nudge(1)", "1 grain", priority=True, show=False),
        Binding("shift+left,up", "nudge(-10)", "10 grains", key_display="up dn", priority=True),
        Binding("shift+right,down", "nudge(10)", "10 grains", priority=True, show=False),
        Binding("space", "other_edge", "other edge", priority=True),
        Binding("enter", "drag_done", "done", key_display="enter", priority=True),
        Binding("escape", "drag_cancel", "cancel", key_display="esc", priority=True),
        # An exercise (--exercise): shown only while the open demo is one. Enter is the walk-through's when no
        # keyboard drag takes it (and the partition list keeps its own Enter).
        Binding("k", "exercise_check", "check"),
        Binding("enter", "exercise_step", "next step", key_display="enter"),
    ]

    DRAG_ACTIONS = frozenset({"nudge", "other_edge", "drag_done", "drag_cancel"})
    SERVED_ABSENT = frozenset({"devices", "save_plan", "load_plan"})  # they open the server's devices or files
    PLAN_ACTIONS = frozenset({"new_partition", "move", "resize", "delete", "undo", "redo", "write", "edit_partition",
                              "new_label", "snap", "fix_layout", "clear_plan", "save_plan", "load_plan", "repair",
                              "realign", "resume_move", "measure"})

    def __init__(
        self,
        source: Source | None = None,
        start: Start = None,
        *,
        console: bool = False,
        lister: Callable[[], list[DiskInfo]] | None = None,
        watch_devices: bool = True,
        host: Host | None = None,
        mono: bool = False,
        served: bool = False,
        exercise: bool = False,
        theme: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        """``mono``: draw without colour (--no-color, a monochrome terminal); NO_COLOR does it too.
        ``served``: served to browsers (diskplan serve): the device picker and plan files are absent.
        ``exercise``: open demos as exercises (--exercise).
        ``theme``: for this run (--theme); otherwise the one ``settings`` remembers, where a theme chosen in
        the command palette is remembered. The console profile keeps its 16 colours (ansi-dark) whatever
        either says: the Linux console has no others, and a theme made of RGB colours would be approximated
        there, often unreadably."""
        super().__init__()
        # Disks are read (and written) by forked children, started from worker threads: the zygote that
        # forks them is forked now, while this process has one thread (backend.parted.isolate).
        from diskplan.backend.parted.isolate import prepare_for_threads

        prepare_for_threads()
        self.served = served
        self.exercise_wanted = exercise
        # NO_COLOR: Textual removes the colours in ANSI mode but sends shades of grey otherwise. Without colour
        # means none at all (no-color.org; a monochrome terminal cannot show grey): every colour is removed,
        # and MONO_CSS marks by reverse video what colour alone marked.
        self.mono = mono or self.no_color
        if self.mono:
            self.no_color = True
            self._filters = [f for f in self._filters if not isinstance(f, Monochrome | NoColor)] + [NoColor()]
        self.host = host  # who uses a disk (tests hand in their own); discovery.inuse by default
        self.session: Session | None = None
        self._said = ""  # what the last step did, shown until the cursor moves
        self._said_at = -1
        self.source = source
        self.start = start
        self.console_profile = console
        self.glyphs = CONSOLE if console else UNICODE
        if self.mono:
            self.glyphs = without_colour(self.glyphs)
        self.lister = lister
        self.watch_devices = watch_devices
        self.target: Target | None = None
        self.grain: Grain | None = None
        self._item_index: tuple[int, int] | None = None
        self._listed: MapContent | None = None  # the content the partition list shows
        self._lesson_open = False
        self._repair_offered = False  # the footer shows R while the plan offers a repair
        self._opened_at = 0
        self._console_glyphs = ConsoleGlyphs()
        self._confirming: list[Screen[object]] = []  # screens asking for consent: no toast may cover them
        self._held: list[tuple[str, str, SeverityLevel, float | None]] = []  # toasts raised meanwhile
        self.after_first_disk: Callable[[], None] | None = None  # called once the first disk is drawn
        self.settings = settings
        if console:
            self.theme = "ansi-dark"
        elif (wanted := theme or (settings.theme if settings else None)) in self.available_themes:
            self.theme = wanted  # (a remembered theme this Textual no longer has is ignored)
        # CONSOLE_CSS is parsed and matched only where it applies; Textual reads self.CSS when it starts
        extra = (CONSOLE_CSS if console else "") + (MONO_CSS if self.mono else "")
        if extra:
            self.CSS = type(self).CSS + extra  # type: ignore[misc]  # a ClassVar, set for this instance only

    def _handle_exception(self, error: Exception) -> None:
        """No traceback reaches the user: one line instead (Textual would print a full traceback with
        locals). DISKPLAN_DEBUG=1 restores Textual's report."""
        if os.environ.get("DISKPLAN_DEBUG"):
            super()._handle_exception(error)
            return
        from rich.text import Text  # plain text, not markup: the message may quote a disk's strings

        detail = safe(" ".join(str(error).split())) or type(error).__name__
        code, said = self._stopped()
        textual_private.end_with_line(self, error, Text(
            f"diskplan: internal error: {detail} ({said}; run with DISKPLAN_DEBUG=1 for details)"), code)

    def end_by_signal(self, signum: int) -> None:
        """SIGTERM, or SIGHUP (the terminal went away): end with one line and the status a Ctrl+C gives a
        command, never 0 ("done")."""
        from rich.text import Text

        code, said = self._stopped()
        self.exit(return_code=code, message=Text(f"diskplan: ended by {signal.Signals(signum).name} ({said})"))

    @staticmethod
    def _stopped() -> tuple[int, str]:
        """The exit status and the words of a planner stopped from outside its course (model.exitstatus.stopped):
        the planner may have written before (a commit, a move), then it says so, not "nothing was written"."""
        from diskplan.backend.write import write_began

        began = write_began()
        said = f"a write had begun, its backup {safe(began)}: `diskplan check` shows the disk now" if began else \
            "nothing was written"
        return stopped(bool(began)), said

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification, the widgets' too: its text often quotes a disk, a path or libparted, so it is
        shown as plain text (no markup) with its control characters escaped. Nothing covers a confirmation:
        while one is up, notifications wait until it is answered."""
        if self._confirming:
            self._held.append((message, title, severity, timeout))
            return
        if self.console_profile:  # the model's arithmetic (×, −) as in the panels
            message, title = message.translate(CP437_TEXT), title.translate(CP437_TEXT)
        text, title = "\n".join(safe(line) for line in message.split("\n")), safe(title)  # its lines stay lines
        if any(n.message == text and n.title == title for n in self._notifications):
            return  # still shown: a key pressed again at a limit does not stack the same refusal
        super().notify(text, title=title, severity=severity, timeout=timeout, markup=False)

    # --- layout ---------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TitleBar(id="titlebar")
        palette = MONO_PALETTE if self.mono else CONSOLE_PALETTE if self.console_profile else PALETTE
        yield SectorMap(self.glyphs, palette, id="map")
        yield StatusLine(id="status")
        with Horizontal(id="bottom"):
            yield PartitionList(self.glyphs, id="partitions")
            yield ViewsPanel(id="views")
        yield KeysFooter()

    @property
    def sector_map(self) -> SectorMap:
        return self.query_one("#map", SectorMap)

    def on_mount(self) -> None:
        if self.console_profile:
            self.add_class("-console")
            self._console_glyphs.apply()
        if self.mono:
            self.add_class("-mono")
        if self.settings is not None and not self.console_profile:
            self.theme_changed_signal.subscribe(self, self._remember_theme)
        self._show_tabs("explain")
        self.query_one(TitleBar).show("", "")
        start = self.start
        if isinstance(start, Target):
            self.show_target(start)  # before the first frame: the first frame shows the disk
        elif start is None:
            self.action_devices()
        else:
            self._open_at_start(*start)

    def on_unmount(self) -> None:
        self._console_glyphs.restore()

    def _remember_theme(self, theme: Theme) -> None:
        """A theme chosen while the planner runs (the palette's Theme command) is the next run's too."""
        assert self.settings is not None  # subscribed only with settings
        why_not = self.settings.remember("theme", theme.name)
        if why_not:
            self.notify(why_not, severity="warning")

    # --- consent --------------------------------------------------------------------------------------

    async def action_quit(self) -> None:  # q, Ctrl+Q, the palette, the device picker
        if self._confirming:  # Ctrl+Q reaches every screen: a question (or a write under way) is answered first
            self.bell()
            return
        self.keep_or_lose("quitting", self.exit)

    def push_confirmation(self, screen: Screen[object], callback: Callable[[object], None]) -> None:
        """Push a screen that asks for consent (the write, changes that would be lost). Nothing may cover
        it: the toasts on the screen go, and toasts raised while it is up wait until it is answered."""
        self.clear_notifications()
        self._confirming.append(screen)

        def answered(result: object) -> None:
            self._confirming.remove(screen)
            callback(result)
            if not self._confirming:
                held, self._held = self._held, []
                for message, title, severity, timeout in held:
                    self.notify(message, title=title, severity=severity, timeout=timeout)

        self.push_screen(screen, answered)

    # --- reacting to the map --------------------------------------------------------------------------

    @on(SectorMap.CursorMoved)
    def _cursor_moved(self, event: SectorMap.CursorMoved) -> None:
        self._on_cursor(event.lba, event.item)

    @on(SectorMap.TableChanged)
    def _table_changed(self, event: SectorMap.TableChanged) -> None:
        self._follow_table()

    def _follow_table(self) -> None:
        """The list and the explanation follow the map's table, once per table: show_target does it before
        the first frame, and the TableChanged that follows (or an older one still queued) finds it done."""
        smap = self.sector_map
        if smap.content is None or smap.content is self._listed:
            return
        self._list(smap.content)
        self._on_cursor(smap.cursor_lba, smap.cursor_item)

    def _list(self, content: MapContent) -> None:
        self._listed = content
        self.query_one(PartitionList).show(content)
        self._item_index = None  # what is under the cursor must be explained again

    @on(SectorMap.ZoomChanged)
    def _zoom_changed(self, event: SectorMap.ZoomChanged) -> None:
        self._update_title()
        self._update_status()  # whose layer data begins in the cursor's cell depends on the cell's size

    def on_resize(self) -> None:
        self.call_after_refresh(self._update_title)
        self.call_after_refresh(self._show_tabs)
        self.call_after_refresh(self._update_status)

    def _on_cursor(self, lba: int, item: Item | None) -> None:
        if self.target is None or self.grain is None:
            return
        drag = self.session.drag if self.session else None
        if drag is not None:  # a drag step: the status line shows the drag, the rest waits for its end
            return
        if self._lesson_open and lba != self._opened_at:
            self._lesson_open = False
            self.action_view("explain")
        if lba != self._said_at:
            self._said = ""
        self._update_status()
        smap = self.sector_map
        live = item.partition if item is not None and item.state is not State.DELETE else None
        smap.select(live.number if live is not None else None)
        index = (smap.version, smap.content.item_index_at(lba) if smap.content else -1)
        if index == self._item_index:
            return
        self._item_index = index
        geom = self.target.disk.geometry
        table = smap.table or self.target.disk.table
        blocked = self.session.plan.blocked() if self.session else ""
        disk = self.target.disk
        part = item.partition if item is not None else None
        # The layers read inside a partition (LVM, LUKS, md, a filesystem's stripe) belong to it where it lies on
        # the disk: a proposal, or a partition planned elsewhere, has none.
        on_disk = part is not None and any((q.number, q.start) == (part.number, part.start)
                                           for q in disk.table.partitions)
        stack = disk.stack(part.number) if on_disk and part is not None else ()
        lines = explain(item, geom, self.grain, table, disk.filesystem, stack=stack, served=self.served)
        self.query_one(ViewsPanel).show_explanation(lines + plan_hints(item, blocked))
        self.query_one(PartitionList).follow(item_number(item), item is not None and item.state is State.DELETE)
        if item is not None and item.partition is not None:
            ext, _, _ = blocks_touched(geom, item.partition.start)
            smap.set_marks((ext,))
        else:
            smap.set_marks(())

    def _update_status(self) -> None:
        if self.target is None:
            return
        if self._said:
            return
        smap = self.sector_map
        line = self.query_one(StatusLine)
        width = line.size.width or self.size.width
        layers = ""
        if smap.content is not None:
            lo = smap.cursor_lba // smap.spc * smap.spc
            layers = layers_here(smap.content.data_starts_in(lo, lo + smap.spc - 1))
        text = status(self.target.disk.geometry, smap.cursor_lba, smap.cursor_item, self.glyphs.separator, width,
                      layers)
        line.update(text)

    def _update_title(self) -> None:
        if self.target is None:
            return
        geom = self.target.disk.geometry
        zoom = zoom_text(geom, self.sector_map.spc)
        short = zoom_text(geom, self.sector_map.spc, short=True)
        self.query_one(TitleBar).show(self.target.title, zoom, self._snap_text(), short)

    def _snap_text(self) -> str:
        """For the title bar: "snap optimal 1 MiB"."""
        if self.session is None:
            return ""
        plan = self.session.plan
        g = plan.grain
        ss = plan.geometry.logical
        snap = f"snap {plan.target.value} {human_bytes(g.sectors * ss)}" if plan.target is not SnapTarget.NONE \
            else "snap none"
        judged = self.grain  # what findings judge: the device's grain, whatever the snapping target
        if judged is not None and judged != g:
            snap += f" · findings {human_bytes(judged.sectors * ss)}"
        return snap

    # --- showing the plan (what plan_actions.py asks for) -----------------------------------------------

    def show_plan(self) -> None:
        """The present plan changed (a step, undo, redo): map, list, legend, changes, title."""
        s = self.session
        if s is None:
            return
        plan = s.plan
        grain = judging_grain(plan)
        changed_grain = grain != self.grain
        self.grain = grain
        self.sector_map.set_table(plan.table, s.findings(plan), grain)  # TableChanged: the list and explanation
        self.show_plan_panels()
        if changed_grain:
            self._update_title()

    def show_plan_panels(self) -> None:
        """What follows the plan but not each drag step: legend, changes panel, its tab, the title."""
        s = self.session
        if s is None:
            return
        plan = s.plan
        states = {p.state for p in plan.table.partitions}
        self.query_one(StatusLine).show_legend(self.sector_map, plan.geometry, self.grain,
                                               proposed=State.PROPOSED in states, deleting=State.DELETE in states)
        views = self.query_one(ViewsPanel)
        views.show_changes(plan, s.history, why_not_writable(self.target), self.move_rate())
        self.exercise_plan_changed()
        self._show_tabs(views.current)
        self._update_title()
        offered = bool(repair_hint(plan))
        if offered != self._repair_offered:  # only then: each refresh recomposes the footer
            self._repair_offered = offered
            self.refresh_bindings()

    def say(self, text: str) -> None:
        """A line in the status bar until the cursor moves."""
        self._said = text
        self._said_at = self.sector_map.cursor_lba
        self.query_one(StatusLine).update(" " + text)

    def show_preview(self, preview: Preview) -> None:
        """One drag step: only the map's rows where an edge was or is, and the mouse's marks."""
        if preview.changed:
            self.sector_map.patch_table(preview.outcome.plan.table, preview.changed)
        marks = requested_extent(preview.outcome.snap, self.sector_map.content.sectors if self.sector_map.content
                                 else 0)
        s = self.session
        if s is not None and s.drag is not None and not s.drag.keyboard and marks is not None:
            self.sector_map.set_marks((marks,))

    def show_drag(self, note: str = "") -> None:
        """The drag in the status line."""
        s = self.session
        if s is None or s.drag is None:
            return
        d = s.drag
        shown = d.shown.partition(d.number)
        base = d.base.base.by_number(d.number) if d.data and d.kind is not DragKind.MOVE else None
        if base is not None:  # a filesystem resize: how far it may shrink, before the user drags below it
            said = limits_text(d.limits, d.base.geometry.logical, base.size)
            if d.snap is not None and d.snap.notes and not note:  # stopped at its minimum, or a neighbour
                said = d.snap.notes[-1]
            note = f"{note} | {said}" if note and said not in note else note or said
        width = self.query_one(StatusLine).size.width or self.size.width
        self.query_one(StatusLine).update(drag_text(d.kind, d.number, d.snap, shown, width, note,
                                                    sector_size=d.base.geometry.logical))

    def drag_ended(self, outcome: Outcome | None) -> None:
        """The drag is recorded (or came to nothing): the list, the explanation and the panels follow."""
        smap = self.sector_map
        smap.set_marks(())
        if outcome is not None and smap.content is not None:
            self._list(smap.content)
            self.show_plan_panels()
            self._on_cursor(smap.cursor_lba, smap.cursor_item)
            self.say(outcome.message)
        else:
            self._on_cursor(smap.cursor_lba, smap.cursor_item)

    @on(PartitionList.Chosen)
    def _chosen(self, event: PartitionList.Chosen) -> None:
        self.sector_map.move_to(event.start)
        if event.focus_map:
            self.sector_map.focus()

    # --- actions --------------------------------------------------------------------------------------

    def _show_tabs(self, current: str | None = None) -> None:
        """The views' names in the panel's border, the current one highlighted, narrower forms when the panel
        is narrow (a title that does not fit would end in an ellipsis the console font does not have)."""
        views = self.query_one(ViewsPanel)
        current = current or views.current
        pending = len(self.session.plan.changes()) if self.session else 0
        room = views.size.width - 4 if views.size.width else 1000  # corners and the spaces around the title
        for pad, form in ((" ", "{name} ({key})"), ("", "{name} ({key})"), ("", "{name} {key}"), ("", "{key}")):
            parts, width = [], 0
            for key, name, ident in VIEW_TABS:
                count = f": {pending}" if ident == "changes" and pending else ""
                text = pad + form.format(name=name, key=key) + count + pad
                width += len(text) + 1
                parts.append(f"[b reverse]{text}[/]" if ident == current else f"[dim]{text}[/]")
            if width - 1 <= room:
                break
        views.border_title = " ".join(parts)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Planner actions only where the planner is, not on the device picker (before a disk is open
        they do nothing; hiding them then would make the footer recompose once the disk arrives). While
        the keys move a partition, only the keys of that mode (and the map's zoom) work."""
        if self.served and action in self.SERVED_ABSENT:
            return False
        on_main = self.screen is self.screen_stack[0] if self.screen_stack else True
        drag = self.session.drag if self.session is not None else None
        keys_drag = drag is not None and drag.keyboard
        if action in self.DRAG_ACTIONS:
            if not (keys_drag and on_main):
                return False
            if action == "other_edge":
                return drag is not None and drag.kind is not DragKind.MOVE
            return True
        if action == "repair":  # offered only while the disk has a repair that is not planned yet
            return on_main and not keys_drag and self._repair_offered
        if action in ("exercise_check", "exercise_step"):  # only while the open demo is an exercise
            return on_main and not keys_drag and self.goal is not None
        if action == "resume_move":  # offered only while the disk has an unfinished move
            return on_main and not keys_drag and bool(self.move_journal)
        if action in self.PLAN_ACTIONS:
            return on_main and not keys_drag
        if action in ("goto", "view"):
            screens = sys.modules.get("diskplan.ui.screens")  # no picker can be open before it is imported
            on_picker = screens is not None and isinstance(self.screen, screens.DevicePicker)
            return not on_picker and not keys_drag
        return not (action in ("help", "demos", "devices", "quit") and keys_drag)

    def get_key_display(self, binding: Binding) -> str:
        """ASCII names for keys on the console (its font has no arrows)."""
        text = super().get_key_display(binding)
        if self.console_profile:
            for arrow, word in (("←", "left"), ("→", "right"), ("↑", "up"), ("↓", "down")):
                text = text.replace(arrow, word)
        return text

    def action_view(self, name: str) -> None:
        views = self.query_one(ViewsPanel)
        if views.current == name:
            return
        views.switch(name)
        self._show_tabs(name)

    def action_redraw(self) -> None:
        """Ctrl+L: paint every cell of the screen again (after line noise on a serial console). Textual
        itself only repaints what it knows changed, so the full update is composed here."""
        try:
            textual_private.repaint_all(self)
        except (AttributeError, TypeError):  # a Textual without these internals: its own repaint
            self.refresh(layout=True)

    def action_help(self) -> None:
        from diskplan.ui.screens import HelpScreen

        self.push_screen(HelpScreen(self.glyphs, served=self.served))

    def action_goto(self) -> None:
        if self.target is None:
            return
        from diskplan.ui.screens import GotoScreen

        disk = self.target.disk

        def go(lba: int | None) -> None:
            if lba is not None:
                self.sector_map.move_to(lba)

        self.push_screen(GotoScreen(disk.geometry, disk.table), go)

    def action_stack(self) -> None:
        """S: plan the stack above the partition under the cursor (ui.stack_screen, as ``diskplan stack``)."""
        if self.target is None:
            return
        item = self.sector_map.cursor_item
        disk = self.target.disk
        whole = disk.table.label is None and bool(disk.stack(0))  # a PV or an array on the whole disk
        if not whole and (item is None or item.partition is None or item.partition.role is Role.EXTENDED):
            self.notify("S plans md RAID, LVM, LUKS and the filesystem above a partition: put the cursor on one.",
                        timeout=5)
            return
        from diskplan.ui.stack_screen import StackScreen

        self.push_screen(StackScreen(disk, None if whole or item is None else item.partition))

    def action_measure(self, read_only: bool = False) -> None:
        """b: time writes and reads in the free space under the cursor (after the write's confirmation);
        B: reads only, at the cursor (ui.measure_screen)."""
        if self.target is None:
            return
        if not self.target.path:
            self.notify("This disk is shown from the model: there is nothing to measure.", timeout=6)
            return
        from diskplan.ui.measure_screen import MeasureScreen

        screen: Screen[Any] = MeasureScreen(self.target.path, self.target.disk, self.sector_map.cursor_lba,
                                            self.host or default_host(), read_only=read_only)
        self.push_confirmation(screen, lambda _: None)

    def action_demos(self) -> None:
        def chosen(name: str | None) -> None:
            if name:
                _, exercise, name = name.rpartition("exercise:")  # the picker's x: as an exercise
                self.open_demo_as(name, exercise=bool(exercise))

        from diskplan.ui.screens import DemoPicker

        self.push_screen(DemoPicker(self.target.demo if self.target else None, self.glyphs.ellipsis), chosen)

    def action_devices(self) -> None:
        if self.served:  # the server's own disks are never offered
            return
        from diskplan.discovery.udev import list_disks
        from diskplan.ui.screens import DevicePicker

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
        # Textual types is_open(App[object]), and App is invariant in its return type
        elif self.use_command_palette and not CommandPalette.is_open(self):  # type: ignore[arg-type]
            self.push_screen(ConsoleCommandPalette(id="--command-palette", placeholder="Search for commands"))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The planner's commands, then Textual's own (Theme, Keys, Screenshot...) but for those ours already
        has (Quit). No Theme on the console profile: its 16 colours are the only ones it has."""
        ours = list(self._planner_commands())
        yield from ours
        titles = {c.title for c in ours}
        for command in super().get_system_commands(screen):
            if command.title not in titles and not (self.console_profile and command.title == "Theme"):
                yield command

    def _planner_commands(self) -> Iterable[SystemCommand]:
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
        yield SystemCommand("New partition...", "Propose a partition in the free space at the cursor (n)",
                            self.action_new_partition)
        yield SystemCommand("New label...", "A new gpt or msdos table; every partition marked for deletion (L)",
                            self.action_new_label)
        yield SystemCommand("Move partition", "Move the partition at the cursor with the keys; on the disk, with "
                            "its data (m)",
                            self.action_move)
        yield SystemCommand("Resize partition", "Move an edge of the partition at the cursor; on the disk, with its "
                            "filesystem (r)",
                            self.action_resize)
        yield SystemCommand("Delete / keep partition", "Remove a proposal, mark a partition for deletion, or keep "
                            "one marked (x)", self.action_delete)
        yield SystemCommand("Type, name, flags...", "Change the partition at the cursor (t)",
                            self.action_edit_partition)
        yield SystemCommand("Undo", "Take back the last step (u)", self.action_undo)
        yield SystemCommand("Redo", "Do again what undo took back (ctrl+y)", self.action_redo)
        yield SystemCommand("Snapping target...", "Optimal, physical block, custom grains or none (s)",
                            self.action_snap)
        yield SystemCommand("Fix my layout", "Re-snap every proposed partition to the grain (a)",
                            self.action_fix_layout)
        yield SystemCommand("Show pending changes", "What writing the plan would change (c)",
                            lambda: self.action_view("changes"))
        if self.move_journal:
            yield SystemCommand("Finish the interrupted move", "Resume the data move its journal records (M)",
                                self.action_resume_move)
        if self._repair_offered:
            yield SystemCommand("Repair the GPT", "Plan the repair this disk offers; w writes it (R)",
                                self.action_repair)
        yield SystemCommand("Clear all changes", "Back to the table on the disk; undo takes it back (C)",
                            self.action_clear_plan)
        if not self.served:
            yield SystemCommand("Save plan...", "The plan as a JSON file (ctrl+s)", self.action_save_plan)
            yield SystemCommand("Load plan...", "A JSON plan or an sfdisk dump (ctrl+o)", self.action_load_plan)
        yield SystemCommand("Write the plan...", "Confirm, back up, write, verify (w)", self.action_write)
        yield SystemCommand("Measure here...", "Time direct writes and reads in the free space at the cursor, "
                            "aligned and misaligned, after confirming (b)", self.action_measure)
        yield SystemCommand("Measure reads here", "Time direct reads at the cursor, aligned and misaligned; "
                            "nothing is written (B)", lambda: self.action_measure(True))
        if not self.served:
            yield SystemCommand("Choose a device", "The disks on this machine", self.action_devices)
        yield SystemCommand("Demo disks", "The built-in demo scenarios", self.action_demos)
        for s in demos.SCENARIOS:
            yield SystemCommand(f"Demo: {s.name}", s.title, lambda name=s.name: self.open_demo_as(name, exercise=False))
        for s in demos.SCENARIOS:
            yield SystemCommand(f"Exercise: {s.name}", f"Fix this layout: {s.title}",
                                lambda name=s.name: self.open_demo_as(name, exercise=True))
        if self.goal is not None:
            yield SystemCommand("Check the exercise", "Judge the plan against the exercise's goal (k)",
                                self.action_exercise_check)
            yield SystemCommand("Exercise: next step", "Walk through the exercise: cursor, zoom, why (enter)",
                                self.action_exercise_step)
        yield SystemCommand("Quit", "Leave diskplan (nothing is written)", self.action_quit)
