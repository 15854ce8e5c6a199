"""Fuzz plan files: JSON plans and `sfdisk --dump` texts made hostile by hypothesis (any JSON value in any
field, deep nesting, huge numbers, lone surrogates, control and bidi characters, unknown keys and fields,
non-ASCII digits, unclosed quotes, cut and flipped bytes). Whatever the text, reading it gives a plan or a
PlanFileError with a one-line message, never another exception; `diskplan apply` and `diskplan export`
exit 0, 1 or 2 with one line on stderr when they refuse, never a traceback or an "internal error".

The default run is small. A long run:
    DISKPLAN_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest -q tests/test_planfile_fuzz.py -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diskplan.model.formats.planfile import PlanFileError, load_plan, table_from_spec
from diskplan.model.geometry import Geometry
from diskplan.model.safetext import UNSAFE

LONG = int(os.environ.get("DISKPLAN_FUZZ_EXAMPLES", "0"))
EXAMPLES = LONG or 300
CLI_EXAMPLES = max(8, EXAMPLES // 50)  # each one starts two processes
GEOMETRIES = (Geometry(131072), Geometry(1), Geometry(2**40, logical=4096, physical=4096))

VALID_JSON: dict[str, Any] = {
    "format": "diskplan-plan", "version": 1, "label": "gpt", "sector_size": 512, "sectors": 131072,
    "first_lba": 34, "last_lba": 131038,
    "partitions": [
        {"number": 1, "start": 2048, "end": 4095, "size": 2048, "type": "EFI system", "name": "EFI",
         "flags": ["legacy_boot"], "role": "primary"},
        {"start": "4MiB", "size": "8MiB", "type": "0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
    ],
}
VALID_DUMP = """label: gpt
label-id: 35069D22-0D08-4C4E-BA94-07D94FA202CF
device: d.img
unit: sectors
first-lba: 34
last-lba: 131038
sector-size: 512

d.img1 : start=        2048, size=        2048, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI \\x22x\\x22"
d.img2 : start=        8192, size=       16384, type=L, uuid=5285340D-5773-304A-93BB-441274056D1B, attrs="GUID:48,63"
"""

# Characters that have broken parsers and terminals: controls, bidi overrides, separators, full-width and
# Arabic-Indic digits, surrogates, quotes and backslashes, and what the formats use themselves.
NASTY = st.sampled_from(list("\x00\x07\x1b\x9b\x7f\n\r\t\u202e\u2066\u2028\ufeff\ud800\udfff２٣\"\\,:=[]{}#0-9aZ"))
TEXT = st.one_of(st.text(max_size=20), st.lists(NASTY, max_size=12).map("".join))
NUMBER = st.one_of(st.integers(-3, 2**66), st.sampled_from([2**64 - 1, 2**64, 10**30, -1, 0]),
                   st.floats(allow_nan=True, allow_infinity=True))
JSON_VALUE = st.recursive(st.one_of(st.none(), st.booleans(), NUMBER, TEXT),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)


@st.composite
def hostile_json(draw: st.DrawFn) -> str:
    doc = json.loads(json.dumps(VALID_JSON))
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.sampled_from(["top", "partition", "partitions"]))
        if where == "top":
            doc[draw(st.sampled_from([*VALID_JSON, "extra"]))] = draw(JSON_VALUE)
        elif where == "partition" and isinstance(doc.get("partitions"), list) and doc["partitions"]:
            item = draw(st.sampled_from(doc["partitions"]))
            if isinstance(item, dict):
                item[draw(st.sampled_from([*VALID_JSON["partitions"][0], "extra"]))] = draw(JSON_VALUE)
        else:
            doc["partitions"] = draw(st.one_of(JSON_VALUE, st.lists(JSON_VALUE, max_size=3)))
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    shape = draw(st.sampled_from(["as is", "deep", "big number", "cut", "flip"]))
    if shape == "deep":
        depth = draw(st.sampled_from([10, 1000, 100_000]))
        text = text.replace('"partitions": ', '"partitions": ' + "[" * depth, 1) + "]" * depth
    elif shape == "big number":
        text = text.replace("2048", "9" * draw(st.sampled_from([19, 21, 4300, 5000])), 1)
    elif shape == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif shape == "flip":
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(NASTY) + text[i + 1 :]
    return text


@st.composite
def hostile_dump(draw: st.DrawFn) -> str:
    lines = VALID_DUMP.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        kind = draw(st.sampled_from(["field", "value", "header", "cut", "insert", "flip"]))
        if kind == "field":
            line += ", " + draw(st.sampled_from(["typ=S", "foo=1", "bootable=1", "bootable", 'name="abc', "uuid=",
                                                 "start=1", "size=0", "attrs=\"Bogus\"", "type=", "Start=2"]))
        elif kind == "value" and "=" in line:
            key = draw(st.sampled_from(["start", "size", "type", "name", "attrs"]))
            line = line.replace(f"{key}=", f"{key}={draw(TEXT)}", 1)
        elif kind == "header":
            line = draw(st.sampled_from(["label", "unit", "first-lba", "last-lba", "sector-size", "table-length",
                                         "label-id", "foo", "grain"])) + ": " + draw(TEXT)
        elif kind == "cut":
            line = line[: draw(st.integers(0, len(line)))]
        elif kind == "insert":
            lines.insert(i, draw(TEXT))
            continue
        elif line:
            j = draw(st.integers(0, len(line) - 1))
            line = line[:j] + draw(NASTY) + line[j + 1 :]
        lines[i] = line
    return "\n".join(lines) + "\n"


PLAN_TEXT = st.one_of(hostile_json(), hostile_dump())


def _read_as_apply_does(text: str) -> None:
    for geom in GEOMETRIES:
        try:
            spec = load_plan(text)
            table_from_spec(spec, geom)
        except PlanFileError as exc:
            message = str(exc)  # one line, nothing a terminal acts on
            assert message and not any(unicodedata.category(ch) in UNSAFE for ch in message), repr(message)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PLAN_TEXT)
def test_any_plan_text_gives_a_plan_or_one_line_of_refusal(text: str) -> None:
    _read_as_apply_does(text)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("fuzz") / "d.img"
    with open(path, "wb") as f:
        f.truncate(64 << 20)
    return path


@settings(max_examples=CLI_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(PLAN_TEXT)
def test_apply_and_export_end_in_a_status_and_one_line(image: pathlib.Path, text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate reaches the file as the bytes it is
    for args in (("apply", "-", str(image)), ("export", "-")):
        proc = subprocess.run([sys.executable, "-m", "diskplan", *args], input=data, capture_output=True,
                              timeout=60)
        out = proc.stdout + proc.stderr
        assert b"Traceback" not in out and b"internal error" not in out, out[-400:]
        assert proc.returncode in (0, 1, 2), proc.returncode
        if proc.returncode == 2:
            assert proc.stderr.count(b"\n") == 1, proc.stderr
        assert b"\x1b" not in proc.stderr  # what the plan holds is shown escaped
