"""model.plan.operations without a disk: which partitions a plan keeps, deletes, creates or re-adds, the table
the disk will hold, what makes a plan unwritable, and what a read-back table is compared on."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.geometry import Geometry
from diskplan.model.plan.operations import differences, plan_changes, plan_writes, validate
from diskplan.model.table import Table
from diskplan.model.value import replace

L, E = Role.LOGICAL, Role.EXTENDED


def part(n: int, start: int, end: int, role: Role = Role.PRIMARY, **kw: Any) -> Partition:
    return Partition(n, start, end, role=role, **kw)


DOS = Table("msdos", 1, 131071, (
    part(1, 2048, 12287, type="0x83", flags=("boot",)),
    part(2, 12288, 72287, E, type="0x05"),
    part(5, 14336, 18431, L, type="0x83"),
    part(6, 20480, 24575, L, type="0x82"),
    part(7, 26624, 30719, L, type="0x07"),
))


def test_deleting_a_logical_partition_renumbers_the_rest_and_keeps_them() -> None:
    live = [DOS.partitions[0], DOS.partitions[1], replace(DOS.partitions[3], number=5),
            replace(DOS.partitions[4], number=6), part(7, 40000, 44095, L, type="0x82")]
    ch = plan_changes("msdos", DOS, live, fresh=False)
    assert [p.number for p in ch.delete] == [5]
    assert [(p.number, p.start) for p in ch.create] == [(7, 40000)]
    assert ch.rewrite == [] and ch.change == []
    assert sorted((p.number, p.start, dict(p.extra).get("was")) for p in ch.keep if p.role is L) == [
        (5, 20480, "6"), (6, 26624, "7")]
    assert Extent(20480, 24575) in ch.protect and Extent(12288, 72287) not in ch.protect  # data, not containers


def test_a_new_logical_partition_numbered_first_re_adds_them_all_in_place() -> None:
    live = [DOS.partitions[0], DOS.partitions[1], part(5, 15360, 17407, L),
            replace(DOS.partitions[3], number=6, type=""), replace(DOS.partitions[4], number=7)]
    ch = plan_changes("msdos", DOS, live, fresh=False)
    assert {p.number for p in ch.delete} == {5, 6, 7}
    assert [p.number for p in ch.create] == [5]
    assert [(p.number, p.type) for p in ch.rewrite] == [(6, "0x82"), (7, "0x07")]  # old type kept: plan said none
    assert next(str(op) for op in ch.operations if op.kind == "rewrite").startswith("rewrite the EBR of logical 6")
    result = ch.result(DOS)
    assert [(p.number, p.start, p.state) for p in result.partitions if p.role is L] == [
        (5, 15360, State.PROPOSED), (6, 20480, State.EXISTING), (7, 26624, State.EXISTING)]


def test_changed_attributes_are_changes_not_deletions() -> None:
    gpt = Table("gpt", 34, 131038, (part(1, 2048, 4095, type="0FC63DAF-8483-4772-8E79-3D69D8477DE4", name="a"),))
    ch = plan_changes("gpt", gpt, [part(1, 2048, 4095, type="Linux swap", name="b", flags=("legacy_boot",))], False)
    assert ch.delete == [] and ch.create == []
    (_, _, why), = ch.change
    assert why == ["type Linux filesystem -> Linux swap", "name 'a' -> 'b'", "legacy_boot flag on"]


def test_the_validator_names_what_libparted_would_refuse() -> None:
    disk = Geometry(131072, 512)
    found = validate(Table("gpt", 34, 131038, (part(1, 2048, 4095), part(2, 4000, 5000), part(3, 10, 20))), disk)
    assert "partitions 1 and 2 overlap" in found
    assert any("partition 3 (10s..20s) is outside the usable area 34s..131038s" in f for f in found)
    gap = validate(Table("msdos", 1, 131071, (part(1, 2048, 9999, E), part(5, 2049, 3000, L),
                                              part(7, 4000, 5000, L))), disk)
    assert any("without gaps" in f for f in gap)
    orphan = validate(Table("msdos", 1, 131071, (part(5, 2049, 3000, L),)), disk)
    assert orphan == ["logical partitions need an extended partition"]


def test_no_label_read_back_is_no_label_planned() -> None:
    blank = Table(None, 0, 0, ())
    assert differences(blank, blank) == []
    assert differences(blank, Table("gpt", 34, 99, ())) == ["the disk holds a gpt label, not no label"]


def test_differences_compare_types_by_meaning() -> None:
    want = Table("msdos", 1, 99, (part(1, 10, 20, type="Linux swap", flags=("boot",)),))
    same = Table("msdos", 1, 99, (part(1, 10, 20, type="0x82", flags=("boot", "swap")),))
    assert differences(want, same) == []
    other = Table("msdos", 1, 99, (part(1, 10, 21, type="0x83"), part(2, 30, 40)))
    assert differences(want, other) == [
        "partition 1 is at 10..21, not 10..20",
        "partition 1 has type Linux filesystem, not Linux swap",
        "partition 1 has flags none, not boot",
        "partition 2 (30..40) is not in the plan",
    ]


# A GPT on disk and a plan that keeps some of its partitions, drops others and adds new ones elsewhere.
@st.composite
def gpt_plans(draw: st.DrawFn) -> tuple[Table, list[Partition], set[int]]:
    slots = draw(st.lists(st.booleans(), min_size=1, max_size=12))
    current, live, kept = [], [], set()
    for i, on_disk in enumerate(slots):
        start, end = 2048 + i * 4096, 2048 + i * 4096 + draw(st.integers(0, 4095))
        number = i + 1
        if on_disk:
            p = part(number, start, end, type="0FC63DAF-8483-4772-8E79-3D69D8477DE4")
            current.append(p)
            if draw(st.booleans()):
                live.append(p)
                kept.add(number)
            elif draw(st.booleans()):  # same number, moved: a delete and a create
                live.append(part(number, start, end + 1 if end - start < 4095 else end - 1, type=p.type))
        elif draw(st.booleans()):
            live.append(part(number, start, end))
    return Table("gpt", 34, 10**6, tuple(current)), live, kept


@given(gpt_plans())
def test_kept_partitions_are_never_touched_and_the_result_is_the_plan(
    case: tuple[Table, list[Partition], set[int]],
) -> None:
    current, live, kept = case
    ch = plan_changes("gpt", current, live, fresh=False)
    assert {p.number for p in ch.keep} == kept
    assert not {p.number for p in ch.delete} & kept
    assert set(ch.protect) == {p.extent for p in current.partitions if p.number in kept}
    result = ch.result(current)
    assert sorted((p.number, p.start, p.end) for p in result.live) == sorted((p.number, p.start, p.end) for p in live)
    assert ch.any == (sorted(current.partitions, key=lambda p: p.number) != sorted(live, key=lambda p: p.number))
    assert differences(result, result) == []


def test_every_gpt_attribute_flag_is_a_planned_change_not_a_refusal() -> None:
    """Bits libparted 3.5 cannot set (1, 48-63) are written by the raw patch: planned like any change."""
    disk = Table("gpt", 34, 100000, (part(1, 2048, 4095, flags=("no_automount",)), part(2, 4096, 8191)))
    geom = Geometry(sectors=100034 + 33, logical=512, physical=512)
    wanted = replace(disk, partitions=(part(1, 2048, 4095), part(2, 4096, 8191, flags=("guid:60", "no_block_io")),
                                       part(3, 8192, 9999, state=State.PROPOSED, flags=("guid:48",))))
    ops = plan_writes(disk, wanted, geom)
    assert not ops.problems
    assert [str(op) for op in ops.operations if op.kind == "change"] == [
        "change 1 (2048..4095): no_automount flag off", "change 2 (4096..8191): no_block_io flag on, guid:60 flag on"]
    assert differences(ops.result(disk), disk)  # the comparison after the write sees every bit
