"""The demo disks are real: libparted writes each scenario to a sparse image, and the reader, `diskplan
check` and `sfdisk --dump` all see the planned partitions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from diskplan.backend.demo_image import DemoUnavailable, Workspace, build, detach_loop
from diskplan.backend.read.reader import read
from diskplan.cli import main as cli_main
from diskplan.model.findings.placement import analyze
from diskplan.model.grain import optimal_grain
from diskplan.model.teach import demos
from helpers.tools import need_tool

SFDISK = shutil.which("sfdisk")
IS_ROOT = os.geteuid() == 0


def sfdisk_dump(device: str) -> tuple[str, list[tuple[int, int]]]:
    out = subprocess.run([SFDISK or "sfdisk", "--dump", device], capture_output=True, text=True, check=True).stdout
    label = re.search(r"^label: (\w+)", out, re.M)
    parts = [(int(a), int(b)) for a, b in re.findall(r"start=\s*(\d+), size=\s*(\d+)", out)]
    return (label.group(1) if label else ""), parts


def _skip_unless_buildable(scenario: demos.Scenario) -> None:
    if scenario.needs_loop and not IS_ROOT:
        pytest.skip("a 4Kn demo needs a loop device with 4096-byte sectors, which needs root")


@pytest.fixture
def built(request: pytest.FixtureRequest, tmp_path):
    scenario = demos.find(request.param)
    _skip_unless_buildable(scenario)
    try:
        image = build(scenario, str(tmp_path))
    except DemoUnavailable as exc:
        pytest.skip(f"cannot build here: {exc}")
    try:
        yield scenario, image
    finally:
        if image.loop:
            detach_loop(image.loop)


@pytest.mark.parametrize("built", demos.names(), indirect=True)
def test_each_demo_reads_back_as_planned(built) -> None:
    scenario, image = built
    assert os.path.getsize(image.image) == scenario.sectors * scenario.logical
    assert os.stat(image.image).st_blocks * 512 < 4 << 20  # sparse: only the tables take space
    disk = scenario.dress(read(image.device))
    assert disk.geometry.logical == scenario.logical
    assert disk.geometry.sectors == scenario.sectors
    assert disk.table.label == scenario.label
    got = [(p.number, p.start, p.end) for p in disk.table.partitions]
    assert got == [(p.number, p.start, p.end) for p in scenario.planned_table().partitions]
    # What the planner will flag on the real image is what the model predicts for the plan.
    planned = scenario.planned_disk()
    grain = optimal_grain(disk.geometry)
    real_codes = sorted((f.partition, f.code) for f in analyze(disk.geometry, disk.table, grain))
    model_codes = sorted((f.partition, f.code) for f in analyze(planned.geometry, planned.table, grain))
    assert real_codes == model_codes


@pytest.mark.skipif(SFDISK is None, reason="sfdisk (util-linux) is not installed")
@pytest.mark.parametrize("built", demos.names(), indirect=True)
def test_sfdisk_agrees_with_the_plan(built) -> None:
    scenario, image = built
    if scenario.label is None:
        done = subprocess.run([SFDISK or "sfdisk", "--dump", image.device], capture_output=True, text=True)
        assert done.returncode != 0 and "not contain a recognized partition table" in done.stderr
        return
    label, parts = sfdisk_dump(image.device)
    assert label == {"gpt": "gpt", "msdos": "dos"}[scenario.label]
    assert parts == [(p.start, p.size) for p in scenario.partitions]


def test_diskplan_check_flags_what_the_lessons_teach(tmp_path, capsys) -> None:
    expect = {
        "ssd-gpt-34": {"start-not-flash-page"},
        "dos-63": {"start-not-flash-page", "dos-era-layout"},
        "advanced-format": {"start-not-physical"},
        "stripe": {"start-not-grain"},
        "modern": set(),
    }
    for name, codes in expect.items():
        image = build(demos.find(name), str(tmp_path))
        overrides = []
        s = demos.find(name)
        if s.physical > 512:
            overrides += ["--physical-block", str(s.physical)]
        if s.optimal_io:
            overrides += ["--optimal-io", str(s.optimal_io)]
        if s.rotational is False:
            overrides.append("--ssd")  # an image file has no sysfs queue/rotational
        status = cli_main.main(["check", image.device, "--json", *overrides])
        report = json.loads(capsys.readouterr().out)
        found = {f["code"] for p in report["partitions"] for f in p["findings"]}
        assert codes <= found, (name, found)
        assert status == (1 if codes else 0), name
        assert report["partitions"][0]["start"] == s.partitions[0].start


def test_the_lessons_quote_the_experiments_without_jargon() -> None:
    assert len(demos.SCENARIOS) == 10 and len(set(demos.names())) == 10
    for s in demos.SCENARIOS:
        assert s.lesson and s.title
        text = " ".join((s.title, *s.lesson)).lower()
        assert "seed" not in text, s.name  # "seed 000" means nothing to a student
    assert "19x" in " ".join(demos.find("ssd-gpt-34").lesson)
    assert demos.find("af").name == "advanced-format" and demos.find("str").name == "stripe"
    with pytest.raises(KeyError, match="choose one of"):
        demos.find("nope")
    af = demos.find("advanced-format").partitions
    assert af[0].start * 512 == 17408 and af[1].start * 512 == 1 << 20


def test_workspace_cleans_up_images_and_loop_devices() -> None:
    ws = Workspace()
    img = ws.image(demos.find("modern"))
    loop = None
    if IS_ROOT:
        try:
            loop = ws.image(demos.find("4kn")).loop
        except DemoUnavailable:
            loop = None
    directory = ws.directory
    assert os.path.exists(img.image)
    ws.close()
    assert not os.path.exists(directory)
    if loop:
        listed = subprocess.run(["losetup", "--list", "--noheadings", "-O", "NAME,BACK-FILE"], capture_output=True,
                                text=True).stdout
        assert directory not in listed


def test_without_root_a_4kn_demo_explains_and_falls_back(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # the module demo_image asks
    with pytest.raises(DemoUnavailable, match="needs root"):
        build(demos.find("4kn"), str(tmp_path))
    from diskplan.cli.planner import CliSource, parser

    source = CliSource(parser().parse_args([]))
    try:
        target = source.open_demo("4kn")
    finally:
        source.close()
    assert "needs root" in target.note and "without writing an image" in target.note
    assert target.disk.geometry.logical == 4096 and len(target.disk.table.partitions) == 3


def test_cli_lists_demos_and_refuses_bad_input(capsys) -> None:
    assert cli_main.main(["--list-demos"]) == 0
    out = capsys.readouterr().out
    for name in demos.names():
        assert name in out
    assert cli_main.main(["--demo", "nope"]) == 2
    assert "choose one of" in capsys.readouterr().err
    assert cli_main.main(["/nonexistent/disk.img"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli_main.main(["--demo"]) == 2  # pytest's stdin is not a terminal
    assert "needs a terminal" in capsys.readouterr().err


def test_a_demo_built_ahead_in_a_child_is_shown_and_cleaned_up_by_the_parent() -> None:
    from diskplan.cli.planner import CliSource, parser

    names = ["ssd-gpt-34", *(["4kn"] if IS_ROOT else [])]
    source = CliSource(parser().parse_args([]))
    try:
        for name in names:
            source.prefetch("demo", name)
        for name in names:
            deadline = time.monotonic() + 60
            while (target := source.ready("demo", name)) is None:  # never blocks: None until the child answers
                assert time.monotonic() < deadline, f"the {name} child gave no answer"
                time.sleep(0.01)
            s = demos.find(name)
            assert target.demo == name and target.path and not target.note
            assert [p.start for p in target.disk.table.partitions] == [p.start for p in s.partitions]
            assert target.disk.geometry.logical == s.logical
            built = source.workspace.built(name)  # the parent owns what the child made
            assert built is not None and built.device == target.path and os.path.exists(built.image)
        assert source.ready("demo", "modern") is None  # not built ahead: opened in a worker instead
        loop = source.workspace.built("4kn").loop if IS_ROOT else None  # type: ignore[union-attr]
        directory = source.workspace.directory
    finally:
        source.close()
    assert not os.path.exists(directory)
    if loop:
        listed = subprocess.run(["losetup", "--list", "--noheadings", "-O", "NAME"], capture_output=True,
                                text=True).stdout.split()
        assert loop not in listed


def test_quitting_while_a_demo_is_built_ahead_still_cleans_up() -> None:
    from diskplan.cli.planner import CliSource, parser

    source = CliSource(parser().parse_args([]))
    source.prefetch("demo", "stripe")
    directory = source.workspace.directory
    source.close()  # at once: the child's image must not outlive the planner
    assert not os.path.exists(directory)


def test_the_planner_process_starts_without_the_backend_libparted_or_pyudev() -> None:
    # A demo is built and read in a forked child; the parent imports the backend when it first needs it.
    code = (
        "import sys\n"
        "from diskplan.cli import planner\n"
        "from diskplan.ui import app\n"
        "print(sorted(m for m in sys.modules if m.startswith(('diskplan.backend.', 'diskplan.discovery.'))\n"
        "             or m in ('parted', '_ped', 'pyudev')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_disk_named_on_the_command_line_is_read_ahead_in_a_child(tmp_path) -> None:
    from diskplan.cli.planner import CliSource, parser

    sfdisk = need_tool("sfdisk")
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run([sfdisk, "-q", str(img)], input="label: gpt\nstart=2048, size=4096\nstart=8192\n",
                   text=True, check=True, capture_output=True)
    source = CliSource(parser().parse_args([]))
    try:
        source.prefetch("path", str(img))
        source.prefetch("path", str(tmp_path / "missing.img"))
        deadline = time.monotonic() + 60
        while (target := source.ready("path", str(img))) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        dump = json.loads(subprocess.run([sfdisk, "--json", str(img)], capture_output=True, text=True,
                                         check=True).stdout)["partitiontable"]["partitions"]
        assert [(p.start, p.size) for p in target.disk.table.partitions] == [(d["start"], d["size"]) for d in dump]
        assert target.path == str(img) and target.title == str(img)
        with pytest.raises(Exception, match="no such file"):  # the child's refusal, in the same words
            source.open_path(str(tmp_path / "missing.img"))
    finally:
        source.close()
