"""scripts/bootstrap.sh installs what is asked and no more: `make demo` (no flag) the planner alone, `make test`
(--test) the dev extra too, and the stamp carries the difference across runs (planner -> test -> planner). The
venv's python is a stand-in that records each pip command, so nothing is downloaded."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../pip.log"
"""


def checkout(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(FAKE_PYTHON)
    (venv / "python").chmod(0o755)
    return tmp_path


def installs(repo: pathlib.Path, *flag: str) -> list[str]:
    """The pip installs one bootstrap run made (its pip upgrade left out)."""
    log = repo / ".venv" / "pip.log"
    log.unlink(missing_ok=True)
    proc = subprocess.run(["bash", str(repo / "scripts" / "bootstrap.sh"), *flag], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": shutil.which("python3") or "python3"})
    assert proc.returncode == 0, proc.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if "install" in line and "--upgrade pip" not in line]


def test_the_demo_install_is_the_planner_alone_and_the_stamp_carries_it_to_the_test_install_and_back(
    tmp_path: pathlib.Path,
) -> None:
    repo = checkout(tmp_path)
    assert installs(repo) == ["-m pip install -q -e ."]  # make demo: no pytest, mypy, ruff, playwright
    assert installs(repo) == []  # nothing changed: nothing installed
    assert installs(repo, "--test") == ["-m pip install -q -e .[dev]"]  # make test after make demo
    assert installs(repo) == []  # make demo after make test: the test install holds the planner's
    stamp = repo / ".venv" / ".diskplan-installed"
    os.utime(repo / "pyproject.toml", (stamp.stat().st_mtime + 5,) * 2)  # the metadata changed
    assert installs(repo) == ["-m pip install -q -e ."]


def test_a_stamp_from_before_the_split_counts_as_the_test_install(tmp_path: pathlib.Path) -> None:
    repo = checkout(tmp_path)
    stamp = repo / ".venv" / ".diskplan-installed"
    stamp.touch()
    os.utime(stamp, (stamp.stat().st_mtime + 5,) * 2)
    assert installs(repo, "--test") == []
