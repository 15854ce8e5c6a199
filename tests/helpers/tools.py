"""The repository, the corpus, and the referee tools (parted, sfdisk, gdisk, ...) the tests run."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"


def run(*cmd: str, input: str | None = None) -> str:
    """Run a referee tool; fail the test with its stderr when it fails."""
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def need_tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        pytest.skip(f"{name} is not installed (make test installs it)")
    return path
