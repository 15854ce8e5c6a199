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
        return self._travel(self._past, self._future)

    def redo(self) -> str | None:
        return self._travel(self._future, self._past)

    def _travel(self, source: list[tuple[Plan, str]], other: list[tuple[Plan, str]]) -> str | None:
        """Undo and redo are one move between the two stacks: the plan on top of ``source`` becomes the
        present, and the present goes onto ``other`` with the same message, so that the step can be taken
        back the other way."""
        if not source:
            return None
        plan, message = source.pop()
        other.append((self.present, message))
        self.present = plan
        return message
