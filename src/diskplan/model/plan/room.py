"""Where a partition of a plan may go: the gaps between its neighbours, the room after the extended partition
and the EBR chain's rules for logical partitions (model.plan.ebrmove); and what every step begins and ends with
(which partition it may change, its refusal, its outcome with the snapping said)."""

from __future__ import annotations

from operator import attrgetter
from typing import Self

from diskplan.model import labels
from diskplan.model.extent import Partition, Role, State
from diskplan.model.plan.ebrmove import extended_room, plan_logical
from diskplan.model.plan.outcome import Outcome, Refused, Snap, Span
from diskplan.model.plan.snap import (
    Gap,
)
from diskplan.model.plan.state import LOGICAL, TOP, PlanState
from diskplan.model.value import replace


class PlanRoom(PlanState):
    """Gap and EBR-chain queries, and the steps' shared beginning and end (a base of ``Plan``)."""

    def gap_of(self, number: int) -> Gap | None:
        """Where partition ``number`` could be moved or stretched to (a drag's limits)."""
        at = self.where.get(number)
        return None if at is None else self._gap(at[0], at[1])

    def _gap(self, lane_no: int, i: int) -> Gap:
        """Where partition ``i`` of lane ``lane_no`` may lie: between its neighbours, and for a logical
        partition that holds data before the next one's EBR as the chain has it (model.plan.ebrmove: every EBR
        sector is occupied; the lane alone keeps only the sector before each partition free)."""
        lane = self.lanes[lane_no]
        gap = lane.gap_of(i)
        if lane_no != LOGICAL or lane.at(i).state is not State.EXISTING:
            return gap
        if i + 1 < len(lane):
            return replace(gap, hi=min(gap.hi, self._ebr_at(i + 1) - 1))
        room = self._room_after_extended()
        if room <= gap.hi:
            return gap
        ext = self.extended()
        assert ext is not None
        # The last one may pass the extended partition's end: it grows into the free space after it, as
        # `diskplan move` and `resize` grow it (``_fit_extended``).
        return replace(gap, hi=room, area_hi=room, area_after=f"the free space after extended partition {ext.number}")

    def _room_after_extended(self) -> int:
        """The last sector the extended partition may grow to: the free space after it at the top level, as
        `diskplan move` has it (model.plan.ebrmove.extended_room); its end when it is not on the disk."""
        ext = self.extended()
        if ext is None:
            return -1
        base = self.base.by_number(ext.number)
        if ext.state is not State.EXISTING or base is None or base.role is not Role.EXTENDED or base.start != ext.start:
            return ext.end
        return extended_room(self.table, ext.extent)

    def _fit_extended(self) -> tuple[Self, str]:
        """The plan with its extended partition (on the disk) ending where its logical partitions need: never
        before its end on the disk, after the last logical partition's end (a data move or grow past it grows
        it first, as backend.move.engine does). What changed, said ("" when nothing)."""
        ext = self.extended()
        base = self.base.by_number(ext.number) if ext is not None else None
        if ext is None or base is None or ext.state is not State.EXISTING or base.role is not Role.EXTENDED:
            return self, ""
        end = max(base.end, *(q.end for q in self._logicals()))
        if end == ext.end:
            return self, ""
        said = (f"extended partition {ext.number} grows to end at {end}s, into the free space after it"
                if end > base.end else f"extended partition {ext.number} ends at {end}s again, as on the disk")
        return self._replaced(ext, replace(ext, end=end)), said

    def _ebr_at(self, j: int) -> int:
        """The EBR sector of logical partition ``j`` (lane order) once the plan is written: where the chain
        has it, unless the partition moves left past it (then it goes the same distance before the new
        start, after the partition before it: model.plan.ebrmove.plan_logical). A proposal's is just before it."""
        lane = self.lanes[LOGICAL]
        q = lane.at(j)
        k = q.number - labels.FIRST_LOGICAL
        base = self.base.by_number(q.number) if q.state is State.EXISTING else None
        if base is None or base.role is not Role.LOGICAL or not 0 <= k < len(self.base.ebrs):
            return q.start - 1
        ebr = self.base.ebrs[k]
        if q.start > ebr:
            return ebr
        low = lane.at(j - 1).end + 1 if j else lane.area_lo
        return max(low, q.start - (base.start - ebr))

    def _chain_reason(self, i: int, start: int, length: int) -> str:
        """Why the EBR chain forbids logical partition ``i`` (lane order) at ``start`` with ``length``
        sectors, in `diskplan move`'s words (model.plan.ebrmove.plan_logical), or ""."""
        lane, ext = self.lanes[LOGICAL], self.extended()
        if ext is None or not self.base.ebrs:
            return ""
        q = lane.at(i)
        k = q.number - labels.FIRST_LOGICAL
        base = self.base.by_number(q.number)
        if k != i or base is None or not 0 <= k < len(self.base.ebrs):
            return ""
        # The move is judged from where it starts on the disk, its neighbours where the plan puts them.
        parts = [base.extent if j == i else o.extent for j, o in enumerate(lane.parts)]
        ebrs = [self.base.ebrs[k] if j == i else self._ebr_at(j) for j in range(len(parts))]
        base_ext = self.base.by_number(ext.number)
        grows = base_ext.extent if base_ext is not None and base_ext.role is Role.EXTENDED else ext.extent
        why = plan_logical(k, ebrs, parts, grows, self._room_after_extended(), start, length)
        return why if isinstance(why, str) and "not in disk order" not in why else ""

    def gap_at(self, lba: int) -> tuple[Gap | None, str]:
        """The free space holding ``lba`` (inside the extended partition: the logical lane), or why none."""
        ext = self.extended()
        lane = self.lanes[LOGICAL] if ext is not None and ext.start <= lba <= ext.end else self.lanes[TOP]
        return lane.gap_at(lba)

    def free_regions(self, min_sectors: int = 1) -> list[Gap]:
        """Every gap a new partition could use, top level and inside the extended partition, by start."""
        gaps = self.lanes[TOP].gaps(min_sectors)
        if self.extended() is not None:
            gaps += self.lanes[LOGICAL].gaps(min_sectors)
        return sorted(gaps, key=attrgetter("lo"))

    # --- what every step begins and ends with ----------------------------------------------------------

    def _refuse(self, reason: str, number: int | None = None) -> Outcome[Self]:
        return Outcome(self, self, False, reason, None, number)

    def _proposed(self, number: int, *, data: bool = False) -> tuple[Partition, int, int]:
        """The live partition ``number`` a move or resize may change; ``data``: an existing one too (its data
        moves with it: a primary, GPT or logical partition (within its EBR chain), never the extended one)."""
        why = self.blocked()
        if why:
            raise Refused(why)
        at = self.where.get(number)
        if at is None:
            raise Refused(f"there is no partition {number}" + (" (it is marked for deletion)"
                                                                  if self.deleted(number) else ""))
        p = self.lanes[at[0]].at(at[1])
        if p.state is State.EXISTING and not data:
            raise Refused(f"partition {number} is on the disk and holds data: m moves it with its data, r resizes "
                           "it with its filesystem, A realigns it; x marks it for deletion to plan in its space")
        if p.state is State.EXISTING and p.role is Role.EXTENDED:
            raise Refused(f"partition {number} is the extended partition: the logical partitions in it move "
                           "with their data, not it")
        if p.state is State.EXISTING and p.role is Role.LOGICAL and len(self.base.ebrs) != len(self.lanes[LOGICAL]):
            raise Refused(f"partition {number} is logical and the disk's EBR chain was not read whole (or the plan "
                           "adds or deletes logical partitions): `diskplan move` moves it with its EBR")
        return p, at[0], at[1]

    def why_not_changed(self, number: int, *, data: bool = False) -> str:
        """Why partition ``number`` cannot be moved or resized at all ("" when it can; ``data``: an existing
        one too), before any position is asked for: what begins a resize of a partition that holds data,
        whose edges may be off the grain and whose filesystem is not measured yet."""
        try:
            self._proposed(number, data=data)
        except Refused as exc:
            return str(exc)
        return ""

    def _free_number(self, role: Role) -> int:
        label = self.table.label
        if label == "msdos":
            if role is Role.LOGICAL:
                used = {p.number for p in self._logicals()}
                return next(n for n in range(labels.FIRST_LOGICAL, labels.FIRST_LOGICAL + len(used) + 1)
                            if n not in used)
            tops = self.lanes[TOP].parts
            if len(tops) >= labels.MSDOS_PRIMARIES:
                raise Refused("an msdos table holds 4 primary partitions (an extended one counts): "
                               "make room in an extended partition for more")
            used = {p.number for p in tops}
            return next(n for n in range(1, labels.MSDOS_PRIMARIES + 1) if n not in used)
        used = set(self.where)
        for n in range(1, self.table.max_partitions + 1):
            if n not in used:
                return n
        raise Refused(f"this {label} table holds at most {self.table.max_partitions} partitions")

    def _outcome(self, p: Partition, new: Partition, requested: Span, notes: list[str], verb: str,
                 wanted_change: bool) -> Outcome[Self]:
        snap = Snap(requested, new.extent, self.grain, self.geometry.logical, tuple(notes))
        if (new.start, new.end) == (p.start, p.end):
            if wanted_change and notes:
                return Outcome(self, self, False, f"partition {p.number} cannot be {verb} further: {notes[-1]}",
                               snap, p.number)
            return Outcome(self, self, True, f"partition {p.number} stays at {p.start}s..{p.end}s", snap, p.number)
        plan = self._replaced(p, new)
        said = ""
        if p.role is Role.LOGICAL and p.state is State.EXISTING:
            plan, said = plan._fit_extended()
        return Outcome(self, plan, True, f"{verb} partition {p.number} to {new.start}s..{new.end}s"
                       + (f" ({said})" if said else ""), snap, p.number)
