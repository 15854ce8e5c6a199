"""The plan being shaped in the planner: its history, the findings of each plan, and drags.

No Textual here: the app turns key presses and mouse messages into calls and shows what comes back.
A drag (the mouse, or the keys in move/resize mode) previews steps from one plan without touching the
history; releasing it records one step, so one undo takes back the whole drag. A preview step costs
O(log n) in the plan plus a findings check of the moved partition and its two neighbours (nothing else
can change), so a 20 TB disk with 128 partitions drags as fast as a 1 GB disk with one.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.findings.codes import SEVERITY_RANK, SHARED_BLOCK
from diskplan.model.findings.placement import Finding, analyze
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, SnapTarget, optimal_grain
from diskplan.model.plan.fsresize import Limits
from diskplan.model.plan.history import History
from diskplan.model.plan.plan import Edge, Outcome, Plan, Snap
from diskplan.model.plan.repair import GptRepair
from diskplan.model.table import Table
from diskplan.model.units import human_bytes
from diskplan.model.value import replace, value

if TYPE_CHECKING:
    from diskplan.model.disk import Disk

Changed = dict[int, tuple[Partition, tuple[Finding, ...]]]


class DragKind(Enum):
    MOVE = "move"
    START = "start"  # resize: the first sector
    END = "end"  # resize: the last sector

    @property
    def edge(self) -> Edge | None:
        return {DragKind.START: Edge.START, DragKind.END: Edge.END}.get(self)


def judging_grain(plan: Plan) -> Grain:
    """The grain findings and gridlines use: the optimal one for the plan's geometry (custom grains
    included), whatever the snapping target, because that is what the disk performs best on."""
    return optimal_grain(plan.geometry)


def _by_number(findings: list[Finding] | tuple[Finding, ...]) -> dict[int, tuple[Finding, ...]]:
    out: dict[int, list[Finding]] = {}
    for f in findings:
        if f.partition is not None:
            out.setdefault(f.partition, []).append(f)
    return {n: tuple(fs) for n, fs in out.items()}


@value
class Preview:
    """One drag step as shown: the outcome, and what the map must repaint (empty: nothing moved)."""

    outcome: Outcome
    changed: Changed

    @property
    def refused(self) -> bool:
        return not self.outcome.ok


class Drag:
    """A partition being moved or resized, previewed from ``base``."""

    def __init__(self, session: Session, number: int, kind: DragKind, grab: int, keyboard: bool,
                 data: bool = False) -> None:
        self.base = session.history.present
        self.data = data  # an existing partition: moving it plans a data move, resizing it a filesystem resize
        self.limits: Limits | None = session.limits.get(number)  # how far its content may be resized (measured)
        self.number = number
        self.kind = kind
        self.grab = grab  # mouse: sectors from the dragged edge (the start, for a move) to the grabbed cell
        self.keyboard = keyboard
        self.shown = self.base  # the plan on the screen
        self.last: Outcome | None = None  # the last step that was not refused
        self.findings = _by_number(session.findings(self.base))
        self.grain = judging_grain(self.base)
        p = self.base.partition(number)
        assert p is not None
        # Findings between partitions concern neighbours by start among data partitions; the dragged one
        # never passes a neighbour, so these stay its neighbours for the whole drag.
        self.prev: Partition | None = None
        self.next: Partition | None = None
        if p.role is not Role.EXTENDED:
            others = sorted((q for q in self.base.live if q.role is not Role.EXTENDED and q.number != number),
                          key=lambda q: (q.start, q.number))
            self.prev = next((q for q in reversed(others) if (q.start, q.number) < (p.start, p.number)), None)
            self.next = next((q for q in others if (q.start, q.number) > (p.start, p.number)), None)

    @property
    def snap(self) -> Snap | None:
        return self.last.snap if self.last else None

    def _findings_for(self, plan: Plan, p: Partition) -> Changed:
        """The findings that may change when ``p`` lies elsewhere: its own, and the next one's
        shared-block finding."""
        sub = replace(plan.wanted, partitions=tuple(q for q in (self.prev, p, self.next) if q is not None))
        fresh = _by_number(analyze(plan.geometry, sub, self.grain))
        out: Changed = {p.number: (p, fresh.get(p.number, ()))}
        nxt = self.next
        if nxt is not None:
            kept = [f for f in self.findings.get(nxt.number, ()) if f.code != SHARED_BLOCK]
            shared = [f for f in fresh.get(nxt.number, ()) if f.code == SHARED_BLOCK]
            mine = tuple(sorted([*kept, *shared], key=lambda f: SEVERITY_RANK[f.severity]))
            if mine != self.findings.get(nxt.number, ()):
                out[nxt.number] = (nxt, mine)
        return out

    def show(self, outcome: Outcome) -> Preview:
        """Make ``outcome`` (a step from ``base`` or from the shown plan) the shown plan, unless refused."""
        if not outcome.ok:
            return Preview(outcome, {})
        self.last = outcome
        plan = outcome.plan
        if plan is self.shown:
            return Preview(outcome, {})
        p = plan.partition(self.number)
        assert p is not None
        changed = self._findings_for(plan, p)
        self.shown = plan
        for n, (_, found) in changed.items():
            self.findings[n] = found
        return Preview(outcome, changed)

    def flat_findings(self) -> list[Finding]:
        return sorted((f for fs in self.findings.values() for f in fs),
                      key=lambda f: (f.partition or 0, SEVERITY_RANK[f.severity]))


class Session:
    """The plan for the open disk: history (undo/redo), findings per plan, and the drag in progress."""

    def __init__(self, geometry: Geometry, table: Table, target: SnapTarget = SnapTarget.OPTIMAL,
                 reader: tuple[Finding, ...] = (), offer: GptRepair | None = None) -> None:
        """``reader``: what the reader found about partitions (kept while they stay on the disk as they are);
        ``offer``: the repair the disk offers (``Disk.repair``), which the plan can make a pending change."""
        self.history = History(Plan.open(geometry, table, target, offer=offer))
        # What each existing partition's content allows (backend.move.resize.content_limits, measured in a worker
        # when a resize or a shrinking realign first needs it): valid while the disk is as read.
        self.limits: dict[int, Limits] = {}
        self._reader = reader
        self.drag: Drag | None = None
        self._judged: tuple[Plan, list[Finding]] | None = None

    @classmethod
    def for_disk(cls, disk: Disk, target: SnapTarget = SnapTarget.OPTIMAL) -> Session:
        """The plan for a disk as read: it starts from the disk's table, keeps what the reader found about
        its partitions, and can plan the repair the disk offers."""
        reader = tuple(f for f in disk.findings if f.partition is not None)
        return cls(disk.geometry, disk.table, target, reader, offer=disk.repair)

    @property
    def plan(self) -> Plan:
        """The plan in the history (a drag's preview is ``drag.shown``)."""
        return self.history.present

    @property
    def shown(self) -> Plan:
        return self.drag.shown if self.drag else self.history.present

    def findings(self, plan: Plan | None = None) -> list[Finding]:
        """Every finding of ``plan`` (default: the present one), judged once per plan."""
        plan = plan or self.history.present
        if self._judged is not None and self._judged[0] is plan:
            return self._judged[1]
        found = analyze(plan.geometry, plan.table, judging_grain(plan))
        if self._reader:  # about partitions still where the reader saw them (not planned to move)
            on_disk = {p.extent for p in plan.base.partitions}
            kept = [f for f in self._reader
                    if (q := plan.partition(f.partition or 0)) is not None and q.state is State.EXISTING
                    and q.extent in on_disk]
            found = sorted([*found, *kept], key=lambda f: (f.partition or 0, SEVERITY_RANK[f.severity]))
        self._judged = (plan, found)
        return found

    # --- steps -----------------------------------------------------------------------------------------

    def apply(self, outcome: Outcome) -> bool:
        """Record a step computed from the present plan; False when refused or nothing changed."""
        return self.history.apply(outcome)

    def undo(self) -> str | None:
        return self.history.undo()

    def redo(self) -> str | None:
        return self.history.redo()

    # --- drags -----------------------------------------------------------------------------------------

    def begin(self, number: int, kind: DragKind, *, grab: int = 0, keyboard: bool = False, data: bool = False) -> str:
        """Start dragging partition ``number``; "" when it can be dragged, else why not. ``data``: it may be an
        existing partition, whose data then moves with it (``Plan.move_to(data=True)``)."""
        self.drag = None
        plan = self.history.present
        p = plan.partition(number)
        if p is None or plan.blocked():
            return plan.blocked() or f"there is no partition {number} to move"
        # Asking to stay where it is gives the plan's own refusal (on disk, holds logical partitions...).
        if kind is DragKind.MOVE:
            probe = plan.move_to(number, p.start, data=data)
        elif data and p.state is State.EXISTING:  # its edges may be off the grain, its filesystem not measured yet
            why = plan.why_not_changed(number, data=True)
            if why:
                return why
            probe = Outcome(plan, plan, True, "")
        else:
            edge = kind.edge or Edge.END
            probe = plan.resize_to(number, edge, p.start if edge is Edge.START else p.end, data=data)
        if not probe.ok:
            return probe.message
        self.drag = Drag(self, number, kind, grab, keyboard, data)
        return ""

    def drag_to(self, lba: int) -> Preview:
        """The mouse is over the cell starting at ``lba``: the dragged edge (the start, for a move) goes as
        far as the mouse went since the button went down (``grab`` keeps the offset inside the cell)."""
        d = self.drag
        assert d is not None
        if d.kind is DragKind.MOVE:
            outcome = d.base.move_to(d.number, lba - d.grab, data=d.data)
        else:
            assert d.kind.edge is not None
            outcome = d.base.resize_to(d.number, d.kind.edge, lba - d.grab, data=d.data, limits=d.limits)
        return d.show(outcome)

    def nudge(self, steps: int) -> Preview:
        """Keys: move (or move the active edge) by ``steps`` grains from where it is shown."""
        d = self.drag
        assert d is not None
        if d.kind is DragKind.MOVE:
            outcome = d.shown.move(d.number, steps, data=d.data)
        else:
            assert d.kind.edge is not None
            outcome = d.shown.resize(d.number, d.kind.edge, steps, data=d.data, limits=d.limits)
        return d.show(outcome)

    def measured(self, number: int, limits: Limits) -> bool:
        """Keep what partition ``number``'s content allows; True when a drag of it now uses it."""
        self.limits[number] = limits
        d = self.drag
        if d is not None and d.number == number and d.data:
            d.limits = limits
            return True
        return False

    def switch_edge(self) -> None:
        d = self.drag
        if d is not None and d.kind is not DragKind.MOVE:
            d.kind = DragKind.START if d.kind is DragKind.END else DragKind.END

    def finish(self) -> Outcome | None:
        """Record the drag as one step (None when the partition ended where it began)."""
        d, self.drag = self.drag, None
        if d is None or d.last is None or d.shown is d.base:
            return None
        outcome = d.last
        if outcome.before is not d.base:  # keys: several steps, recorded as one
            outcome = Outcome(d.base, d.shown, True, outcome.message, outcome.snap, d.number)
        if not self.history.apply(outcome):
            return None
        self._judged = (d.shown, d.flat_findings())
        return outcome

    def cancel(self) -> Plan | None:
        """Forget the drag; the plan to show again (None when nothing was previewed)."""
        d, self.drag = self.drag, None
        return None if d is None or d.shown is d.base else d.base


def repair_hint(plan: Plan | None) -> str:
    """One line about the repair the disk offers, while it is not planned ("" when none)."""
    if plan is None or plan.offer is None or plan.repairing:
        return ""
    return f"{plan.offer.reason}. R plans the repair: {plan.offer.summary}"


# --- words for the status line ----------------------------------------------------------------------


def _at(lba: int, ss: int, short: bool) -> str:
    nbytes = lba * ss
    return f"{lba:,}s" if short else f"{lba:,}s ({nbytes:,} B = {human_bytes(nbytes)})"


def drag_text(kind: DragKind, number: int, snap: Snap | None, shown: Partition | None, width: int,
              note: str = "", *, sector_size: int) -> str:
    """"#3 start 2,050s (1,049,600 B) -> 2,048s (1,048,576 B = 1 MiB) | size 100 MiB" made to fit ``width``:
    the requested position, where snapping put it, in sectors and bytes. ``sector_size``: the disk's (there
    is no snap yet right after m or r, and a 4Kn disk's sectors are 8x a 512 B one's)."""
    verb = {DragKind.MOVE: "move", DragKind.START: "resize", DragKind.END: "resize"}[kind]
    edge = Edge.END if kind is DragKind.END else Edge.START
    if shown is None:
        return f" {verb} #{number}"
    ss = sector_size
    got = shown.end if edge is Edge.END else shown.start
    size = f"size {shown.size:,}s = {human_bytes(shown.size * ss)}"
    wheres = []
    for short in (False, True):
        if snap is not None:
            req = snap.requested.end if edge is Edge.END else snap.requested.start
            req_text = f"{req:,}s ({req * ss:,} B)" if not short else f"{req:,}s"
            wheres.append(f"{edge.value} {req_text} -> {_at(got, ss, short)}" if req != got else
                          f"{edge.value} {_at(got, ss, short)} on the grain")
        else:
            wheres.append(f"{edge.value} {_at(got, ss, short)}")
    tail = f" | {note}" if note else ""
    kept = [f" {verb} #{number}: {wheres[0]} | {size}{tail}", f" {verb} #{number}: {wheres[1]} | {size}{tail}",
            f" {verb} #{number}: {wheres[1]}{tail}"] if note else []  # a note (a refusal, a limit) is kept first
    candidates = [*kept, f" {verb} #{number}: {wheres[0]} | {size}{tail}", f" {verb} #{number}: {wheres[0]} | {size}",
                  f" {verb} #{number}: {wheres[0]}", f" {verb} #{number}: {wheres[1]} | {size}{tail}",
                  f" {verb} #{number}: {wheres[1]}", f" #{number} {wheres[1]}"]
    for text in candidates:
        if len(text) <= width:
            return text
    return candidates[-1]


def requested_extent(snap: Snap | None, sectors: int) -> Extent | None:
    """Where the user asked the partition to be, clipped to the disk (for the map's marks)."""
    if snap is None:
        return None
    lo, hi = sorted((snap.requested.start, snap.requested.end))
    lo, hi = max(0, lo), min(sectors - 1, hi)
    return Extent(lo, hi) if lo <= hi else None


def limits_text(limits: Limits | None, sector_size: int, size: int) -> str:
    """What a resize of a partition that holds data may do, for the status line: "ext4: shrinks to 5 MiB
    at least (resize2fs)", or why it cannot (``size``: its sectors on the disk)."""
    if limits is None:
        return "measuring how far its filesystem can shrink..."
    if not limits.grow and not limits.shrink:
        return f"not resizable: {limits.why}"
    if not limits.shrink:
        return f"{limits.fs}: grows only ({limits.why})"
    floor = min(limits.floor(sector_size), size)
    return f"{limits.fs}: shrinks to {human_bytes(floor * sector_size)} at least ({limits.tool})"
