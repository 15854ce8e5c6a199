"""Shared fixtures: sparse images, loop devices (root only, skipped with the reason). The helpers the tests
share live in tests/helpers/."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest

from helpers.tools import CORPUS, REPO, need_tool, run

# Tests written before tests/helpers/ import these from here (the home is helpers.tools).
__all__ = ["CORPUS", "REPO", "need_tool", "run"]


@pytest.fixture(autouse=True)
def own_moves_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's move journals in its own directory (backend.movejournal.moves_dir), never the machine's
    /var/lib/diskplan/moves; a subprocess started with os.environ inherits it."""
    monkeypatch.setenv("DISKPLAN_MOVES_DIR", str(tmp_path / "moves"))


@pytest.fixture
def sparse_image(tmp_path: pathlib.Path) -> Callable[..., pathlib.Path]:
    """make(size_bytes, name='disk.img') -> a sparse file of that size."""

    def make(size: int, name: str = "disk.img") -> pathlib.Path:
        path = tmp_path / name
        with open(path, "wb") as f:
            f.truncate(size)
        return path

    return make


def _loop_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root for loop devices"
    if shutil.which("losetup") is None:
        return "losetup is not installed"
    if not os.path.exists("/dev/loop-control"):
        return "this machine has no loop devices (/dev/loop-control missing)"
    return None


@pytest.fixture
def loop_device() -> Iterator[Callable[..., str]]:
    """attach(image, sector_size=512, read_only=False) -> /dev/loopN, detached after the test."""
    reason = _loop_reason()
    if reason:
        pytest.skip(reason)
    attached: list[str] = []

    def attach(image: os.PathLike[str] | str, sector_size: int = 512, read_only: bool = False) -> str:
        cmd = ["losetup", "--find", "--show", "--partscan", "--sector-size", str(sector_size)]
        if read_only:
            cmd.append("--read-only")
        proc = subprocess.run([*cmd, str(image)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"losetup could not attach a loop device: {proc.stderr.strip()}")
        dev = proc.stdout.strip()
        attached.append(dev)
        return dev

    yield attach
    for dev in reversed(attached):
        subprocess.run(["losetup", "--detach", dev], capture_output=True)
