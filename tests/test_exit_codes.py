"""One exit-status scheme across the commands (model.exitstatus, README "Exit status"): 0 done, nothing to do
or only shown (a preview is not a refusal, as `sfdisk --no-act`), 1 refused, 2 unreadable input, 3 a write
that began and failed or was stopped. Each command as a user types it, on an image file."""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

import pytest

from diskplan.model.disk import Disk
from diskplan.model.exitstatus import WRITES, Exit
from helpers.cli import KEEP_1_SWAP_3, plan_file
from helpers.tools import REPO, run
from helpers.units import MiB

TABLE = "label: gpt\nfirst-lba: 34\nstart=34, size=20480, type=L\n"


def _img(tmp_path: pathlib.Path, name: str = "disk.img") -> pathlib.Path:
    """A GPT image with partition 1 (an ext4) off the grain (at 34: something to realign), free space after."""
    img = tmp_path / name
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    run("sfdisk", "-q", str(img), input=TABLE)
    fs = tmp_path / "fs.img"
    with open(fs, "wb") as f:
        f.truncate(20480 * 512)
    run("mkfs.ext4", "-q", "-F", str(fs))
    with open(img, "r+b") as out:
        out.seek(34 * 512)
        out.write(fs.read_bytes())
    fs.unlink()
    return img


def _dp(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO / "src"), **env},
                          timeout=120)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def _sha(path: pathlib.Path) -> bytes:
    return path.read_bytes()


def _backup(img: pathlib.Path, tmp_path: pathlib.Path) -> str:
    from diskplan.backend.write import backup as bk

    n = os.path.getsize(img) // 512
    return bk.save(bk.capture(str(img), 512, n, bk.backup_extents(str(img), 512, n)), str(tmp_path / "t.dpbackup"))


