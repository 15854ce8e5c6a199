"""Relative plans (sizes in % of the usable space, "rest", starts left to snapping), resolved on each disk:
what they resolve to, the refusals, a Hypothesis property over disk sizes, and `apply` writing one on images of
two sizes with parted as the referee for what "50%" means."""

from __future__ import annotations

import itertools
import json
import pathlib
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import need_tool, run
from diskplan.model.formats.planfile import PlanFileError, load_plan, placed_on, table_from_spec, to_json
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.plan import relplan
from diskplan.model.plan.operations import validate
from helpers.cli import diskplan
from helpers.images import sfdisk_parts

MiB = 2048  # sectors of 512 B
GiB = 1024 * MiB


def plan(*parts: dict[str, object], label: str = "gpt") -> str:
    return json.dumps({"label": label, "partitions": list(parts)})


FLEET = plan({"size": "512MiB", "type": "EFI system", "name": "EFI"}, {"size": "50%", "name": "root"},
             {"size": "rest", "name": "home"}, {"size": "4GiB", "type": "swap", "name": "swap"})


def extents(text: str, sectors: int) -> list[tuple[int, int, int]]:
    table = table_from_spec(load_plan(text), Geometry(sectors))
    return [(p.number, p.start, p.end) for p in table.live]


def test_half_and_rest_are_parteds_0_50_100_percent() -> None:
    # parted -a optimal mkpart 0% 50% mkpart 50% 100% on a 10 GiB GPT image gives exactly these (checked below)
    got = extents(plan({"size": "50%"}, {"size": "rest"}), 10 * GiB)
    assert got == [(1, 2048, 10485759), (2, 10485760, 20969471)]


def test_rest_leaves_room_for_what_follows_it() -> None:
    got = extents(FLEET, 10 * GiB)
    assert got[0] == (1, MiB, 513 * MiB - 1)
    assert got[1] == (2, 513 * MiB, 513 * MiB + 5119 * MiB - 1)  # 50% of 10238 MiB, whole MiB down
    assert got[3] == (4, 20969472 - 4 * GiB, 20969471)  # swap keeps 4 GiB and ends on the last MiB
    assert got[2] == (3, got[1][2] + 1, got[3][1] - 1)  # home: everything between


def test_apply_notes_what_each_size_became() -> None:
    spec = placed_on(load_plan(FLEET), Geometry(10 * GiB))
    assert "partition 2: size 50% → 10483712 sectors (5 GiB) on this disk, start 1050624 (the next grain boundary)" \
        in spec.notes


@pytest.mark.parametrize(("parts", "refusal"), [
    ([{"size": "60%"}, {"size": "50%"}], "the percentages add up to 110%, over 100% of the disk"),
    ([{"size": "101%"}], "size 101% is not a share of the disk"),
    ([{"size": "rest"}, {"size": "rest"}], "two partitions ask for the rest (partition entry 1 and partition entry 2)"),
    ([{"size": "100%"}, {"size": "1MiB"}], "leaves nothing for partition entry 2"),
    ([{"size": "50%", "end": 4000}], "give a size and no end"),
    ([{"size": "10%", "number": 2}, {"size": "10%", "number": 2}], "partition number 2 is used twice"),
])
def test_plans_no_disk_can_hold_are_refused_when_read(parts: list[dict[str, object]], refusal: str) -> None:
    with pytest.raises(PlanFileError, match=None) as exc:
        load_plan(plan(*parts))
    assert refusal in str(exc.value)
    assert "\n" not in str(exc.value)


def test_msdos_logical_partitions_are_not_relative() -> None:
    with pytest.raises(PlanFileError, match="a relative plan holds primary partitions only"):
        load_plan(plan({"size": "rest", "type": "0x0f"}, label="msdos"))


def test_a_disk_too_small_is_refused_with_what_the_plan_needs() -> None:
    with pytest.raises(PlanFileError) as exc:
        placed_on(load_plan(FLEET), Geometry(1 * GiB))
    text = str(exc.value)
    assert "the disk is too small for this plan" in text and "it needs 18882560 sectors of usable space" in text


