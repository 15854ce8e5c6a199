"""Everything the planner does to the plan: propose, move and resize (mouse and keys), delete, undo and
redo, snapping, plan files, and the commit. A mixin of ``PlannerApp`` (app.py declares the key bindings and
shows what comes back); what it needs from the app is ``PlannerView``, public names only.

The rule for speed: a drag step touches the map through ``SectorMap.patch_table`` (the rows where an
edge was or is) and the status line, nothing else; the partition list, the explanation and the
changes panel follow when the drag ends.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from textual import work

from diskplan.model.extent import State
from diskplan.model.plan.plan import Outcome, Plan
from diskplan.model.units import human_bytes
from diskplan.model.value import replace
from diskplan.ui.cells import Item
from diskplan.ui.planning import DragKind, Preview, Session
from diskplan.ui.target import why_not_writable

# Dialogs, plan files and the commit are imported when first used: start-up (to the first frame) needs none.
if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from diskplan.backend.move.engine import MoveOutcome
    from diskplan.backend.write.steps import Host, WriteOutcome
    from diskplan.model.grain import Grain
    from diskplan.model.plan.fsresize import Limits
    from diskplan.ui.dialogs import SnapChoice
    from diskplan.ui.sectormap import SectorMap
    from diskplan.ui.target import Target


class PlannerView(Protocol):
    """What planning needs from the app besides Textual's ``App`` (notify, push_screen, ...): the open disk
    and its session, the map, and ways to show what a step did."""

    session: Session | None
    target: Target | None
    grain: Grain | None  # what findings judge
    host: Host | None  # who uses a disk; None: discovery.inuse
    served: bool  # served to browsers (diskplan serve): no device, no file of the server's is opened

    @property
    def sector_map(self) -> SectorMap: ...

    def show_plan(self) -> None:
        """The present plan changed (a step, undo, redo): map, list, legend, changes, title."""

    def show_preview(self, preview: Preview) -> None:
        """One drag step on the map."""

    def show_drag(self, note: str = "") -> None:
        """The drag in the status line."""

    def drag_ended(self, outcome: Outcome | None) -> None:
        """The drag is recorded (or came to nothing): the list, the explanation and the panels follow."""

    def say(self, text: str) -> None:
        """A line in the status bar until the cursor moves."""

    def reread(self, path: str) -> object:
        """Read the disk again after a write; the plan starts again from it."""

    def action_view(self, name: str) -> None: ...

    def push_confirmation(self, screen: Screen[Any], callback: Callable[[Any], None]) -> None:
        """A screen asking for consent, which nothing may cover."""


if TYPE_CHECKING:  # the mixin's self: a Textual app (notify, push_screen, ...) that is a PlannerView

    class _Base(App[int], PlannerView): ...

else:
    _Base = object


def default_host() -> Host:
    from diskplan.backend.raw import kernelparts
    from diskplan.backend.write.steps import Host
    from diskplan.discovery import inuse

    return Host(users=inuse.find_users, kernel_partitions=kernelparts.kernel_list)


def unnested(model: str) -> str:
    """A model for the write dialog, which puts it in parentheses: "1 TB NVMe SSD (demo)" reads
    "1 TB NVMe SSD, demo" there, not "(1 TB NVMe SSD (demo))"."""
    return re.sub(r"\s*\(([^()]*)\)$", r", \1", model)


class PlanActions(_Base):
    _saved_plan: Plan | None = None  # the plan as last saved (Ctrl+S): quitting does not lose it
    _plan_dir_used = ""  # the folder of the plan last saved or loaded in this run
    move_journal: str = ""  # an unfinished data move recorded for the open disk: M (resume) finishes it
    _rate: tuple[str, tuple[float, str]] | None = None  # (path, its assumed copy rate)
    _mouse_on_existing: int | None = None  # a press on a partition on the disk
    _mouse_refusal = ""  # why the partition pressed on cannot be dragged: said once the mouse moves
    _mouse_moved = False

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

        self.push_confirmation(UnsavedScreen(what, n, can_save=not self.served), answer)

    # --- steps -----------------------------------------------------------------------------------------

    def _step(self, outcome: Outcome | None, *, say: bool = True) -> bool:
        """Record a step; a refusal is a notification with its reason and the plan stays as it was."""
        if outcome is None or self.session is None:
            return False
        if not outcome.ok:
            self.notify(outcome.message, title="Refused", severity="warning", timeout=8)
            return False
        recorded = self.session.apply(outcome)
        if recorded:
            self.show_plan()
        if say:
            self.say(outcome.message)
        return recorded

    def _record(self, outcome: Outcome | None) -> None:
        """``_step`` as a screen's callback, which returns nothing."""
        self._step(outcome)

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
            if plan.wanted.label is not None:  # on a blank disk the label dialog says it (a toast would outlive it)
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
        self.push_screen(PartitionScreen(s.plan, number=n), self._record)

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
        self.show_plan()
        self.say(f"undone: {what}")

    def action_redo(self) -> None:
        s = self._plan_session()
        if s is None:
            return
        what = s.redo()
        if what is None:
            self.notify("Nothing to redo.", timeout=2)
            return
        self.show_plan()
        self.say(f"redone: {what}")

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

    # --- moving and resizing with the keys --------------------------------------------------------------

    def _begin_keys(self, kind: DragKind) -> None:
        s = self._plan_session()
        if s is None:
            return
        n = self._number_under_cursor()
        if n is None:
            self.notify("Put the cursor on a partition first (n proposes one).", timeout=4)
            return
        p = s.plan.partition(n)
        data = p is not None and p.state is State.EXISTING
        why = s.begin(n, kind, keyboard=True, data=data)
        if why:
            self.notify(why, title="Refused", severity="warning", timeout=8)
            return
        if data and p is not None and kind is DragKind.MOVE:
            self.notify(self._data_warning(p.number, p.size), title="Moving a partition that holds data",
                        severity="warning", timeout=10)
        elif data and p is not None:
            number = p.number

            def warn() -> None:  # once measured: a content that cannot be resized is refused instead
                if self.session is s and s.drag is not None:
                    self.notify(self._resize_warning(number), title="Resizing a partition that holds data",
                                severity="warning", timeout=10)

            self.measure([n], warn)
        self.sector_map.select(n)
        self.refresh_bindings()
        self._follow_edge()
        self.show_drag()

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
            self.show_drag(note=preview.outcome.message)
            return
        self.show_preview(preview)
        self._follow_edge()
        self.show_drag()

    def _data_warning(self, number: int, sectors: int) -> str:
        ss = self.session.plan.geometry.logical if self.session else 512
        return (f"Partition {number} holds data: moving it plans a data move ({human_bytes(sectors * ss)} copied "
                "when written, journalled and resumable; the partition must not be mounted). Enter plans it, "
                "Esc cancels.")

    def _resize_warning(self, number: int) -> str:
        return (f"Partition {number} holds data: resizing it plans a resize of its filesystem with the "
                "filesystem's own tool (a shrink stops at the smallest size the tool reports; the start edge "
                "moves the data too; the partition must not be mounted). Enter plans it, Esc cancels.")

    def action_realign(self) -> None:
        """A: the existing partition under the cursor goes to the nearest grain boundary the free space allows
        (a data move, size unchanged); off any partition, every misaligned existing partition that has room.
        Where that needs a shrink (no room, or a size off the physical block), the filesystem is measured
        first, off the UI thread, and the realign follows."""
        s = self._plan_session()
        if s is None:
            return
        n = self._number_under_cursor()
        plan = s.plan
        wants = [q.number for q in plan.live if (n is None or q.number == n) and plan.realign_wants_limits(q.number)
                 and q.number not in s.limits]

        def realign() -> None:
            if self.session is not s or s.plan is not plan:  # the disk or the plan changed meanwhile
                self.say("the plan changed while the filesystems were measured: A again realigns")
                return
            self._step(plan.realign(n, s.limits.get(n)) if n is not None else plan.realign_all(s.limits))

        if wants and self.target is not None and self.target.path:
            self.say(f"measuring how far partition{'s' if len(wants) > 1 else ''} {', '.join(map(str, wants))} "
                     "can shrink...")
            self.measure(wants, realign)
        else:
            realign()

    def measure(self, numbers: list[int], then: Callable[[], None] | None = None) -> None:
        """Find out what the content of existing partitions ``numbers`` allows (backend.move.resize.content_limits:
        blkid, the tool's minimum), in a worker: the tools may take a moment and the model stays pure.
        ``then``: called on the UI thread once all are known."""
        from diskplan.model.plan.fsresize import Limits

        s = self.session
        if s is None:
            return
        ss = s.plan.geometry.logical
        path = self.target.path if self.target is not None else ""
        todo = [(n, q.start, q.size) for n in numbers if n not in s.limits
                and (q := s.plan.base.by_number(n)) is not None]
        if not path:  # a demo shown from the model: nothing on a disk to measure
            for n, _, _ in todo:
                self._measured(s, n, Limits("", False, False, None, "this disk is shown from the model: there is "
                                            "no filesystem to measure"))
            todo = []
        if not todo:
            if then is not None:
                then()
            return
        self._measure_worker(s, path, todo, ss, then)

    @work(thread=True, group="measure")
    def _measure_worker(self, session: Session, path: str, todo: list[tuple[int, int, int]], ss: int,
                        then: Callable[[], None] | None) -> None:
        from diskplan.backend.move.resize import content_limits
        from diskplan.model.plan.fsresize import Limits

        for n, start, size in todo:
            try:
                found = content_limits(path, start, size, ss)
            except Exception as exc:  # said as a reason, never a traceback
                found = Limits("", False, False, None, " ".join(str(exc).split()) or type(exc).__name__)
            self.call_from_thread(self._measured, session, n, found)
        if then is not None:
            self.call_from_thread(then)

    def _measured(self, session: Session, number: int, limits: Limits) -> None:
        if session is not self.session:
            return
        if session.measured(number, limits):
            d = session.drag
            if d is not None and d.keyboard and not limits.grow and not limits.shrink:
                session.cancel()
                self.refresh_bindings()
                self.notify(f"partition {number} cannot be resized: {limits.why}", title="Refused",
                            severity="warning", timeout=8)
                self.drag_ended(None)
                return
            self.show_drag()

    def move_rate(self) -> tuple[float, str]:
        """The bytes/s a data move on the open disk is estimated at (backend.move.devspeed), once per disk."""
        from diskplan.backend.move.devspeed import UNKNOWN, assumed_rate

        path = self.target.path if self.target is not None else ""
        if self._rate is None or self._rate[0] != path:
            self._rate = (path, assumed_rate(path) if path else (UNKNOWN, "a disk of unknown speed"))
        return self._rate[1]

    def action_other_edge(self) -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        s.switch_edge()
        self._follow_edge()
        self.show_drag()

    def action_drag_done(self) -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        outcome = s.finish()
        self.refresh_bindings()
        self.drag_ended(outcome)

    def action_drag_cancel(self) -> None:
        s = self.session
        if s is None or s.drag is None:
            return
        back = s.cancel()
        self.refresh_bindings()
        self.sector_map.set_marks(())
        if back is not None:
            self.sector_map.set_table(back.table, s.findings(back), self.grain)
        self.say("cancelled: nothing moved")

    def _follow_edge(self) -> None:
        """Keys: the cursor goes with the edge being moved, so it stays on screen."""
        s = self.session
        if s is None or s.drag is None:
            return
        p = s.drag.shown.partition(s.drag.number)
        if p is not None:
            self.sector_map.move_to(p.end if s.drag.kind is DragKind.END else p.start)

    # --- moving and resizing with the mouse -----------------------------------------------------------

    def on_sector_map_map_mouse_down(self, event: SectorMap.MapMouseDown) -> None:
        s = self._plan_session()
        self._mouse_on_existing = None
        self._mouse_refusal = ""
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
        data = p is None and self._mouse_on_existing is not None
        if data:  # a partition that holds data: its data moves with it, its filesystem is resized with its edges
            p = s.plan.partition(self._mouse_on_existing or 0)
        if p is None:
            return
        has_start, has_end = hit.lba <= p.start <= hit.last, hit.lba <= p.end <= hit.last
        kind = DragKind.START if has_start and not has_end else DragKind.END if has_end and not has_start \
            else DragKind.MOVE
        edge = p.end if kind is DragKind.END else p.start
        why = s.begin(p.number, kind, grab=hit.lba - edge, data=data)
        if why:
            self._mouse_refusal = why
            return
        if data and kind is not DragKind.MOVE:
            self.measure([p.number])  # what a shrink may reach: known within a moment, shown in the status line
        self._mouse_on_existing = None
        self._mouse_moved = False
        self.sector_map.select(p.number)
        self.show_drag()

    def on_sector_map_map_mouse_move(self, event: SectorMap.MapMouseMove) -> None:
        s = self.session
        if s is None or s.drag is None or s.drag.keyboard:
            if self._mouse_refusal:
                why, self._mouse_refusal = self._mouse_refusal, ""
                self.notify(why, title="Refused", severity="warning", timeout=6)
            return
        self._mouse_moved = True
        self._mouse_to(event.hit.lba)

    def _mouse_to(self, lba: int) -> Preview:
        s = self.session
        assert s is not None and s.drag is not None
        preview = s.drag_to(lba)
        self.show_preview(preview)
        self.show_drag(note=preview.outcome.message if preview.refused else "")
        return preview

    def on_sector_map_map_mouse_up(self, event: SectorMap.MapMouseUp) -> None:
        self._mouse_on_existing = None
        self._mouse_refusal = ""
        s = self.session
        if s is None or s.drag is None or s.drag.keyboard:
            return
        if not self._mouse_moved:  # a click: nothing moves
            s.cancel()
            self.drag_ended(None)
            return
        last = self._mouse_to(event.hit.lba)
        number = s.drag.number
        data = s.drag.data
        outcome = s.finish()
        if outcome is None and last.refused:  # dropped where it cannot go: say why
            self.notify(last.outcome.message, title="Refused", severity="warning", timeout=8)
        moved = outcome.plan.partition(number) if data and outcome is not None and outcome.changed else None
        if moved is not None:
            warning = self._data_warning(number, moved.size) if moved.resized_from is None else \
                self._resize_warning(number)
            self.notify(warning.replace(" Enter plans it, Esc cancels.", " u undoes it."), severity="warning",
                        title="A data move is planned" if moved.resized_from is None else "A resize is planned",
                        timeout=10)
        p = s.plan.partition(number)
        if p is not None:  # the cursor goes with the partition (it was where the drag began)
            self.sector_map.move_to(min(max(event.hit.lba, p.start), p.end))
        self.drag_ended(outcome)

    # --- plan files -------------------------------------------------------------------------------------

    def _plan_folder(self) -> tuple[str, str]:
        """Where Ctrl+S and Ctrl+O start, and what that folder is: the one last used (this run, or remembered
        in the settings), else diskplan's plans folder. Never the working directory, which may be a checkout
        or a read-only medium."""
        from diskplan.ui.settings import plans_dir

        settings = getattr(self, "settings", None)
        last = self._plan_dir_used or (settings.plan_dir if settings is not None else None)
        if last and os.path.isdir(last):
            return last, "the folder last used"
        return plans_dir(os.environ), "diskplan's plans folder, $XDG_DATA_HOME/diskplan/plans"

    def _default_plan_path(self) -> str:
        title = self.target.title if self.target else "plan"
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-") or "plan"
        return os.path.join(self._plan_folder()[0], f"diskplan-{slug}.json")

    def _plan_prompt(self, what: str) -> str:
        folder, why = self._plan_folder()
        return f"{what}\nFolder: {folder} ({why})"

    def _used_plan_folder(self, path: str) -> None:
        """Remember the folder of a plan saved or loaded: the next Ctrl+S or Ctrl+O starts there."""
        folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
        self._plan_dir_used = folder
        settings = getattr(self, "settings", None)
        if settings is not None:
            settings.remember("plan_dir", folder)  # best effort: a folder not remembered is no error

    def _made_against(self, s: Session) -> str | None:
        """The fingerprint of the disk's table the plan starts from, which `diskplan apply` checks; None
        for a disk without a file or device (a demo shown from the model)."""
        from diskplan.backend.raw.tableid import table_fingerprint

        if self.target is None or not self.target.path:
            return None
        return table_fingerprint(s.plan.base, self.target.path, s.plan.geometry, self.target.disk.filesystem)

    def _guids(self) -> dict[int, str]:
        """The GPT unique GUIDs of the open disk's partitions (a saved plan's ``keeps`` name them)."""
        from diskplan.backend.raw.gptattrs import partition_guids

        if self.target is None or not self.target.path:
            return {}
        try:
            return partition_guids(replace(self.target.disk, source=self.target.path))
        except OSError:
            return {}

    def action_save_plan(self, then: Callable[[], object] | None = None) -> None:
        """Save the plan as a JSON file; ``then``: what to do once it is saved (not when cancelled)."""
        from diskplan.model.formats.planfile import PlanFileError, save_plan
        from diskplan.ui.dialogs import PathScreen

        s = self._plan_session()
        if s is None or self.served:  # no file of the server's is written
            return

        def save(path: str) -> str | None:
            try:
                text = save_plan(s.plan, self._made_against(s), self._guids())
            except PlanFileError as exc:
                return str(exc)
            full = os.path.expanduser(path)
            try:
                if os.path.dirname(os.path.abspath(full)) == self._plan_folder()[0]:
                    os.makedirs(os.path.dirname(os.path.abspath(full)), mode=0o700, exist_ok=True)
                with open(full, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as exc:
                return f"cannot write {path}: {exc.strerror or exc}"
            self._used_plan_folder(full)
            self._saved_plan = s.plan
            self.notify(f"plan saved to {path}", timeout=4)
            return None

        def saved(path: str | None) -> None:
            if path is not None and then is not None:
                then()

        self.push_screen(PathScreen("Save plan", self._plan_prompt(
            "The wanted table as a JSON plan file (diskplan apply and diskplan export read it)."),
            self._default_plan_path(), save), saved)

    def action_load_plan(self) -> None:
        from diskplan.model.formats.planfile import PlanFileError, load_into
        from diskplan.ui.dialogs import PathScreen

        s = self._plan_session()
        if s is None or self.served:  # no file of the server's is read
            return

        def load(path: str) -> str | None:
            from diskplan.backend.read.planread import read_plan_text

            try:  # bounded, and never a wait on a FIFO
                text = read_plan_text(os.path.expanduser(path))
            except OSError as exc:
                return f"cannot read {path}: {exc.strerror or exc}"
            except PlanFileError as exc:
                return str(exc)
            outcome = load_into(s.plan, text)
            if not outcome.ok:
                return outcome.message
            self._used_plan_folder(path)
            self._step(outcome)
            return None

        self.keep_or_lose("loading a plan", lambda: self.push_screen(PathScreen(
            "Load plan", self._plan_prompt(
                "A JSON plan or an `sfdisk --dump` text; it becomes the plan (undo takes it back)."),
            self._default_plan_path(), load)))

    # --- writing ----------------------------------------------------------------------------------------

    def action_write(self) -> None:
        from diskplan.ui.commit_screen import CommitScreen

        s = self._plan_session()
        if s is None or self.target is None:
            return
        why = why_not_writable(self.target)
        if why:
            self.notify(why[0].upper() + why[1:] + (f" ({self.target.note})" if self.target.note else ""),
                        title="Cannot write", severity="warning", timeout=8)
            return
        if not s.plan.dirty:
            self.notify("Nothing to write: the plan is the table on the disk.", timeout=4)
            return
        geom = s.plan.geometry
        writes = s.plan.writes()
        if writes.move:
            self._write_moves(s.plan)
            return
        screen = CommitScreen(self.target.path, s.plan.writes(), self.host or default_host(),
                              sector_size=geom.logical, sectors=geom.sectors, model=unnested(geom.model),
                              repair=s.plan.pending_repair)
        self.push_confirmation(screen, self._written)

    def _write_moves(self, plan: Plan) -> None:
        """A plan of data moves: backend.move.engine runs them one at a time (ui.move_screen). Table changes are
        written by the commit first, on their own: the engine moves a partition against the table on disk."""
        from diskplan.ui.move_screen import MoveScreen

        assert self.target is not None
        if plan.problems():
            self.notify(plan.problems()[0], title="Cannot write", severity="warning", timeout=10)
            return
        screen = MoveScreen(self.target.path, plan.writes(), self.host or default_host(),
                            sector_size=plan.geometry.logical, model=unnested(plan.geometry.model))
        self.push_confirmation(screen, self._moved)

    def offer_resume(self) -> bool:
        """Whether the open disk has an unfinished data move (its journal, backend.move.movejournal); if so, say so
        once and offer M. The footer follows."""
        from diskplan.backend.move.movejournal import unfinished
        from diskplan.backend.write.steps import identity

        path = self.target.path if self.target is not None else ""
        found = ""
        if path:
            try:
                found = next(iter(unfinished(path, identity(path).size)), "")
            except OSError:
                found = ""
        changed = found != self.move_journal
        self.move_journal = found
        if changed:
            self.refresh_bindings()
        if found:
            command = "" if self.served else " (or `diskplan resume`)"  # a browser runs no command
            self.notify(f"A data move on {path} was interrupted (journal {found}): the partition is half-moved "
                        f"and must not be mounted. M finishes the move{command}.",
                        title="Unfinished move", severity="warning", timeout=15)
        return bool(found)

    def action_resume_move(self) -> None:
        from diskplan.ui.move_screen import MoveScreen

        s = self._plan_session()
        if s is None or self.target is None or not self.target.path:
            return
        if not self.move_journal:
            self.notify("No unfinished move is recorded for this disk.", title="Resume", timeout=4)
            return
        screen = MoveScreen(self.target.path, None, self.host or default_host(), sector_size=s.plan.geometry.logical,
                            model=unnested(s.plan.geometry.model))
        self.push_confirmation(screen, self._moved)

    def _moved(self, outcome: MoveOutcome | None) -> None:
        from diskplan.backend.write.steps import Verdict

        if outcome is None or self.target is None:
            return
        if outcome.verdict is Verdict.FAILED:
            resume = "M finishes it" if self.served else f"{outcome.resume_command} (or M)"
            self.notify(outcome.message + (f" - {resume}" if outcome.resumable else ""),
                        title="The move did not finish", severity="error", timeout=15)
        if outcome.verdict in (Verdict.WRITTEN, Verdict.FAILED):  # either may have changed the disk
            self.say(f"{outcome.message}; reading the disk again...")
            self.reread(self.target.path)

    def _written(self, outcome: WriteOutcome | None) -> None:
        from diskplan.backend.write.steps import Verdict

        if outcome is None or self.target is None:
            return
        if outcome.verdict is Verdict.WRITTEN:
            self.say(f"{outcome.message}; reading the disk again...")
            self.reread(self.target.path)
        elif outcome.verdict is Verdict.FAILED:
            self.notify(outcome.message + (f" - {outcome.restore_command}" if outcome.restore_command else ""),
                        title="The write failed", severity="error", timeout=15)
