"""A new partition in a plan: its number, its type, name and flags checked for the label, and its extent snapped
into the free space holding the start asked for."""

from __future__ import annotations

from typing import Self

from diskplan.model import labels
from diskplan.model.extent import Partition, Role, State
from diskplan.model.labels import LabelError
from diskplan.model.plan.outcome import Outcome, Refused, Snap, Span
from diskplan.model.plan.room import PlanRoom
from diskplan.model.plan.snap import (
    Gap,
    clamp,
    first_end,
    first_start,
    last_end,
    last_start,
    snap_end,
    snap_start,
)
from diskplan.model.plan.state import LOGICAL, TOP
from diskplan.model.units import human_bytes


class Proposing(PlanRoom):
    """``propose`` (a base of ``Plan``)."""

    def propose(
        self,
        start: int,
        size: int,
        *,
        ptype: str = "",
        name: str = "",
        flags: tuple[str, ...] = (),
        role: Role | None = None,
    ) -> Outcome[Self]:
        """A new partition of ``size`` sectors in the free space holding ``start``, snapped to the grain.

        On msdos a start inside the extended partition makes a logical partition; ``role=Role.EXTENDED``
        makes the extended one. The size may shrink to stay aligned and inside the free space, but only
        when the request as typed fitted there; otherwise the step is refused."""
        try:
            return self._propose(start, size, ptype, name, flags, role)
        except (Refused, LabelError) as exc:
            return self._refuse(str(exc))

    def _propose(self, start: int, size: int, ptype: str, name: str, flags: tuple[str, ...],
                 role: Role | None) -> Outcome[Self]:
        why = self.blocked()
        if why:
            raise Refused(why)
        if size < 1:
            raise Refused("a partition has at least one sector")
        label = self.table.label
        assert label is not None
        ext = self.extended()
        inside = ext is not None and ext.start <= start <= ext.end
        if role is None:
            role = Role.LOGICAL if inside else Role.PRIMARY
        if label != "msdos" and role is not Role.PRIMARY:
            raise Refused(f"{label} has no {role.value} partitions")
        if role is Role.LOGICAL and not inside:
            raise Refused("a logical partition goes inside the extended partition" +
                           ("" if ext else ": create an extended partition first"))
        if role is not Role.LOGICAL and inside:
            assert ext is not None
            raise Refused(f"sector {start} is inside extended partition {ext.number}: only logical "
                           "partitions go there")
        if role is Role.EXTENDED and ext is not None:
            raise Refused(f"an msdos table has one extended partition, and partition {ext.number} is it")
        code = labels.type_code(label, ptype) if ptype else labels.default_type(label, role)
        if labels.is_extended_type(code) != (role is Role.EXTENDED):
            raise Refused(f"type {code} is for extended partitions only" if role is not Role.EXTENDED
                           else f"an extended partition needs an extended type, not {code}")
        name = labels.check_name(label, name)
        flags = labels.check_flags(label, flags)
        number = self._free_number(role)
        lane = self.lanes[LOGICAL if role is Role.LOGICAL else TOP]
        gap, reason = lane.gap_at(start)
        if gap is None:
            raise Refused(reason)
        s, e, notes = self._fit_new(gap, start, size)
        new = Partition(number, s, e, code, name, flags, role, State.PROPOSED)
        plan = self._rebuilt(self.table.with_partitions((*self.table.partitions, new)))
        snap = Snap(Span(start, start + size - 1), new.extent, self.grain, self.geometry.logical, tuple(notes))
        what = "extended partition" if role is Role.EXTENDED else f"{role.value} partition" if label == "msdos" \
            else "partition"
        shown = human_bytes(new.size * self.geometry.logical)
        return Outcome(self, plan, True, f"new {what} {number} at {s}s..{e}s ({shown})", snap, number)

    def _fit_new(self, gap: Gap, start: int, size: int) -> tuple[int, int, list[str]]:
        g = self.grain
        notes: list[str] = []
        lo, hi = first_start(g, gap), last_start(g, gap.hi)
        if lo > hi:
            raise Refused(f"no {human_bytes(g.sectors * self.geometry.logical)}-aligned start is free between "
                           f"{gap.lo}s and {gap.hi}s")
        s = clamp(snap_start(g, start), lo, hi)
        end_lo, end_hi = first_end(g, s, gap.area_hi), last_end(g, gap)
        if end_lo > end_hi:
            raise Refused(f"the free space {gap.lo}s..{gap.hi}s has no room for an aligned partition at {s}s")
        e = max(snap_end(g, s + size - 1, gap.area_hi), end_lo)
        if e > end_hi:
            if start + size - 1 > gap.hi:
                free = max(gap.hi - start + 1, 0)
                raise Refused(f"{size} sectors do not fit: from {start}s the free space ends at {gap.hi}s "
                               f"({free} sectors, {human_bytes(free * self.geometry.logical)}; then {gap.after})")
            notes.append(f"end pulled in to {end_hi}s to stay aligned before {gap.after}")
            e = end_hi
        if s != start:
            notes.append(f"start snapped to the {g.sectors}-sector grain")
        return s, e, notes
