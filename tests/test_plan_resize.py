"""Resizing partitions that hold data in the plan (pure): within what the filesystem's tool measured
(``Limits``), a shrink stopped at its minimum, refusals with the reason, the operation and its writes in the
safe order (a shrink before a move, a grow after it), the order of several, and a realign that shrinks
when the free space leaves no room."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.model.extent import Partition, State
from diskplan.model.geometry import Geometry
from diskplan.model.plan.fsresize import Limits, limits
from diskplan.model.plan.operations import Changes, plan_writes
from diskplan.model.plan.plan import Edge
from diskplan.model.table import new_table
from diskplan.model.value import replace
from helpers.plans import GIB, existing, ok, plan_on, refused

MiB = 2048  # sectors
EXT4 = limits("ext4", 12 * MiB * 512)  # resize2fs -P said 12 MiB
XFS = limits("xfs", None)
LUKS = limits("crypto_LUKS", None)


def test_an_existing_partition_resizes_only_within_what_its_filesystem_allows() -> None:
    plan = plan_on(GIB, existing(1, MiB, 41 * MiB - 1), existing(2, 100 * MiB, 120 * MiB - 1))
    # Not measured yet: its size cannot change (the probe, at its own edge, still begins the drag).
    refused(plan.resize_to(1, Edge.END, 30 * MiB, data=True), "not measured yet")
    assert plan.resize_to(1, Edge.END, 41 * MiB - 1, data=True).ok
    refused(plan.resize_to(1, Edge.END, 30 * MiB), "holds data")  # without data=True: as before
    # A shrink: the end snaps to the grain, never below the minimum, which the note names.
    out = plan.resize_to(1, Edge.END, 2 * MiB, data=True, limits=EXT4)
    p = ok(out).partition(1)
    assert p is not None and (p.start, p.size) == (MiB, 12 * MiB)
    assert out.snap is not None and "stopped at its ext4 minimum (12 MiB, from resize2fs)" in out.snap.notes
    assert "its ext4 shrinks by 28 MiB to 12 MiB when written" in out.message
    (op,) = ok(out).changes()
    assert (op.kind, op.source, op.source_size, op.start, op.end, op.nbytes) == (
        "resize", MiB, 40 * MiB, MiB, 13 * MiB - 1, 0)
    assert [(s.kind, s.to, s.new_length) for s in op.steps()] == [("shrink", MiB, 12 * MiB)]
    assert "resize2fs resizes the ext4 filesystem first, then the table entry is rewritten" in str(op)
    assert p.resized_from == 40 * MiB and p.moved_from is None
    # Keys: already at the minimum, one more step left is refused with the same reason.
    refused(ok(out).resize(1, Edge.END, -1, data=True, limits=EXT4), "cannot be resized further",
            "its ext4 minimum")
    # A grow stops against the next partition.
    grown = plan.resize_to(1, Edge.END, 110 * MiB, data=True, limits=EXT4)
    assert ok(grown).partition(1).end == 100 * MiB - 1  # type: ignore[union-attr]
    assert "stopped against partition 2" in grown.snap.notes  # type: ignore[union-attr]


def test_xfs_grows_only_and_luks_not_at_all() -> None:
    plan = plan_on(GIB, existing(1, MiB, 41 * MiB - 1))
    refused(plan.resize(1, Edge.END, -1, data=True, limits=XFS), "cannot be shrunk",
            "an XFS filesystem cannot shrink: it can only grow")
    (op,) = ok(plan.resize(1, Edge.END, 2, data=True, limits=XFS)).changes()
    assert "the table entry is rewritten first, then xfs_growfs resizes the xfs filesystem" in str(op)
    for steps in (-1, 1):
        refused(plan.resize(1, Edge.END, steps, data=True, limits=LUKS), "cannot be", "a LUKS container")
    refused(plan.resize(1, Edge.END, 1, data=True, limits=limits("ext4", None, "resize2fs is needed (Debian "
                                                                              "package e2fsprogs)")),
            "e2fsprogs")


def test_the_start_edge_moves_the_data_a_shrink_before_the_move_a_grow_after() -> None:
    plan = plan_on(GIB, existing(1, 10 * MiB, 50 * MiB - 1))
    right = ok(plan.resize(1, Edge.START, 2, data=True, limits=EXT4))
    (op,) = right.changes()
    assert (op.kind, op.start, op.end, op.nbytes) == ("resize", 12 * MiB, 50 * MiB - 1, 38 * MiB * 512)
    assert [(s.kind, s.to, s.new_length) for s in op.steps()] == [("shrink", 10 * MiB, 38 * MiB),
                                                               ("move", 12 * MiB, 38 * MiB)]
    left = ok(plan.resize(1, Edge.START, -3, data=True, limits=EXT4))
    (op,) = left.changes()
    assert [(s.kind, s.to, s.new_length) for s in op.steps()] == [("move", 7 * MiB, 40 * MiB),
                                                               ("grow", 7 * MiB, 43 * MiB)]
    assert "(81920s -> 88064s; 41,943,040 B = 40 MiB copied to the new start first; then the table entry" in str(op)
    # Moved afterwards (m): still a resize, by the same tool; the move is part of it.
    (op,) = ok(right.move(1, 1, data=True)).changes()
    assert (op.kind, op.start, op.source_size) == ("resize", 13 * MiB, 40 * MiB) and "resize2fs" in str(op)
    # Back to where it was: nothing to write.
    assert not ok(right.resize(1, Edge.START, -2, data=True, limits=EXT4)).dirty


def _pair(n: int, old: tuple[int, int], new: tuple[int, int]) -> tuple[Partition, Partition]:
    was = Partition(n, *old, state=State.EXISTING)
    resized = (("resized_from", str(was.size)),) if new[1] - new[0] != old[1] - old[0] else ()
    return was, Partition(n, *new, state=State.EXISTING, extra=resized)


def _writes(*pairs: tuple[Partition, Partition]) -> Changes:
    """The planner's one list for a disk holding the pairs' old partitions and a plan holding the new ones."""
    current = new_table("gpt", GIB).with_partitions(tuple(old for old, _ in pairs))
    return plan_writes(current, replace(current, partitions=tuple(new for _, new in pairs)), GIB)


def test_several_are_written_in_an_order_the_disk_allows() -> None:
    # 1 grows into the space 2 leaves by moving right, which 3 leaves by shrinking; 4 moves left.
    ops = _writes(_pair(1, (100, 199), (100, 259)), _pair(2, (200, 299), (260, 359)),
                  _pair(3, (300, 499), (360, 499)), _pair(4, (700, 799), (600, 699)))
    assert not ops.problems
    assert [new.number for _, new in ops.move] == [op.number for op in ops.operations if op.moves_data] == [3, 4, 2, 1]
    # The steps the write runs: every shrink, then the moves, then the grows (model.plan.move.data_steps).
    assert [(s.kind, s.number) for s in ops.steps] == [("shrink", 3), ("move", 4), ("move", 3), ("move", 2),
                                                      ("grow", 1)]
    done = {old.number: old.extent for old, _ in ops.move}
    for s in ops.steps:  # each lands where no other is at that moment
        assert done[s.number] == s.before and not any(e.overlaps(s.after) for n, e in done.items() if n != s.number)
        done[s.number] = s.after


def test_two_partitions_that_need_each_others_place_are_refused_before_anything_is_written() -> None:
    # 3 could move first, then neither 1 nor 2: the one list says so, and has no step to write.
    ops = _writes(_pair(1, (100, 199), (200, 299)), _pair(2, (200, 299), (100, 199)), _pair(3, (700, 799), (600, 699)))
    assert ops.problems == ("no order moves partitions 1, 2 one at a time: partition 2 needs 100..199, where "
                            "partition 1 is until it has moved, and it cannot move first (move one of them out of the "
                            "way in a plan of its own, then apply this one)",)
    assert ops.steps == ()


def test_realign_shrinks_the_filesystem_first_when_no_boundary_leaves_room() -> None:
    geom = Geometry(2**21, 512, 4096)  # 4 KiB physical blocks: 8 sectors
    plan = plan_on(geom, existing(1, 34, 32 * MiB - 1), existing(2, 32 * MiB, 40 * MiB - 1))
    assert plan.realign_wants_limits(1) and not plan.realign_wants_limits(2)
    refused(plan.realign(1), "would have to shrink first")
    out = ok(plan.realign(1, EXT4))
    p = out.partition(1)
    assert p is not None and (p.start, p.end) == (MiB, 32 * MiB - 1) and p.size % 8 == 0
    (op,) = out.changes()
    assert [(s.kind, s.to) for s in op.steps()] == [("shrink", 34), ("move", MiB)]
    refused(plan.realign(1, limits("ext4", 31 * MiB * 512 + 4096)), "would have to shrink to 31 MiB",
            "its ext4 filesystem")
    refused(plan.realign(1, XFS), "an XFS filesystem cannot shrink")
    # Fix my layout (A off any partition) uses the limits it is given.
    refused(plan.realign_all(), "partition 1: no 1 MiB boundary leaves room for it (it would have to shrink first)")
    assert ok(plan.realign_all({1: EXT4})).partition(1).start == MiB  # type: ignore[union-attr]
    # A size off the physical block: realigned and cut to whole blocks (its start moves into free space).
    odd = plan_on(geom, existing(1, 34, 20 * MiB + 2))
    assert odd.realign_wants_limits(1)
    q = ok(odd.realign(1, EXT4)).partition(1)
    assert q is not None and q.start == MiB and q.size % 8 == 0 and 0 <= (20 * MiB + 2 - 34 + 1) - q.size < 8
    assert ok(odd.realign(1)).partition(1).size == 20 * MiB + 2 - 34 + 1  # type: ignore[union-attr]  # unmeasured


@settings(max_examples=200, deadline=None)
@given(st.integers(-10 * MiB, 200 * MiB), st.sampled_from([Edge.START, Edge.END]), st.integers(1, 60))
def test_a_resize_never_goes_below_the_minimum_nor_leaves_its_free_space(lba: int, edge: Edge, least: int) -> None:
    plan = plan_on(GIB, existing(1, 5 * MiB, 45 * MiB - 1), existing(2, 100 * MiB, 120 * MiB - 1))
    found = Limits("ext4", True, True, least * MiB * 512 - 7)
    out = plan.resize_to(1, edge, lba, data=True, limits=found)
    if not out.ok:
        return
    p = out.plan.partition(1)
    assert p is not None
    assert p.size >= 40 * MiB or p.size * 512 >= found.minimum  # type: ignore[operator]  # a grow is always safe
    assert p.start >= 34 and p.end < 100 * MiB
    assert (p.start == 5 * MiB) if edge is Edge.END else (p.end == 45 * MiB - 1)


def test_a_resize_of_a_partition_off_the_grain_begins_before_its_filesystem_is_measured() -> None:
    from diskplan.ui.planning import DragKind, Session

    plan = plan_on(GIB, existing(1, 34, 20 * MiB + 99))  # both edges off the 1 MiB grain
    s = Session(plan.geometry, plan.table)
    for kind in (DragKind.END, DragKind.START):
        assert s.begin(1, kind, keyboard=True, data=True) == ""
        assert s.nudge(-1).refused  # not measured yet: its size cannot change
        s.measured(1, EXT4)
        shown = s.nudge(-1).outcome.plan.partition(1)
        assert shown is not None and shown.size < 20 * MiB + 66
        s.cancel()
        s.limits.clear()
