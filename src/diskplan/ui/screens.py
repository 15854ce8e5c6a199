"""Screens over the planner: help, go to, the demo list and the device picker."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from diskplan.model import sizes
from diskplan.model.geometry import Geometry
from diskplan.model.safetext import safe
from diskplan.model.table import Table
from diskplan.model.teach import demos
from diskplan.model.units import human_bytes
from diskplan.ui.explain import shorten
from diskplan.ui.glyphs import Glyphs

if TYPE_CHECKING:
    from diskplan.discovery.udev import DiskInfo, Watcher


HELP_INTRO = ("Each cell is a run of sectors; the left column is the first LBA of the row. Gridlines appear where "
              "the zoom is fine enough to show them.")


def help_sections(g: Glyphs, *, served: bool = False) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The keys (a heading where the text is empty) and the symbols; ``served`` (diskplan serve) leaves out
    what is absent there: the device picker and plan files (PlannerApp.SERVED_ABSENT), and commands and
    options, which a browser cannot run or pass."""
    resume = "M" if served else "M or `diskplan resume`"
    keys = [
        ("Moving", ""),
        ("arrows", "move the cursor one cell / one row"),
        ("PgUp PgDn", "one screen up / down"),
        ("Home End", "start / end of the disk"),
        ("] [", "next / previous partition start"),
        (". ,", "next / previous boundary of anything (partition, table, free)"),
        ("f", "next finding (a '!' on the map)"),
        ("g", "go to an LBA, a size (1MiB, 17.4kB), a percentage or #N (partition N)"),
        ("Zoom", ""),
        ("+ -", "zoom in / out around the cursor"),
        ("0  1", "whole disk / one sector per cell"),
        ("Planning", ""),
        ("n", "propose a partition in the free space at the cursor; sizes need a unit: 100MiB (binary), "
              "100MB (decimal), 2048s (sectors), 50% (of the free space)"),
        ("L", "a new gpt or msdos label: every partition on the disk is marked for deletion"),
        ("m  r", "move / resize the partition at the cursor with the keys (on a partition on the disk: m moves "
                 "it with its data, r resizes it with its filesystem; see Partitions that hold data), then:"),
        ("  <- ->", "one grain; Shift+<- -> or up/down: ten grains; space: the other edge (resize); "
                    "Enter: done; Esc: cancel"),
        ("x  t", "remove a proposal, mark a partition for deletion or keep it after all / type, name, flags"),
        ("u  ctrl+y", "undo / redo every step (also ctrl+z and U)"),
        ("s  a", "snapping target: optimal, physical block, custom grains, none / re-snap every proposal"),
        ("c  C", "the pending changes / clear them all (undo brings them back)"),
        ("A", "realign the partition on the disk at the cursor: its start goes to the nearest grain boundary "
              "the free space allows, size unchanged; with no room, its filesystem shrinks first (its size then a "
              "whole number of physical blocks); its data moves when written (elsewhere: fix my layout, every "
              "misaligned one)"),
        ("M", "finish an interrupted data move (offered when the disk has an unfinished move journal)"),
        ("R", "repair a damaged GPT copy or a lost protective MBR (offered when the disk needs it; w writes it)"),
        *([] if served else [("^s ^o", "save the plan as JSON / load a JSON plan or an sfdisk dump")]),
        ("w", "write the plan: every operation listed, confirm, back up, write, verify; data moves and "
              "resizes are written on their own, one partition at a time: progress, Esc stops a move at a chunk "
              f"boundary ({resume} finishes it). A partition being moved must not be mounted"),
        ("b  B", "measure: time direct writes and reads, aligned and misaligned, in the free space at the cursor "
                 "(confirmed like a write) / reads only, anywhere"),
        ("S", "plan md RAID, LVM, LUKS and the filesystem above the partition at the cursor, aligned: the commands "
              "and their arithmetic (as diskplan stack), and the stack there now against them; runs nothing"),
        ("Partitions that hold data", ""),
        ("resize", "r (or dragging its [ or ] edge) grows or shrinks it with its filesystem's own tool: "
                   "resize2fs, xfs_growfs, btrfs, ntfsresize, libparted's FAT resizer (as fatresize), mkswap, "
                   "pvresize. The status line says how far a shrink can go (measured on the disk: resize2fs -P, "
                   "ntfsresize --info...) and the edge stops there. XFS only grows; LUKS and unknown content are "
                   "refused, with the reason"),
        ("order", "a shrink resizes the filesystem first, then the table entry; a grow the entry first; the "
                  "start edge moves the data too: a shrink before the move, a grow after it"),
        ("move", "copied in chunks with a journal, read back and compared, the entry rewritten last (its "
                 f"PARTUUID kept); a crash or Esc leaves it resumable: {resume}"),
        ("warnings", "it must not be mounted (refused otherwise); a boot loader that finds it by its sector "
                     "(GRUB on a BIOS/MBR disk, syslinux, a FAT/NTFS boot sector) must be reinstalled after a "
                     "move; a filesystem tool is not journalled: do not cut the power while it runs"),
        ("Panels", ""),
        ("Tab", "focus: map, partition list, explanation"),
        ("Enter", "(in the list) jump to that partition"),
        ("e  i  c", "show the explanation / the disk facts / the pending changes"),
        ("d", "open a demo disk") if served else ("d  o", "open a demo disk / pick a device"),
        ("k  Enter", f"in an exercise ({'' if served else '--exercise, '}x in the demo picker): check the plan / "
                     "the next step of the walk-through"),
        ("Ctrl+P", "command palette: every command by name"),
        ("Ctrl+L", "redraw the whole screen (after line noise on a serial console)"),
        ("?  q", "this help / quit"),
        ("Mouse", ""),
        ("click", "put the cursor on a cell; wheel scrolls"),
        ("drag", "a proposed partition: moves it; its [ or ] edge: resizes it (snapping as you go); a "
                 "partition on the disk: moves it with its data (a data move), its edges resize it with its "
                 "filesystem"),
    ]
    legend = [
        (f"'{g.partition}' on colour", "a partition (each its own colour)"),
        (f"'{g.flagged}' on colour", "a partition with findings (explained when the cursor is on it)"),
        (f"'{g.problem}'", "where a finding's boundary lies (red: costs I/O, yellow: notice)"),
        (f"'{g.metadata}'", "partition-table metadata (MBR, GPT header and entries, EBR)"),
        (f"'{g.free}'", "free space"),
        (f"'{g.proposed}' on colour", "a proposed partition (planned, not written yet)"),
        (f"'{g.deleting}' on colour", "a partition the plan deletes (its space is free for planning)"),
        (f"'{g.sel_start}' '{g.sel_end}'", "the first and last cell of the selected partition"),
        (f"'{g.layer}'", "data of a layer inside (LVM, LUKS, md) begins here (red or bold: off the page or the "
                         "stripe, yellow: off the grain)"),
        (f"'{g.grid_physical}'", "a physical-block boundary lies in this cell (on flash: a boundary of the "
                                 "assumed 4 KiB page, when the device reports smaller blocks)"),
        (f"'{g.grid_mib}'", "a 1 MiB boundary"),
        (f"'{g.grid_grain}'", "a boundary of the alignment grain (when it is not 1 MiB)"),
        ("marked cells", "the first 4 KiB filesystem block of the partition under the cursor"),
    ]
    if g.mono:
        legend[:1] = [("'1'..'9' 'A'..'Z'", "without colour: partition 1..9, 10..35 (reversed: on the disk; "
                       "plain: proposed)")]
        legend = [(k, v) for k, v in legend if not k.startswith(f"'{g.flagged}'")]
    if g.notice != g.problem:
        legend.insert(2, (f"'{g.notice}'", "where a notice's boundary lies ('!': a finding that costs I/O)"))
    return keys, legend


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "close"),
        Binding("up", "scroll(-1)", show=False),
        Binding("down", "scroll(1)", show=False),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%; max-width: 96; height: 90%; border: solid $accent; background: $surface; padding: 0 1;
    }
    HelpScreen .help-heading { text-style: bold; color: $accent; }
    HelpScreen .help-row { height: auto; }
    HelpScreen .help-key { width: 13; text-style: bold; padding-left: 2; }
    HelpScreen .help-symbol { width: 20; text-style: bold; padding-left: 2; }
    HelpScreen .help-text { width: 1fr; }
    """

    def __init__(self, glyphs: Glyphs, *, served: bool = False) -> None:
        super().__init__()
        self.glyphs = glyphs
        self.served = served

    def compose(self) -> ComposeResult:
        # One row a key, its text wrapping beside the key column (a hanging indent), not under it.
        keys, legend = help_sections(self.glyphs, served=self.served)
        with VerticalScroll() as v:
            v.border_title = "Help (Esc closes)"
            yield Static("The sector map", classes="help-heading")
            yield Static(HELP_INTRO + "\n")
            for column, rows in (("help-key", keys), ("help-symbol", [("", ""), ("Symbols", ""), *legend])):
                for k, text in rows:
                    if not text:  # a heading, or an empty line
                        yield Static(k, classes="help-heading", markup=False)
                        continue
                    with Horizontal(classes="help-row"):
                        yield Static(k, classes=column, markup=False)
                        yield Static(text, classes="help-text", markup=False)

    def action_scroll(self, direction: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=direction, animate=False)


def parse_position(text: str, geom: Geometry, table: Table | None) -> int:
    """An LBA from what a person types: "2048", "2048s", "1MiB", "17408B", "50%", "#2", "end"
    (model.sizes.parse_position: the same parser as the partition dialog and the command line)."""
    return sizes.parse_position(text, geom, table).sectors


class GotoScreen(ModalScreen[int | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel")]
    DEFAULT_CSS = """
    GotoScreen { align: center middle; }
    GotoScreen > Vertical { width: 64; height: auto; border: solid $accent; background: $surface; padding: 0 1; }
    GotoScreen Input { border: solid $primary; }
    GotoScreen #goto-error { color: $error; height: auto; }
    """

    def __init__(self, geom: Geometry, table: Table | None) -> None:
        super().__init__()
        self.geom = geom
        self.table = table

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = "Go to"
            yield Static("LBA (2048 or 2048s), bytes with a unit (1MiB, 17.4kB, 4096B), 50%, #2 or end:")
            yield Input(placeholder="2048", id="goto-input", select_on_focus=False)
            yield Static("", id="goto-error")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        try:
            got = sizes.parse_position(event.value, self.geom, self.table)
        except ValueError as exc:
            self.query_one("#goto-error", Static).update(str(exc))
            return
        if not got.exact:  # "17.4 kB = 17,400 B = 34 sectors (rounded to the nearest sector from 33.98...)"
            self.app.notify(got.explanation, title=f"Go to LBA {got.sectors:,}", timeout=6)
        self.dismiss(got.sectors)


def demo_line(scenario: demos.Scenario, width: int, ellipsis: str) -> str:
    """A demo's line in the picker: its name and the title's first clause, on one line of ``width`` (a
    wrapped title's second line fell below the list's fold, and the title read as cut mid-phrase)."""
    return shorten(f"{scenario.name:<16} {scenario.title.split(':')[0]}", width, ellipsis)


class DemoList(OptionList):
    """The demos, one line each, fitted again whenever the list's width changes."""

    def __init__(self, ellipsis: str) -> None:
        super().__init__(*(Option(demo_line(s, 1000, ellipsis), id=s.name) for s in demos.SCENARIOS))
        self.ellipsis = ellipsis

    def on_resize(self) -> None:
        padding = self.get_component_styles("option-list--option").padding.width
        room = self.scrollable_content_region.width - padding
        if room > 0:
            for s in demos.SCENARIOS:
                self.replace_option_prompt(s.name, demo_line(s, room, self.ellipsis))
            self.refresh(layout=True)


