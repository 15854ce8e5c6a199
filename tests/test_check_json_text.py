"""diskplan writes its indented JSON documents (`check --json`, `stack --json`, plan files, Ignition, the planner's
settings) with its own writer (model.formats.jsontext.as_text, faster than json's indented one): it must give
exactly what ``json.dumps(doc, indent=2)`` gives, with ``ensure_ascii`` and ``sort_keys`` as json has them, for
anything the documents can hold."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.model.formats.jsontext import as_text

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
keys = st.text() | st.integers() | st.booleans() | st.none() | st.floats()  # json spells each as a string
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                         | st.dictionaries(keys, inner, max_size=4), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_as_text_is_json_dumps_indent_2(doc: object) -> None:
    assert as_text(doc) == json.dumps(doc, indent=2)


@settings(max_examples=100, deadline=None)
@given(documents, st.booleans())
def test_as_text_is_json_dumps_with_its_options(doc: object, ascii: bool) -> None:
    assert as_text(doc, ascii=ascii) == json.dumps(doc, indent=2, ensure_ascii=ascii)
    try:
        expected = json.dumps(doc, indent=2, ensure_ascii=ascii, sort_keys=True)
    except TypeError:  # keys json cannot order (a str beside an int): refused alike
        with pytest.raises(TypeError):
            as_text(doc, ascii=ascii, sort_keys=True)
    else:
        assert as_text(doc, ascii=ascii, sort_keys=True) == expected


def test_as_text_refuses_what_json_refuses() -> None:
    for bad in ({"set": {1}}, [object()], {(1, 2): "tuple key"}):
        with pytest.raises(TypeError):
            json.dumps(bad, indent=2)
        with pytest.raises(TypeError):
            as_text(bad)


def test_check_json_imports_neither_the_json_package_nor_a_codec_it_needs_not(sparse_image) -> None:
    """`diskplan check --json` (the parent; its reading child is forked) quotes strings with json's C accelerator
    and spells the DASD tags in bytes: the json package (its decoder's regexes) and the cp500 codec cost a
    128-partition check ~2 ms of the ~60 it takes."""
    import subprocess
    import sys

    from diskplan.backend.read.probe import _DASD_TAGS
    from helpers.tools import need_tool, run

    assert set(_DASD_TAGS) == {tag.encode("cp500") for tag in ("VOL1", "LNX1", "CMS1")}
    img = sparse_image(64 << 20)
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=8192, name=a\n")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "diskplan", "check", "--json", str(img)],
                          capture_output=True, text=True)
    assert proc.returncode in (0, 1) and json.loads(proc.stdout)["partitions"][0]["name"] == "a"
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not {"json", "json.decoder", "json.scanner", "encodings.cp500"} & imported
    assert {"diskplan.cli.checkjson", "diskplan.model.formats.jsontext"} <= imported  # the list is the real one


def test_a_128_partition_check_runs_no_garbage_collection(sparse_image, capsys) -> None:
    """check raises the collector's first threshold for its own run (cli.check.GEN0), and puts it back, leaving
    what it made in the oldest generation: the young one's next collection, which putting it back brings at the
    next allocation, has next to nothing to walk (it walked every object the check made: ~2 ms)."""
    import gc

    from diskplan.cli import check
    from helpers.tools import need_tool, run

    img = sparse_image(64 << 30)
    script = "label: gpt\n" + "".join(f"start={2048 + i * 4096}, size=4096\n" for i in range(128))
    run(need_tool("sfdisk"), "-q", str(img), input=script)
    passes = []

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            passes.append(info["generation"])

    before = gc.get_threshold()
    gc.callbacks.append(counted)
    try:
        assert check.main(["--json", str(img)]) in (0, 1)
        young = gc.get_count()[0]
    finally:
        gc.callbacks.remove(counted)
    assert young < 100
    assert len(json.loads(capsys.readouterr().out)["partitions"]) == 128
    assert passes == []
    assert gc.get_threshold() == before
