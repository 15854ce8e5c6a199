"""Steps on a whole plan: a new label, clearing it, the snapping target, fixing the layout (every proposal
re-snapped), adopting a plan file's table, and the GPT repair the disk offers."""

from __future__ import annotations

from typing import Self

from diskplan.model import labels
from diskplan.model.extent import Partition, Role, State
from diskplan.model.grain import SnapTarget, optimal_grain
from diskplan.model.labels import LabelError
from diskplan.model.plan.moving import Moving
from diskplan.model.plan.operations import validate
from diskplan.model.plan.outcome import REPAIR_PENDING, Edge, Outcome
from diskplan.model.plan.state import LOGICAL, TOP
from diskplan.model.table import Table, label_sectors, new_table
from diskplan.model.units import human_bytes
from diskplan.model.value import replace


class WholePlan(Moving):
    """``new_label``, ``clear``, ``set_target``, ``fix_layout``, ``adopt``, ``repair`` (a base of ``Plan``)."""

    def new_label(self, label: str) -> Outcome[Self]:
        """A fresh gpt or msdos table: every partition on the disk is marked for deletion."""
        if self.repairing:
            return self._refuse(REPAIR_PENDING)
        try:
            label = labels.check_label(label)
        except LabelError as exc:
            return self._refuse(str(exc))
        need = label_sectors(label, self.geometry)
        if self.geometry.sectors < need:
            return self._refuse(f"a {label} label needs at least {need:,} sectors; this disk has "
                                f"{self.geometry.sectors:,}")
        fresh = new_table(label, self.geometry)
        doomed = tuple(replace(p, state=State.DELETE) for p in self.base.partitions)
        plan = self._rebuilt(fresh.with_partitions(doomed), fresh=True)
        n = len(self.base.partitions)
        old = f"the {self.base.label} table and its {n} partition{'s' if n != 1 else ''}" if self.base.label \
            else "nothing (the disk had no table)"
        return Outcome(self, plan, True, f"new {label} label: replaces {old}")

    def clear(self) -> Outcome[Self]:
        """Back to the table on disk: every proposal, deletion mark and change dropped."""
        if not self.dirty:
            return Outcome(self, self, True, "nothing to clear")
        n = len(self.changes())
        plan = type(self)._make(self.geometry, self.base, self.base, self.target, False, self.offer, custom=self.custom)
        return Outcome(self, plan, True, f"cleared {n} pending changes")

    def set_target(self, target: SnapTarget, grains: tuple[int, ...] | None = None, *,
                   fix: bool = False) -> Outcome[Self]:
        """Snap to another target from now on (CUSTOM: ``grains`` in bytes, e.g. a stripe). Partitions do
        not move, unless ``fix``: then every proposal is re-snapped in the same step (or it is refused).
        The device's geometry does not change: findings still judge what the disk is."""
        geom = self.geometry
        custom = self.custom if grains is None else tuple(grains)
        try:
            if any(g <= 0 for g in custom or ()):
                raise ValueError("a grain is a positive number of bytes")
            target.grain(geom, custom)
        except ValueError as exc:
            return self._refuse(str(exc))
        plan = type(self)._make(geom, self.base, self.table, target, self.fresh, self.offer, self.repairing, custom)
        g = plan.grain
        message = f"snapping to {target.value}: {g.sectors} sectors ({human_bytes(g.sectors * geom.logical)})" + (
            f", offset {g.offset}s" if g.offset else "")
        if fix:
            fixed = plan.fix_layout()
            if not fixed.ok:
                return self._refuse(fixed.message)
            plan, message = fixed.plan, f"{message}; {fixed.message}"
        if plan == self:
            return Outcome(self, self, True, f"already snapping to {target.value}")
        return Outcome(self, plan, True, message)

    def fix_layout(self) -> Outcome[Self]:
        """Re-snap every proposed partition to the grain, left to right, in one step (all or nothing)."""
        plan = self
        moved = []
        for lane_no in (TOP, LOGICAL):
            for p in list(plan.lanes[lane_no].parts):
                if p.state is not State.PROPOSED:
                    continue
                cur = plan.partition(p.number)
                assert cur is not None
                if plan.on_grain(cur):
                    continue
                if cur.role is Role.EXTENDED and plan._logicals():
                    steps = [plan.resize_to(cur.number, Edge.START, cur.start)]
                    if steps[0].ok:
                        q = steps[0].plan.partition(cur.number)
                        assert q is not None
                        steps.append(steps[0].plan.resize_to(cur.number, Edge.END, q.end))
                else:  # the start, then the end nearest the same size (a move would keep the size as it is)
                    steps = [plan.resize_to(cur.number, Edge.START, cur.start)]
                    if steps[0].ok:
                        q = steps[0].plan.partition(cur.number)
                        assert q is not None
                        steps.append(steps[0].plan.resize_to(cur.number, Edge.END, q.start + cur.size - 1))
                for step in steps:
                    if not step.ok:
                        return self._refuse(f"cannot fix the layout: {step.message}", cur.number)
                    plan = step.plan
                if plan.partition(cur.number) != cur:
                    moved.append(cur.number)
        return Outcome(self, plan if moved else self, True, plan._fixed_message(moved))

    def _fixed_message(self, moved: list[int]) -> str:
        """What fix my layout did, and what it did not: proposals still off the device's grain (what the
        findings judge) when the snapping target is another, and existing partitions it never moves."""
        g, ss = self.grain, self.geometry.logical
        target = f"the {self.target.value} grain ({g.sectors:,}s = {human_bytes(g.sectors * ss)})"
        if self.target is SnapTarget.NONE:
            done = "snapping is off: no partition was re-snapped"
        elif moved:
            done = f"re-snapped partition{'s' if len(moved) > 1 else ''} {', '.join(map(str, moved))} to {target}"
        else:
            done = f"every proposed partition is already on {target}"
        device = optimal_grain(self.geometry)
        off = [p.number for p in self.live if p.state is State.PROPOSED and not self.on_grain(p, device)]
        if off and device != g:
            done += (f"; not on the device's {human_bytes(device.sectors * ss)} grain (what the findings judge): "
                     f"partition{'s' if len(off) > 1 else ''} {', '.join(map(str, off))} (snap to optimal and "
                     "fix again to align them)")
        stuck = [p.number for p in self.live if p.state is State.EXISTING and not device.is_aligned(p.start)]
        if stuck:
            done += (f"; partition{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))} on the disk "
                     f"{'are' if len(stuck) > 1 else 'is'} not moved (it holds data): A realigns "
                     f"{'them' if len(stuck) > 1 else 'it'}, moving the data")
        return done

    def adopt(self, table: Table) -> Outcome[Self]:
        """Make ``table`` (from a plan file) the wanted table: partitions of the disk that it keeps exactly
        (number, start, end) stay EXISTING, the others are marked DELETE, the rest are PROPOSED. A different
        label or usable area means a new label."""
        if self.repairing:
            return self._refuse(REPAIR_PENDING)
        problems = validate(table, self.geometry)
        if problems:
            return self._refuse("the plan is not valid here: " + "; ".join(problems))
        base = self.base
        fresh = (table.label != base.label or (table.first_usable, table.last_usable)
                 != (base.first_usable, base.last_usable))
        wanted = {(p.number, p.start, p.end, p.role): p for p in table.partitions if p.state is not State.DELETE}
        parts: list[Partition] = []
        attrs = labels.attribute_flags(base.label or "")
        for p in base.partitions:
            keep = None if fresh else wanted.pop((p.number, p.start, p.end, p.role), None)
            if keep is None:
                parts.append(replace(p, state=State.DELETE))
                continue
            flags = {*(f for f in p.flags if f not in attrs), *labels.plan_flags(base.label or "", keep.flags)}
            kept = replace(p, type=keep.type or p.type, name=keep.name,
                           flags=p.flags if flags == set(p.flags) else tuple(sorted(flags)))
            parts.append(p if kept == p else kept)
        parts += [replace(p, state=State.PROPOSED) for p in wanted.values()]
        plan = self._rebuilt(replace(table, partitions=()).with_partitions(tuple(parts)), fresh=fresh)
        return Outcome(self, plan, True, f"plan loaded: {len(plan.changes())} pending changes")

    def repair(self) -> Outcome[Self]:
        """Plan the repair the disk offers (rebuild the damaged GPT copy, or the protective MBR, from the
        good copy): a pending change of its own, written before anything else can be planned."""
        offer = self.offer
        if offer is None:
            return self._refuse("this disk has no repair to offer: its table passed diskplan's checks, or no "
                                "good copy is left to repair it from (see its findings)")
        if self.repairing:
            return Outcome(self, self, True, f"the repair is already planned: {offer.summary}")
        if self.dirty:
            n = len(self.changes())
            return self._refuse(f"a repair is written on its own, before any other change: undo or clear the {n} "
                                f"pending change{'s' if n != 1 else ''} first (committing changes to a GPT "
                                "rewrites both copies anyway, when the table can be written)")
        plan = type(self)(self.geometry, self.base, self.wanted, self.target, self.fresh, self.grain, self.lanes,
                    self.where, self.patch, offer, True, self.custom)
        return Outcome(self, plan, True, f"repair planned: {offer.summary} (nothing is written until you commit)")
