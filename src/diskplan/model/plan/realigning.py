"""Realigning existing partitions of a plan: a data move to the device's grain boundary nearest each start that
the free space allows, shrinking first where the filesystem's measured limits allow it."""

from __future__ import annotations

from typing import Self

from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.grain import optimal_grain
from diskplan.model.plan.fsresize import Limits
from diskplan.model.plan.move import free_around, realign_shrinking, realign_start
from diskplan.model.plan.moving import Moving
from diskplan.model.plan.outcome import Outcome, Refused, Snap, Span
from diskplan.model.plan.state import LOGICAL, TOP
from diskplan.model.units import human_bytes
from diskplan.model.value import replace


class Realigning(Moving):
    """``realign``, ``realign_all`` (a base of ``Plan``)."""

    def realign(self, number: int, limits: Limits | None = None) -> Outcome[Self]:
        """Plan a data move of existing partition ``number`` to the device's grain boundary nearest its start
        that the free space around it allows, size unchanged (model.plan.move.realign_start). When no boundary
        leaves room, or its size is not a whole number of physical blocks, and ``limits`` (what its
        filesystem's tool can do, measured on the disk) allow a shrink: it shrinks first, its start to the
        nearest boundary and its size to whole physical blocks (model.plan.move.realign_shrunk)."""
        try:
            p, _, _ = self._proposed(number, data=True)
        except Refused as exc:
            return self._refuse(str(exc), number)
        if p.state is not State.EXISTING:
            return self._refuse(f"partition {number} is proposed: a re-snaps proposals (nothing to move)", number)
        grain = optimal_grain(self.geometry)
        ss = self.geometry.logical
        block = self.geometry.sectors_per_physical
        if grain.is_aligned(p.start) and p.size % block == 0:
            return Outcome(self, self, True, f"partition {number} already starts on the device's "
                           f"{human_bytes(grain.sectors * ss)} grain", None, number)
        usable, others = self._realign_room(p)
        to = p.start if grain.is_aligned(p.start) else realign_start(p.extent, grain, usable, others)
        shrinks = limits is not None and limits.shrink
        if to is not None:
            new = replace(p, start=to, end=to + p.size - 1)
            if shrinks and p.size % block and p.size - p.size % block >= self._floor(p, limits):
                new = replace(new, end=new.end - p.size % block)  # a whole number of physical blocks
        else:
            at = realign_shrinking(p.extent, grain, block, free_around(p.extent, usable, others), limits, ss)
            if isinstance(at, str):
                return self._refuse(f"partition {number} cannot be realigned: {at}", number)
            new = replace(p, start=at.start, end=at.end)
        if (new.start, new.end) == (p.start, p.end):  # on the grain, its size off the physical block
            why = limits.why if limits is not None and not limits.shrink else "how far its filesystem can shrink " \
                "is not measured" if limits is None else "its filesystem cannot shrink that far"
            return self._refuse(f"partition {number} starts on the grain, but its size ({p.size}s) is not a whole "
                                f"number of {block}-sector physical blocks ({why})", number)
        out = self._moved(p, new, Span(p.start, p.end), [], "realigned", True, limits)
        return replace(out, snap=Snap(Span(p.start, p.end), new.extent, grain, ss))

    def _floor(self, p: Partition, limits: Limits | None) -> int:
        return limits.floor(self.geometry.logical) if limits is not None else p.size

    def realign_wants_limits(self, number: int) -> bool:
        """Whether realigning existing partition ``number`` depends on how far its filesystem can shrink:
        it has no room to move whole, or its size is not a whole number of physical blocks."""
        p = self.partition(number)
        if p is None or p.state is not State.EXISTING or p.role is Role.EXTENDED or self.blocked():
            return False
        grain = optimal_grain(self.geometry)
        if p.size % self.geometry.sectors_per_physical:
            return True
        if grain.is_aligned(p.start):
            return False
        return realign_start(p.extent, grain, *self._realign_room(p)) is None

    def _realign_room(self, p: Partition) -> tuple[Extent, list[Extent]]:
        """Where existing partition ``p`` may go, and the partitions around it (a logical one: its window in
        the EBR chain, as `diskplan realign` has it, model.plan.ebrmove.window)."""
        lane_no, i, _ = self.where[p.number]
        if lane_no == LOGICAL:  # within the extended partition, as `diskplan realign`: it never grows it
            gap = self._gap(lane_no, i)
            return Extent(gap.lo, min(gap.hi, self.lanes[LOGICAL].area_hi)), []
        t = self.table
        return Extent(t.first_usable, t.last_usable), [q.extent for q in self.lanes[TOP].parts if q.number != p.number]

    def realign_all(self, limits: dict[int, Limits] | None = None) -> Outcome[Self]:
        """Realign every existing partition off the device's grain that has room (one step), shrinking those
        whose ``limits`` allow it (as ``realign``); says which cannot move and why. Passes until nothing
        more moves: one realigned may make room for another (its neighbour on the left, once it has moved
        right)."""
        grain = optimal_grain(self.geometry)
        limits = limits or {}
        plan, done = self, []
        pending = [p.number for p in self.live if p.state is State.EXISTING and self.misaligned(p)]
        why: dict[int, str] = {}
        while pending:  # each pass realigns one at least, or stops
            moved = False
            for n in list(pending):
                out = plan.realign(n, limits.get(n))
                if out.ok:
                    plan, moved = out.plan, True
                    done.append(n)
                    pending.remove(n)
                else:
                    why[n] = out.message.split(": ", 1)[-1]
            if not moved:
                break
        left = [f"{n}: {why[n]}" for n in pending]
        done.sort()
        if not done:
            return self._refuse("no partition on the disk can be realigned" + (
                f": partition {'; '.join(left)}" if left else f": every one starts on the device's grain "
                f"({human_bytes(grain.sectors * self.geometry.logical)})"))
        s = "s" if len(done) > 1 else ""
        text = f"realigned partition{s} {', '.join(map(str, done))}: data moves when written"
        return Outcome(self, plan, True, text + (f"; not partition {'; '.join(left)}" if left else ""))
