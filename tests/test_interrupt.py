"""Ctrl+C while a filesystem tool rewrites a filesystem: the terminal sends SIGINT to the whole foreground
process group, so a resize2fs started by diskplan would die half-way through a shrink (and Python would
then claim "nothing was written"). The tools run in a session of their own and diskplan finishes the
step it is in: the shrink completes, the checker finds the filesystem clean, every file is unchanged."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time

from helpers.movedisk import PY, View, assert_intact, entry, make_disk, state_env
from helpers.tools import run
from helpers.units import MiB


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the direct children of ``pid`` (the kernel's own list: fast enough to poll)."""
    try:
        pids = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    out = []
    for child in pids:
        try:
            out.append((int(child), pathlib.Path(f"/proc/{child}/cmdline").read_text().replace("\0", " ").strip()))
        except OSError:
            continue
    return out


def shrinking(cmd: str) -> bool:
    """resize2fs at work (not ``resize2fs -P``, which only asks the minimum while the plan is shown)."""
    return cmd.startswith("resize2fs ") and " -P " not in f"{cmd} "


def spread(loop: str, tmp: pathlib.Path) -> None:
    """Files in many directories (ext4 spreads them over block groups), so a shrink moves blocks for a while."""
    mnt = tmp / "mnt"
    mnt.mkdir()
    run("mount", loop, str(mnt))
    try:
        for i in range(112):
            (mnt / f"d{i}").mkdir()
            (mnt / f"d{i}" / "data").write_bytes(os.urandom(2 * MiB))
    finally:
        run("umount", str(mnt))


def test_ctrl_c_during_a_shrink_lets_the_tool_finish(loop_device, tmp_path) -> None:
    d = make_disk(loop_device, tmp_path, start=2048, size=600 * 2048, disk_mib=604)
    with View(d.dev, d.start, d.size, read_only=False) as v:
        spread(v, tmp_path)
    partuuid = entry(d)[2]
    new = 300 * 2048
    proc = subprocess.Popen([PY, "-m", "diskplan", "resize", d.dev, "--partition", "1", "--size", f"{new}s", "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=state_env(d.state),
                            stdin=subprocess.DEVNULL, start_new_session=True)
    seen = ""
    deadline = time.monotonic() + 120
    while not seen and proc.poll() is None and time.monotonic() < deadline:
        seen = next((cmd for _, cmd in children(proc.pid) if shrinking(cmd)), "")
        time.sleep(0.0005)
    pressed = 0
    while seen and pressed < 2 and any(shrinking(cmd) for _, cmd in children(proc.pid)):
        os.killpg(proc.pid, signal.SIGINT)  # a user pressing Ctrl+C, then again, while resize2fs works
        pressed += 1
        time.sleep(0.02)
    out, err = proc.communicate(timeout=300)
    assert seen and pressed, f"resize2fs was never seen running (the resize took {proc.returncode=}): {out}{err}"
    assert proc.returncode == 0 and "shrunk" in out, out + err
    assert "cannot stop half-way" in err and "nothing was written" not in err  # it heard Ctrl+C, and said so
    d.size = new
    assert_intact(d, d.start, partuuid)


def test_a_late_ctrl_c_does_not_claim_nothing_was_written(tmp_path, monkeypatch, capsys) -> None:
    """The top level's message after Ctrl+C: "nothing was written" only while no write saved its backup."""
    from diskplan.backend.write import backup
    from diskplan.cli import main

    def interrupt(argv: list[str]) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(backup, "SAVED", [])
    assert main.main(["check", "x"], run=interrupt) == 2
    assert capsys.readouterr().err == "diskplan: interrupted; nothing was written.\n"
    monkeypatch.setattr(backup, "SAVED", [str(tmp_path / "disk-1.dpbackup")])
    assert main.main(["check", "x"], run=interrupt) == 3  # a write began and was stopped (model.exitstatus)
    said = capsys.readouterr().err
    assert "nothing was written" not in said and "disk-1.dpbackup" in said and "diskplan check" in said


def test_an_internal_error_after_a_write_began_is_3_and_says_so(tmp_path, monkeypatch, capsys) -> None:
    """Exit 2 means "nothing written": an internal error after a write saved its backup is 3, and names it."""
    from diskplan.backend.write import backup
    from diskplan.cli import main

    def boom(argv: list[str]) -> int:
        raise ValueError("boom")

    monkeypatch.delenv("DISKPLAN_DEBUG", raising=False)
    monkeypatch.setattr(backup, "SAVED", [])
    assert main.main(["apply", "x"], run=boom) == 2
    assert "boom (internal error; run with" in capsys.readouterr().err
    monkeypatch.setattr(backup, "SAVED", [str(tmp_path / "disk-1.dpbackup")])
    assert main.main(["apply", "x"], run=boom) == 3
    said = capsys.readouterr().err
    assert "disk-1.dpbackup" in said and "diskplan check" in said
