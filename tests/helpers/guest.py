"""The guest-machine tier for tests (scripts/guestvm.py does the booting): ``boot_guest`` boots a throw-away
QEMU guest with disks of a chosen geometry, runs a batch of cases in it and returns their outputs, or skips
the test saying why the guest cannot run here (not root, no QEMU, no kernel with 9p).

A boot costs ~10 s and Python runs ~15x slower in the guest, so a test file boots once in a module fixture
with all its cases and each test asserts on one case's result:

    @pytest.fixture(scope="module")
    def run(tmp_path_factory):
        return boot_guest([e512("a")], [Case("check", "diskplan check --json $DISK_a")], udevd=True)

    def test_check(run):
        assert json.loads(run["check"].check().out)...

Tests are marked ``guest``; the default run boots a small sample, the rest is ``full_only()`` behind
DISKPLAN_GUEST=all, and DISKPLAN_GUEST=0 skips the tier.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Callable, Sequence

import pytest

from helpers.tools import REPO

sys.path.insert(0, str(REPO / "scripts"))

from guestvm import (  # scripts/ is not a package: found through sys.path
    Case,
    CaseResult,
    Disk,
    GuestUnavailable,
    Machine,
    Run,
    check_host,
    e512,
    n4k,
    ssd,
)

__all__ = ["Case", "CaseResult", "Disk", "Machine", "Run", "boot_guest", "e512", "full_only", "n4k", "ssd"]

# the guest's command line: the project's venv, whatever PATH the case has
DISKPLAN = str(REPO / ".venv/bin/diskplan")


def full_only() -> None:
    """Skip unless DISKPLAN_GUEST=all (the default run boots only a sample of the tier)."""
    if os.environ.get("DISKPLAN_GUEST") != "all":
        pytest.skip("a longer guest-machine case: DISKPLAN_GUEST=all runs it")


def boot_guest(disks: Sequence[Disk], cases: Sequence[Case], *, workdir: pathlib.Path | None = None,
               udevd: bool = False, handlers: dict[str, Callable[[Machine], None]] | None = None,
               kill_after: float | None = None) -> Run:
    """Boot once, run ``cases`` in order (``$DISK_<serial>`` is each disk's node, the repository the
    working directory, ``diskplan`` on PATH through the venv), return the run. Skips when the guest cannot
    run here. ``workdir`` keeps the images for another boot (a power cut's recovery)."""
    if os.environ.get("DISKPLAN_GUEST") == "0":
        pytest.skip("DISKPLAN_GUEST=0: the guest-machine tier is off")
    try:
        check_host()
    except GuestUnavailable as exc:
        pytest.skip(f"no guest machine: {exc}")
    import guestvm

    return guestvm.boot(disks, cases, workdir=workdir, udevd=udevd, handlers=handlers, kill_after=kill_after)
