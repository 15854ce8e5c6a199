"""Everything the planner does to the plan: propose, move and resize (mouse and keys), delete, undo and
redo, snapping, plan files, and the commit. A mixin of ``PlannerApp`` (app.py declares the key bindings).

The rule for speed: a drag step touches the map through ``SectorMap.patch_table`` (the rows where an
edge was or is) and the status line, nothing else; the partition list, the explanation and the
changes panel follow when the drag ends.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from textual import work

from diskplan.model.extent import State
from diskplan.model.grain import SnapTarget
from diskplan.model.plan import Outcome, Plan
from diskplan.ui.cells import Item
from diskplan.ui.panels import StatusLine, ViewsPanel
from diskplan.ui.planning import DragKind, Preview, Session, drag_text, judging_grain, requested_extent

# Dialogs, plan files and the commit are imported when first used: start-up (to the first frame) needs none.
if TYPE_CHECKING:
    from diskplan.backend.write import Host, WriteOutcome
    from diskplan.model.disk import Disk
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.dialogs import SnapChoice
    from diskplan.ui.sectormap import SectorMap

    _Base = PlannerApp
else:
    _Base = object


def default_host() -> Host:
    from diskplan.backend.write import Host
    from diskplan.discovery import inuse

    return Host(users=inuse.find_users, kernel_partitions=inuse.kernel_partitions)


def unnested(model: str) -> str:
    """A model for the write dialog, which puts it in parentheses: "1 TB NVMe SSD (demo)" reads
    "1 TB NVMe SSD, demo" there, not "(1 TB NVMe SSD (demo))"."""
    return re.sub(r"\s*\(([^()]*)\)$", r", \1", model)


class PlanActions(_Base):
    session: Session | None
    _mouse_on_existing: int | None
    _mouse_moved: bool
    _said: str
    _said_at: int
    _repair_offered: bool
    _saved_plan: Plan | None

    # --- changes that would be lost ----------------------------------------------------------------------

    def unsaved(self) -> int:
        """How many pending changes would be lost: 0 when the plan is the disk's or was saved as it is."""
        s = self.session
        if s is None or not s.plan.dirty or s.plan is self._saved_plan:
            return 0
        return len(s.plan.changes())

    def keep_or_lose(self, what: str, then: Callable[[], object]) -> None:
        """Do ``then`` ("quitting", "opening ...") at once, or, when it would lose pending changes that are
        not saved, after asking: write, save the plan (then go on), discard (go on), or cancel."""
        from diskplan.ui.dialogs import UnsavedScreen

        n = self.unsaved()
        if not n:
            then()
            return

        def answer(choice: str | None) -> None:
            if choice == "discard":
                then()
            elif choice == "save":
                self.action_save_plan(then=then)
            elif choice == "write":
                self.action_write()

        self.push_confirmation(UnsavedScreen(what, n), answer)

    # --- showing the plan ------------------------------------------------------------------------------

    def _on_plan_changed(self) -> None:
        """The present plan changed (a step, undo, redo): map, list, legend, changes, title."""
        s = self.session
        if s is None:
            return
        plan = s.plan
        grain = judging_grain(plan)
        changed_grain = grain != self.grain
        self.grain = grain
        self.sector_map.set_table(plan.table, s.findings(plan), grain)  # TableChanged: the list and explanation
        self._plan_panels()
        if changed_grain:
            self._update_title()

    def _plan_panels(self) -> None:
        """What follows the plan but not each drag step: legend, changes panel, its tab, the title."""
        s = self.session
        if s is None:
            return
        plan = s.plan
        states = {p.state for p in plan.table.partitions}
        self.query_one(StatusLine).show_legend(self.sector_map, plan.geometry, self.grain,
                                               proposed=State.PROPOSED in states, deleting=State.DELETE in states)
        views = self.query_one(ViewsPanel)
        views.show_changes(plan, s.history, self._why_not_writable())
        self._show_tabs(views.current)
        self._update_title()
        offered = bool(self.repair_hint())
        if offered != self._repair_offered:  # only then: each refresh recomposes the footer
            self._repair_offered = offered
            self.refresh_bindings()

    def _why_not_writable(self) -> str:
        if self.target is None or not self.target.path:
            return "this disk is shown from the model: there is nothing to write to"
        return ""

    def _say(self, text: str) -> None:
        """A line in the status bar until the cursor moves."""
        self._said = text
        self._said_at = self.sector_map.cursor_lba
        self.query_one(StatusLine).update(" " + text)

    def _step(self, outcome: Outcome | None, *, say: bool = True) -> bool:
        """Record a step; a refusal is a notification with its reason and the plan stays as it was."""
        if outcome is None or self.session is None:
            return False
        if not outcome.ok:
            self.notify(outcome.message, title="Refused", severity="warning", timeout=8)
            return False
        recorded = self.session.apply(outcome)
        if recorded:
            self._on_plan_changed()
        if say:
            self._say(outcome.message)
        return recorded

    def _under_cursor(self) -> Item | None:
        return self.sector_map.cursor_item

    def _number_under_cursor(self, *, live: bool = True) -> int | None:
        item = self._under_cursor()
        if item is None or item.partition is None:
            return None
        if live and item.partition.state is State.DELETE:
            return None
        return item.partition.number

    def _plan_session(self) -> Session | None:
        """The session, after ending a keyboard drag (any other action first records it)."""
        s = self.session
        if s is not None and s.drag is not None:
            self.action_drag_done()
        return s

    # --- proposing and editing ----------------------------------------------------------------------

    def action_new_partition(self) -> None:
        from diskplan.ui.dialogs import PartitionScreen, default_gap

        s = self._plan_session()
        if s is None:
            return
        plan = s.plan
        if plan.blocked():
            self.notify(plan.blocked(), title="New partition", timeout=6)
            self.action_new_label(then_propose=True)
            return
        cursor = self.sector_map.cursor_lba
        gap, why = default_gap(plan, cursor)  # the dialog's title says which free space it is
        if gap is None:
            self.notify(why, title="No free space", severity="warning", timeout=6)
            return

        def done(outcome: Outcome | None) -> None:
            if self._step(outcome) and outcome is not None and outcome.number is not None:
                p = self.session.plan.partition(outcome.number) if self.session else None
                if p is not None:
                    self.sector_map.move_to(p.start)

        self.push_screen(PartitionScreen(plan, gap=gap, start=cursor), done)

    def action_edit_partition(self) -> None:
        from diskplan.ui.dialogs import PartitionScreen

        s = self._plan_session()
        if s is None:
            return
        n = self._number_under_cursor()
        if n is None:
            self.notify("Put the cursor on a partition to change its type, name or flags.", timeout=4)
            return
        if s.plan.blocked():
            self.notify(s.plan.blocked(), severity="warning", timeout=6)
            return
        self.push_screen(PartitionScreen(s.plan, number=n), self._step)

    def action_new_label(self, then_propose: bool = False) -> None:
        from diskplan.ui.dialogs import LabelScreen

        s = self._plan_session()
        if s is None:
            return

        def done(outcome: Outcome | None) -> None:
            if self._step(outcome) and then_propose:
                self.call_after_refresh(self.action_new_partition)

        self.push_screen(LabelScreen(s.plan), done)

    # --- deleting, undo, redo, clear ------------------------------------------------------------------

    def action_delete(self) -> None:
        s = self._plan_session()
        if s is None:
            return
        item = self._under_cursor()
        p = item.partition if item is not None else None
        if p is None:
            self.notify("Put the cursor on a partition to delete it (or keep one marked for deletion).",
                        timeout=4)
            return
        self._step(s.plan.undelete(p.number) if p.state is State.DELETE else s.plan.delete(p.number))

    def action_undo(self) -> None:
        s = self._plan_session()
        if s is None:
            return
        what = s.undo()
        if what is None:
            self.notify("Nothing to undo.", timeout=2)
            return
        self._on_plan_changed()
        self._say(f"undone: {what}")

    def action_redo(self) -> None:
        s = self._plan_session()
        if s is None:
            return
        what = s.redo()
        if what is None:
            self.notify("Nothing to redo.", timeout=2)
            return
        self._on_plan_changed()
        self._say(f"redone: {what}")

    def action_repair(self) -> None:
        """Plan the repair the disk offers (a damaged GPT copy or a lost protective MBR): a pending change
        on its own, written by the commit like any other."""
        s = self._plan_session()
        if s is None:
            return
        plan = s.plan
        if plan.offer is None:
            self.notify("This disk has no repair to offer: its table passed diskplan's checks, or no good copy "
                        "is left to repair it from (press i for its findings).", title="Repair", timeout=6)
            return
        if plan.repairing:
            self.notify(f"The repair is already planned: {plan.offer.summary}. w writes it.", title="Repair",
                        timeout=6)
            return
        if self._step(s.plan.repair()):
            self.action_view("changes")

    def repair_hint(self) -> str:
        """One line about the repair the disk offers, while it is not planned ("" when none)."""
        plan = self.session.plan if self.session is not None else None
        if plan is None or plan.offer is None or plan.repairing:
            return ""
        return f"{plan.offer.reason}. R plans the repair: {plan.offer.summary}"

    def action_clear_plan(self) -> None:
        s = self._plan_session()
        if s is not None:
            self._step(s.plan.clear())

    # --- snapping ---------------------------------------------------------------------------------------

    def action_snap(self) -> None:
        from diskplan.ui.dialogs import SnapScreen

        s = self._plan_session()
        if s is None:
            return

        def done(choice: SnapChoice | None) -> None:
            if choice is not None and self.session is not None:
                target, grains, fix = choice
                self._step(self.session.plan.set_target(target, grains, fix=fix))

        self.push_screen(SnapScreen(s.plan), done)

    def action_fix_layout(self) -> None:
        s = self._plan_session()
        if s is not None:
            self._step(s.plan.fix_layout())

    def snap_text(self) -> str:
        """For the title bar: "snap optimal 1 MiB"."""
        if self.session is None:
            return ""
        plan = self.session.plan
        g = plan.grain
        from diskplan.model.units import human_bytes

        ss = plan.geometry.logical
        snap = f"snap {plan.target.value} {human_bytes(g.sectors * ss)}" if plan.target is not SnapTarget.NONE \
            else "snap none"
        judged = self.grain  # what findings judge: the device's grain, whatever the snapping target
        if judged is not None and judged != g:
            snap += f" · findings {human_bytes(judged.sectors * ss)}"
        return snap

    # --- moving and resizing with the keys --------------------------------------------------------------

    def _begin_keys(self, kind: DragKind) -> None:
        s = self._plan_session()
        if s is None:
            return
        n = self._number_under_cursor()
        if n is None:
            self.notify("Put the cursor on a proposed partition first (n proposes one).", timeout=4)
            return
        why = s.begin(n, kind, keyboard=True)
        if why:
            self.notify(why, title="Refused", severity="warning", timeout=8)
            return
        self.sector_map.select(n)
        self.refresh_bindings()
        self._follow_edge()
        self._drag_status()

    def action_move(self) -> None:
        self._begin_keys(DragKind.MOVE)

    def action_resize(self) -> None:
        self._begin_keys(DragKind.END)

    def action_nudge(self, steps: int) -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        preview = s.nudge(steps)
        if preview.refused:
            self.notify(preview.outcome.message, title="Refused", severity="warning", timeout=5)
            self._drag_status(note=preview.outcome.message)
            return
        self._show_preview(preview)
        self._follow_edge()
        self._drag_status()

    def action_other_edge(self) -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        s.switch_edge()
        self._follow_edge()
        self._drag_status()

    def action_drag_done(self) -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        outcome = s.finish()
        self.refresh_bindings()
        self._after_drag(outcome)

    def action_drag_cancel(self) -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        back = s.cancel()
        self.refresh_bindings()
        self.sector_map.set_marks(())
        if back is not None:
            self.sector_map.set_table(back.table, s.findings(back), self.grain)
        self._say("cancelled: nothing moved")

    def _follow_edge(self) -> None:
        """Keys: the cursor goes with the edge being moved, so it stays on screen."""
        s = self.session
        if s is None or s.drag is None:
            return
        p = s.drag.shown.partition(s.drag.number)
        if p is not None:
            self.sector_map.move_to(p.end if s.drag.kind is DragKind.END else p.start)

    def _show_preview(self, preview: Preview) -> None:
        if preview.changed:
            self.sector_map.patch_table(preview.outcome.plan.table, preview.changed)
        marks = requested_extent(preview.outcome.snap, self.sector_map.content.sectors if self.sector_map.content
                                 else 0)
        s = self.session
        if s is not None and s.drag is not None and not s.drag.keyboard and marks is not None:
            self.sector_map.set_marks((marks,))

    def _drag_status(self, note: str = "") -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        d = s.drag
        shown = d.shown.partition(d.number)
        width = self.query_one(StatusLine).size.width or self.size.width
        self.query_one(StatusLine).update(drag_text(d.kind, d.number, d.snap, shown, width, note))

    def _after_drag(self, outcome: Outcome | None) -> None:
        """The drag is recorded (or came to nothing): the list, the explanation and the panels follow."""
        smap = self.sector_map
        smap.set_marks(())
        if outcome is not None and smap.content is not None:
            self._list(smap.content)
            self._plan_panels()
            self._on_cursor(smap.cursor_lba, smap.cursor_item)
            self._say(outcome.message)
        else:
            self._on_cursor(smap.cursor_lba, smap.cursor_item)

    # --- moving and resizing with the mouse -----------------------------------------------------------

    def on_sector_map_map_mouse_down(self, event: SectorMap.MapMouseDown) -> None:
        s = self._plan_session()
        self._mouse_on_existing = None
        if s is None or event.button != 1:
            return
        content = self.sector_map.content
        if content is None:
            return
        hit = event.hit
        p = None
        for lba in (hit.lba, hit.last):
            item = content.item_at(lba)
            if item is not None and item.partition is not None and item.state is State.PROPOSED:
                p = item.partition
                break
            if item is not None and item.partition is not None and item.state is State.EXISTING:
                self._mouse_on_existing = item.partition.number
        if p is None:
            return
        has_start, has_end = hit.lba <= p.start <= hit.last, hit.lba <= p.end <= hit.last
        kind = DragKind.START if has_start and not has_end else DragKind.END if has_end and not has_start \
            else DragKind.MOVE
        edge = p.end if kind is DragKind.END else p.start
        if s.begin(p.number, kind, grab=hit.lba - edge):
            return
        self._mouse_on_existing = None
        self._mouse_moved = False
        self.sector_map.select(p.number)
        self._drag_status()

    def on_sector_map_map_mouse_move(self, event: SectorMap.MapMouseMove) -> None:
        s = self.session
        if s is None or s.drag is None or s.drag.keyboard:
            if self._mouse_on_existing is not None:
                n, self._mouse_on_existing = self._mouse_on_existing, None
                self.notify(f"partition {n} is on the disk and holds data: diskplan does not move or resize it "
                            "(x marks it for deletion; then plan in its space)", title="Refused",
                            severity="warning", timeout=6)
            return
        self._mouse_moved = True
        self._mouse_to(event.hit.lba)

    def _mouse_to(self, lba: int) -> None:
        s = self.session
        assert s is not None and s.drag is not None
        preview = s.drag_to(lba)
        self._show_preview(preview)
        self._drag_status(note=preview.outcome.message if preview.refused else "")

    def on_sector_map_map_mouse_up(self, event: SectorMap.MapMouseUp) -> None:
        self._mouse_on_existing = None
        s = self.session
        if s is None or s.drag is None or s.drag.keyboard:
            return
        if not self._mouse_moved:  # a click: nothing moves
            s.cancel()
            self._after_drag(None)
            return
        self._mouse_to(event.hit.lba)
        number = s.drag.number
        outcome = s.finish()
        p = s.plan.partition(number)
        if p is not None:  # the cursor goes with the partition (it was where the drag began)
            self.sector_map.move_to(min(max(event.hit.lba, p.start), p.end))
        self._after_drag(outcome)

    # --- plan files -------------------------------------------------------------------------------------

    def _default_plan_path(self) -> str:
        title = self.target.title if self.target else "plan"
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-") or "plan"
        return os.path.join(os.getcwd(), f"diskplan-{slug}.json")

    def _made_against(self, s: Session) -> str | None:
        """The fingerprint of the disk's table the plan starts from, which `diskplan apply` checks; None
        for a disk without a file or device (a demo shown from the model)."""
        from diskplan.backend.tableid import table_fingerprint

        if self.target is None or not self.target.path:
            return None
        return table_fingerprint(s.plan.base, self.target.path, s.plan.geometry, self.target.disk.filesystem)

    def action_save_plan(self, then: Callable[[], object] | None = None) -> None:
        """Save the plan as a JSON file; ``then``: what to do once it is saved (not when cancelled)."""
        from diskplan.model.planfile import PlanFileError, save_plan
        from diskplan.ui.dialogs import PathScreen

        s = self._plan_session()
        if s is None:
            return

        def save(path: str) -> str | None:
            try:
                text = save_plan(s.plan, self._made_against(s))
            except PlanFileError as exc:
                return str(exc)
            try:
                with open(os.path.expanduser(path), "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as exc:
                return f"cannot write {path}: {exc.strerror or exc}"
            self._saved_plan = s.plan
            self.notify(f"plan saved to {path}", timeout=4)
            return None

        def saved(path: str | None) -> None:
            if path is not None and then is not None:
                then()

        self.push_screen(PathScreen("Save plan", "The wanted table as a JSON plan file (diskplan apply and "
                                    "diskplan export read it).", self._default_plan_path(), save), saved)

    def action_load_plan(self) -> None:
        from diskplan.model.planfile import PlanFileError, load_into
        from diskplan.ui.dialogs import PathScreen

        s = self._plan_session()
        if s is None:
            return

        def load(path: str) -> str | None:
            from diskplan.backend.planread import read_plan_text

            try:  # bounded, and never a wait on a FIFO
                text = read_plan_text(os.path.expanduser(path))
            except OSError as exc:
                return f"cannot read {path}: {exc.strerror or exc}"
            except PlanFileError as exc:
                return str(exc)
            outcome = load_into(s.plan, text)
            if not outcome.ok:
                return outcome.message
            self._step(outcome)
            return None

        self.keep_or_lose("loading a plan", lambda: self.push_screen(PathScreen(
            "Load plan", "A JSON plan or an `sfdisk --dump` text; it becomes the plan (undo takes it back).",
            self._default_plan_path(), load)))

    # --- writing ----------------------------------------------------------------------------------------

    def action_write(self) -> None:
        from diskplan.ui.commit_screen import CommitScreen

        s = self._plan_session()
        if s is None or self.target is None:
            return
        why = self._why_not_writable()
        if why:
            self.notify(why[0].upper() + why[1:] + (f" ({self.target.note})" if self.target.note else ""),
                        title="Cannot write", severity="warning", timeout=8)
            return
        if not s.plan.dirty:
            self.notify("Nothing to write: the plan is the table on the disk.", timeout=4)
            return
        geom = s.plan.geometry
        screen = CommitScreen(self.target.path, s.plan.writes(), self.host or default_host(),
                              sector_size=geom.logical, sectors=geom.sectors, model=unnested(geom.model),
                              repair=s.plan.pending_repair)
        self.push_confirmation(screen, self._written)

    def _written(self, outcome: WriteOutcome | None) -> None:
        from diskplan.backend.write import Verdict

        if outcome is None or self.target is None:
            return
        if outcome.verdict is Verdict.WRITTEN:
            self._say(f"{outcome.message}; reading the disk again...")
            self._reread(self.target.path)
        elif outcome.verdict is Verdict.FAILED:
            self.notify(outcome.message + (f" - {outcome.restore_command}" if outcome.restore_command else ""),
                        title="The write failed", severity="error", timeout=15)

    @work(thread=True, exclusive=True, group="load")
    def _reread(self, path: str) -> None:
        from diskplan.backend.reader import ReadError, read

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
        self.session = Session(old.geometry, disk.table, old.target,
                               tuple(f for f in disk.findings if f.partition is not None), offer=disk.repair)
        self._facts()
        self._on_plan_changed()
        self._say(f"read back: {self.target.path} holds the new table")
