"""The repair as a plan step (pure model): offered by the disk, planned on its own, undoable, listed with
the sectors it writes, and blocking every other step while it is pending (and the other way round)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.model.extent import Extent, Partition, State
from diskplan.model.geometry import Geometry
from diskplan.model.grain import SnapTarget
from diskplan.model.plan.history import History
from diskplan.model.plan.operations import repair_operations
from diskplan.model.plan.plan import REPAIR_PENDING, Outcome, Plan
from diskplan.model.plan.repair import PROTECTIVE_MBR, GptRepair
from diskplan.model.table import Table, new_table

LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
GIB = Geometry(2**21)
LAST = GIB.sectors - 1


def backup_repair(sector_size: int = 512, last: int = LAST) -> GptRepair:
    """What the reader offers when the backup copy is bad: header at the last LBA, entries before it."""
    count = 128 * 128 // sector_size
    return GptRepair("primary", "backup", last, last - count, count, "entry array CRC does not match",
                     writes=((last - count, bytes(count * sector_size)), (last, bytes(sector_size))))


def disk_table(geom: Geometry = GIB) -> Table:
    parts = (Partition(1, 2048, 206847, LINUX, "boot", state=State.EXISTING),
             Partition(2, 206848, 1048575, LINUX, "root", state=State.EXISTING))
    return new_table("gpt", geom).with_partitions(parts)


def offered() -> Plan:
    return Plan.open(GIB, disk_table(), offer=backup_repair())


def refused(outcome: Outcome, *words: str) -> None:
    assert not outcome.ok and outcome.plan is outcome.before
    for w in words:
        assert w in outcome.message, outcome.message


def test_no_offer_no_repair() -> None:
    plan = Plan.open(GIB, disk_table())
    refused(plan.repair(), "no repair to offer")
    assert plan.pending_repair is None and not plan.dirty


def test_the_repair_is_a_pending_change_that_undo_takes_back() -> None:
    history = History(offered())
    start = history.present
    out = start.repair()
    assert out.ok and "nothing is written until you commit" in out.message
    assert history.apply(out)
    plan = history.present
    assert plan.repairing and plan.dirty and plan.pending_repair is start.offer
    assert plan != start and plan.table == start.table  # the partitions are the disk's
    changes = plan.changes()
    assert [c.kind for c in changes] == ["repair", "repair"]  # the operations the confirmation lists
    assert str(changes[0]).endswith("2097119..2097150: backup GPT entry array, copied from the primary copy")
    assert str(changes[1]) == "repair: write sector 2097151: backup GPT header, rebuilt from the primary header"
    assert plan.repair().plan is plan  # already planned: nothing changes
    assert history.undo() == out.message and history.present is start and start.pending_repair is None
    assert history.redo() == out.message and history.present is plan


def test_a_repair_is_planned_on_its_own() -> None:
    plan = offered()
    proposed = plan.propose(1048576, 2048)
    assert proposed.ok
    refused(proposed.plan.repair(), "written on its own", "1 pending change")
    deleted = plan.delete(2).plan
    refused(deleted.repair(), "written on its own")
    refused(plan.new_label("msdos").plan.repair(), "written on its own")


def test_while_the_repair_is_pending_every_other_step_is_refused() -> None:
    plan = offered().repair().plan
    assert plan.blocked() == REPAIR_PENDING
    for out in (
        plan.propose(1048576, 2048),
        plan.delete(1),
        plan.set_name(1, "other"),
        plan.set_type(2, "swap"),
        plan.toggle_flag(1, "legacy_boot"),
        plan.new_label("gpt"),
        plan.adopt(disk_table()),
    ):
        refused(out, "the GPT repair is pending")
    # Snapping to another target changes no partition: the repair stays planned.
    retargeted = plan.set_target(SnapTarget.PHYSICAL).plan
    assert retargeted.pending_repair is plan.offer
    cleared = plan.clear()
    assert cleared.ok and cleared.plan.pending_repair is None and not cleared.plan.dirty
    assert cleared.plan.offer is plan.offer  # still offered: it can be planned again
    assert cleared.plan.repair().ok


def test_operations_name_every_sector_written() -> None:
    for sector_size in (512, 4096):
        geom = Geometry(2**18, sector_size, sector_size)
        last = geom.sectors - 1
        r = backup_repair(sector_size, last)
        ops = repair_operations(r, disk_table(Geometry(2**21)), sector_size)
        writes = [op for op in ops if op.kind == "repair"]
        count = 128 * 128 // sector_size
        assert [(op.start, op.end) for op in writes] == [(last - count, last - 1), (last, last)]
        assert str(writes[0]) == (f"repair: write sectors {last - count}..{last - 1}: backup GPT entry array, "
                                  "copied from the primary copy")
        assert str(writes[1]) == f"repair: write sector {last}: backup GPT header, rebuilt from the primary header"
        assert [op.number for op in ops if op.kind == "keep"] == [1, 2]
        assert r.sectors_written(sector_size) == count + 1
    pmbr = GptRepair("primary", PROTECTIVE_MBR, 0, 0, 0, "no 0xEE", writes=((0, bytes(512)),))
    assert [str(op) for op in repair_operations(pmbr, Table(None, 0, 0), 512)] == [
        "repair: write sector 0: protective MBR (one 0xEE entry; boot code and disk signature kept)"]


@given(writes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 64)), min_size=1, max_size=4,
                       unique_by=lambda w: w[0]),
       sector_size=st.sampled_from([512, 4096]))
def test_runs_cover_exactly_the_bytes_written(writes: list[tuple[int, int]], sector_size: int) -> None:
    r = GptRepair("backup", "primary", writes[0][0], 0, 0, "", writes=tuple((lba, bytes(n * sector_size))
                                                                             for lba, n in writes))
    runs = r.runs(sector_size)
    assert [e for e, _ in runs] == sorted(Extent(lba, lba + n - 1) for lba, n in writes)
    assert r.sectors_written(sector_size) == sum(n for _, n in writes)
    assert r.same_writes(r) and not r.same_writes(GptRepair("backup", "primary", writes[0][0], 0, 0, ""))


STEPS = st.lists(st.sampled_from(["repair", "propose", "delete", "rename", "label", "clear", "undo", "redo"]),
                 max_size=12)


@settings(max_examples=60, deadline=None)
@given(steps=STEPS)
def test_a_pending_repair_never_travels_with_other_changes(steps: list[str]) -> None:
    history = History(offered())
    seen: list[Plan] = [history.present]
    for step in steps:
        plan = history.present
        if step == "undo":
            history.undo()
        elif step == "redo":
            history.redo()
        else:
            actions: dict[str, Callable[[], Outcome]] = {
                "repair": plan.repair,
                "propose": partial(plan.propose, 1048576, 4096),
                "delete": partial(plan.delete, 2),
                "rename": partial(plan.set_name, 1, "x"),
                "label": partial(plan.new_label, "gpt"),
                "clear": plan.clear,
            }
            history.apply(actions[step]())
        now = history.present
        seen.append(now)
        if now.repairing:
            assert {c.kind for c in now.changes()} == {"repair"} and now.table == now.base and not now.fresh
        else:
            assert "repair" not in {c.kind for c in now.changes()}
        assert now.offer is seen[0].offer
