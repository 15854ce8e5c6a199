"""Editing one partition of a plan in place: delete (an existing one is marked), undelete, and its type, name and
flags."""

from __future__ import annotations

from typing import Self

from diskplan.model import labels
from diskplan.model.extent import Partition, Role, State
from diskplan.model.labels import LabelError
from diskplan.model.plan.outcome import Outcome
from diskplan.model.plan.room import PlanRoom
from diskplan.model.plan.state import LOGICAL, TOP
from diskplan.model.value import replace


class Editing(PlanRoom):
    """``delete``, ``undelete``, ``set_type``, ``set_name``, ``set_flags`` (a base of ``Plan``)."""

    def delete(self, number: int) -> Outcome[Self]:
        """A proposed partition goes away; an existing one is marked for deletion (its space becomes free).
        Deleting an extended partition deletes the logical partitions inside it. Deleting a logical
        partition renumbers the ones after it, as libparted will (msdos numbers them 5, 6, … in the order
        of their EBR chain): logical 6 becomes 5."""
        why = self.blocked()
        p = self.partition(number)
        if why or p is None:
            return self._refuse(why or f"there is no partition {number}", number)
        doomed = [p, *self._logicals()] if p.role is Role.EXTENDED else [p]
        ids = {id(q) for q in doomed}
        later = {id(q) for q in self._logicals() if q.number > number} if p.role is Role.LOGICAL else set()
        parts = []
        for q in self.table.partitions:
            if id(q) in later:
                parts.append(replace(q, number=q.number - 1))
            elif id(q) not in ids:
                parts.append(q)
            elif q.state is State.EXISTING:  # a planned data move is dropped: it is deleted where it is on disk
                parts.append(replace(self._on_disk(q), state=State.DELETE))
        plan = self._rebuilt(self.table.with_partitions(tuple(parts)))
        verb = "marked for deletion" if p.state is State.EXISTING else "removed"
        n = len(doomed) - 1
        extra = f" with {n} logical partition{'s' if n > 1 else ''}" if n else ""
        shifted = f"; logical partitions {number + 1}.. are now {number}.. (the EBR chain's order)" if later else ""
        return Outcome(self, plan, True, f"partition {number}{extra} {verb}{shifted}", None, number)

    def _on_disk(self, p: Partition) -> Partition:
        """An existing partition as it is on the disk (where a planned data move would take it from)."""
        if p.role is not Role.PRIMARY:
            return p
        q = self.base.by_number(p.number)
        return replace(p, start=q.start, end=q.end, extra=()) if q is not None and q.size == p.size else p

    def undelete(self, number: int) -> Outcome[Self]:
        """Take back the deletion mark of an existing partition, if its space is still free."""
        p = self.deleted(number)
        if p is None:
            return self._refuse(f"partition {number} is not marked for deletion", number)
        if self.fresh:
            return self._refuse("the new label replaces the whole table: clear the plan to get the disk's "
                                "table back", number)
        if number in self.where and p.role is not Role.LOGICAL:
            return self._refuse(f"number {number} is now used by a proposed partition", number)
        if p.role is Role.LOGICAL:
            if self.extended() is None:
                return self._refuse(f"logical partition {number} needs its extended partition back first", number)
            lane = self.lanes[LOGICAL]
        else:
            if self.table.label == "msdos" and len(self.lanes[TOP].parts) >= labels.MSDOS_PRIMARIES:
                return self._refuse("an msdos table holds 4 primary partitions", number)
            if p.role is Role.EXTENDED and self.extended() is not None:
                return self._refuse("an msdos table has only one extended partition", number)
            lane = self.lanes[TOP]
        if not lane.fits(p.extent):
            other = next((q for q in lane.parts if q.extent.overlaps(p.extent)), None)
            what = f"partition {other.number}" if other else "the EBR of a logical partition"
            return self._refuse(f"the space of partition {number} ({p.start}s..{p.end}s) is used by {what} now",
                                number)
        # A logical partition takes its number back; the ones renumbered when it was deleted move up again.
        after: set[int] = set()
        if p.role is Role.LOGICAL:  # without a gap in the numbers: 5, 6, … as the chain has them
            number = min(number, labels.FIRST_LOGICAL + len(self._logicals()))
            after = {id(q) for q in self._logicals() if q.number >= number}
        parts = tuple(replace(q, state=State.EXISTING, number=number) if q is p else
                      replace(q, number=q.number + 1) if id(q) in after else q for q in self.table.partitions)
        return Outcome(self, self._rebuilt(self.table.with_partitions(parts)), True,
                       f"partition {number} kept", None, number)

    def _edit(self, number: int, **changes: object) -> Outcome[Self]:
        why = self.blocked()
        p = self.partition(number)
        if why or p is None:
            return self._refuse(why or f"there is no partition {number}", number)
        new = replace(p, **changes)  # keyword fields named by the three setters below
        if new == p:
            return Outcome(self, self, True, f"partition {number} unchanged", None, number)
        what = ", ".join(f"{k} {v!r}" for k, v in changes.items())
        return Outcome(self, self._replaced(p, new), True, f"partition {number}: {what}", None, number)

    def set_type(self, number: int, ptype: str) -> Outcome[Self]:
        p = self.partition(number)
        label = self.table.label
        if p is None or label not in labels.WRITTEN_LABELS:
            return self._edit(number)
        try:
            code = labels.type_code(label, ptype)
        except LabelError as exc:
            return self._refuse(str(exc), number)
        if labels.is_extended_type(code) != (p.role is Role.EXTENDED):
            return self._refuse("a partition cannot become extended, nor an extended one something else: "
                                "delete it and create another", number)
        # Flags libparted reported for the old type (esp, lvm, ...) would contradict the new one.
        return self._edit(number, type=code, flags=labels.plan_flags(label, p.flags))

    def set_name(self, number: int, name: str) -> Outcome[Self]:
        try:
            name = labels.check_name(self.table.label or "", name)
        except LabelError as exc:
            return self._refuse(str(exc), number)
        return self._edit(number, name=name)

    def set_flags(self, number: int, flags: tuple[str, ...]) -> Outcome[Self]:
        """Set the attribute flags (``labels.attribute_flags(label)`` lists them). On an existing partition,
        flags libparted reports for its type (esp, lvm, ...) are kept as they are."""
        p = self.partition(number)
        label = self.table.label or ""
        try:
            wanted = labels.check_flags(label, flags)
        except LabelError as exc:
            return self._refuse(str(exc), number)
        if p is None:
            return self._edit(number)
        keep = tuple(f for f in p.flags if f not in labels.attribute_flags(label))
        return self._edit(number, flags=tuple(sorted({*keep, *wanted})))

    def toggle_flag(self, number: int, flag: str) -> Outcome[Self]:
        p = self.partition(number)
        if p is None:
            return self._edit(number)
        current = set(labels.plan_flags(self.table.label or "", p.flags))
        return self.set_flags(number, tuple(current ^ {flag}))
