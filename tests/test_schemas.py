"""The published JSON Schemas (src/diskplan/schemas, in the wheel): each is a valid draft 2020-12 schema, and
real outputs match them: `check --json` of the demo disks (one target and many), the plans `export` prints of
them (the disk's own, --layout-only, --relative) and the planner's Ctrl+S text; the plan schema refuses what
`apply` refuses for its shape. The corpus's reports are checked in test_corpus.py. python-jsonschema is the
referee (helpers.schemas)."""

from __future__ import annotations

import json
import pathlib

import pytest

from diskplan import schemas
from diskplan.backend.demo_image import build
from diskplan.model.formats.planfile import PlanFileError, load_plan, save_plan
from diskplan.model.plan.plan import Plan
from diskplan.model.teach import demos
from helpers.cli import diskplan
from helpers.schemas import SYSTEM_PYTHON, schema_problems
from helpers.tools import run

CHECK, PLAN = schemas.load("check-v1"), schemas.load("plan-v1")
GUID = "0E8B5A1C-4D2F-4B8E-9C11-2A3B4C5D6E7F"
ON_FILES = [s for s in demos.SCENARIOS if not s.needs_loop]  # a loop device is not needed to read these


def test_each_schema_is_a_draft_2020_12_schema_with_its_version() -> None:
    code = ("import json, sys, jsonschema\n"
            "for s in json.load(sys.stdin): jsonschema.Draft202012Validator.check_schema(s)")
    schema_problems({})  # skips without python-jsonschema
    run(SYSTEM_PYTHON, "-c", code, input=json.dumps([CHECK, PLAN]))
    assert (CHECK["$id"], PLAN["$id"]) == ("urn:diskplan:schema:check:1", "urn:diskplan:schema:plan:1")
    assert pathlib.Path(schemas.path("plan-v1")).parent.name == "schemas"


@pytest.fixture(scope="module")
def demo_images(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    where = tmp_path_factory.mktemp("demos")
    return [build(s, str(where)).device for s in ON_FILES]


def test_check_json_of_the_demo_disks_matches_the_schema(demo_images: list[str]) -> None:
    many = diskplan("check", "--json", *demo_images)
    one = diskplan("check", "--json", demo_images[0])
    assert many.returncode in (0, 1) and one.returncode in (0, 1), many.stderr + one.stderr
    doc = json.loads(many.stdout)
    assert len(doc["disks"]) == len(ON_FILES) >= 5
    assert schema_problems(CHECK, doc, json.loads(one.stdout)) == []
    dropped = json.loads(one.stdout)
    del dropped["partitions"][0]["tools"]  # the schema notices a field gone (check --json's speed work keeps all)
    assert any("'tools' is a required property" in line for line in schema_problems(CHECK, dropped))


def test_every_plan_export_writes_matches_the_schema(demo_images: list[str]) -> None:
    plans = []
    for image in demo_images:
        for how in ((), ("--layout-only",), ("--relative",)):
            proc = diskplan("export", image, *how)
            if proc.returncode == 0:
                plans.append(json.loads(proc.stdout))
            else:  # a disk without a table; --relative of one with logical partitions: refused, said why
                assert "not a disk without a table" in proc.stderr or (
                    how == ("--relative",) and "primary partitions only" in proc.stderr), proc.stderr
    saved = []  # the planner's Ctrl+S text, as if each demo had been read from a disk (keeps, made_against)
    for s in demos.SCENARIOS:
        disk = s.planned_disk()
        if disk.table.label in ("gpt", "msdos"):
            guids = {p.number: GUID if disk.table.label == "gpt" else "" for p in disk.table.live}
            saved.append(json.loads(save_plan(Plan.open(disk.geometry, disk.table), "sha256:" + "ab" * 32, guids)))
    assert saved and any("keeps" in p for doc in saved for p in doc["partitions"])
    assert len(plans) >= 2 * len(demo_images)
    assert schema_problems(PLAN, *plans, *saved) == []


GOOD = [
    {"label": "gpt", "partitions": [{"size": "512MiB", "type": "EFI system", "name": "EFI"},
                                    {"size": "rest", "name": "root"}, {"size": "4GiB", "type": "swap"}]},
    {"format": "diskplan-plan", "version": 1, "label": "dos", "sector_size": 4096,
     "partitions": [{"number": 1, "start": "1MiB", "end": 100000, "flags": ["boot"], "role": "primary",
                     "keeps": {"number": 1}}]},
]
BAD = {
    "an unknown key": {"label": "gpt", "partitions": [], "lable": "x"},
    "no label": {"partitions": []},
    "another label": {"label": "bsd", "partitions": []},
    "a later version": {"version": 2, "label": "gpt", "partitions": []},
    "a share with an end": {"label": "gpt", "partitions": [{"size": "50%", "end": 99}]},
    "neither end nor size": {"label": "gpt", "partitions": [{"start": 2048}]},
    "a keeps on an entry without a number": {"label": "gpt", "partitions": [{"start": 2048, "size": 8,
                                                                             "keeps": {"number": 1}}]},
    "a keeps without its number": {"label": "gpt", "partitions": [{"number": 1, "start": 2048, "size": 8,
                                                                   "keeps": {"guid": ""}}]},
}


def test_the_plan_schema_takes_what_apply_reads_and_refuses_what_it_refuses_for_its_shape() -> None:
    for doc in GOOD:
        load_plan(json.dumps(doc))
    assert schema_problems(PLAN, *GOOD) == []
    for why, doc in BAD.items():
        with pytest.raises(PlanFileError):
            load_plan(json.dumps(doc))
        assert schema_problems(PLAN, doc), why
