"""Plan files without any tool: JSON and sfdisk-dump round trips for any valid plan, the documented
JSON shape, clear refusals, and tables turned into plans and back."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import given, settings

from diskplan.model.extent import Partition, Role, State
from diskplan.model.formats.planfile import (
    Keep,
    PlanFileError,
    PlanSpec,
    load_plan,
    spec_from_table,
    table_from_spec,
    to_json,
    to_parted,
    to_sfdisk,
)
from diskplan.model.geometry import Geometry
from diskplan.model.table import Table, new_table
from helpers.plans import specs

LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
EFI = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
@settings(max_examples=150)
@given(specs())
def test_json_round_trip(spec: PlanSpec) -> None:
    assert load_plan(to_json(spec)) == spec


@settings(max_examples=150)
@given(specs())
def test_sfdisk_script_read_back_as_a_plan(spec: PlanSpec) -> None:
    back = load_plan(to_sfdisk(spec, "/dev/nvme0n1"))
    assert back == PlanSpec(spec.label, spec.sector_size, spec.partitions, None, spec.first_lba, spec.last_lba)


def test_the_documented_json_shape() -> None:
    spec = PlanSpec("gpt", 512, (Partition(1, 2048, 206847, EFI, "EFI", ("legacy_boot",), state=State.PROPOSED),),
                    2097152, 34, 2097118)
    doc = json.loads(to_json(spec))
    assert doc == {
        "format": "diskplan-plan", "version": 1, "label": "gpt", "sector_size": 512, "sectors": 2097152,
        "first_lba": 34, "last_lba": 2097118,
        "partitions": [{"number": 1, "start": 2048, "end": 206847, "size": 204800, "type": EFI,
                        "type_name": "EFI system", "name": "EFI", "flags": ["legacy_boot"], "role": "primary"}],
    }


def test_a_handwritten_plan_with_units_names_and_defaults() -> None:
    text = """{"label": "gpt", "partitions": [
        {"start": "1MiB", "size": "100MiB", "type": "esp", "name": "EFI"},
        {"start": 206848, "size": "1GB", "type": "linux swap"},
        {"start": "2GiB", "end": 6291455}]}"""
    spec = load_plan(text)
    assert [(p.number, p.start, p.end, p.type) for p in spec.partitions] == [
        (1, 2048, 206847, EFI),
        (2, 206848, 206848 + 1953125 - 1, "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"),  # 10^9 B = 1953125 sectors
        (3, 4194304, 6291455, LINUX),
    ]


def test_msdos_roles_follow_types_and_numbers() -> None:
    spec = load_plan("""{"label": "msdos", "partitions": [
        {"number": 1, "start": 2048, "end": 4095, "flags": ["boot"]},
        {"number": 2, "start": 4096, "end": 100000, "type": "0x05"},
        {"start": 6144, "end": 8191, "role": "logical"},
        {"start": 10240, "end": 12287, "role": "logical", "type": "swap"}]}""")
    roles = [(p.number, p.role, p.type) for p in spec.partitions]
    assert roles == [(1, Role.PRIMARY, "0x83"), (2, Role.EXTENDED, "0x05"), (5, Role.LOGICAL, "0x83"),
                     (6, Role.LOGICAL, "0x82")]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ["empty"]),
        ("{", ["not valid JSON", "line 1"]),
        ("[1, 2]", ["object"]),
        ('{"label": "gpt", "partitions": [], "strat": 1}', ["unknown key 'strat'"]),
        ('{"label": "gpt", "partitions": [{"start": 1, "end": 9, "strat": 1}]}', ["partition entry 1", "'strat'"]),
        ('{"format": "diskplan-plan", "version": 2, "label": "gpt", "partitions": []}', ["version 2"]),
        ('{"label": "mac", "partitions": []}', ["gpt and msdos"]),
        ('{"label": "gpt", "partitions": [{"start": 2048}]}', ["an end or a size"]),
        ('{"label": "gpt", "partitions": [{"start": 2048, "end": 4095, "size": 10}]}', ["disagree"]),
        ('{"label": "gpt", "partitions": [{"start": 2048, "size": "100M"}]}', ["ambiguous", "100MiB"]),
        ('{"label": "gpt", "partitions": [{"start": 2048, "end": 9000}, {"start": 4096, "end": 5000}]}',
         ["overlap"]),
        ('{"label": "gpt", "partitions": [{"start": 2048, "end": 9000, "flags": ["esp"]}]}', ["as the type"]),
        ('{"label": "msdos", "partitions": [{"start": 2048, "end": 9000, "name": "x"}]}', ["no names"]),
        ('{"label": "gpt", "partitions": [{"start": 2048, "end": 9000, "name": "\U0001F600"}]}', ["U+FFFF"]),
        ('{"label": "msdos", "partitions": [{"number": 5, "start": 2048, "end": 9000}]}', ["extended"]),
        ('{"label": "gpt", "sectors": 5000, "partitions": [{"start": 2048, "end": 9000}]}', ["past the end"]),
        ('{"label": "gpt", "partitions": [{"start": 2048, "end": 9000, "type": "Extended"}]}', ["not a GPT"]),
        ('{"label": "gpt", "partitions": [{"start": true, "end": 9000}]}', ["whole number"]),
        ("label: gpt\n\nx1 : start=2048, typ=L\n", ["line 3", "unknown field 'typ=L'"]),
        ("label: gpt\nunit: cylinders\n", ["unit"]),
        ("label: gpt\n\n2048,100,Q\n", ["line 3", "not a GPT type"]),
        ('label: gpt\n\nx1 : start=2048, size=100, type=L, attrs="Sticky"\n', ["Sticky"]),
        ('{"label": "gpt", "partitions": [{"number": 1, "start": 2048, "end": 9000, "keeps": 1}]}',
         ["keeps must be an object"]),
        ('{"label": "gpt", "partitions": [{"number": 1, "start": 2048, "end": 9000, "keeps": {"nr": 1}}]}',
         ["keeps: unknown key 'nr'"]),
        ('{"label": "gpt", "partitions": [{"number": 1, "start": 2048, "end": 9000, "keeps": {}}]}',
         ["keeps needs the number"]),
        ('{"label": "gpt", "partitions": [{"number": 1, "start": 2048, "end": 9000, "keeps": {"number": 2}}]}',
         ["keeps partition 2, so it must have number 2"]),
        ('{"label": "gpt", "partitions": [{"start": 2048, "end": 9000, "keeps": {"number": 1}}]}',
         ["must have number 1"]),
        ('{"label": "gpt", "partitions": [{"number": 1, "start": 2048, "end": 9000, "keeps": {"number": 1, '
         '"guid": "nope"}}]}', ["guid must be a GPT unique GUID"]),
        ('{"label": "msdos", "partitions": [{"number": 1, "start": 2048, "end": 9000, "keeps": {"number": 1, '
         '"guid": "0E8B5A1C-4D2F-4B8E-9C11-2A3B4C5D6E7F"}}]}', ["msdos partition has no GUID"]),
        ("\0\0\0label:", ["binary"]),
        ("hello", ["not a plan"]),
    ],
)
def test_refusals_say_where_and_why(text: str, words: list[str]) -> None:
    with pytest.raises(PlanFileError) as err:
        load_plan(text)
    for w in words:
        assert w in str(err.value)


def test_a_real_looking_dump_with_escapes_attributes_and_ids() -> None:
    p1_line = ("/dev/nvme0n1p1 : start=        2048, size=      204800, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, "
               r'uuid=D2E74EA1-3547-4AA2-B8D6-143A88A2966D, name="EFI \x22x\x22 \x5c\x5c \xc3\xa9"')
    p3_line = ("/dev/nvme0n1p3 : start=      206848, size=        1000, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, "
               'uuid=5285340D-5773-304A-93BB-441274056D1B, attrs="RequiredPartition LegacyBIOSBootable GUID:48,63"')
    dump = r"""label: gpt
