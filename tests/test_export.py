"""`diskplan export`: a disk or a plan file out as JSON, an sfdisk script or parted commands, checked by
running the output through the real tools; every failure is one line and exit status 2."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Callable

import pytest

from helpers.tools import need_tool, run
from helpers.units import MiB

GPT_SCRIPT = """label: gpt
first-lba: 34

disk1 : start=2048, size=204800, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI system"
disk2 : start=206848, size=409600, type=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F, name="swap"
disk4 : start=616448, size=1000000, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root", attrs="LegacyBIOSBootable"
"""
DOS_SCRIPT = """label: dos

disk1 : start=2048, size=204800, type=c, bootable
disk2 : start=206848, size=1000000, type=f
disk5 : start=208896, size=100000, type=83
disk6 : start=311296, size=100000, type=82
"""


def export(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", "export", *args], input=stdin, capture_output=True,
                          text=True)
    assert "Traceback" not in proc.stderr
    return proc


def made_with_sfdisk(make: Callable[..., pathlib.Path], script: str, name: str = "disk.img") -> str:
    image = make(1024 * MiB, name)
    run(need_tool("sfdisk"), "--quiet", str(image), input=script)
    return str(image)


def dump(target: str) -> str:
    """`sfdisk --dump` without the lines that name the device or hold random ids."""
    out = run(need_tool("sfdisk"), "--dump", target)
    lines = []
    for line in out.splitlines():
        if line.startswith(("label-id:", "device:")):
            continue
        if ":" in line and "start=" in line:
            line = line.split(":", 1)[1]
            line = ", ".join(f for f in line.split(", ") if not f.strip().startswith("uuid="))
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize("script", [GPT_SCRIPT, DOS_SCRIPT], ids=["gpt", "dos"])
def test_a_disk_exported_and_replayed_by_each_tool_is_the_same_table(
    script: str, sparse_image: Callable[..., pathlib.Path]
) -> None:
    source = made_with_sfdisk(sparse_image, script, "source.img")
    for fmt in ("sfdisk", "parted"):
        copy = str(sparse_image(1024 * MiB, f"copy-{fmt}.img"))
        proc = export(source, "--format", fmt, "--device", copy)
        assert proc.returncode == 0, proc.stderr
        if fmt == "sfdisk":
            run(need_tool("sfdisk"), "--quiet", copy, input=proc.stdout)
        else:
            subprocess.run(["sh", "-s"], input=proc.stdout, capture_output=True, text=True, check=True)
        assert dump(copy) == dump(source), fmt


def test_json_export_of_a_disk(sparse_image: Callable[..., pathlib.Path]) -> None:
    source = made_with_sfdisk(sparse_image, GPT_SCRIPT)
    proc = export(source)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["format"], doc["version"], doc["label"], doc["sector_size"]) == ("diskplan-plan", 1, "gpt", 512)
    assert doc["sectors"] == 1024 * MiB // 512
    assert [(p["number"], p["start"], p["end"], p["name"], p["flags"]) for p in doc["partitions"]] == [
        (1, 2048, 206847, "EFI system", []), (2, 206848, 616447, "swap", []),
        (4, 616448, 1616447, "root", ["legacy_boot"])]
    assert doc["partitions"][0]["type_name"] == "EFI system"


def test_plan_files_and_stdin(tmp_path: pathlib.Path, sparse_image: Callable[..., pathlib.Path]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"label": "gpt", "partitions": [{"start": "1MiB", "size": "100MiB", "type": "esp"}]}')
    proc = export(str(plan), "--format", "sfdisk", "--device", "/dev/nvme0n1")
    assert proc.returncode == 0, proc.stderr
    assert "/dev/nvme0n1p1 : start=        2048, size=      204800, type=C12A7328" in proc.stdout
    dumped = tmp_path / "dump.txt"
    dumped.write_text(proc.stdout)
    back = export(str(dumped), "-o", str(tmp_path / "out.json"))
    assert back.returncode == 0 and back.stdout == ""
    assert json.loads((tmp_path / "out.json").read_text())["partitions"][0]["size"] == 204800
    piped = export("-", "--format", "parted", stdin=plan.read_text())
    assert piped.returncode == 0
    assert "parted -s -a none DEVICE unit s mkpart" in piped.stdout  # no --device for a plan: a placeholder


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        (lambda d: str(d / "missing.img"), ["no such file"]),
        (lambda d: str(d), ["directory"]),
        (lambda d: _write(d / "bad.json", '{"label": "gpt", "partitions": [{"start": 1}]}'), ["an end or a size"]),
        (lambda d: _write(d / "typo.json", '{"label": "gpt", "partitoins": []}'), ["unknown key"]),
        (lambda d: _write(d / "notes.txt", "buy milk\n"), ["not a plan"]),
        (lambda d: _zeros(d / "blank.img"), ["gpt and msdos", "without a table"]),
    ],
    ids=["missing", "directory", "incomplete", "typo", "text", "blank-disk"],
)
def test_failures_are_one_line_and_exit_2(setup: Callable[[pathlib.Path], str], words: list[str],
                                          tmp_path: pathlib.Path) -> None:
    proc = export(setup(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("diskplan export: ") and proc.stderr.count("\n") == 1, proc.stderr
    for w in words:
        assert w in proc.stderr


def test_an_unwritable_output_and_a_bad_format(tmp_path: pathlib.Path) -> None:
    plan = _write(tmp_path / "plan.json", '{"label": "msdos", "partitions": []}')
    proc = export(plan, "-o", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.startswith("diskplan export: ")
    proc = export(plan, "--format", "yaml")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def _write(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _zeros(path: pathlib.Path) -> str:
    with open(path, "wb") as f:
        f.truncate(64 * MiB)
    return str(path)


@pytest.mark.parametrize("fmt", ["sfdisk", "parted"])
def test_a_control_character_in_the_image_name_is_escaped_in_a_script(
    sparse_image: Callable[..., pathlib.Path], fmt: str
) -> None:
    """ESC [2J in an image's file name cleared the terminal the script was printed on (issue 25)."""
    img = made_with_sfdisk(sparse_image, "label: gpt\nstart=2048, size=2048\n", name="a\x1b[2Jb.img")
    out = export("--format", fmt, img)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "a\\x1b[2Jb.img" in out.stdout
