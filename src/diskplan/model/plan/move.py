"""The schedule of a data move: which chunks of a partition are copied in which order, and which old
bytes must be saved in the journal before a chunk is written. Pure: no I/O (backend.move.datamove runs it).

Moving ``length`` sectors from ``start`` to ``target``:

- **Direction.** Moving left (target < start) copies chunks in ascending order, moving right in
  descending order, so a chunk's destination only ever covers sources that are already copied (or its
  own source), never a source still to come.
- **Chunk size.** When the shift is at least ``MIN_CLEAN_BYTES`` the chunk is no larger than the shift,
  so no chunk's destination overlaps its own source and nothing but checksums is journalled: a chunk
  interrupted half-way is simply copied again from its intact source. A smaller shift (a realign by a
  few sectors) would need chunks of a few sectors — sfdisk's slow-step problem (util-linux #848) — so
  chunks stay large and each saves the part of its source its own write overwrites (``Step.saved``)
  in the journal first.
- **The last chunk** is cut to what is left; chunks cover the range exactly once (util-linux #938 was a
  last step that ran past the partition's end).
- **Durability** (``groups``): a sync of the device and of the journal is needed only before a write
  would destroy a source byte whose chunk is not yet durably copied. So chunks are written in groups
  with no sync inside: a group ends before a chunk whose destination overlaps the source of a chunk in
  the group, before and after a chunk that saves old bytes (alone in its group, its saved bytes and
  its read record durable before its write), and after ``batch`` chunks (bounding what a crash makes
  redo). After each group the device is synced, then its chunks are recorded as written. A move whose
  shift exceeds the partition (the usual realign into free space) thus syncs every ``batch`` chunks, a
  shift of one chunk after every chunk, as before.
- **Resume** (``resume_point``): every chunk not recorded as written is redone from its source, which
  no write has touched (the rule above), except the chunk that saves its old bytes: it is redone with
  those bytes from the journal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from diskplan.model.extent import Extent, Role
from diskplan.model.grain import Grain
from diskplan.model.plan.fsresize import Limits
from diskplan.model.table import Table
from diskplan.model.units import human_bytes
from diskplan.model.value import value

MAX_CHUNK_BYTES = 8 << 20  # large direct I/O: one request keeps the disk streaming; memory stays small
MIN_CLEAN_BYTES = 1 << 20  # below this shift, chunks as small as the shift would make the copy crawl
BATCH_BYTES = 256 << 20  # at most this much is redone after a crash when nothing forces a sync sooner


@value
class Step:
    """Chunk ``index``: ``count`` sectors from ``src`` to ``dst``."""

    index: int
    src: int
    dst: int
    count: int

    @property
    def source(self) -> Extent:
        return Extent(self.src, self.src + self.count - 1)

    @property
    def dest(self) -> Extent:
        return Extent(self.dst, self.dst + self.count - 1)

    @property
    def saved(self) -> Extent | None:
        """The part of this chunk's source that its own write overwrites: saved in the journal first."""
        return self.source.intersection(self.dest)