class DemoPicker(ModalScreen[str | None]):
    """The built-in demo disks, each with what it teaches."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "cancel"),
                                              Binding("x", "exercise", "open as an exercise")]
    DEFAULT_CSS = """
    DemoPicker { align: center middle; }
    DemoPicker > Vertical { width: 96%; max-width: 110; height: 90%; border: solid $accent; background: $surface; }
    DemoPicker OptionList { height: auto; max-height: 9; border: none; }
    DemoPicker #demo-lesson { height: 1fr; padding: 0 1; border-top: solid $primary; }
    """

    def __init__(self, current: str | None = None, ellipsis: str = "…") -> None:
        super().__init__()
        self.current = current
        self.ellipsis = ellipsis  # the glyph profile's: the console font has no "…"

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = "Demo disks (Enter opens, x as an exercise, Esc cancels)"
            yield DemoList(self.ellipsis)
            with VerticalScroll(id="demo-lesson"):
                yield Static(id="demo-lesson-text")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = demos.names()
        options.highlighted = names.index(self.current) if self.current in names else 0

    @on(OptionList.OptionHighlighted)
    def _preview(self, event: OptionList.OptionHighlighted) -> None:
        s = demos.find(event.option.id or demos.DEFAULT)
        text = Content.assemble((s.title + "\n", "bold"), "\n".join(s.lesson))
        self.query_one("#demo-lesson-text", Static).update(text)

    @on(OptionList.OptionSelected)
    def _open(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_exercise(self) -> None:
        """x: the highlighted demo as an exercise ("fix this layout")."""
        options = self.query_one(OptionList)
        if options.highlighted is not None:
            self.dismiss(f"exercise:{options.get_option_at_index(options.highlighted).id}")


PICKER_COLUMNS = ("device", "model", "size", "log/phys", "table", "kind", "scheduler")
MODEL = 1  # the column that gives way when the rows are wider than the screen


def fit_model(rows: list[list[str]], width: int) -> list[list[str]]:
    """Rows whose model column is shortened (at a word, marked with "~") so that every other column fits
    ``width``: a picker that scrolls sideways hides the kind and scheduler, or cuts them mid-word."""
    if not rows:
        return rows
    widths = [max(len(r[i]) for r in [list(PICKER_COLUMNS), *rows]) for i in range(len(PICKER_COLUMNS))]
    others = sum(w + 2 for i, w in enumerate(widths) if i != MODEL)  # a cell pads one space each side
    room = max(len(PICKER_COLUMNS[MODEL]), width - others - 2)
    out = []
    for row in rows:
        model = row[MODEL]
        if len(model) > room:
            cut = model[: room - 1]
            space = cut.rfind(" ")
            model = (cut[:space] if space >= room // 2 else cut).rstrip() + "~"
        out.append([*row[:MODEL], model, *row[MODEL + 1:]])
    return out


class DevicePicker(Screen[str | None]):
    """The disks on this machine; refreshed when one is plugged in or removed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "open", show=False),
        Binding("r", "refresh", "refresh"),
        Binding("d", "demo", "demo disks"),
        Binding("escape", "back", "back"),
        Binding("q", "app.quit", "quit"),  # the app asks first when the plan has changes that would be lost
    ]
    DEFAULT_CSS = """
    DevicePicker { layout: vertical; }
    DevicePicker #picker-title { height: 1; background: $panel; }
    DevicePicker #picker-help { height: auto; padding: 0 1; color: $text-muted; }
    DevicePicker DataTable { height: 1fr; }
    """

    def __init__(self, lister: Callable[[], list[DiskInfo]], watch: bool = True, can_go_back: bool = False) -> None:
        super().__init__()
        self.lister = lister
        self.watch_devices = watch  # not self.watch: that would hide Textual's DOMNode.watch
        self.can_go_back = can_go_back
        self._watcher: Watcher | None = None
        self._shown: tuple[list[DiskInfo], str] | None = None  # the disks as last listed

    def compose(self) -> ComposeResult:
        yield Static(" diskplan │ choose a disk", id="picker-title")
        yield Static("Enter opens the disk read-only for planning. d opens a demo disk instead.", id="picker-help")
        yield DataTable(cursor_type="row", zebra_stripes=False, id="devices")
        yield Footer()

    def on_mount(self) -> None:
        tables = self.query(DataTable)
        if not tables:  # pushed while the app was closing
            return
        tables.first().add_columns(*PICKER_COLUMNS)
        self.action_refresh()
        if self.watch_devices:
            from diskplan.discovery.udev import Watcher

            self._watcher = Watcher(lambda: self.app.call_from_thread(self.action_refresh))
            self._watcher.start()

    def on_resize(self) -> None:
        if self._shown is not None:  # the model column fits the new width
            self._show(*self._shown)

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def action_refresh(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="devices")
    def _load(self) -> None:
        try:
            disks = self.lister()
            error = ""
        except Exception as exc:  # a sysfs surprise must not take the picker down
            disks, error = [], " ".join(str(exc).split())
        self.app.call_from_thread(self._show, disks, error)

    def _show(self, disks: list[DiskInfo], error: str) -> None:
        if not self.is_attached or not self.query(DataTable):
            return
        self._shown = (disks, error)
        table = self.query_one(DataTable)
        at = table.cursor_row
        # The model comes from the device or a path: escaped, and plain text (a DataTable string is markup).
        rows = [[d.node, safe(d.model or (d.backing_file and f"file {d.backing_file}") or "-"),
                 human_bytes(d.size_bytes), f"{d.logical}/{d.physical}", d.table, d.kind, d.scheduler or "-"]
                for d in disks]
        rows = fit_model(rows, (self.size.width or self.app.size.width) - 1)
        # Columns as wide as their widest cell, given, not measured: DataTable measures new rows when it is
        # next idle, and on a busy machine a refresh could leave every column at its heading's width.
        table.clear(columns=True)
        for i, label in enumerate(PICKER_COLUMNS):
            table.add_column(label, width=max(len(r[i]) for r in [list(PICKER_COLUMNS), *rows]))
        for d, row in zip(disks, rows, strict=True):
            table.add_row(row[0], Text(row[1]), *row[2:], key=d.node)
        if 0 < at < table.row_count:  # a refresh or a resize keeps the row the user was on
            table.move_cursor(row=at)
        mode = getattr(self._watcher, "mode", "off")
        watching = {"udev": "watching udev", "kernel": "watching kernel events (no udevd)",
                    "poll": "polling /sys/block"}.get(mode, "")
        count = f"{len(disks)} disk(s) found" if disks else (error or "no disks found (reading them needs root)")
        unread = [d.unread for d in disks if d.unread]
        why = f" {safe(unread[0])}" + (f" (and {len(unread) - 1} more)" if len(unread) > 1 else "") + "." \
            if unread else ""
        self.query_one("#picker-help", Static).update(
            f"{count}{'; ' + watching if watching else ''}.{why} Enter opens a disk for planning (nothing is "
            "written); d opens a demo disk; r refreshes."
        )

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            self.notify("No disk to open: try d for a demo disk.", timeout=3)
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        self.dismiss(key)

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.row_key.value)

    def action_demo(self) -> None:
        self.dismiss(f"demo:{demos.DEFAULT}")

    def action_back(self) -> None:
        if self.can_go_back:
            self.dismiss(None)
        else:
            self.app.exit()
