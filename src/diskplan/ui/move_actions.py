"""Moving and resizing partitions in the planner, with the keys (m, r, arrows, space, Enter, Esc) and the mouse
(a drag on the map), realigning them (A), and measuring what a partition's filesystem allows first.

The rule for speed: a drag step touches the map through ``SectorMap.patch_table`` (the rows where an
edge was or is) and the status line, nothing else; the partition list, the explanation and the
changes panel follow when the drag ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import work

from diskplan.model.extent import State
from diskplan.model.units import human_bytes
from diskplan.ui.plan_base import PlanBase
from diskplan.ui.planning import DragKind, Preview, Session

# Dialogs, plan files and the commit are imported when first used: start-up (to the first frame) needs none.
if TYPE_CHECKING:
    from diskplan.model.plan.fsresize import Limits
    from diskplan.ui.sectormap import SectorMap


class MoveActions(PlanBase):
    """Drags, nudges and realigns (a mixin of ``PlannerApp``, through ``PlanActions``)."""

    _rate: tuple[str, tuple[float, str]] | None = None  # (path, its assumed copy rate)
    _mouse_on_existing: int | None = None  # a press on a partition on the disk
    _mouse_refusal = ""  # why the partition pressed on cannot be dragged: said once the mouse moves
    _mouse_moved = False

    def _begin_keys(self, kind: DragKind) -> None:
        got = self._at_partition("Put the cursor on a partition first (n proposes one).")
        if got is None:
            return
        s, n = got
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
        s = self._dragging()
        if s is None:
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
        s = self._dragging()
        if s is None:
            return
        s.switch_edge()
        self._follow_edge()
        self.show_drag()

    def action_drag_done(self) -> None:
        s = self._dragging()
        if s is None:
            return
        outcome = s.finish()
        self.refresh_bindings()
        self.drag_ended(outcome)

    def action_drag_cancel(self) -> None:
        s = self._dragging()
        if s is None:
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
