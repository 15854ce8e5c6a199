"""Where an msdos logical partition's EBR goes when the partition moves or is resized. Pure: the raw chain
is read and written in backend.raw.ebrchain.

A logical partition's entry lives in its EBR (extended boot record), one sector before its data, and the
EBR before it links to that sector. util-linux #3568: ``sfdisk --move-data`` moved a logical partition's
data over the next partition's EBR (the EBR had stayed behind when that partition was moved), so the
chain ended there and every later logical partition was gone. Here every EBR sector counts as occupied,
and a move or resize:

- stays between its neighbours in the chain (after the previous logical partition's data, before the next
  EBR), so the chain keeps its disk order and every partition keeps its number;
- keeps its EBR where it is when the new start is still after it (only the entry's relative start
  changes); otherwise (a move left past its own EBR) the EBR moves to the same distance before the new
  start (as far as the previous partition allows), written before the previous EBR's link is pointed at
  it. The first logical partition's EBR is the extended partition's first sector: it cannot move
  (diskplan does not move the extended partition);
- grows the extended partition into free space after it when the new end is past its end;
- parks the hidden entry (backend.raw.ebrchain) on one free sector of the extended partition: not data of any
  partition, not an EBR, not the move's source or destination, so a partition node of one sector shows
  nothing a prober could take for a filesystem.
"""

from __future__ import annotations

from diskplan.model.extent import Extent, Role
from diskplan.model.table import Table
from diskplan.model.value import value


@value
class LogicalMove:
    """The EBR now and afterwards, the sector the hidden entry points at (0: none free) and the extended
    partition's end afterwards."""

    ebr: int
    new_ebr: int
    park: int
    ext_end: int


def free_sector(after: int, last: int, taken: list[Extent]) -> int:
    """The first sector in ``after+1..last`` in none of ``taken``; 0 when there is none."""
    at = after + 1
    for e in sorted(taken):
        if e.end < at:
            continue
        if e.start > at:
            break
        at = e.end + 1
    return at if at <= last else 0


def extended_room(table: Table, ext: Extent) -> int:
    """The last sector the extended partition ``ext`` may grow to when a logical partition is moved or grown
    past its end: up to the first partition after it at the top level, or the end of the usable area; never
    before its own end. The one answer for `diskplan move`/`resize`/`apply` (backend.move.engine.logical_move) and
    the planner (``Plan``), so a plan the planner shows is one the write accepts."""
    after = [p.start for p in table.live if p.role is not Role.LOGICAL and p.start > ext.end]
    return max(ext.end, min([table.last_usable, *(a - 1 for a in after)]))


def plan_logical(
    k: int, ebrs: list[int], parts: list[Extent], ext: Extent, limit: int, to: int, length: int
) -> LogicalMove | str:
    """Logical partition ``k`` (0 for the first, numbered 5) of a chain whose EBRs are at ``ebrs`` and data
    at ``parts`` (chain order), in the extended partition ``ext`` that may grow up to ``limit``, moved to
    ``to`` with ``length`` sectors. Returns the plan, or why it is refused."""
    number = k + 5
    if any(b >= p.start for b, p in zip(ebrs, parts, strict=True)) or any(
        parts[i].end >= ebrs[i + 1] for i in range(len(parts) - 1)
    ):
        return "the EBR chain is not in disk order (each EBR before its partition, before the next EBR)"
    new = Extent(to, to + length - 1)
    ebr = ebrs[k]
    last = ebrs[k + 1] - 1 if k + 1 < len(ebrs) else limit
    if new.end > last:
        if k + 1 < len(ebrs):
            return (f"partition {number} at {new.start}..{new.end} would overwrite the EBR of partition {number + 1} "
                    f"at LBA {ebrs[k + 1]} (what made sfdisk --move-data lose logical partitions, util-linux #3568)")
        if limit <= ext.end:
            return (f"partition {number} at {new.start}..{new.end} would pass the extended partition's end "
                    f"({ext.end}), and nothing after it is free to grow it into (a partition or the end of the usable "
                    "area follows): make room after it first, or choose a place inside it")
        return (f"partition {number} at {new.start}..{new.end} would pass the extended partition's end ({ext.end}) "
                f"and the free space after it (up to {limit})")
    new_ebr = ebr
    if to <= ebr:
        if k == 0:
            return (f"partition {number} cannot start at or before its EBR, the extended partition's first sector "
                    f"({ext.start}): diskplan does not move the extended partition")
        low = parts[k - 1].end + 1
        if to <= low:
            return (f"partition {number} at {to} leaves no sector for its EBR after partition {number - 1} "
                    f"(which ends at {parts[k - 1].end})")
        new_ebr = max(low, to - (parts[k].start - ebr))
    ext_end = max(ext.end, new.end)
    taken = [*parts, *(Extent(b, b) for b in ebrs), Extent(new_ebr, new_ebr), new]
    return LogicalMove(ebr, new_ebr, free_sector(ebr, ext_end, taken), ext_end)


def window(k: int, ebrs: list[int], parts: list[Extent], ext: Extent) -> Extent:
    """Where logical partition ``k`` may lie without growing the extended partition: after the previous
    partition and a sector for its own EBR (the extended's first sector for the first), before the next EBR."""
    lo = parts[k - 1].end + 2 if k else ext.start + 1
    hi = ebrs[k + 1] - 1 if k + 1 < len(ebrs) else ext.end
    return Extent(lo, hi)