label-id: 35069D22-0D08-4C4E-BA94-07D94FA202CF
device: /dev/nvme0n1
unit: sectors
first-lba: 34
last-lba: 2097118
sector-size: 512

"""
    spec = load_plan(dump + p1_line + "\n" + p3_line + "\n")
    assert (spec.label, spec.sector_size, spec.first_lba, spec.last_lba) == ("gpt", 512, 34, 2097118)
    p1, p3 = spec.partitions
    assert (p1.number, p1.start, p1.end, p1.type, p1.name) == (1, 2048, 206847, EFI, 'EFI "x" \\\\ é')
    assert (p3.number, p3.size, p3.flags) == (3, 1000, ("guid:48", "hidden", "legacy_boot", "no_automount"))
    assert 'attrs="RequiredPartition LegacyBIOSBootable GUID:48,63"' in to_sfdisk(spec, "/dev/sda")


def test_a_dos_dump() -> None:
    spec = load_plan("""label: dos
label-id: 0x1221679d
device: c.img
unit: sectors
sector-size: 512

c.img1 : start=        2048, size=      204800, type=c, bootable
c.img2 : start=      206848, size=    19793153, type=f
c.img5 : start=      208896, size=      202752, type=83
""")
    assert [(p.number, p.role, p.type, p.flags) for p in spec.partitions] == [
        (1, Role.PRIMARY, "0x0c", ("boot",)), (2, Role.EXTENDED, "0x0f", ()), (5, Role.LOGICAL, "0x83", ())]


def test_a_table_from_libparted_becomes_a_plan_with_types_not_type_flags() -> None:
    geom = Geometry(2**21)
    table = new_table("gpt", geom).with_partitions((
        Partition(1, 2048, 206847, EFI, "EFI", ("boot", "esp", "legacy_boot")),
        Partition(2, 206848, 411647, "", "", ("lvm",)),  # no raw type read: the flag says it
        Partition(3, 411648, 500000, LINUX, state=State.DELETE),
    ))
    spec = spec_from_table(table, geom)
    assert [(p.number, p.type, p.flags) for p in spec.partitions] == [
        (1, EFI, ("legacy_boot",)), (2, "E6D6D379-F507-44C2-A23C-238F2A3DF928", ())]
    assert (spec.sectors, spec.first_lba, spec.last_lba) == (2**21, 34, 2097118)
    back = table_from_spec(spec, geom)
    assert [(p.start, p.end, p.state) for p in back.partitions] == [(2048, 206847, State.PROPOSED),
                                                                   (206848, 411647, State.PROPOSED)]


def test_a_plan_that_does_not_fit_the_disk_is_refused() -> None:
    spec = load_plan('{"label": "gpt", "sector_size": 512, "partitions": [{"start": 2048, "end": 3000000}]}')
    with pytest.raises(PlanFileError, match="outside the usable area"):
        table_from_spec(spec, Geometry(2**21))
    with pytest.raises(PlanFileError, match="4096-byte sectors"):
        table_from_spec(spec, Geometry(2**21, 4096, 4096))
    with pytest.raises(PlanFileError, match="diskplan plans gpt and msdos"):
        spec_from_table(Table("mac", 0, 100), Geometry(2**21))


def test_parted_commands_use_exact_sectors_and_say_what_parted_cannot_do() -> None:
    spec = PlanSpec("gpt", 512, (
        Partition(2, 2048, 206847, EFI, 'say "hi"', ("legacy_boot", "no_automount"), state=State.PROPOSED),
        Partition(3, 206848, 411647, "3B8F8425-20E0-4F3B-907F-1A25A76F98E8", "it's \"both\"", state=State.PROPOSED),
    ))
    script = to_parted(spec, "/dev/sdb")
    lines = script.splitlines()
    assert "parted -s -a none /dev/sdb unit s mklabel gpt" in lines
    mkparts = [shlex.split(line) for line in lines if " mkpart " in line]
    # parted splits its arguments again and knows quotes but no escapes: the name travels quoted for it.
    assert mkparts[0][-4:] == ["'say \"hi\"'", "ext2", "2048s", "206847s"]
    assert mkparts[1][-3:] == ['""', "206848s", "411647s"]
    assert "parted -s -a none /dev/sdb unit s set 1 esp on" in lines
    assert "parted -s -a none /dev/sdb unit s set 1 legacy_boot on" in lines
    assert "# parted will number partition 2 as 1" in lines
    assert any(line.startswith("# parted 3.5 cannot set GUID:63") for line in lines)
    assert any("cannot set type 3B8F8425" in line for line in lines)
    assert any("cannot quote the name" in line for line in lines)


def test_the_ui_saves_and_loads_a_plan() -> None:
    from diskplan.model.formats.planfile import load_into, save_plan
    from diskplan.model.plan.plan import Plan

    geom = Geometry(2**21)
    disk = new_table("gpt", geom).with_partitions((Partition(1, 2048, 100_000, LINUX, "keep"),
                                                   Partition(2, 100_001, 200_000, LINUX, "drop")))
    plan = Plan.open(geom, disk)
    plan = plan.delete(2).plan.propose(204_800, 2048 * 10, ptype="swap", name="swap").plan
    text = save_plan(plan)
    assert [p["name"] for p in json.loads(text)["partitions"]] == ["keep", "swap"]
    again = load_into(Plan.open(geom, disk), text)
    assert again.ok and again.plan == plan
    refused = load_into(plan, '{"label": "gpt", "sector_size": 4096, "partitions": []}')
    assert not refused.ok and refused.plan is plan and "4096-byte sectors" in refused.message


def test_keeps_round_trips_and_names_the_partition() -> None:
    guid = "0e8b5a1c-4d2f-4b8e-9c11-2a3b4c5d6e7f"
    text = json.dumps({"label": "gpt", "partitions": [
        {"number": 1, "start": 2048, "end": 9000, "keeps": {"number": 1, "guid": guid}},
        {"number": 2, "start": 9001, "end": 10000}]})
    spec = load_plan(text)
    assert spec.keeps == (Keep(1, guid.upper()),)  # upper case, as libfdisk and blkid write it
    again = load_plan(to_json(spec))
    assert again == spec and again.keeps == spec.keeps
    doc = json.loads(to_json(spec))
    assert doc["partitions"][0]["keeps"] == {"number": 1, "guid": guid.upper()} and "keeps" not in doc["partitions"][1]
    geom = Geometry(2**21)
    table = new_table("gpt", geom).with_partitions((Partition(1, 2048, 9000, LINUX),))
    assert spec_from_table(table, geom, {1: guid.upper()}).keeps == (Keep(1, guid.upper()),)
    assert spec_from_table(table, geom).keeps == ()  # keeps only when asked for
