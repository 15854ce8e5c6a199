"""Everything the planner does to the plan, put together for ``PlannerApp`` (app.py declares the key bindings
and shows what comes back): here proposing, editing, deleting, undo and redo, the repair and snapping; moves
and resizes in move_actions.py, plan files in plan_files.py, the commit in write_actions.py, what they share
in plan_base.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from diskplan.model.extent import State
from diskplan.model.plan.plan import Outcome
from diskplan.ui.move_actions import MoveActions
from diskplan.ui.plan_base import PlanBase
from diskplan.ui.plan_files import PlanFileActions
from diskplan.ui.planning import Session
from diskplan.ui.write_actions import WriteActions

# Dialogs, plan files and the commit are imported when first used: start-up (to the first frame) needs none.
if TYPE_CHECKING:
    from diskplan.ui.dialogs import SnapChoice


class PlanActions(MoveActions, PlanFileActions, WriteActions, PlanBase):
    """The planner's steps on the plan (a mixin of ``PlannerApp``)."""

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

        got = self._at_partition("Put the cursor on a partition to change its type, name or flags.")
        if got is None:
            return
        s, n = got
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
        self._undo_or_redo(Session.undo, "undo", "undone")

    def action_redo(self) -> None:
        self._undo_or_redo(Session.redo, "redo", "redone")

    def _undo_or_redo(self, step: Callable[[Session], str | None], verb: str, done: str) -> None:
        """Undo and redo are one action in two directions (``step``): the plan shown again and the step said,
        or that there is nothing to ``verb``."""
        s = self._plan_session()
        if s is None:
            return
        what = step(s)
        if what is None:
            self.notify(f"Nothing to {verb}.", timeout=2)
            return
        self.show_plan()
        self.say(f"{done}: {what}")

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
