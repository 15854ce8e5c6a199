"""The planner moves, resizes and realigns msdos logical partitions that hold data by `diskplan move`'s rules
(model.plan.ebrmove): each stays between the previous partition's data and the next EBR as the raw chain has it,
the first never starts at or before the extended partition's first sector, and the plan writes it as a
data move (backend.move.engine rewrites the EBR chain), never as a deletion and a creation."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from diskplan.model.extent import Extent, Partition, Role
from diskplan.model.geometry import Geometry
from diskplan.model.plan.ebrmove import LogicalMove, extended_room, plan_logical
from diskplan.model.plan.fsresize import Limits
from diskplan.model.plan.plan import Edge, Plan
from diskplan.model.table import Table

L, E = Role.LOGICAL, Role.EXTENDED
EXT = (63, 150_062)
GEOM = Geometry(sectors=196_608)
EXT4 = Limits("ext4", True, True, 4 << 20)


def part(n: int, start: int, end: int, role: Role = Role.PRIMARY, **kw: Any) -> Partition:
    return Partition(n, start, end, role=role, type="0x05" if role is E else "0x83", **kw)


def table(chain: list[tuple[int, int, int]], ebrs: bool = True, after: int | None = None) -> Table:
    """An msdos table: the extended partition at EXT and logical partitions (EBR, start, size) in chain order;
    with ``after``, primary partition 2 from there (8192 sectors), which bounds the extended partition's growth."""
    logicals = [part(5 + i, s, s + n - 1, L) for i, (_, s, n) in enumerate(chain)]
    tail = () if after is None else (part(2, after, after + 8191),)
    return Table("msdos", 1, GEOM.sectors - 1, (part(1, *EXT, E), *logicals, *tail),
                 ebrs=tuple(b for b, _, _ in chain) if ebrs else ())


# The DOS-era layout of tests/test_move_logical.py: partition 6's EBR far before its data (at 39000, data 39063).
DOS = [(63, 126, 30_000), (39_000, 39_063, 30_000)]


def allowed(t: Table, number: int, new: Extent) -> LogicalMove | str:
    """What `diskplan move`/`resize` says about partition ``number`` going to ``new`` on the disk ``t``
    (backend.move.engine.logical_move: the extended partition may grow as far as
    model.plan.ebrmove.extended_room says)."""
    ext = next(p for p in t.partitions if p.role is E)
    parts = [p.extent for p in sorted(t.partitions, key=lambda p: p.number) if p.role is L]
    room = extended_room(t, ext.extent)
    return plan_logical(number - 5, list(t.ebrs), parts, ext.extent, room, new.start, new.size)


def test_realign_moves_a_logical_partition_as_data_never_delete_and_create() -> None:
    plan = Plan.open(GEOM, table(DOS))
    out = plan.realign(5)
    assert out.ok, out.message
    assert (out.plan.partition(5).start, out.plan.partition(5).size) == (2048, 30_000)  # type: ignore[union-attr]
    (op,) = out.plan.changes()
    assert (op.kind, op.number, op.source, op.start) == ("move", 5, 126, 2048)
    assert not out.plan.problems()
    ch = out.plan.writes()
    assert not ch.delete and not ch.create and not ch.rewrite and not ch.table_changes


def test_realign_all_takes_logical_partitions_and_leaves_the_extended_one() -> None:
    out = Plan.open(GEOM, table(DOS)).realign_all()
    assert out.ok and "realigned partitions 5, 6" in out.message and "not partition 1" in out.message
    moves = {op.number: (op.source, op.start) for op in out.plan.changes()}
    # 6 goes left past its own EBR (which moves with it, after partition 5): 38912 is the nearest boundary.
    assert moves == {5: (126, 2048), 6: (39_063, 38_912)}
    assert allowed(table(DOS), 6, Extent(38_912, 38_912 + 29_999)) is not None
    assert not out.plan.problems()


def test_a_drag_over_the_next_ebr_stops_before_it_then_is_refused_with_the_clis_reason() -> None:
    plan = Plan.open(GEOM, table(DOS))
    out = plan.move_to(5, 20_000, data=True)  # 20480..50479 would cover partition 6's EBR at 39000
    assert out.ok and out.plan.partition(5).extent == Extent(8192, 38_191)  # type: ignore[union-attr]
    assert out.snap is not None and "would overwrite the EBR of partition 6 at LBA 39000" in out.snap.notes[-1]
    again = out.plan.move_to(5, 30_000, data=True)
    assert not again.ok and not again.changed
    assert again.message.startswith("partition 5 cannot be moved further: partition 5 at 30720..60719 would "
                                    "overwrite the EBR of partition 6 at LBA 39000 (what made sfdisk --move-data")


