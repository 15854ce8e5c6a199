"""Opening disks in the planner: a demo, an image or a device (read in a worker: the screen stays live), shown
with its findings and facts, the plan starting from its table; after a write, the disk read again and the plan
starting from it. A mixin of ``PlannerApp``, after ``PlanActions`` (an open asks first when it would lose
pending changes)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import work

from diskplan.model.findings.report import table_findings as findings_of_table
from diskplan.model.findings.stackfindings import data_starts
from diskplan.model.safetext import safe
from diskplan.model.value import replace
from diskplan.ui import textual_private
from diskplan.ui.panels import KeysFooter, StatusLine, ViewsPanel
from diskplan.ui.plan_base import PlanBase
from diskplan.ui.planning import Session, judging_grain, repair_hint
from diskplan.ui.target import Source, Target

if TYPE_CHECKING:
    from diskplan.model.disk import Disk
    from diskplan.model.findings.placement import Finding
    from diskplan.model.grain import Grain

# What the planner writes to the terminal after its first complete frame when DISKPLAN_BENCH=first-frame
# (an xterm title; scripts/bench_floor.py writes the same).
BENCH_MARK = "\x1b]2;diskplan-first-frame\x07"


class DiskOpening(PlanBase):
    """Opening a disk and reading it back (a mixin of ``PlannerApp``)."""

    if TYPE_CHECKING:  # the app's (app.py, exercise_mode.py, write_actions.py), used here
        session: Session | None  # (PlannerView's, declared again: they are assigned here)
        target: Target | None
        grain: Grain | None
        source: Source | None
        after_first_disk: Callable[[], None] | None
        _item_index: tuple[int, int] | None
        _lesson_open: bool
        _opened_at: int

        def start_exercise(self, demo: str | None) -> None: ...

        def exercise_lines(self) -> list[tuple[str, str]]: ...

        def show_plan_panels(self) -> None: ...

        def offer_resume(self) -> bool: ...

        def _follow_table(self) -> None: ...

        def _update_status(self) -> None: ...

    def _open_at_start(self, kind: str, name: str) -> None:
        """Before the first frame: what the source has ready is shown at once, so the first frame shows it."""
        if self.source is None:
            return
        try:
            ready = self.source.ready(kind, name)
        except Exception as exc:
            self._load_failed(" ".join(str(exc).split()) or type(exc).__name__)
            return
        if ready is not None:
            self.show_target(ready)
        elif kind == "demo":
            self.open_demo(name)
        else:
            self.open_path(name)

    def open_demo(self, name: str) -> None:
        if self.source is None:
            return
        source = self.source
        self.keep_or_lose(f"opening the demo {name}",
                          lambda: self._load(lambda: source.open_demo(name), f"Building the demo disk {name}..."))

    def open_path(self, path: str) -> None:
        if self.source is None:
            return
        source = self.source
        shown = safe(path)
        self.keep_or_lose(f"opening {shown}", lambda: self._load(lambda: source.open_path(path), f"Reading {shown}..."))

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
        if self.after_first_disk is not None:  # no disk to wait for
            self.after_first_disk()
            self.after_first_disk = None
        self.notify(reason, title="Could not open", severity="error", timeout=10)
        if self.target is None:
            devices = "" if self.served else "o: choose a device   "
            self.query_one(StatusLine).update(f" Nothing open. d: a demo disk   {devices}q: quit")
        else:
            self._update_status()

    def show_target(self, target: Target) -> None:
        """Show a disk: the map, the list, the facts; the plan starts from its table."""
        self.target = target
        disk = target.disk
        self.session = Session.for_disk(disk)
        plan = self.session.plan
        self.grain = judging_grain(plan)
        self._item_index = None
        self._lesson_open = False
        self.start_exercise(target.demo)
        found = findings_of_table(disk)
        smap = self.sector_map
        smap.select(None)
        smap.show(disk.geometry, plan.table, self.grain, self.session.findings(plan),
                  data_starts=data_starts(disk, self.grain) if disk.stacks else ())
        self._facts(found)
        self.show_plan_panels()
        self._opened_at = smap.cursor_lba
        self._follow_table()
        # A demo opens on its lesson; the first cursor move switches to the explanation of what is under it.
        self._lesson_open = bool(target.demo)
        self.action_view("facts" if target.demo else "explain")
        if target.note:
            self.notify(target.note, title=target.title, severity="warning", timeout=8)
        if self.after_first_disk is not None:
            self.call_after_refresh(self.after_first_disk)
            self.after_first_disk = None
        if os.environ.get("DISKPLAN_BENCH") == "first-frame":
            self.call_after_refresh(self._first_frame_drawn)
        serious = [f for f in found if f.severity != "notice"]
        hint = repair_hint(plan)
        # An unfinished data move (its journal): looked for once the disk is drawn, so the engine's modules
        # stay out of start-up; its notification then comes on top of these.
        self.call_after_refresh(self.offer_resume)
        if hint:
            self.notify(hint, title="This table can be repaired", severity="warning", timeout=12)
        elif serious:
            more = f" (+{len(serious) - 1} more: press i)" if len(serious) > 1 else " (press i)"
            self.notify(serious[0].message + more, title="About this table", severity="warning", timeout=10)

    def _first_frame_drawn(self) -> None:
        """scripts/bench.py times start-up to BENCH_MARK on the terminal: written once the frame shows the
        disk and the footer its keys (as scripts/bench_floor.py does), behind the frame in the same output
        queue. Then exit."""
        if not self.query_one(KeysFooter).shown:
            self.call_after_refresh(self._first_frame_drawn)
            return
        textual_private.write_to_terminal(self, BENCH_MARK)
        self.exit()

    @work(thread=True, exclusive=True, group="load")
    def reread(self, path: str) -> None:
        """Read the disk again after a write; the plan starts again from it."""
        from diskplan.backend.read.reader import ReadError, read

        try:
            disk = read(path)
        except ReadError as exc:
            self.call_from_thread(self._load_failed, f"{path}: {exc}")
            return
        self.call_from_thread(self._adopt_disk, disk)

    def _adopt_disk(self, read_back: Disk) -> None:
        """The disk after a commit: its new table, with the geometry (and overrides) it had; the plan
        starts again from it, with the same snapping target."""
        if self.target is None or self.session is None:
            return
        old = self.session.plan
        disk = replace(self.target.disk, table=read_back.table, findings=read_back.findings,
                       messages=read_back.messages, views=read_back.views, repair=read_back.repair,
                       filesystem=read_back.filesystem)
        self.target = replace(self.target, disk=disk, note="")
        self.session = Session.for_disk(disk, old.target)
        self._facts()
        self.show_plan()
        self.say(f"read back: {self.target.path} holds the new table")
        self.offer_resume()

    def _facts(self, table_findings: tuple[Finding, ...] | None = None) -> None:
        if self.target is None or self.grain is None:
            return
        if table_findings is None:
            table_findings = findings_of_table(self.target.disk)
        self.query_one(ViewsPanel).show_facts(self.target, self.grain, table_findings, self.exercise_lines())

    def refresh_facts(self) -> None:
        self._facts()

    def show_lesson(self) -> None:
        """The facts (a demo's lesson, an exercise's step) shown from the top, as when the demo opened: the
        cursor's next move of its own switches to the explanation."""
        self._lesson_open = True
        self._opened_at = self.sector_map.cursor_lba
        self.action_view("facts")
