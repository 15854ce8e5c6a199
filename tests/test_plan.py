"""The plan, step by step: snapping to each target, refusals that leave the plan as it was, existing
partitions that never move, msdos rules, pending changes, undo and redo."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from diskplan.model.extent import Partition, Role, State
from diskplan.model.formats.planfile import PlanFileError, load_into, save_plan
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, SnapTarget
from diskplan.model.plan.history import History
from diskplan.model.plan.operations import validate
from diskplan.model.plan.plan import Edge, Outcome, Plan
from diskplan.model.table import new_table
from helpers.plans import GIB, LINUX, existing, ok, plan_on, refused

# A 3-disk RAID's 192 KiB stripe on 4 KiB physical blocks: the targets all differ.
RAID = Geometry(2**23, 512, 4096, optimal_io=196608, min_io=4096)


def aligned(p: Partition, grain: Grain, area_hi: int) -> bool:
    return grain.is_aligned(p.start) and (grain.is_aligned(p.end + 1) or p.end == area_hi)


# --- snapping --------------------------------------------------------------------------------------------


def test_a_new_partition_snaps_and_says_requested_and_snapped() -> None:
    out = plan_on().propose(34, 204800 + 100)
    plan = ok(out)
    p = plan.partition(out.number or 0)
    assert p is not None and p.state is State.PROPOSED
    assert (p.start, p.end) == (2048, 2048 + 204800 - 1)  # start up to 1 MiB, size to whole MiB
    assert out.snap is not None
    assert (out.snap.requested.start, out.snap.snapped.start) == (34, 2048)
    text = out.snap.describe(Edge.START)
    assert "34s (17,408 B" in text and "-> 2048s (1,048,576 B = 1 MiB)" in text


@pytest.mark.parametrize(
    ("target", "grains", "sectors"),
    [
        (SnapTarget.OPTIMAL, None, 6144),  # lcm(1 MiB, 192 KiB stripe) = 3 MiB
        (SnapTarget.PHYSICAL, None, 8),
        (SnapTarget.CUSTOM, (65536,), 128),  # a 64 KiB erase block the kernel cannot know
        (SnapTarget.NONE, None, 1),
    ],
)
def test_every_step_lands_on_the_target_grain(target: SnapTarget, grains: tuple[int, ...] | None,
                                              sectors: int) -> None:
    plan = ok(plan_on(RAID).set_target(target, grains))
    assert plan.grain.sectors == sectors
    out = plan.propose(5001, 300001)
    plan = ok(out)
    n = out.number or 0
    area_hi = plan.table.last_usable
    before = plan.partition(n)
    assert before is not None and aligned(before, plan.grain, area_hi)
    for step in (plan.move(n, 1), plan.move(n, 10), plan.resize(n, Edge.END, 3), plan.resize(n, Edge.START, 2),
                 plan.move_to(n, 777_777), plan.resize_to(n, Edge.END, 1_234_567),
                 plan.resize_to(n, Edge.START, 12_345)):
        after = ok(step).partition(n)
        assert after is not None and aligned(after, plan.grain, area_hi), (step.message, after)
    moved = ok(plan.move(n, 1)).partition(n)
    assert moved is not None and moved.start - before.start == sectors
    moved10 = ok(plan.move(n, 10)).partition(n)
    assert moved10 is not None and moved10.start - before.start == 10 * sectors


def test_the_grain_carries_the_alignment_offset() -> None:
    # An old 512e drive with a "WinXP jumper": LBA 63 is on a physical block boundary.
    geom = Geometry(2**22, 512, 4096, alignment_offset=3584)
    plan = ok(plan_on(geom).set_target(SnapTarget.PHYSICAL))
    p = ok(plan.propose(100, 5000)).partition(1)
    assert p is not None and p.start % 8 == 7 and (p.end + 1) % 8 == 7


def test_4kn_sectors_make_a_mebibyte_256_sectors() -> None:
    geom = Geometry(2**18, 4096, 4096)  # 1 GiB of 4 KiB sectors: GPT usable from 6
    plan = plan_on(geom)
    assert plan.table.first_usable == 6
    p = ok(plan.propose(6, 1000)).partition(1)
    assert p is not None and (p.start, p.size) == (256, 1024)


def test_requested_and_snapped_for_each_edge() -> None:
    plan = ok(plan_on().propose(2048, 204800))
    out = plan.resize_to(1, Edge.END, 300_000)
    assert out.snap is not None
    assert out.snap.requested.end == 300_000
    assert out.snap.snapped.end == 299_007  # 300,001 is nearest the boundary 146 × 2048: end one before it
    assert "end 300000s (153,600,000 B" in out.snap.describe(Edge.END)
    out = plan.resize_to(1, Edge.START, 3000)
    assert out.snap is not None and (out.snap.requested.start, out.snap.snapped.start) == (3000, 2048)


def test_a_drag_is_previews_from_one_plan_and_one_step_in_history() -> None:
    base = ok(plan_on().propose(2048, 204800))
    history = History(base)
    previews = [base.move_to(1, lba) for lba in range(10_000, 300_000, 7_919)]
    assert all(o.before is base for o in previews)
    assert history.apply(previews[-1])
    assert history.present.partition(1) == previews[-1].plan.partition(1)
    assert history.undo() is not None and history.present is base


# --- limits: neighbours, metadata, the end of the disk ----------------------------------------------------


def test_snapping_never_overlaps_a_neighbour() -> None:
    plan = plan_on(GIB, existing(1, 34, 100_000), existing(2, 500_001, 600_000))
    out = plan.propose(100_001, 10_000)
    plan = ok(out)
    p = plan.partition(3)
    assert p is not None and p.start == 100_352  # the first 1 MiB boundary after partition 1
    out = plan.move_to(3, 499_000)  # as far right as the existing partition 2 allows
    q = ok(out).partition(3)
    assert q is not None and q.end < 500_001 and q.start % 2048 == 0 and (q.end + 1) % 2048 == 0
    assert out.snap is not None and any("partition 2" in n for n in out.snap.notes)
    refused(ok(out).move(3, 1), "partition 2")
    out = plan.resize_to(3, Edge.END, 10**9)
    r = ok(out).partition(3)
    assert r is not None and r.end == 499_711  # 244 × 2048 − 1: the last grain end before partition 2


def test_a_new_partition_cannot_start_inside_another() -> None:
    plan = plan_on(GIB, existing(1, 2048, 100_000))
    refused(plan.propose(50_000, 2048), "belongs to partition 1")


def test_too_big_is_refused_not_shrunk() -> None:
    plan = plan_on(GIB, existing(1, 2048, 100_000), existing(2, 200_000, 300_000))
    refused(plan.propose(100_001, 150_000), "do not fit", "partition 2")
    # What fitted as typed may lose the sectors alignment costs, no more.
    p = ok(plan.propose(100_001, 99_999)).partition(3)
    assert p is not None and p.start == 100_352 and p.end == 198_655


def test_nothing_enters_the_gpt_metadata_or_passes_the_end() -> None:
    plan = ok(plan_on().propose(34, 2048 * 10))
    p = ok(plan.move_to(1, 0)).partition(1) if plan.move_to(1, 0).ok else plan.partition(1)
    assert p is not None and p.start == 2048
    refused(plan.move(1, -1), "GPT header")
    out = plan.resize_to(1, Edge.END, 10**12)
    q = ok(out).partition(1)
    assert q is not None and q.end == plan.table.last_usable == 2097118  # the area's end is a valid end
    out = plan.move_to(1, 10**12)
    r = ok(out).partition(1)
    assert r is not None and r.end <= 2097118 and (r.end + 1) % 2048 == 0


def test_a_partition_stays_at_least_one_grain() -> None:
    plan = ok(plan_on().propose(2048, 204800))
    p = ok(plan.resize_to(1, Edge.END, 0)).partition(1)
    assert p is not None and p.size == 2048
    q = ok(plan.resize_to(1, Edge.START, 10**9)).partition(1)
    assert q is not None and q.size == 2048 and q.end == 206847


# --- existing partitions -------------------------------------------------------------------------------------


def test_existing_partitions_move_only_with_their_data_and_never_resize() -> None:
    plan = plan_on(GIB, existing(1, 2048, 100_000))
    for out in (plan.move(1, 1), plan.move_to(1, 4096), plan.resize(1, Edge.END, 1),
                plan.resize_to(1, Edge.START, 4096)):
        refused(out, "holds data")
    moved = ok(plan.move(1, 1, data=True))  # asked explicitly: a data move, one grain right
    p = moved.partition(1)
    assert p is not None and (p.start, p.size, p.state) == (4096, 97_953, State.EXISTING)
    (op,) = moved.changes()
    assert (op.kind, op.number, op.source, op.start, op.end, op.nbytes) == ("move", 1, 2048, 4096, 100_000 + 2048,
                                                                          97_953 * 512)
    assert "move 1 with its data: 2048..100000 -> 4096..102048" in str(op) and not moved.problems()
    assert [(q.start, q.end) for q in moved.writes().result(moved.base).live] == [(4096, 102_048)]
    assert ok(moved.move_to(1, 2048, data=True)) == plan  # back where it is: nothing moves
    # A data move with a table change is refused as a whole: the moves are written on their own.
    mixed = ok(moved.propose(500_000, 4096))
    assert any("write the table changes first, then move" in why for why in mixed.problems())
    assert any("write the table changes first" in why for why in ok(moved.set_name(1, "x")).problems())
    with pytest.raises(PlanFileError, match="GUID of partition 1 is unknown"):  # it could not say which it moves
        save_plan(moved)
    guid = "0E8B5A1C-4D2F-4B8E-9C11-2A3B4C5D6E7F"
    (saved,) = json.loads(save_plan(moved, guids={1: guid}))["partitions"]  # diskplan apply moves it
    assert (saved["start"], saved["keeps"]) == (4096, {"number": 1, "guid": guid})
    again = load_into(plan, save_plan(moved, guids={1: guid}))  # the planner would delete and create it
    assert not again.ok and "moves or resizes partition 1 with its data" in again.message
    # Deleting a moved partition deletes it where it is on the disk.
    gone = ok(moved.delete(1))
    assert gone.deleted(1).extent == plan.partition(1).extent  # type: ignore[union-attr]
    assert [op.kind for op in gone.changes()] == ["delete"]


def test_saving_a_move_names_the_partition_whose_guid_is_unknown() -> None:
    plan = plan_on(GIB, existing(1, 2048, 100_000), existing(2, 200_000, 300_000))
    moved = ok(ok(plan.move(1, 1, data=True)).move(2, 1, data=True))
    with pytest.raises(PlanFileError, match="GUID of partition 1 is unknown"):  # partition 2's is known
        save_plan(moved, guids={2: "0E8B5A1C-4D2F-4B8E-9C11-2A3B4C5D6E7F"})


def test_realign_moves_existing_partitions_to_the_nearest_boundary_that_fits() -> None:
    # 34s (what old tools did) with no room to realign, one right after it, one 639 sectors past a boundary.
    plan = plan_on(GIB, existing(1, 34, 100_033), existing(2, 100_034, 300_033), existing(3, 1_000_063, 1_010_062))
    refused(plan.realign(1), "cannot be realigned", "shrink")  # partition 2 follows it at once
    one = ok(plan.realign(3))
    assert one.partition(3).start == 999_424  # type: ignore[union-attr]  # the nearest boundary, down
    assert one.partition(3).size == 10_000  # type: ignore[union-attr]
    assert ok(plan.realign(2)).partition(2).start == 100_352  # type: ignore[union-attr]  # down is taken: up
    both = plan.realign_all()
    assert both.ok and "realigned partitions 2, 3" in both.message
    assert "not partition 1: no 1 MiB boundary leaves room" in both.message
    assert [(op.kind, op.number) for op in both.plan.changes()] == [("move", 3), ("move", 2)]  # rightmost first
    assert "A realigns" in plan.fix_layout().message
    assert ok(plan.realign(3)).realign(3).message.startswith("partition 3 already starts")
    refused(ok(plan.propose(1_500_000, 4096)).realign(4), "proposed")


def test_existing_partitions_are_never_moved_only_marked() -> None:
    plan = plan_on(GIB, existing(1, 2048, 100_000))
    marked = ok(plan.delete(1))
    assert marked.deleted(1) is not None and marked.partition(1) is None
    assert marked.deleted(1).extent == plan.partition(1).extent  # type: ignore[union-attr]
    # The freed space is plannable, and the freed number is reused.
    out = marked.propose(2048, 4096)
    assert ok(out).partition(1) is not None and out.number == 1
    refused(ok(out).undelete(1), "number 1")
    # Number 1 free again but its space taken: a proposal numbered 2 sits there.
    taken = ok(ok(ok(out.plan.propose(300_000, 4096)).delete(1)).move_to(2, 50_000))
    assert taken.partition(1) is None and taken.partition(2).start < 100_000  # type: ignore[union-attr]
    refused(taken.undelete(1), "used by partition 2")
    back = ok(marked.undelete(1))
    assert back == plan


def test_changes_against_the_disk() -> None:
    plan = plan_on(GIB, existing(1, 2048, 100_000), existing(2, 100_352, 200_000, name="old"))
    plan = ok(plan.delete(1))
    plan = ok(plan.set_name(2, "home"))
    plan = ok(plan.set_type(2, "linux home"))
    plan = ok(plan.propose(300_000, 20480, name="new", flags=("legacy_boot",)))
    kinds = [(c.kind, c.number) for c in plan.changes()]
    assert kinds == [("delete", 1), ("create", 1), ("change", 2)]  # the operations a commit performs
    create = str(plan.changes()[1])
    assert create.startswith("create 1 at 299008..319487: 20480 sectors") and "flags legacy_boot" in create
    assert str(plan.changes()[2]) == ("change 2 (100352..200000): type Linux filesystem -> Linux home, "
                                      "name 'old' -> 'home'")
    relabeled = ok(plan.new_label("msdos"))
    texts = [str(c) for c in relabeled.changes()]
    assert texts[0] == "new msdos label (every old partition is removed)"
    assert [c.kind for c in relabeled.changes()] == ["label", "delete", "delete"]
    refused(relabeled.undelete(2), "new label")
    assert ok(relabeled.clear()) == Plan.open(GIB, plan.base)


# --- msdos ---------------------------------------------------------------------------------------------------


def test_msdos_primaries_extended_and_logicals() -> None:
    geom = Geometry(2**22)
    plan = plan_on(geom, label="msdos")
    plan = ok(plan.propose(1, 2048 * 10))
    ext = plan.propose(30_000, 2048 * 100, role=Role.EXTENDED)
    plan = ok(ext)
    e = plan.partition(ext.number or 0)
    assert e is not None and e.role is Role.EXTENDED and e.type == "0x0f"
    refused(plan.propose(500_000, 2048, role=Role.EXTENDED), "one extended")
    first = plan.propose(e.start, 2048)  # clicked on the extended partition's first sector (its EBR)
    plan = ok(first)
    l5 = plan.partition(5)
    assert first.number == 5 and l5 is not None and l5.role is Role.LOGICAL
    assert l5.start > e.start and l5.start % 2048 == 0
    second = plan.propose(l5.end + 1, 2048)
    plan = ok(second)
    l6 = plan.partition(6)
    assert l6 is not None and l6.start >= l5.end + 2  # one sector at least for the EBR
    refused(plan.propose(e.start + 10, 10, role=Role.PRIMARY), "only logical")
    shrunk = plan.resize_to(e.number, Edge.END, l6.start)
    assert ok(shrunk).partition(e.number).end >= l6.end  # type: ignore[union-attr]
    assert shrunk.snap is not None and "logical partition 6" in shrunk.snap.notes[0]
    refused(plan.move(e.number, 1), "holds logical")
    assert validate(plan.table, geom) == []
    for start in (3_000_000, 3_100_000):
        plan = ok(plan.propose(start, 2048))
    refused(plan.propose(3_500_000, 2048), "4 primary")
    gone = ok(plan.delete(e.number))
    assert gone.partition(5) is None and gone.partition(6) is None and gone.extended() is None


def test_msdos_names_and_types_are_checked() -> None:
    plan = plan_on(Geometry(2**22), label="msdos")
    refused(plan.propose(2048, 2048, name="root"), "no names")
    refused(plan.propose(2048, 2048, ptype="Linux home"), "not an MBR partition type")
    refused(plan.propose(2048, 2048, ptype="0x05"), "extended")
    p = ok(plan.propose(2048, 2048, ptype="swap")).partition(1)
    assert p is not None and p.type == "0x82"


def test_gpt_types_names_and_flags() -> None:
    plan = ok(plan_on().propose(2048, 2048, ptype="esp", name="EFI"))
    p = plan.partition(1)
    assert p is not None and p.type == "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
    refused(plan.set_name(1, "x" * 37), "36")
    refused(plan.set_flags(1, ("esp",)), "as the type")
    refused(plan.set_type(1, "W95 FAT32 (LBA)"), "not a GPT partition type")
    flagged = ok(plan.toggle_flag(1, "legacy_boot"))
    assert flagged.partition(1).flags == ("legacy_boot",)  # type: ignore[union-attr]
    assert ok(flagged.toggle_flag(1, "legacy_boot")).partition(1).flags == ()  # type: ignore[union-attr]


# --- whole-plan steps ----------------------------------------------------------------------------------------


def test_fix_my_layout_resnaps_every_proposal_at_once() -> None:
    loose = ok(plan_on().set_target(SnapTarget.NONE))
    for start, size in ((40, 5000), (9000, 7777), (30001, 100_000)):
        loose = ok(loose.propose(start, size))
    tight = ok(loose.set_target(SnapTarget.OPTIMAL))
    assert tight.live == loose.live  # switching the target moves nothing
    fixed = ok(tight.fix_layout())
    assert all(aligned(p, fixed.grain, fixed.table.last_usable) for p in fixed.live)
    assert validate(fixed.table, GIB) == []
    assert ok(fixed.fix_layout()) is fixed  # nothing left to do


def test_fix_my_layout_is_all_or_nothing() -> None:
    loose = ok(plan_on(GIB, existing(1, 34, 3000), existing(2, 3500, 9000), target=SnapTarget.NONE)
               .propose(3001, 400))
    tight = ok(loose.set_target(SnapTarget.OPTIMAL))
    refused(tight.fix_layout(), "cannot fix")


def test_no_table_and_foreign_labels_only_allow_a_new_label() -> None:
    from diskplan.model.table import no_table

    plan = Plan.open(GIB, no_table(GIB))
    refused(plan.propose(2048, 2048), "no partition table")
    fresh = ok(plan.new_label("gpt"))
    assert fresh.table.label == "gpt" and ok(fresh.propose(2048, 2048)).partition(1) is not None
    refused(plan.new_label("mac"), "gpt and msdos")


def test_adopting_a_plan_keeps_what_matches() -> None:
    disk = plan_on(GIB, existing(1, 2048, 100_000), existing(2, 100_352, 200_000))
    wanted = new_table("gpt", GIB).with_partitions((
        Partition(1, 2048, 100_000, LINUX, "data", state=State.PROPOSED),
        Partition(3, 204_800, 300_000, LINUX, state=State.PROPOSED),
    ))
    plan = ok(disk.adopt(wanted))
    assert plan.partition(1).state is State.EXISTING and plan.partition(1).name == "data"  # type: ignore[union-attr]
    assert plan.deleted(2) is not None
    assert plan.partition(3).state is State.PROPOSED  # type: ignore[union-attr]
    assert [c.kind for c in plan.changes()] == ["delete", "create", "change"]
    assert str(plan.changes()[2]) == "change 1 (2048..100000): name '' -> 'data'"
    clash = wanted.with_partitions((Partition(1, 2048, 100_000, LINUX), Partition(2, 50_000, 60_000, LINUX)))
    refused(disk.adopt(clash), "overlap")


# --- history -------------------------------------------------------------------------------------------------


def test_undo_and_redo_restore_exact_plans() -> None:
    h = History(plan_on())
    plans = [h.present]
    steps: tuple[Callable[[Plan], Outcome], ...] = (
        lambda p: p.propose(2048, 4096), lambda p: p.move(1, 3), lambda p: p.resize(1, Edge.END, 2),
        lambda p: p.set_name(1, "x"), lambda p: p.delete(1))
    for step in steps:
        assert h.apply(step(h.present))
        plans.append(h.present)
    for expected in reversed(plans[:-1]):
        assert h.undo() is not None
        assert h.present is expected
    assert h.undo() is None and not h.can_undo
    for expected in plans[1:]:
        assert h.redo() is not None and h.present is expected
    h.undo()
    h.apply(h.present.set_name(1, "y"))
    assert not h.can_redo  # a new step drops the redo branch


def test_history_records_only_real_steps_from_the_present() -> None:
    h = History(plan_on())
    stale = h.present.propose(2048, 4096)
    assert not h.apply(h.present.propose(0, 0))  # refused
    assert not h.apply(h.present.clear())  # nothing changed
    assert h.apply(stale)
    with pytest.raises(ValueError):
        h.apply(stale)
    assert h.undo_message.startswith("new partition 1")


def test_a_new_type_on_an_existing_partition_drops_the_old_types_flags() -> None:
    efi = existing(1, 2048, 206847, type="C12A7328-F81F-11D2-BA4B-00A0C93EC93B", flags=("boot", "esp", "hidden"))
    plan = ok(plan_on(GIB, efi).set_type(1, "linux filesystem"))
    p = plan.partition(1)
    assert p is not None and p.type == LINUX and p.flags == ("hidden",)
    assert [str(c) for c in plan.changes()] == ["change 1 (2048..206847): type EFI system -> Linux filesystem"]


def test_a_wild_drag_is_reported_as_asked() -> None:
    plan = ok(plan_on().propose(2048, 204800))
    out = plan.resize_to(1, Edge.START, 10**9)  # dragged far past its own end
    assert out.snap is not None and out.snap.requested == (10**9, 206847)
    assert ok(out).partition(1).size == 2048  # type: ignore[union-attr]
    out = plan.move_to(1, -50_000)  # dragged off the start of the disk
    assert out.snap is not None and out.snap.requested.start == -50_000
    assert "stopped against the GPT header" in out.snap.describe()