def test_the_first_logical_partition_never_starts_at_the_extended_partitions_first_sector() -> None:
    out = Plan.open(GEOM, table(DOS)).move_to(5, 0, data=True)
    assert out.ok and out.plan.partition(5).start == 2048  # type: ignore[union-attr]  # the first boundary after 63
    assert "cannot start at or before its EBR, the extended partition's first sector (63)" in out.snap.notes[-1]  # type: ignore[union-attr]


def test_growing_the_end_stops_before_the_next_ebr_with_the_clis_reason() -> None:
    out = Plan.open(GEOM, table(DOS)).resize_to(5, Edge.END, 45_000, data=True, limits=EXT4)
    p = out.plan.partition(5)
    assert out.ok and p is not None and p.end < 39_000 and (p.end + 1) % 2048 == 0, out.message
    assert "would overwrite the EBR of partition 6 at LBA 39000" in out.snap.notes[-1]  # type: ignore[union-attr]
    (op,) = out.plan.changes()
    assert (op.kind, op.number, op.source_size) == ("resize", 5, 30_000)


def test_without_the_raw_chain_a_logical_partition_is_not_moved() -> None:
    out = Plan.open(GEOM, table(DOS, ebrs=False)).realign(5)
    assert not out.ok and "EBR chain was not read" in out.message
    out = Plan.open(GEOM, table(DOS)).move_to(1, 4096, data=True)
    assert not out.ok and "partition 1 is the extended partition" in out.message


@st.composite
def chains(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """1 to 4 logical partitions in the extended partition, each with its EBR 1 to 3000 sectors before it."""
    out: list[tuple[int, int, int]] = []
    at = EXT[0]
    for _ in range(draw(st.integers(1, 4))):
        ebr = at if not out else at + draw(st.integers(0, 4000))
        start = ebr + draw(st.integers(1, 3000))
        size = draw(st.integers(2048, 20_000))
        if start + size - 1 > EXT[1]:
            break
        out.append((ebr, start, size))
        at = start + size
    return out


@settings(max_examples=150, deadline=None)
@given(chains(), st.integers(0, 3), st.integers(-1000, 160_000), st.sampled_from(["move", "start", "end"]),
       st.none() | st.integers(EXT[0] + EXT[1], 180_000))
# Issue 31: the last logical partition moved past the extended partition's end, into the free space after it
# (the extended partition grows, as `diskplan move` grows it).
@example(chain=[(63, 64, 2048)], k=0, lba=148_480, how="move", after=None)
@example(chain=[(63, 64, 2048)], k=0, lba=148_480, how="move", after=151_000)  # no room for it: stops before
def test_every_place_the_planner_lands_a_logical_partition_on_is_one_the_cli_allows(
        chain: list[tuple[int, int, int]], k: int, lba: int, how: str, after: int | None) -> None:
    t = table(chain, after=after)
    number = 5 + k % len(chain)
    plan = Plan.open(GEOM, t)
    if how == "move":
        out = plan.move_to(number, lba, data=True)
    else:
        out = plan.resize_to(number, Edge.START if how == "start" else Edge.END, lba, data=True,
                             limits=Limits("ext4", True, True, 1 << 20))
    if not out.changed:
        return
    new = out.plan.partition(number)
    assert new is not None
    verdict = allowed(t, number, new.extent)
    assert isinstance(verdict, LogicalMove), verdict
    ch = out.plan.writes()
    assert [q.number for q, _ in ch.move] == [number] and not ch.delete and not ch.create, ch.operations
    assert not out.plan.problems(), out.plan.problems()


def test_a_shrink_stopped_at_the_filesystem_minimum_says_so_not_a_chain_reason() -> None:
    out = Plan.open(GEOM, table(DOS)).resize_to(6, Edge.END, 39_100, data=True, limits=EXT4)
    p = out.plan.partition(6)
    assert out.ok and p is not None and p.size * 512 >= 4 << 20
    snap = out.snap
    assert snap is not None and snap.notes[-1].startswith("stopped at its ext4 minimum"), snap


def test_a_start_edge_dragged_before_the_first_sector_says_the_clis_reason() -> None:
    out = Plan.open(GEOM, table(DOS)).resize_to(5, Edge.START, 10, data=True, limits=EXT4)
    assert out.snap is not None and "cannot start at or before its EBR" in out.snap.notes[-1], (out.message, out.snap)
