"""Measuring the open disk from the planner (b, B): what ``diskplan measure`` does, at the cursor.

b writes test data into the free space under the cursor — the disk's free space as it was read, never a
partition the plan marks for deletion, never the table's metadata — after the same confirmation as a write
(the device's name, or "yes" for an image), with the exact byte range shown, under the disk's write lock
and only while nothing uses the disk. B reads only, anywhere, from the 1 MiB boundary at the cursor.
The device is named honestly (a loop device over a file, a virtual disk, a file on a filesystem) with
its rotational flag, physical block and scheduler, as the command does; then IOPS with the ratios and
their spread, and the equivalent fio command lines. Each line wraps beside its label (``range:``, ``+512 B``),
not under it, as the help's keys do, so a screen of 80 columns stays readable.

``backend.iotime`` does the timing in a worker thread; this screen shows its rounds as they end.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Input, Static

from diskplan.backend.iotime import Ask, DirectIOUnsupported, holes_note, measure, measure_refusals
from diskplan.backend.write.lock import LockBusy, take
from diskplan.backend.write.steps import Host, half_moved
from diskplan.discovery.devicekind import DeviceKind, device_kind
from diskplan.model.disk import Disk
from diskplan.model.safetext import safe
from diskplan.model.teach.measure import (
    READ_TESTS,
    WRITE_TESTS,
    Result,
    byte_range,
    free_range,
    offsets,
    ranges_read,
    read_range,
    report,
    span,
)
from diskplan.model.units import MiB, plural
from diskplan.model.value import value
from diskplan.ui.commit_screen import progress_bar
from diskplan.ui.dialogs import FORM_CSS
from diskplan.ui.workform import WorkForm

# What each measurement runs (``diskplan measure``'s defaults; tests make them smaller).
ROUNDS = 5
COUNT = 64


@value
class Where:
    """Where a measurement reads or writes, and what refuses a write there (before asking who uses the disk)."""

    base: int
    end: int
    refusals: tuple[str, ...]


def where(path: str, disk: Disk, lba: int, read_only: bool, count: int = COUNT) -> Where:
    ss = disk.geometry.logical
    need = span(ss, count)
    if read_only:
        placed = read_range(disk.geometry.size_bytes, need, lba * ss)
        if placed is None:
            return Where(0, 0, (f"{path} is smaller than the {need // MiB} MiB a measurement reads",))
        return Where(*placed, ())
    placed = free_range(disk, need, at=lba)
    # measure_refusals names a missing range as the whole disk's; here it is the cursor's (said below)
    refusals = measure_refusals(path, disk, placed or (0, need), need)
    if placed is None:
        free = next((e for e in disk.table.free_regions() if e.start <= lba <= e.end), None)
        if free is None:
            refusals.append(f"LBA {lba} is not free space on the disk (a partition, one the plan only marks for "
                            "deletion, or the table's metadata): b writes only into free space; B measures "
                            "reads here, writing nothing")
        else:
            refusals.append(f"the free space under the cursor (LBA {free.start}-{free.end}) holds no "
                            f"{need // MiB} MiB from a 1 MiB boundary clear of the table's metadata; B measures "
                            "reads here, writing nothing")
    return Where(*(placed or (0, 0)), tuple(refusals))


def row(label: str, text: str | Content, kind: str = "-key") -> Horizontal:
    """One line, its text wrapping beside its label (a hanging indent), not back under it. ``kind``: -key
    ("range:"), -offset (an offset under a test's heading), -fio (a fio command line), -refused."""
    return Horizontal(Static(label, classes=f"measure-label {kind}", markup=False),
                      Static(text, classes="measure-text", markup=False), classes="measure-row")


class MeasureScreen(WorkForm[None]):
    """Measure ``path`` at ``lba``: its writes only after the confirmation; the results stay until Esc."""

    body_id = "measure-body"
    DEFAULT_CSS = "MeasureScreen { align: center middle; }\n" + FORM_CSS + """
    MeasureScreen > .form { width: 100%; height: 100%; }
    MeasureScreen #measure-body { height: 1fr; }
    MeasureScreen #measure-progress { height: auto; }
    MeasureScreen #measure-answer-row { height: auto; display: none; }
    MeasureScreen #measure-answer-row.-asking { display: block; }
    MeasureScreen #measure-prompt { width: 1fr; height: auto; }
    MeasureScreen #measure-about, MeasureScreen #measure-results { height: auto; }
    MeasureScreen .measure-row { height: auto; }
    MeasureScreen .measure-label { width: 9; color: $text-muted; }
    MeasureScreen .measure-label.-offset { width: 13; padding-left: 2; color: $text; }
    MeasureScreen .measure-label.-fio { width: 6; padding-left: 2; color: $text; }
    MeasureScreen .measure-label.-refused { color: $warning; text-style: bold; }
    MeasureScreen .measure-text { width: 1fr; }
    MeasureScreen .measure-heading { height: auto; text-style: bold; }
    MeasureScreen .measure-note { height: auto; color: $text-muted; margin-top: 1; }
    """

    def __init__(self, path: str, disk: Disk, lba: int, host: Host, *, read_only: bool) -> None:
        super().__init__()
        self.path = path
        self.disk = disk
        self.lba = lba
        self.host = host
        self.read_only = read_only
        self.rounds, self.count = ROUNDS, COUNT
        self.dev: DeviceKind | None = None
        self.where = where(path, disk, lba, read_only, self.count)
        self.ask: Ask | None = None  # the question, once nothing refuses the write
        self.running = False
        self.results: list[Result] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="form") as v:
            v.border_title = "Measure reads (nothing is written)" if self.read_only else "Measure writes and reads"
            with VerticalScroll(id="measure-body"):
                with Vertical(id="measure-about"):
                    yield Static("Looking at the device...")
                yield Vertical(id="measure-results")
            yield Static("", id="measure-progress")
            # The prompt above its answer: the whole byte range and the path seldom leave room beside it.
            with Vertical(id="measure-answer-row"):
                yield Static("", id="measure-prompt")
                yield Input(id="measure-answer", classes="field", select_on_focus=False)
            yield Static("Esc: back to the planner (nothing is written)", id="measure-keys", classes="keys")

    def on_mount(self) -> None:
        self._look()

    # --- before measuring -----------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="measure")
    def _look(self) -> None:
        """What the device is and who uses it: sysfs and /proc, in a worker."""
        dev = device_kind(self.path)
        self.dev = dev  # where its holes are looked for, after the reads
        users = [] if self.read_only or self.where.refusals else self._users()
        self.app.call_from_thread(self._show_plan, dev, users)

    def _users(self) -> list[str]:
        return [str(u) for u in self.host.users(self.path) if u.blocking]

    def _show_plan(self, dev: DeviceKind, users: list[str]) -> None:
        w, ss = self.where, self.disk.geometry.logical
        rows: list[Static | Horizontal] = [Static(Content.styled(safe(dev.what), "bold"), classes="measure-heading"),
                                           row("device:", dev.facts())]
        if not dev.hardware:
            rows.append(Static(Content.styled("These numbers say nothing about a disk's hardware: measure the disk "
                                              "itself for that.", "$warning"), classes="text"))
        refusals = (*w.refusals, *users)
        if w.end:
            verb = "reads" if self.read_only else "writes test data to, then reads"
            rows.append(row("range:", f"{verb} {safe(byte_range(self.path, w.base, w.end, ss))}"
                                      f"{'' if self.read_only else ': free space, no partition, no table metadata'}"))
        tests = READ_TESTS if self.read_only else (*WRITE_TESTS, *READ_TESTS)
        shape = f"; {plural(self.rounds, 'round')} x {plural(self.count, 'operation')}, interleaved"
        rows.append(row("tests:", Content.styled(", ".join(t.name for t in tests) + " at " + ", ".join(
            o.label for o in offsets(ss)) + shape, "$text-muted")))
        rows += [row("refused:", safe(refusal), "-refused") for refusal in refusals]
        about = self.query_one("#measure-about", Vertical)
        about.remove_children()  # "Looking at the device...", pruned while the rows are mounted
        about.mount_all(rows)
        keys = self.query_one("#measure-keys", Static)
        if refusals:
            keys.update("Nothing can be written (see refused:). Esc: back to the planner")
            return
        if self.read_only:
            keys.update("Enter: measure (reads only)   Esc: back")
            self.focus()
            return
        kind = "block" if self.disk.kind == "block" else "file"
        self.ask = Ask(kind, self.path, w.base, w.end)
        self.query_one("#measure-prompt", Static).update(safe(self.ask.prompt) + ":")
        self.query_one("#measure-answer-row").add_class("-asking")
        keys.update("Enter: write the test data and measure   Esc: back, nothing written")
        self.query_one("#measure-answer", Input).focus()

    def key_enter(self) -> None:
        if self.results is not None:
            self.dismiss(None)
        elif self.read_only and not self.running and not self.where.refusals:
            self._start()

    @on(Input.Submitted, "#measure-answer")
    def _answered(self, event: Input.Submitted) -> None:
        if self.ask is None or self.running or self.results is not None:
            return
        if not self.ask.accepts(event.value):
            self.query_one("#measure-progress", Static).update(
                Content.assemble(("not confirmed: ", "bold $warning"), f"type {safe(self.ask.confirm_word)} exactly"))
            return
        self.query_one("#measure-answer-row").remove_class("-asking")
        self._start()

    # --- measuring ------------------------------------------------------------------------------------

    def _start(self) -> None:
        self.running = True
        self.query_one("#measure-keys", Static).update("Measuring: wait for the last round...")
        self.query_one("#measure-progress", Static).update(f"{progress_bar(0, self.rounds)} rounds")
        self.refresh_bindings()
        self.focus()
        self._measure()

    @work(thread=True, exclusive=True, group="measure")
    def _measure(self) -> None:
        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(self._progress, done, total)

        w = self.where
        tests = READ_TESTS if self.read_only else (*WRITE_TESTS, *READ_TESTS)
        try:
            if self.read_only:
                results = measure(self.path, w.base, tests, offsets(self.disk.geometry.logical), self.rounds,
                                  self.count, progress)
            else:
                with take(self.path):
                    # under the lock, as `diskplan measure` asks again: nothing may have started using it, nor a
                    # move been started (and stopped) meanwhile, whose hidden partition's bytes look free
                    again = self._users() + half_moved(self.path, self.disk.geometry.size_bytes)
                    if again:
                        self.app.call_from_thread(self._failed, "refused: " + "; ".join(again)
                                                  + ". Nothing was written.")
                        return
                    results = measure(self.path, w.base, tests, offsets(self.disk.geometry.logical), self.rounds,
                                      self.count, progress)
        except LockBusy as exc:
            self.app.call_from_thread(self._failed, f"refused: {exc}. Nothing was written.")
            return
        except DirectIOUnsupported as exc:
            self.app.call_from_thread(self._failed, f"{exc.strerror}: a measurement through the page cache would "
                                      "time memory")
            return
        except OSError as exc:
            self.app.call_from_thread(self._failed, f"I/O failed on {self.path}: {exc.strerror or exc}")
            return
        self.app.call_from_thread(self._show_results, results)

    def _progress(self, done: int, total: int) -> None:
        self.query_one("#measure-progress", Static).update(f"{progress_bar(done, total)} rounds")

    def _failed(self, reason: str) -> None:
        self.running = False
        self.results = []
        note = Static(Content.styled(safe(reason), "bold $warning"), classes="measure-note")
        self.query_one("#measure-results", Vertical).mount(note)
        self._done()

    def _show_results(self, results: list[Result]) -> None:
        self.running = False
        self.results = results
        rows: list[Static | Horizontal] = [Static(f"{plural(self.rounds, 'round')} x {plural(self.count, 'operation')} "
                                                  "per offset, interleaved; O_DIRECT, one at a time",
                                                  classes="measure-note")]
        for r in report(results, self.path, self.where.base, self.count):
            if r.heading:
                rows.append(Static(safe(r.text), classes="measure-heading", markup=False))
            elif r.label:
                rows.append(row(r.label, safe(r.text), "-offset"))
            else:  # a fio command: its options wrap under the first, clear of "fio"
                command, _, options = r.text.partition(" ")
                rows.append(row(command, safe(options), "-fio"))
        dev = self.dev
        if dev is not None:
            note = holes_note(dev.backing, dev.backing_offset + (dev.partition_start or 0),
                              ranges_read(self.where.base, self.disk.geometry.logical, self.count))
            if note:
                rows.append(Static(Content.styled(safe(note), "$warning"), classes="measure-note"))
        self.query_one("#measure-results", Vertical).mount_all(rows)
        self._done()

    def _done(self) -> None:
        self.query_one("#measure-progress", Static).update("")
        self.query_one("#measure-keys", Static).update("Esc or Enter: back to the planner")
        self.refresh_bindings()
        self.focus()

    @property
    def busy(self) -> bool:
        return self.running

    def result(self) -> None:
        return None