def _previews(img: pathlib.Path, tmp_path: pathlib.Path) -> dict[str, tuple[str, ...]]:
    """Each write command without --yes, with something to do."""
    backup = _backup(img, tmp_path)
    run("sfdisk", "-q", "--delete", str(img), "1")  # restore has something to put back
    return {
        "restore": ("restore", backup, str(img)),
        "apply": ("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img)),
        "move": ("move", str(img), "--partition", "1", "--to", "40960s"),
        "realign": ("realign", str(img)),
        "resize": ("resize", str(img), "--partition", "1", "--size", "12MiB"),
        "measure": ("measure", str(img)),
    }


def test_a_preview_is_not_a_refusal(tmp_path: pathlib.Path) -> None:
    img = _img(tmp_path)
    for name, args in _previews(img, tmp_path).items():
        if name != "restore":
            run("sfdisk", "-q", str(img), input=TABLE)
        before = _sha(img)
        got = _dp(*args)
        assert got.returncode == Exit.OK, (name, got.returncode, got.stdout, got.stderr)
        assert "--yes" in got.stdout and _sha(img) == before, name


def test_move_and_realign_agree_without_yes(tmp_path: pathlib.Path) -> None:
    img = _img(tmp_path)
    moved = _dp("move", str(img), "--partition", "1", "--to", "2048s")
    realigned = _dp("realign", str(img))
    assert moved.returncode == realigned.returncode == Exit.OK, (moved.stderr, realigned.stderr)


def test_a_refusal_is_1_and_unreadable_input_is_2(tmp_path: pathlib.Path) -> None:
    img = _img(tmp_path)
    before = _sha(img)
    refusals = {  # each would write something forbidden: nothing written, 1
        "apply": ("apply", plan_file(tmp_path, [{"number": 1, "start": 30, "end": 999_999_999, "type": "linux"}]),
                  str(img), "--yes"),
        "move": ("move", str(img), "--partition", "1", "--to", "10s", "--yes"),
        "resize": ("resize", str(img), "--partition", "1", "--size", "1TiB", "--yes"),
        "measure": ("measure", f"{img}", "--yes", "--count", "4096"),  # more than the free space holds
        "restore": ("restore", _backup(_img(tmp_path, "other.img"), tmp_path), str(img), "--yes"),  # another disk
        # a partition the disk does not have: invalid for this disk, alike in the three commands that take -N
        "move -N 9": ("move", str(img), "--partition", "9", "--to", "2048s", "--yes"),
        "resize -N 9": ("resize", str(img), "--partition", "9", "--size", "12MiB", "--yes"),
        "realign -N 9": ("realign", str(img), "--partition", "9", "--yes"),
    }
    for name, args in refusals.items():
        got = _dp(*args)
        assert got.returncode == Exit.REFUSED and "refused" in got.stderr, (name, got.returncode, got.stderr)
    for name, args in {"move": ("move", str(img), "--partition", "1", "--to", "40960s", "--yes"),
                       "realign": ("realign", str(img), "--yes"),
                       "resize": ("resize", str(img), "--partition", "1", "--size", "12MiB", "--yes")}.items():
        with open(img, "rb") as held:  # noqa: F841 -- a flock held by another process: refused, 1
            locker = subprocess.Popen(["flock", str(img), "sleep", "30"])
            try:
                import time

                time.sleep(0.3)
                got = _dp(*args)
            finally:
                locker.kill()
                locker.wait()
        assert got.returncode == Exit.REFUSED and "locked" in got.stderr, (name, got.returncode, got.stderr)
    missing = str(tmp_path / "missing.img")
    for args in (("apply", str(tmp_path / "no-plan.json"), str(img)), ("move", missing, "--partition", "1",
                 "--to", "2048s"), ("realign", missing), ("resize", missing, "--partition", "1", "--size", "1MiB"),
                 ("restore", str(tmp_path / "none.dpbackup"), str(img)), ("repair", missing),
                 ("resume", str(img), "--journal", str(tmp_path / "none.dpmove")), ("measure", missing),
                 ("move", str(img), "--bogus")):
        got = _dp(*args)
        assert got.returncode == Exit.UNREADABLE, (args, got.returncode, got.stderr)
    assert _sha(img) == before


def test_resume_with_nothing_to_resume_is_not_a_failure(tmp_path: pathlib.Path) -> None:
    img = _img(tmp_path)
    got = _dp("resume", str(img), "--yes")
    assert got.returncode == Exit.OK and "nothing to do" in got.stdout, got.stdout + got.stderr


def test_a_write_stopped_part_way_is_3_and_resume_finishes_it(tmp_path: pathlib.Path) -> None:
    img = _img(tmp_path)
    stopped = _dp("move", str(img), "--partition", "1", "--to", "40960s", "--yes",
                  DISKPLAN_MOVE_KILL="read:1:INT")
    assert stopped.returncode == Exit.FAILED and "diskplan resume" in stopped.stderr, stopped.stderr
    shown = _dp("resume", str(img))
    assert shown.returncode == Exit.OK and "--yes" in shown.stdout, shown.stdout + shown.stderr
    done = _dp("resume", str(img), "--yes")
    assert done.returncode == Exit.OK, done.stdout + done.stderr


def test_a_write_that_fails_after_it_began_is_3(tmp_path: pathlib.Path) -> None:
    """apply whose backup cannot be saved (its directory is a symbolic link): the write began, failed, and
    says nothing was written."""
    img = _img(tmp_path)
    (tmp_path / "state" / "diskplan").mkdir(parents=True, mode=0o700)
    (tmp_path / "state" / "diskplan" / "backups").symlink_to(tmp_path)
    got = _dp("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes", XDG_STATE_HOME=str(tmp_path / "state"))
    assert got.returncode == Exit.FAILED and "nothing was written" in got.stdout + got.stderr, got.stderr


@pytest.mark.parametrize("command", ["apply", "restore", "repair", "move", "realign", "resize", "resume",
                                     "measure"])
def test_every_write_command_documents_the_scheme(command: str) -> None:
    got = _dp(command, "--help")
    assert got.returncode == 0 and " ".join(WRITES.split()[:6]) in " ".join(got.stdout.split()), got.stdout


def test_realign_takes_a_backup_path_like_move(tmp_path: pathlib.Path) -> None:
    img = _img(tmp_path)
    backup = tmp_path / "realign.dpbackup"
    got = _dp("realign", str(img), "--yes", "--backup", str(backup))
    assert got.returncode == Exit.OK, got.stdout + got.stderr
    assert backup.exists() and str(backup) in got.stdout + got.stderr


def test_realign_stopped_part_way_by_an_unreadable_disk_is_a_failure_not_unreadable(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two partitions to realign; the first moves, then the disk cannot be read again for the second: a write
    stopped part-way (3, the message says what is done), not 2, which says nothing was written."""
    from diskplan.cli import options, realign
    from diskplan.cli.options import TargetError

    img = tmp_path / "two.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    run("sfdisk", "-q", str(img), input="label: gpt\nfirst-lba: 34\nstart=34, size=8192\nstart=30000, size=8192\n")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("DISKPLAN_MOVES_DIR", str(tmp_path / "state" / "moves"))
    reads: list[str] = []
    real = options.open_target

    def once(path: str, args: argparse.Namespace | None = None) -> Disk:
        reads.append(path)
        if len(reads) > 1:
            raise TargetError(f"{path}: Input/output error")
        return real(path, args)

    monkeypatch.setattr(realign, "open_target", once)
    code = realign.main([str(img), "--yes"])
    said = capsys.readouterr()
    assert code == Exit.FAILED, said.out + said.err
    assert "moved and verified" in said.out and "the moves before it are done" in said.err, said.out + said.err
    starts = run("sfdisk", "--dump", str(img))
    assert "start=        2048" in starts or "start=       30720" in starts, starts  # one of them moved