@value
class Schedule:
    start: int
    target: int
    length: int  # sectors
    chunk: int  # sectors per chunk (the last may be shorter)

    @property
    def shift(self) -> int:
        return self.target - self.start

    @property
    def ascending(self) -> bool:
        return self.shift < 0

    @property
    def count(self) -> int:
        return -(-self.length // self.chunk) if self.shift else 0

    @property
    def journals_data(self) -> bool:
        """Whether chunks overlap their own source (then each saves its old bytes first)."""
        return 0 < abs(self.shift) < self.chunk and self.length > abs(self.shift)

    def step(self, k: int) -> Step:
        if not 0 <= k < self.count:
            raise IndexError(f"chunk {k} of {self.count}")
        offset = k * self.chunk
        n = min(self.chunk, self.length - offset)
        rel = offset if self.ascending else self.length - offset - n
        return Step(k, self.start + rel, self.target + rel, n)

    def steps(self) -> Iterator[Step]:
        return (self.step(k) for k in range(self.count))

    def groups(self, first: int = 0, batch: int = 1) -> Iterator[range]:
        """Chunks ``first..count-1`` in the groups written with no sync between them (see the module's
        doc): a chunk joins the group unless its destination overlaps a source of the group, it or the
        group's last chunk saves old bytes, or the group holds ``batch`` chunks already."""
        lo = first
        while lo < self.count:
            hi = lo + 1
            src = self.step(lo).source
            while hi < self.count and hi - lo < max(1, batch):
                nxt, prev = self.step(hi), self.step(hi - 1)
                if nxt.saved is not None or prev.saved is not None or nxt.dest.overlaps(src):
                    break
                src = Extent(min(src.start, nxt.src), max(src.end, nxt.source.end))  # sources are contiguous
                hi += 1
            yield range(lo, hi)
            lo = hi


def schedule(
    start: int, target: int, length: int, sector_size: int, *, max_chunk_bytes: int = MAX_CHUNK_BYTES,
    min_clean_bytes: int = MIN_CLEAN_BYTES,
) -> Schedule:
    """The schedule moving ``length`` sectors of ``sector_size`` bytes from ``start`` to ``target``."""
    if length < 0 or start < 0 or target < 0:
        raise ValueError("a move needs a non-negative start, target and length")
    big = max(1, max_chunk_bytes // sector_size)
    shift = abs(target - start)
    chunk = min(big, shift) if shift * sector_size >= min_clean_bytes else big
    return Schedule(start, target, length, max(1, min(chunk, length or 1)))


@value
class Read:
    """Journal record: chunk ``index`` was read; ``digest`` of its source, ``saved`` digest of the old
    bytes saved (empty when its write overlaps nothing of its own source)."""

    index: int
    digest: str
    saved: str = ""


@value
class Written:
    """Journal record: chunk ``index`` is on the device (synced)."""

    index: int


@value
class Resume:
    """Where a move stands: chunks ``0..next-1`` are written; ``pending`` is the read record of chunk
    ``next`` when one was made (its write may have begun: use its saved bytes and check its digest)."""

    next: int
    pending: Read | None
    digests: dict[int, str]  # every source digest recorded, for the final verification


class JournalError(Exception):
    """The journal's records are not a sequence this schedule could have written."""


def resume_point(records: Iterable[Read | Written]) -> Resume:
    """Replay the records in order. Chunks are written strictly one after another."""
    done = 0
    pending: Read | None = None
    digests: dict[int, str] = {}
    for r in records:
        if isinstance(r, Read):
            if r.index != done:
                raise JournalError(f"chunk {r.index} read while chunk {done} was next")
            pending = r
            digests[r.index] = r.digest
        else:
            if r.index != done or pending is None or pending.index != done:
                raise JournalError(f"chunk {r.index} recorded as written out of order")
            done, pending = done + 1, None
    return Resume(done, pending, digests)


def realign_start(part: Extent, grain: Grain, usable: Extent, others: Iterable[Extent]) -> int | None:
    """The grain boundary nearest ``part``'s start where the partition fits with its size unchanged,
    within ``usable`` and the free space around it (between its neighbours in ``others``); a tie goes
    up. None when no boundary leaves room (the partition would have to shrink first)."""
    room = free_around(part, usable, others)
    if room is None:
        return None
    lo, hi = room.start, room.end
    first, last = grain.align_up(lo), grain.align_down(hi - part.size + 1)
    if hi - part.size + 1 < lo or first > last:
        return None
    down = min(max(grain.align_down(part.start), first), last)
    up = min(max(grain.align_up(part.start), first), last)
    return down if part.start - down < up - part.start else up


def free_around(part: Extent, usable: Extent, others: Iterable[Extent]) -> Extent | None:
    """The sectors ``part`` may use: its own and the free space around it up to its neighbours in ``others``
    within ``usable``; None when another overlaps it (an overlapping table: nothing sensible to move)."""
    lo, hi = usable.start, usable.end
    for o in others:
        if o.end < part.start:
            lo = max(lo, o.end + 1)
        elif o.start > part.end:
            hi = min(hi, o.start - 1)
        elif o.overlaps(part):
            return None
    return Extent(lo, hi)


def realign_shrunk(part: Extent, grain: Grain, block: int, room: Extent) -> Extent | None:
    """Where ``part`` goes when it has no room to move whole (``realign_start`` is None): the grain boundary
    nearest its start inside ``room`` (a tie goes up), its size cut to what is left up to its old end or
    ``room``'s end, whichever comes first, then to a whole number of ``block``-sector physical blocks. None
    when no boundary leaves a block. The filesystem shrinks first (the caller checks its minimum)."""
    best: Extent | None = None
    for s in (grain.align_down(part.start), grain.align_up(part.start)):
        if not room.start <= s <= room.end:
            continue
        size = min(part.end, room.end) - s + 1
        size -= size % block
        if size < block:
            continue
        if best is None or abs(s - part.start) <= abs(best.start - part.start):
            best = Extent(s, s + size - 1)
    return best


def realign_shrinking(part: Extent, grain: Grain, block: int, room: Extent | None, limits: Limits | None,
                      sector_size: int) -> Extent | str:
    """Where ``part`` goes when it has no room to move whole (``realign_start`` is None) and its filesystem
    shrinks first (``limits``: what its tool can do, measured on the disk; None: not measured), by
    ``realign_shrunk`` within ``room`` and never below the filesystem's minimum; or why it cannot be realigned.
    The planner's A and `diskplan realign` both decide here."""
    shrinks = limits is not None and limits.shrink
    at = realign_shrunk(part, grain, block, room) if room is not None and shrinks else None
    if at is None:
        why = (limits.why if limits is not None and not limits.shrink else
               "no room to shrink into" if limits is not None else "it would have to shrink first")
        return f"no {human_bytes(grain.sectors * sector_size)} boundary leaves room for it ({why})"
    assert limits is not None
    floor = limits.floor(sector_size)
    if at.size < floor:
        return (f"it would have to shrink to {human_bytes(at.size * sector_size)}, below the "
                f"{human_bytes(floor * sector_size)} its {limits.fs} filesystem can shrink to")
    return at


def old_place_touched(plan: Schedule, done: int, batch: int) -> Step | None:
    """The first chunk that may have been written over the partition's old place when chunks
    ``0..done-1`` are recorded as written: those, and the group in flight (at most ``batch`` chunks from
    ``done``, written before their records, see ``Schedule.groups``). None: every source byte is intact,
    so the move can be rolled back by rewriting only the table entry."""
    old = Extent(plan.start, plan.start + plan.length - 1)
    for k in range(min(plan.count, done + max(1, batch))):
        if plan.step(k).dest.overlaps(old):
            return plan.step(k)
    return None


# --- a plan's data steps, in an order the disk allows ------------------------------------------------


@value
class DataStep:
    """One write of a plan that keeps partitions with their content (``diskplan apply``): partition
    ``number`` goes from ``length`` sectors at ``start`` to ``new_length`` at ``to``. ``kind``: "shrink"
    (start kept), "move" (size kept) or "grow" (start kept)."""

    kind: str
    number: int
    start: int
    length: int
    to: int
    new_length: int

    @property
    def before(self) -> Extent:
        return Extent(self.start, self.start + self.length - 1)

    @property
    def after(self) -> Extent:
        return Extent(self.to, self.to + self.new_length - 1)


class SequenceError(ValueError):
    """No order moves the partitions one at a time: ``str(exc)`` says which and why."""


def data_layout(table: Table) -> dict[int, Extent]:
    """Number -> extent of every partition of ``table`` that holds data, the ``layout`` ``data_steps`` takes:
    an extended partition is left out (it holds only the EBR chain, whose rules model.plan.ebrmove checks), or
    each logical partition's move would be blocked by the extended partition around it."""
    return {p.number: p.extent for p in table.live if p.role is not Role.EXTENDED}


def kept_moves(current: Table, desired: Table, kept: Iterable[int]) -> dict[int, Extent]:
    """The partitions ``kept`` (numbers: kept with their content) that ``desired`` puts elsewhere than
    ``current`` (the table on the disk) has them: number -> extent in the plan, what ``data_steps`` takes.
    An extended partition holds no data of its own: its logical partitions are kept by the table write."""
    out = {}
    for n in kept:
        p, w = current.by_number(n), desired.by_number(n)
        if p is not None and w is not None and p.extent != w.extent and p.role is not Role.EXTENDED:
            out[n] = w.extent
    return out


def data_steps(layout: dict[int, Extent], wanted: dict[int, Extent]) -> list[DataStep]:
    """The shrinks, moves and grows that take each partition of ``wanted`` (number -> its extent in the
    plan) from where ``layout`` (number -> extent: every partition on the disk now, including those the
    plan deletes afterwards) has it, one at a time, each into room the steps before it left:

    - every shrink first, at its own start (it only frees room, and a moved partition is smaller to copy);
    - then the moves, each chosen as soon as its new place is clear of every other partition where the
      steps before left it (a move may overlap its own old place: backend.move.engine copies in the safe
      direction). Moving left frees room for a partition moving left behind it, moving right for one
      ahead of it; when nothing can go first (two partitions that need each other's place, or room that
      a partition still holds), there is no order and SequenceError says why;
    - then every grow, into its final room (which the moves cleared).

    The one order of a plan's data writes: the planner's (model.plan.operations.plan_writes) and ``diskplan
    apply``'s (backend.move.planmoves). Raises SequenceError. Pure; backend.move.planmoves checks each step against the
    disk as well."""
    place = dict(layout)
    steps: list[DataStep] = []
    for n in sorted(wanted):
        now, want = place[n], wanted[n]
        if want.size < now.size:
            steps.append(DataStep("shrink", n, now.start, now.size, now.start, want.size))
            place[n] = Extent(now.start, now.start + want.size - 1)

    def blocker(n: int) -> int | None:
        new = Extent(wanted[n].start, wanted[n].start + place[n].size - 1)
        return next((m for m in sorted(place, key=lambda m: place[m].start) if m != n and place[m].overlaps(new)),
                    None)

    pending = sorted((n for n in wanted if wanted[n].start != place[n].start),
                     key=lambda n: (wanted[n].start > place[n].start, place[n].start * (-1 if
                                    wanted[n].start > place[n].start else 1)))
    while pending:
        free = next((n for n in pending if blocker(n) is None), None)
        if free is None:
            n = pending[0]
            m = blocker(n)
            assert m is not None
            new = Extent(wanted[n].start, wanted[n].start + place[n].size - 1)
            if m in pending:
                raise SequenceError(
                    f"no order moves partitions {', '.join(map(str, sorted(pending)))} one at a time: partition {n} "
                    f"needs {new.start}..{new.end}, where partition {m} is until it has moved, and it cannot move "
                    "first (move one of them out of the way in a plan of its own, then apply this one)")
            raise SequenceError(
                f"partition {n} would move to {new.start}..{new.end}, over partition {m} ({place[m].start}.."
                f"{place[m].end}), which stays there while data moves: apply in two steps, first a plan that "
                f"deletes or moves partition {m}, then this one")
        now = place[free]
        steps.append(DataStep("move", free, now.start, now.size, wanted[free].start, now.size))
        place[free] = Extent(wanted[free].start, wanted[free].start + now.size - 1)
        pending.remove(free)
    for n in sorted(wanted):
        now, want = place[n], wanted[n]
        if want.size > now.size:
            m = next((m for m in sorted(place) if m != n and place[m].overlaps(want)), None)
            if m is not None:
                raise SequenceError(
                    f"partition {n} would grow to {want.start}..{want.end}, over partition {m} ({place[m].start}.."
                    f"{place[m].end}), which stays there while data moves: apply in two steps, first a plan "
                    f"that deletes or moves partition {m}, then this one")
            steps.append(DataStep("grow", n, now.start, now.size, now.start, want.size))
            place[n] = want
    return steps
