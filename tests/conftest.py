"""Shared fixtures: sparse images, loop devices (root only, skipped with the reason). The helpers the tests
share live in tests/helpers/.

The long run: ``DISKPLAN_FUZZ_EXAMPLES=N`` gives every Hypothesis test at least N examples (the "long"
profile for tests without settings of their own; the hook below raises the ones that name fewer), besides
the fuzz tests' own use of it. The default run draws what each test says.
"""

from __future__ import annotations

import compileall
import os
import pathlib
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

from helpers.tools import CORPUS, REPO, need_tool, run

# Tests written before tests/helpers/ import these from here (the home is helpers.tools).
__all__ = ["CORPUS", "REPO", "need_tool", "run"]


LONG_EXAMPLES = int(os.environ.get("DISKPLAN_FUZZ_EXAMPLES", "0"))
settings.register_profile("long", max_examples=max(LONG_EXAMPLES, 1), deadline=None, print_blob=True)
if LONG_EXAMPLES:
    settings.load_profile("long")


def _at_least(given: settings, n: int) -> settings:
    return given if given.max_examples >= n else settings(given, max_examples=n)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With DISKPLAN_FUZZ_EXAMPLES set, raise every collected Hypothesis test's examples to at least that:
    an explicit ``@settings(max_examples=...)`` overrides any profile, so the test's own settings object is
    replaced (a @given test keeps it on the function; a state machine's TestCase on the class)."""
    if not LONG_EXAMPLES:
        return
    for item in items:
        cls, obj = getattr(item, "cls", None), getattr(item, "obj", None)
        fn = getattr(obj, "__func__", obj)  # a method's function
        if cls is not None and isinstance(getattr(cls, "settings", None), settings):
            cls.settings = _at_least(cls.settings, LONG_EXAMPLES)
        elif getattr(fn, "is_hypothesis_test", False):
            own = getattr(fn, "_hypothesis_internal_use_settings", None)
            if not isinstance(own, settings):  # Hypothesis moved its private attribute: say so, never run short
                raise pytest.UsageError(f"cannot raise the examples of {item.nodeid}: Hypothesis keeps its settings "
                                        "elsewhere now (tests/conftest.py)")
            setattr(fn, "_hypothesis_internal_use_settings", _at_least(own, LONG_EXAMPLES))  # noqa: B010


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile diskplan's sources once, before the run: hundreds of tests start ``python -m diskplan``, and
    with PYTHONDONTWRITEBYTECODE set (as on this project's machines) each of them compiled every module it
    imports again (about 0.2 s a process). A child still reads .pyc files that exist; they go to the
    git-ignored __pycache__ directories, and a source edited later is compiled afresh (its mtime is checked)."""
    compileall.compile_dir(str(REPO / "src"), quiet=1)


def pytest_report_header(config: pytest.Config) -> str | None:
    return f"hypothesis: every test draws at least {LONG_EXAMPLES} examples (DISKPLAN_FUZZ_EXAMPLES)" \
        if LONG_EXAMPLES else None


@pytest.fixture(autouse=True)
def own_moves_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's move journals in its own directory (backend.move.movejournal.moves_dir), never the machine's
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
