"""The map, the explanations and the planner itself on the 55 real partition tables of the corpus:
hybrid MBRs, damaged GPTs, overlaps, partitions past the end, exotic labels, whole-disk filesystems."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import pathlib

import pytest

from diskplan.backend.read.reader import ReadError, read
from diskplan.cli.planner import CliSource, parser
from diskplan.model.extent import Role
from diskplan.model.findings.report import build_report
from diskplan.ui.app import PlannerApp
from diskplan.ui.cells import MapContent
from diskplan.ui.explain import explain, status
from helpers.pilot import wait_for
from helpers.tools import CORPUS

pytestmark = pytest.mark.corpus

MANIFEST = CORPUS / "manifest.json"
IMAGES = {e["name"]: e for e in json.loads(MANIFEST.read_text())["images"]} if MANIFEST.exists() else {}
# Planner runs on the hardest cases (the rest are covered by the pure checks below).
DRIVEN = ["bootsector-pirroman-sparse", "bootcamp-hybrid-sparse"]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    if not IMAGES:
        pytest.skip(f"the corpus is not present at {CORPUS} (it lives beside the repository)")
    spec = importlib.util.spec_from_file_location("corpus_materialize_ui", CORPUS / "materialize.py")
    assert spec and spec.loader
    mat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mat)
    out = tmp_path_factory.mktemp("corpus-ui")
    for entry in IMAGES.values():
        mat.materialize(entry, str(out), root=str(CORPUS))
    return out


def test_every_corpus_table_draws_and_explains(corpus_dir: pathlib.Path) -> None:
    drawn = 0
    for name in sorted(IMAGES):
        try:
            disk = read(str(corpus_dir / f"{name}.img"))
        except ReadError:
            continue  # nothing to plan on: `diskplan check` says why (tests/test_corpus.py)
        report = build_report(disk)
        geom = disk.geometry
        content = MapContent(geom, disk.table, [f for r in report.partitions for f in r.findings], report.grain)
        cols, rows = 64, 12
        fit = max(1, -(-geom.sectors // (cols * rows)))
        for spc in {1, 8, fit}:
            for r in range(rows):
                cells = content.row(r * cols * spc, spc, cols)
                assert len(cells) == cols
                assert all(-1 <= c.item < len(content.items) for c in cells)
        for item in content.items:
            lines = explain(item, geom, report.grain, disk.table, disk.filesystem)
            assert lines and lines[0].style == "heading", (name, item)
            lba = min(max(item.extent.start, 0), geom.last_lba)
            assert status(geom, lba, content.item_at(lba)).startswith(f" LBA {lba:,} "), name
        # Every partition the reader found is on the map, where the table says it is (an extended
        # partition's first sector is its EBR: shown as table metadata).
        for p in disk.table.partitions:
            if 0 <= p.start < geom.sectors and p.role is not Role.EXTENDED:
                shown = content.item_at(p.start)
                assert shown is not None and shown.partition is not None, (name, p.number)
        drawn += 1
    assert drawn >= 45


@pytest.mark.parametrize("name", DRIVEN)
def test_the_planner_opens_and_navigates_hard_cases(name: str, corpus_dir: pathlib.Path) -> None:
    source = CliSource(parser().parse_args([]))

    async def go() -> PlannerApp:
        app = PlannerApp(source, ("path", str(corpus_dir / f"{name}.img")))
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.target is not None, 5)
            await pilot.press("1", "right", "down", "right_square_bracket", "f", "end", "minus", "0", "i", "e")
            await pilot.pause()
        return app

    try:
        app = asyncio.run(go())
    finally:
        source.close()
    assert app.target is not None and app.target.title.endswith(f"{name}.img")
    assert app.return_code in (None, 0)
