"""backend.fs.fscheck.view and the demos' loop devices (backend.loopdev): a loop device diskplan attaches is
autocleared, so it is gone after a Ctrl+C and after a SIGKILL at any moment diskplan holds it (losetup, which
attached them before, has no option for that: 11 were left behind by a round of kill -9 runs)."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from diskplan.discovery import inuse
from helpers.units import MiB

HOLD = """
import sys, time
from diskplan.backend.fs import fscheck
with fscheck.view(sys.argv[1], 1048576, 1048576, read_only=sys.argv[2] == "ro") as loop:
    print(loop, flush=True)
    time.sleep(60)
"""

DEMO = """
import sys, time
from diskplan.backend.demo_image import Workspace
from diskplan.model.teach import demos
w = Workspace()
print(w.image(demos.find(sys.argv[1])).device, flush=True)
time.sleep(60)
"""


def _loops(img: pathlib.Path) -> list[str]:
    return [n.path for n in inuse.loops_backed_by(str(img))]


def _gone(img: pathlib.Path, within: float = 10.0) -> list[str]:
    """The loop devices still reading ``img`` once the kernel had ``within`` seconds to clear them."""
    end = time.monotonic() + within
    while _loops(img) and time.monotonic() < end:
        time.sleep(0.05)
    return _loops(img)


def _held(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    # SIGINT as at a terminal even when the tests run in a background job (which starts with it ignored)
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _cleanup(img: pathlib.Path) -> None:
    for node in _loops(img):  # (a leak is cleaned up here, after it was seen)
        subprocess.run(["losetup", "--detach", node], capture_output=True)


@pytest.fixture
def root() -> None:
    if os.geteuid() != 0 or not os.path.exists("/dev/loop-control"):
        pytest.skip("needs root and loop devices")


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_a_view_killed_with_sigkill_leaves_no_loop_device(
    root: None, sparse_image: Callable[..., pathlib.Path], mode: str
) -> None:
    img = sparse_image(8 * MiB)
    proc, loop = _held(HOLD, str(img), mode)
    try:
        assert loop.startswith("/dev/loop") and _loops(img) == [loop], proc.stderr.read() if proc.stderr else ""
        shown = subprocess.run(["losetup", "--noheadings", "-O", "AUTOCLEAR,RO", loop], capture_output=True,
                               text=True).stdout.split()
        assert shown == ["1", "1" if mode == "ro" else "0"]
        proc.kill()
        proc.wait(timeout=30)
        left = _gone(img)
    finally:
        if proc.poll() is None:
            proc.kill()
        _cleanup(img)
    assert left == []


def test_a_ctrl_c_while_a_view_is_held_leaves_no_loop_device(
    root: None, sparse_image: Callable[..., pathlib.Path]
) -> None:
    img = sparse_image(8 * MiB)
    proc, loop = _held(HOLD, str(img), "ro")
    try:
        assert _loops(img) == [loop]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        left = _loops(img)  # detached by the view itself, at once: no waiting for the kernel
    finally:
        if proc.poll() is None:
            proc.kill()
        _cleanup(img)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err  # the Ctrl+C was not lost
    assert left == []


def test_a_demo_loop_device_is_gone_after_sigkill(root: None, tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc, device = _held(DEMO, "4kn", env=env)
    images = list(tmp_path.glob("diskplan-demo-*/*.img"))
    try:
        assert device.startswith("/dev/loop") and len(images) == 1 and _loops(images[0]) == [device]
        proc.kill()
        proc.wait(timeout=30)
        left = _gone(images[0])
    finally:
        if proc.poll() is None:
            proc.kill()
        for img in images:
            _cleanup(img)
    assert left == []


SLOW_CHECK = """#!/bin/sh
sleep 3
exec {real} "$@"
"""


def test_a_move_killed_while_its_filesystem_is_checked_leaves_no_loop_device(
    root: None, loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """kill -9 of `diskplan move` while the filesystem checker reads the private loop device: the checker
    (its own session) finishes, and the loop device goes with its last holder."""
    from helpers.movedisk import PY, make_disk, state_env

    d = make_disk(loop_device, tmp_path, start=2048, size=16384)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("e2fsck")
    assert real
    (bin_dir / "e2fsck").write_text(SLOW_CHECK.format(real=real))
    (bin_dir / "e2fsck").chmod(0o755)
    env = state_env(d.state, PATH=f"{bin_dir}:{os.environ['PATH']}")
    proc = subprocess.Popen([PY, "-m", "diskplan", "move", d.dev, "--partition", "1", "--to", "40960s", "--yes"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    disk = pathlib.Path(d.dev)
    try:
        end = time.monotonic() + 60
        while not _loops(disk):
            assert proc.poll() is None and time.monotonic() < end, "the move attached no loop device"
            time.sleep(0.02)
        proc.kill()
        proc.wait(timeout=30)
        left = _gone(disk, within=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        _cleanup(disk)
    assert left == []
