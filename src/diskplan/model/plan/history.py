"""Undo and redo over whole plans (the planner keeps one ``History`` per open disk)."""

from __future__ import annotations

from diskplan.model.plan.plan import Outcome, Plan


class History:
    """Undo and redo over whole plans: undo gives back exactly the plan before the step."""

    def __init__(self, plan: Plan, limit: int = 10_000) -> None:
        self.present = plan
        self.limit = limit
        self._past: list[tuple[Plan, str]] = []
        self._future: list[tuple[Plan, str]] = []

    def apply(self, outcome: Outcome) -> bool:
        """Record a step taken from the present plan; False when it was refused or changed nothing."""
        if outcome.before is not self.present:
            raise ValueError("this outcome was computed from another plan than the present one")
        if not outcome.ok or not outcome.changed:
            return False
        self._past.append((self.present, outcome.message))
        if len(self._past) > self.limit:
            del self._past[0]
        self._future.clear()
        self.present = outcome.plan
        return True

    @property
    def can_undo(self) -> bool:
        return bool(self._past)

    @property
    def can_redo(self) -> bool:
        return bool(self._future)

    @property
    def undo_message(self) -> str:
        """What undo would take back ("" when nothing)."""
        return self._past[-1][1] if self._past else ""

    @property
    def redo_message(self) -> str:
        return self._future[-1][1] if self._future else ""

    def undo(self) -> str | None:
        """Go back one step; returns what was undone, or None when there was nothing."""
        if not self._past:
            return None
        plan, message = self._past.pop()
        self._future.append((self.present, message))
        self.present = plan
        return message

    def redo(self) -> str | None:
        if not self._future:
            return None
        plan, message = self._future.pop()
        self._past.append((self.present, message))
        self.present = plan
        return message
