"""Moving and resizing a partition of a plan, by keys (grains) or the mouse (a sector): snapped, stopped against
its neighbours, and for an existing partition a planned data move or a resize by its filesystem's tool, within
the limits measured on the disk."""

from __future__ import annotations

from typing import Self

from diskplan.model.extent import Partition, Role, State
from diskplan.model.plan.fsresize import Limits
from diskplan.model.plan.outcome import Edge, Outcome, Refused, Span
from diskplan.model.plan.room import PlanRoom
from diskplan.model.plan.snap import (
    place,
    place_end,
    place_start,
    snap_end,
    snap_start,
)
from diskplan.model.plan.state import LOGICAL
from diskplan.model.units import human_bytes
from diskplan.model.value import replace


class Moving(PlanRoom):
    """``move``, ``move_to``, ``resize``, ``resize_to`` (a base of ``Plan``)."""

    def move(self, number: int, steps: int = 1, *, data: bool = False) -> Outcome[Self]:
        """Move a proposed partition by ``steps`` grains (keyboard: 1, or 10 with a modifier)."""
        p = self.partition(number)
        if p is None:
            return self.move_to(number, 0)
        return self.move_to(number, p.start + steps * self._step(), keyboard=True, data=data)

    def move_to(self, number: int, start: int, *, keyboard: bool = False, data: bool = False) -> Outcome[Self]:
        """Move a proposed partition so it starts near LBA ``start`` (mouse), keeping its size exactly.
        It stops against its neighbours; it never jumps over one. ``data``: an existing partition may move
        too, which plans a data move (``Changes.move``: its bytes are copied to the new place)."""
        try:
            p, lane_no, i = self._proposed(number, data=data)
        except Refused as exc:
            return self._refuse(str(exc), number)
        if p.role is Role.EXTENDED and self._logicals():
            return self._refuse(f"extended partition {number} holds logical partitions: move those, or resize "
                                "its edges", number)
        gap = self._gap(lane_no, i)
        placed = place(self.grain, gap, start, p.size)
        if placed is None:
            return self._refuse(f"partition {number} no longer fits between {gap.before} and {gap.after} when "
                                "aligned", number)
        s, e = placed
        notes = []
        free_s = snap_start(self.grain, start)
        if s != free_s:
            chain = self._chain_reason(i, free_s, p.size) if lane_no == LOGICAL and p.state is State.EXISTING else ""
            notes.append(chain or f"stopped against {gap.after if s < free_s else gap.before}")
        if p.size % self.grain.sectors and p.state is State.PROPOSED:
            notes.append(f"size kept: {p.size}s is not a whole number of {self.grain.sectors}-sector grains, "
                         "so the end is off the grain (r resizes, a re-snaps)")
        changed_wanted = start != p.start if keyboard else snap_start(self.grain, start) != p.start
        return self._moved(p, replace(p, start=s, end=e), Span(start, start + p.size - 1), notes, "moved",
                           changed_wanted)

    def _moved(self, p: Partition, new: Partition, requested: Span, notes: list[str], verb: str,
               wanted_change: bool, limits: Limits | None = None) -> Outcome[Self]:
        # A proposal (every step of most drags) needs no look-up: by_number scans the disk's whole table.
        base = self.base.by_number(p.number) if p.state is State.EXISTING else None
        if base is None:
            return self._outcome(p, new, requested, notes, verb, wanted_change)
        # The map and the list say where it comes from; the change list what its filesystem's tool does.
        extra: list[tuple[str, str]] = []
        if new.start != base.start:
            extra.append(("moved_from", str(base.start)))
        if new.size != base.size:
            fs = limits.fs if limits else dict(p.extra).get("content", "")  # a later move keeps what was measured
            extra += [("resized_from", str(base.size)), ("content", fs)]
        new = replace(new, extra=tuple(extra))
        out = self._outcome(p, new, requested, notes, verb, wanted_change)
        if not out.changed:
            return out
        if (new.start, new.end) == (base.start, base.end):
            return replace(out, message=f"partition {p.number} back at {new.start}s..{new.end}s: no data moves")
        ss = self.geometry.logical
        said = []
        if new.size != base.size:
            said.append(f"its {dict(new.extra).get('content') or 'content'} "
                        f"{'grows' if new.size > base.size else 'shrinks'} by "
                        f"{human_bytes(abs(new.size - base.size) * ss)} to {human_bytes(new.size * ss)}")
        if new.start != base.start:
            said.append(f"its data ({human_bytes(min(new.size, base.size) * ss)}) moves from {base.start}s")
        # Where a logical partition stops depends on EBRs the map barely shows: the chain's reason is said.
        stopped = f" (it stopped: {notes[-1]})" if notes and p.role is Role.LOGICAL else ""
        return replace(out, message=f"{out.message}: {' and '.join(said)} when written{stopped}")

    def resize(self, number: int, edge: Edge, steps: int = 1, *, data: bool = False,
               limits: Limits | None = None) -> Outcome[Self]:
        """Move one edge of a proposed partition by ``steps`` grains (negative: left); ``data``, ``limits``:
        as ``resize_to``."""
        p = self.partition(number)
        if p is None:
            return self.resize_to(number, edge, 0)
        at = p.start if edge is Edge.START else p.end
        return self.resize_to(number, edge, at + steps * self._step(), keyboard=True, data=data, limits=limits)

    def resize_to(self, number: int, edge: Edge, lba: int, *, keyboard: bool = False, data: bool = False,
                  limits: Limits | None = None) -> Outcome[Self]:
        """Move one edge of a proposed partition to near LBA ``lba`` (mouse); the other edge stays.

        ``data``: an existing partition may be resized too, within ``limits`` (what its filesystem's tool
        can do, measured on the disk; None: not measured yet, so its size cannot change). A shrink stops at
        the smallest size the filesystem reaches; dragging the start edge moves its data as well."""
        try:
            p, lane_no, i = self._proposed(number, data=data)
        except Refused as exc:
            return self._refuse(str(exc), number)
        gap = self._gap(lane_no, i)
        g = self.grain
        logicals = self._logicals() if p.role is Role.EXTENDED else ()
        notes = []
        base = self.base.by_number(number) if p.state is State.EXISTING else None
        floor, least = 1, ""  # the fewest sectors, and what sets it (not measured, or no shrink: refused below)
        if base is not None and limits is not None and limits.shrink:
            floor = min(limits.floor(self.geometry.logical), base.size)
            least = f"its {limits.fs} minimum ({human_bytes(floor * self.geometry.logical)}, from {limits.tool})"
        if edge is Edge.START:
            limit = p.end if not logicals else min(p.end, logicals[0].start - 1)
            limit = min(limit, p.end - floor + 1)
            s = place_start(g, gap, lba, limit)
            if s is None:
                return self._refuse(f"no aligned start is left for partition {number}", number)
            free = snap_start(g, lba)
            if s != free:
                bound = gap.before if s > free else (f"logical partition {logicals[0].number}" if logicals and
                                                     limit < p.end - floor + 1 else least or "its own end")
                notes.append(f"stopped at {bound}" if bound == least else f"stopped against {bound}")
            new, requested = replace(p, start=s), Span(lba, p.end)
            wanted = lba != p.start if keyboard else free != p.start
        else:
            at_least = p.start if not logicals else max(p.start, logicals[-1].end)
            at_least = max(at_least, p.start + floor - 1)
            e = place_end(g, gap, lba, at_least)
            if e is None:
                return self._refuse(f"no aligned end is left for partition {number}", number)
            free = snap_end(g, lba, gap.area_hi)
            if e != free:
                bound = gap.after if e < free else (f"logical partition {logicals[-1].number}" if logicals and
                                                    at_least > p.start + floor - 1 else least or
                                                    "its own start (one grain at least)")
                notes.append(f"stopped at {bound}" if bound == least else f"stopped against {bound}")
            new, requested = replace(p, end=e), Span(p.start, lba)
            wanted = lba != p.end if keyboard else free != p.end
        if lane_no == LOGICAL and base is not None and notes and notes[-1] in (
                f"stopped against {gap.before}", f"stopped against {gap.after}"):  # the chain says why, as `resize`
            ask = min(requested.start, requested.end)
            notes[-1] = self._chain_reason(i, ask, max(requested.start, requested.end) - ask + 1) or notes[-1]
        if base is not None and new.size != base.size:
            why = self._resize_refusal(new, base, limits)
            if why:
                return self._refuse(why, number)
            return self._moved(p, new, requested, notes, "resized", wanted, limits)
        if base is not None:
            return self._moved(p, new, requested, notes, "resized", wanted)
        return self._outcome(p, new, requested, notes, "resized", wanted)

    def _resize_refusal(self, new: Partition, base: Partition, limits: Limits | None) -> str:
        """Why existing partition ``base`` cannot take ``new``'s size, or ""."""
        n = base.number
        if limits is None:
            return (f"how far partition {n}'s filesystem can grow or shrink is not measured yet (it is read from "
                    "the disk: a moment)")
        if (new.size > base.size and not limits.grow) or (new.size < base.size and not limits.shrink):
            return f"partition {n} cannot be {'grown' if new.size > base.size else 'shrunk'}: {limits.why}"
        return ""