def test_a_relative_plan_is_written_back_as_it_was_given() -> None:
    spec = load_plan(FLEET)
    again = load_plan(to_json(spec))
    assert [(w.part, w.start, w.size) for w in again.relative or ()] == \
        [(w.part, w.start, w.size) for w in spec.relative or ()]
    assert json.loads(to_json(spec))["partitions"][1]["size"] == "50%"


# --- the property -------------------------------------------------------------------------------------------

_SIZE = st.one_of(st.integers(1, 3000).map(lambda s: relplan.Size(sectors=s)),
                  st.integers(1, 40).map(lambda p: relplan.Size(percent=Fraction(p))))


@st.composite
def fleet_plans(draw: st.DrawFn) -> str:
    sizes = draw(st.lists(_SIZE, min_size=1, max_size=7))
    percent = sum(s.percent or 0 for s in sizes)
    if percent > 90:  # keep it resolvable: leave room for the fixed sizes and the rest
        sizes = [s for s in sizes if s.percent is None] or [relplan.Size(sectors=1)]
    if draw(st.booleans()):
        sizes.insert(draw(st.integers(0, len(sizes))), relplan.Size(rest=True))
    label = draw(st.sampled_from(["gpt", "msdos"]))
    if label == "msdos":
        sizes = sizes[:4]
    parts: list[dict[str, object]] = [{"size": s.text if s.sectors is None else s.sectors} for s in sizes]
    return plan(*parts, label=label)


@given(text=fleet_plans(), extra=st.integers(0, 1 << 24), physical=st.sampled_from([512, 4096]),
       io=st.sampled_from([0, 65536, 3 << 20]))
@settings(max_examples=300, deadline=None)
def test_resolved_plans_fit_any_disk_above_the_minimum(text: str, extra: int, physical: int, io: int) -> None:
    spec = load_plan(text)
    assert spec.relative is not None
    probe = Geometry(1 << 30, physical=physical, optimal_io=io)
    grain = optimal_grain(probe)
    usable = relplan.minimum_usable(spec.relative, grain)
    assert usable is not None
    # the disk: the plan's minimum usable space, the label's own sectors, the first grain, then any more
    overhead = 2 * grain.sectors + 2 * 34
    geom = Geometry(usable + overhead + extra, physical=physical, optimal_io=io)
    table = table_from_spec(spec, geom)
    parts = sorted(table.live, key=lambda p: p.start)
    assert len(parts) == len(spec.relative)
    assert not validate(table, geom)  # no overlaps, inside the usable area, msdos rules
    for a, b in itertools.pairwise(parts):
        assert a.end < b.start
    for p in parts:
        assert grain.is_aligned(p.start)
        assert p.end <= table.last_usable
    wanted = {w.part.number: w.size for w in spec.relative}
    for p in parts:
        size = wanted[p.number]
        if size.sectors is not None:
            assert p.size == size.sectors
        else:
            assert p.size % grain.sectors == 0 and p.size >= grain.sectors


@given(text=fleet_plans(), sectors=st.integers(1, 1 << 23))
@settings(max_examples=200, deadline=None)
def test_on_any_disk_a_relative_plan_resolves_validly_or_is_refused(text: str, sectors: int) -> None:
    geom = Geometry(sectors)
    try:
        table = table_from_spec(load_plan(text), geom)
    except PlanFileError as exc:
        assert "\n" not in str(exc)
        return
    assert not validate(table, geom)


# --- apply on images, parted as the referee -----------------------------------------------------------------


