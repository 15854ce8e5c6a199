"""What every planning mixin of ``PlannerApp`` builds on: what it needs from the app (``PlannerView``, public
names only), recording a step (a refusal is a notification), what is under the cursor, and the changes a
quit or an open would lose. The mixins: plan_actions.py (propose, edit, delete, undo, snapping),
move_actions.py (moves and resizes by keys and mouse, realign), plan_files.py (save and load a plan) and
write_actions.py (the commit, data moves, resuming one)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from diskplan.model.extent import State
from diskplan.model.plan.plan import Outcome, Plan
from diskplan.ui.cells import Item
from diskplan.ui.planning import Preview, Session

# Dialogs, plan files and the commit are imported when first used: start-up (to the first frame) needs none.
if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from diskplan.backend.write.steps import Host
    from diskplan.model.grain import Grain
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


if TYPE_CHECKING:  # the mixins' self: a Textual app (notify, push_screen, ...) that is a PlannerView

    class _Base(App[int], PlannerView):
        # What one of the planning mixins asks of another (all are mixed into PlannerApp by PlanActions).
        def action_save_plan(self, then: Callable[[], object] | None = None) -> None: ...

        def action_write(self) -> None: ...

        def action_drag_done(self) -> None: ...

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


class PlanBase(_Base):
    """The steps' shared beginning and end (a base of every planning mixin)."""

    _saved_plan: Plan | None = None  # the plan as last saved (Ctrl+S): quitting does not lose it

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

    def _at_partition(self, hint: str) -> tuple[Session, int] | None:
        """The session (a keyboard drag recorded first) and the number of the live partition under the cursor,
        for an action on one partition; None when no disk is open, or, with ``hint`` said, when the cursor is
        on no partition."""
        s = self._plan_session()
        if s is None:
            return None
        n = self._number_under_cursor()
        if n is None:
            self.notify(hint, timeout=4)
            return None
        return s, n

    def _dragging(self) -> Session | None:
        """The session while a drag (by keys or by mouse) is under way, else None: what every drag step,
        and ending one, starts from."""
        s = self.session
        return s if s is not None and s.drag is not None else None

    def _plan_session(self) -> Session | None:
        """The session, after ending a keyboard drag (any other action first records it)."""
        s = self.session
        if s is not None and s.drag is not None:
            self.action_drag_done()
        return s
