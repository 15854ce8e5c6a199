"""The reader survives whatever happens to libparted in its child: a crash (SIGSEGV, SIGABRT), a hang,
an exception, unbounded allocation. Each time the planner gets a Disk with its geometry (a new label can be
planned), an `unreadable-table` finding that says why, and whatever diskplan's own parser could recover.
The failures are injected by replacing the function the child runs; the recovery path is the real one."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import time
from collections.abc import Callable

import pytest

from diskplan.backend.parted import readahead
from diskplan.backend.parted.isolate import IsolatedFailure, run_isolated
from diskplan.backend.read import reader
from diskplan.model.disk import Disk
from diskplan.model.findings.codes import UNREADABLE
from diskplan.model.table import new_table
from helpers.tools import need_tool, run
from helpers.units import MiB


@pytest.fixture
def gpt_image(sparse_image: Callable[..., pathlib.Path]) -> pathlib.Path:
    image = sparse_image(32 * MiB)
    run(need_tool("sfdisk"), "-q", str(image), input="label: gpt\nsize=8MiB, name=one\nsize=8MiB, name=two\n")
    return image


def sfdisk_parts(image: pathlib.Path) -> dict[int, tuple[int, int]]:
    out = run(need_tool("sfdisk"), "--dump", str(image))
    return {
        int(m[1]): (int(m[2]), int(m[2]) + int(m[3]) - 1)
        for m in re.finditer(r"img(\d+) : start=\s*(\d+), size=\s*(\d+)", out)
    }


def unreadable_message(disk: Disk) -> str:
    found = [f.message for f in disk.findings if f.code == UNREADABLE]
    assert len(found) == 1
    return found[0]


def _segfault(path: str) -> Disk:
    os.kill(os.getpid(), signal.SIGSEGV)
    raise AssertionError("unreachable")


def _abort(path: str) -> Disk:
    os.abort()


def _hang(path: str) -> Disk:
    time.sleep(600)
    raise AssertionError("unreachable")


def _bug(path: str) -> Disk:
    raise ValueError("a bug in the child")


def _greedy(path: str) -> Disk:
    hoard = bytearray(64 << 30)  # more than the child may have: must fail, not swap the machine
    raise AssertionError(f"allocated {len(hoard)}")


@pytest.mark.parametrize(
    ("inject", "reason"),
    [
        (_segfault, "libparted crashed (SIGSEGV)"),
        (_abort, "libparted crashed (SIGABRT)"),
        (_hang, "libparted gave no answer within 1 s"),
        (_bug, "the reader failed (ValueError: a bug in the child)"),
        (_greedy, "the reader failed (MemoryError)"),
    ],
    ids=["sigsegv", "sigabrt", "hang", "exception", "memory"],
)
def test_a_failing_libparted_leaves_a_usable_disk(
    gpt_image: pathlib.Path, monkeypatch: pytest.MonkeyPatch, inject: Callable[[str], Disk], reason: str
) -> None:
    monkeypatch.setattr(readahead, "_read", inject)
    started = time.monotonic()
    disk = reader.read(str(gpt_image), timeout=1)
    assert time.monotonic() - started < 10
    assert unreadable_message(disk) == f"this table could not be read safely: {reason}"
    assert disk.geometry.sectors == 32 * MiB // 512
    # diskplan's own GPT parser shows the table, read-only; a new label can still be planned.
    assert disk.table.label == "gpt" and disk.table.read_only
    assert {p.number: (p.start, p.end) for p in disk.table.partitions} == sfdisk_parts(gpt_image)
    assert [p.name for p in disk.table.partitions] == ["one", "two"]
    assert new_table("gpt", disk.geometry).label == "gpt"


def test_nothing_recoverable_still_gives_the_geometry(
    sparse_image: Callable[..., pathlib.Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    image = sparse_image(8 * MiB)
    monkeypatch.setattr(readahead, "_read", _segfault)
    disk = reader.read(str(image))
    assert unreadable_message(disk).endswith("libparted crashed (SIGSEGV)")
    assert disk.table.label is None and not disk.table.partitions
    assert disk.geometry.sectors == 8 * MiB // 512


def _noisy() -> int:
    os.write(1, b"to stdout\n")
    os.write(2, b"sh: udevadm: not found\n")
    return 42


def test_the_child_cannot_write_to_the_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    assert run_isolated(_noisy) == 42
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_isolated_failures_carry_what_happened() -> None:
    with pytest.raises(IsolatedFailure) as crash:
        run_isolated(_segfault, "x")
    assert crash.value.signal_number == signal.SIGSEGV and not crash.value.timed_out
    with pytest.raises(IsolatedFailure) as hang:
        run_isolated(_hang, "x", timeout=0.5)
    assert hang.value.timed_out and hang.value.signal_number is None


def test_a_directory_or_missing_path_is_a_read_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(reader.ReadError, match="cannot open it: No such file"):
        reader.read(str(tmp_path / "missing.img"))
    with pytest.raises(reader.ReadError, match="a directory"):
        reader.read(str(tmp_path))


def test_the_real_reader_on_a_clean_gpt_finds_nothing_wrong(gpt_image: pathlib.Path) -> None:
    disk = reader.read(str(gpt_image))
    assert disk.table.label == "gpt" and not disk.table.read_only
    assert {p.number: (p.start, p.end) for p in disk.table.partitions} == sfdisk_parts(gpt_image)
    assert disk.findings == () and disk.repair is None and disk.views == ()


def test_an_msdos_disk_s_last_partial_track_is_free_as_parted_says(tmp_path: pathlib.Path) -> None:
    """Issue 26 item 7: libparted keeps the last partial track of an msdos disk as metadata; parted prints it
    as free space, and the planner proposes partitions there: the map must not draw it as the table's."""
    need_tool("parted")
    img = tmp_path / "odd.img"
    with open(img, "wb") as f:
        f.truncate(204863 * 512)  # not a whole number of tracks: 204,800 + 63
    run("parted", "-s", str(img), "mklabel", "msdos", "mkpart", "primary", "1MiB", "50MiB")
    said = run("parted", "-s", str(img), "unit", "s", "print", "free")
    assert re.search(r"102400s\s+204862s\s+102463s\s+Free Space", said)
    disk = reader.read(str(img))
    assert not any(r.extent.end >= 204800 for r in disk.table.metadata)
    assert disk.table.free_regions()[-1].end == 204862
