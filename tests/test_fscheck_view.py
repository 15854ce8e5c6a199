"""backend.fscheck.view: the private loop device the filesystem referees read through is detached whatever
happens, a Ctrl+C while losetup attaches it included."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from diskplan.discovery import inuse
from helpers.units import MiB

# losetup that attaches, says so on stderr, then takes its time answering: a Ctrl+C lands in that window.
SLOW_LOSETUP = """#!/bin/sh
case "$1" in --find) out=$(/sbin/losetup "$@") || exit $?; echo attached >&2; sleep 1; echo "$out";;
*) exec /sbin/losetup "$@";; esac
"""

VIEW = """
import sys
from diskplan.backend import fscheck
sys.stderr.write("ready\\n"); sys.stderr.flush()
with fscheck.view(sys.argv[1], 1048576, 1048576) as loop:
    print(loop, flush=True)
"""


def test_a_ctrl_c_while_losetup_attaches_leaves_no_loop_device(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    if os.geteuid() != 0 or not os.path.exists("/sbin/losetup"):
        pytest.skip("needs root and /sbin/losetup for loop devices")
    img = sparse_image(8 * MiB)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "losetup").write_text(SLOW_LOSETUP)
    (bin_dir / "losetup").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen([sys.executable, "-c", VIEW, str(img)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stderr is not None
    left: list[str] = []
    try:
        assert proc.stderr.readline().strip() == "ready"
        # losetup's stderr is captured by view: wait until a loop device reads the image, then press Ctrl+C
        end = time.monotonic() + 20
        while not inuse.loops_backed_by(str(img)):
            assert time.monotonic() < end, "losetup attached nothing"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        left = [n.path for n in inuse.loops_backed_by(str(img))]
    finally:
        if proc.poll() is None:
            proc.kill()
        for node in inuse.loops_backed_by(str(img)):  # (a leak is cleaned up here, after it was seen)
            subprocess.run(["losetup", "--detach", node.path], capture_output=True)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err  # the Ctrl+C was not lost
    assert left == []
