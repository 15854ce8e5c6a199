"""Many isolated calls sharing children (isolate.IsolatedMap, what `check A B C ...` reads with): every call
still fails alone (a crash, a hang or an exception costs that call only, the next ones are answered by a new
child), answers come in order across side-by-side children, and the children are few: a fork per lane, not
per call. The reads themselves: several images of one directory, each with FIFOs where libparted looks for
its partition nodes, read by one child in one `check` call."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from diskplan.backend.parted import isolate
from diskplan.backend.parted.isolate import IsolatedFailure, IsolatedMap
from helpers.tools import need_tool, run
from helpers.units import MiB


def _square_or_fail(n: int) -> int:
    if n == 3:
        os.kill(os.getpid(), signal.SIGSEGV)
    if n == 5:
        time.sleep(600)
    if n == 7:
        raise ValueError("seven")
    return n * n


def _mine(n: int) -> tuple[int, int]:
    return n, os.getpid()


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The forks this process makes from now on (one entry each)."""
    made: list[int] = []
    real = os.fork

    def counting() -> int:
        pid = real()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counting)
    return made


@pytest.mark.parametrize("lanes", [1, 2])
def test_each_call_fails_alone_and_the_rest_are_answered(lanes: int, forks: list[int]) -> None:
    answers = list(IsolatedMap(_square_or_fail, range(10), timeout=1, lanes=lanes))
    failures = {i: a for i, a in enumerate(answers) if isinstance(a, IsolatedFailure)}
    assert [a for i, a in enumerate(answers) if i not in failures] == [n * n for n in (0, 1, 2, 4, 6, 8, 9)]
    assert failures[3].signal_number == signal.SIGSEGV and failures[3].reason == "libparted crashed (SIGSEGV)"
    assert failures[5].timed_out and failures[5].reason == "gave no answer within 1 s"
    assert (failures[7].error_type, failures[7].reason) == ("ValueError", "seven")
    assert set(failures) == {3, 5, 7}
    # A child per lane, and one more for each call that took its child down (the crash, the hang); the
    # exception did not: that child answered the next call.
    assert len(forks) == lanes + 2


def test_calls_share_children_and_every_child_is_reaped(forks: list[int]) -> None:
    answers = [a for a in IsolatedMap(_mine, range(40), lanes=2) if not isinstance(a, IsolatedFailure)]
    assert [n for n, _ in answers] == list(range(40))  # in order, across both children
    pids = {pid for _, pid in answers}
    assert len(pids) == 2 and pids == set(forks)
    for pid in forks:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left behind


def test_stopping_early_ends_the_children(forks: list[int]) -> None:
    answers = iter(IsolatedMap(_mine, range(1000), lanes=2))
    assert next(answers) == (0, forks[0])
    answers.close()  # the caller stopped asking: the children are killed and reaped, not left running
    for pid in forks:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_no_items_no_child(forks: list[int]) -> None:
    assert list(IsolatedMap(_mine, [], lanes=4)) == [] and forks == []
    assert not isolate.IN_CHILD


def test_images_side_by_side_with_hostile_neighbours(sparse_image: Callable[..., pathlib.Path]) -> None:
    """libparted opens IMG1..IMG63 beside each image it opens: one child reading six images of one directory,
    each with FIFOs named so, must hide each image's neighbours in turn (backend.parted.siblings) and still see the
    next image, which the previous one's hiding had covered."""
    images = []
    for i in range(6):
        img = sparse_image(16 * MiB, f"d{i}.img")
        run(need_tool("sfdisk"), "-q", str(img), input=f"label: gpt\nstart={2048 * (i + 1)}, size=2048\n")
        os.mkfifo(f"{img}1")
        os.mkfifo(f"{img}63")
        images.append(str(img))
    begin = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "diskplan", "check", "--json", *images], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - begin < 20  # a FIFO opened by libparted would have hung a read for 30 s
    doc = json.loads(proc.stdout)
    assert [(d["target"], d["partitions"][0]["start"]) for d in doc["disks"]] == [
        (img, 2048 * (i + 1)) for i, img in enumerate(images)]
    assert sorted(os.listdir(os.path.dirname(images[0]))) == sorted(
        name for i in range(6) for name in (f"d{i}.img", f"d{i}.img1", f"d{i}.img63"))


def test_a_fleet_checked_whole_in_children_says_what_one_by_one_says(
        sparse_image: Callable[..., pathlib.Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """From check.FLEET targets on, each child runs whole checks; a child that crashes on one target costs
    nothing: that target is checked again in the parent, the usual way. Both ways give the same objects."""
    from diskplan.cli import check
    from diskplan.cli.checkjson import json_result

    targets = []
    for i in range(check.FLEET + 2):
        img = sparse_image(8 * MiB, f"f{i:02}.img")
        script = f"label: {'gpt' if i % 2 else 'dos'}\nstart={2048 + i}, size=2048\n,,L\n"
        run(need_tool("sfdisk"), "-q", str(img), input=script)
        os.mkfifo(f"{img}1")  # a neighbour libparted must never open
        targets.append(str(img))
    targets.insert(3, "/nonexistent/disk.img")
    args = check.parser().parse_args(["--json", *targets])
    one_by_one = [json_result(r) for t in targets for r in check.checked([t], args)]
    real = check._whole_check

    def crashing(args: object, as_json: bool, target: str) -> object:
        if target == targets[7]:
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(args, as_json, target)  # type: ignore[arg-type]

    monkeypatch.setattr(check, "_whole_check", crashing)
    assert list(check.checked_in_children(targets, args, True)) == one_by_one
    assert one_by_one[3][0] == 2 and one_by_one[7][1] is not None  # the missing one, the crashed one


@pytest.mark.parametrize("count", [3, 20])  # libparted's reads in children; whole checks in children
def test_check_forks_a_child_per_core_not_per_disk(count: int, sparse_image: Callable[..., pathlib.Path],
                                                    forks: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    from diskplan.cli import check

    targets = []
    for i in range(count):
        img = sparse_image(8 * MiB, f"c{i:02}.img")
        run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=2048\n")
        targets.append(str(img))
    forks.clear()  # (sfdisk's own processes)
    assert check.main(["--json", *targets]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["disks"]) == count and doc["errors"] == []
    assert len(forks) == min(os.cpu_count() or 1, check.MAX_LANES, count)