@pytest.mark.parametrize("gib", [4, 10])
def test_apply_writes_the_plan_resolved_for_each_disk(tmp_path: pathlib.Path,
                                                      sparse_image: Callable[..., pathlib.Path], gib: int) -> None:
    """One plan, two disk sizes: `apply` writes what parted's -a optimal 0%/50%/100% makes there."""
    parted = need_tool("parted")
    path = tmp_path / "fleet.json"
    path.write_text(plan({"size": "50%", "name": "a"}, {"size": "rest", "name": "b"}))
    ours, theirs = sparse_image(gib << 30, "ours.img"), sparse_image(gib << 30, "theirs.img")
    proc = diskplan("apply", str(path), str(ours), "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "size 50% →" in proc.stdout and "on this disk" in proc.stdout
    run(parted, "-s", "-a", "optimal", str(theirs), "mklabel", "gpt", "mkpart", "a", "0%", "50%",
        "mkpart", "b", "50%", "100%")
    assert [p[:3] for p in sfdisk_parts(ours)] == [p[:3] for p in sfdisk_parts(theirs)]


def test_apply_refuses_a_disk_too_small_in_one_line(tmp_path: pathlib.Path,
                                                    sparse_image: Callable[..., pathlib.Path]) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(FLEET)
    proc = diskplan("apply", str(path), str(sparse_image(1 << 30)), "--yes")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "refused" in proc.stderr and "too small for this plan" in proc.stderr


def test_the_planner_loads_a_relative_plan_resolved_for_its_disk() -> None:
    from diskplan.model.formats.planfile import load_into
    from diskplan.model.plan.plan import Plan
    from diskplan.model.table import new_table

    geom = Geometry(4 * GiB)
    outcome = load_into(Plan.open(geom, new_table("gpt", geom)), plan({"size": "50%"}, {"size": "rest"}))
    assert outcome.ok
    assert [(p.start, p.end) for p in outcome.plan.table.live] == [(2048, 4194303), (4194304, 8386559)]
    assert "size 50% → 4192256 sectors (2 GiB) on this disk" in outcome.message


def test_a_share_below_one_grain_is_refused_with_its_size() -> None:
    with pytest.raises(PlanFileError) as exc:
        placed_on(load_plan(plan({"size": "1%"}, {"size": "rest"})), Geometry(100_000))
    assert str(exc.value) == ("partition entry 1: 1% of this disk's usable space (47 MiB) is less than one grain "
                              "(2048 sectors): the disk is too small for this plan (it needs 204800 sectors of usable "
                              "space, 100 MiB; this disk has 96256)")


@pytest.mark.parametrize(("label", "parts", "refusal"), [
    ("msdos", [{"size": "20%"}] * 5, "msdos has at most 4 primary partitions"),
    ("gpt", [{"size": "rest", "number": 200}], "GPT partition numbers go from 1 to 128"),
    ("msdos", [{"size": "10%", "flags": ["boot"]}, {"size": "rest", "flags": ["boot"]}],
     "msdos marks one partition active (boot), not 2"),
])
def test_a_relative_plan_breaking_the_table_s_own_rules_is_refused_when_read(
        label: str, parts: list[dict[str, object]], refusal: str) -> None:
    """The rules no disk changes (numbering, msdos's four primaries, one active partition) hold for relative
    plans when read too, as for exact ones: `export --format ansible/ignition` does not resolve the plan on a
    disk, and printed a fifth msdos primary or GPT partition 200."""
    with pytest.raises(PlanFileError) as exc:
        load_plan(plan(*parts, label=label))
    assert "the plan is not a valid table: " in str(exc.value) and refusal in str(exc.value)


# --- one plan for 512-byte and 4096-byte-sector disks -------------------------------------------------------

BYTES_ONLY = plan({"size": "64MiB", "name": "boot"}, {"size": "50%", "name": "root"}, {"size": "rest", "name": "data"})


@pytest.mark.parametrize("logical", [512, 4096])
def test_a_plan_without_sector_size_in_bytes_resolves_in_each_disks_own_sectors(logical: int) -> None:
    geom = Geometry((8 << 30) // logical, logical, logical)
    table = table_from_spec(load_plan(BYTES_ONLY), geom)
    parts = sorted(table.live, key=lambda p: p.start)
    mib = [(p.start * logical / (1 << 20), p.size * logical / (1 << 20)) for p in parts]
    # the same bytes on either: 64 MiB from 1 MiB; half of the 8190 MiB between the first and the last MiB
    # boundary of the usable area; the rest
    assert mib == [(1, 64), (65, 4095), (4160, 4031)]
    assert not validate(table, geom)


def test_a_plan_for_any_sector_size_is_written_back_as_one() -> None:
    doc = json.loads(to_json(load_plan(BYTES_ONLY)))
    assert "sector_size" not in doc and doc["partitions"][0]["size"] == "64MiB"
    spec = load_plan(json.dumps(doc))
    assert table_from_spec(spec, Geometry(1 << 21, 4096, 4096)).live[0].size == 16384


@pytest.mark.parametrize(("parts", "sector_size", "said"), [
    # a count of sectors: 512-byte ones, as in any plan without sector_size; the entry that counts is named
    ([{"size": 204800}, {"size": "rest"}], None,
     "the plan gives no sector_size, so its sectors are 512 B; this disk has 4096-byte sectors (every position "
     "would mean another byte); partition entry 1: size 204800s is a count of sectors: in bytes (100MiB, 1GB) "
     "the plan resolves on disks of any sector size"),
    ([{"start": "2048s", "size": "50%"}], None, "partition entry 1: start 2048s is a count of sectors"),
    # an exact plan without sector_size: 512-byte sectors, as before, and the message says why
    ([{"start": 2048, "size": "4MiB"}], None, "the plan gives no sector_size, so its sectors are 512 B; this disk "
     "has 4096-byte sectors (every position would mean another byte)"),
    # a plan that says its sector size means it
    ([{"size": "50%"}], 512, "the plan is for 512-byte sectors; this disk has 4096-byte sectors"),
])
def test_a_plan_tied_to_512_byte_sectors_is_refused_on_4kn_saying_why(
        parts: list[dict[str, object]], sector_size: int | None, said: str) -> None:
    doc: dict[str, object] = {"label": "gpt", "partitions": parts}
    if sector_size:
        doc["sector_size"] = sector_size
    with pytest.raises(PlanFileError) as exc:
        table_from_spec(load_plan(json.dumps(doc)), Geometry(1 << 21, 4096, 4096))
    assert said in str(exc.value)


def test_apply_resolves_a_plan_without_sector_size_on_a_4kn_disk(
        tmp_path: pathlib.Path, sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A real 4096-byte-sector loop device: `apply` writes what parted's -a optimal 0%/50%/100% makes on another;
    sfdisk reads 4096-byte sectors and the fixed 64 MiB as 16384 of them."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    parted = need_tool("parted")
    ours = loop_device(sparse_image(256 << 20, "ours.img"), sector_size=4096)
    theirs = loop_device(sparse_image(256 << 20, "theirs.img"), sector_size=4096)
    half = tmp_path / "half.json"
    half.write_text(plan({"size": "50%", "name": "a"}, {"size": "rest", "name": "b"}))
    proc = diskplan("apply", str(half), ours, "--yes")
    assert proc.returncode == 0, proc.stderr
    run(parted, "-s", "-a", "optimal", theirs, "mklabel", "gpt", "mkpart", "a", "0%", "50%", "mkpart", "b", "50%",
        "100%")
    assert [p[:3] for p in sfdisk_parts(ours)] == [p[:3] for p in sfdisk_parts(theirs)] == \
        [(1, 256, 32512), (2, 32768, 32512)]
    fleet = tmp_path / "fleet.json"
    fleet.write_text(BYTES_ONLY)
    proc = diskplan("apply", str(fleet), ours, "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "sector-size: 4096" in run(need_tool("sfdisk"), "--dump", ours)
    assert next((p[0], p[1], p[2], p[4]) for p in sfdisk_parts(ours)) == (1, 256, 16384, "boot")
