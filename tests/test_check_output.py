"""`diskplan check` as text: whole lines when piped (a script or a pager must not get arithmetic cut across
lines), and an extended partition either judged or not, never both."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Callable

from helpers.tools import need_tool, run
from helpers.units import MiB


def check_text(target: str, *extra: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", "check", target, *extra], capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")})
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.splitlines()


def test_piped_output_is_not_wrapped(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nfirst-lba: 34\nstart=34,size=20480\n")
    lines = check_text(str(img), "--physical-block", "4096")
    head = next(line for line in lines if line.startswith(str(img)))
    assert head.endswith("table gpt"), head  # the headline is one line, however long
    assert any(len(line) > 80 for line in lines)
    assert any(line.strip() == "Start: 34 × 512 B = 17408 B (17.4 kB); 17408 B mod 4096 = 1024." for line in lines)
    end = next(line for line in lines if line.strip().startswith("End: LBA 20513"))
    assert end.endswith("10503168 B mod 4096 = 1024."), end
    start = next(i for i, line in enumerate(lines) if line.startswith("warning partition 1"))
    assert lines[start + 1].startswith("    ") and not lines[start].endswith(" ")


def test_an_extended_partition_is_not_judged_twice(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img),
        input="label: dos\nstart=63,size=100000,type=5\nstart=2048,size=8192,type=83\n")
    row = next(line.split() for line in check_text(str(img)) if line.split()[:2] == ["1", "63s"])
    # the row's verdict columns and its findings agree: the container is not judged (its logicals are)
    assert row[-3:] == ["-", "-", "-"], row


def test_check_reads_sizes_as_the_planner_does(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    ambiguous = subprocess.run([sys.executable, "-m", "diskplan", "check", str(img), "--grain", "100M"],
                               capture_output=True, text=True)
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr and "100MiB" in ambiguous.stderr
    lines = check_text(str(img), "--grain", "6144s")  # sectors of the disk: 6,144 × 512 B = 3 MiB
    assert any(line.startswith("grain: 6144 sectors = 3 MiB") for line in lines), lines


def test_a_gpt_partition_without_a_name_is_not_named_primary(sparse_image: Callable[..., pathlib.Path]) -> None:
    """parted names partitions "primary" by default: the name column must not invent that name."""
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048,size=8192\nstart=10240,size=8192,name=r\n")
    rows = {line.split()[0]: line.split() for line in check_text(str(img)) if line.split()[:1] in (["1"], ["2"])}
    assert rows["1"][5] == "-" and rows["2"][5] == "r", rows  # (the size is two words: "4 MiB")
    dos = sparse_image(64 * MiB, "dos.img")
    run(need_tool("sfdisk"), "-q", str(dos), input="label: dos\nstart=2048,size=8192\n")
    assert [line.split()[5] for line in check_text(str(dos)) if line.split()[:1] == ["1"]] == ["primary"]


def test_check_ssd_says_the_page_column_beside_a_page_warning(sparse_image: Callable[..., pathlib.Path]) -> None:
    """Issue 26 item 7: with --ssd a start is judged against a 4 KiB page; "physical yes" beside the page
    warning contradicted it."""
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nfirst-lba: 34\nstart=34,size=20480\n")
    lines = check_text(str(img), "--ssd")
    head = next(line.split() for line in lines if line.split()[:2] == ["#", "start"])
    row = next(line.split() for line in lines if line.split()[:2] == ["1", "34s"])
    assert head[head.index("grain") - 1] == "page" and "physical" not in head
    assert row[-3:] == ["NO", "NO", "start-not-flash-page"], row  # page, grain, findings
    plain = check_text(str(img))
    assert next(line.split() for line in plain if line.split()[:2] == ["#", "start"])[5] == "physical"
