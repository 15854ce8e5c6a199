"""`diskplan check A B C ...`: many disks in one process, one combined JSON document and one exit status (the
worst), each partition's GPT unique GUID and attribute bits as sfdisk reads them."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable

from conftest import need_tool, run

MiB = 1 << 20


def diskplan(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def _images(sparse_image: Callable[..., pathlib.Path]) -> tuple[pathlib.Path, pathlib.Path]:
    good = sparse_image(64 * MiB, "good.img")
    run(need_tool("sfdisk"), "-q", str(good), input='label: gpt\nstart=2048, size=8192, attrs="GUID:48,63"\n,,L\n')
    odd = sparse_image(64 * MiB, "odd.img")  # starts on an odd sector: a finding on a 4096-byte-block disk
    run("sfdisk", "-q", str(odd), input="label: gpt\nstart=2049, size=8192\n")
    return good, odd


def test_one_document_for_many_disks_and_the_worst_status(sparse_image: Callable[..., pathlib.Path]) -> None:
    good, odd = _images(sparse_image)
    proc = diskplan("check", "--json", str(good), str(odd), "/nonexistent/disk.img", "--physical-block", "4096")
    assert proc.returncode == 2  # one target could not be read: the worst status of all
    doc = json.loads(proc.stdout)
    assert (doc["format"], doc["version"], doc["status"]) == ("diskplan-check", 1, 2)
    assert [d["target"] for d in doc["disks"]] == [str(good), str(odd)]
    assert [e["target"] for e in doc["errors"]] == ["/nonexistent/disk.img"]
    assert doc["disks"][0]["partitions"][0]["findings"] == [] and doc["disks"][1]["partitions"][0]["findings"]
    assert proc.stderr.count("\n") == 1 and "/nonexistent/disk.img" in proc.stderr

    proc = diskplan("check", "--json", str(good), str(odd), "--physical-block", "4096")
    assert proc.returncode == 1 and json.loads(proc.stdout)["status"] == 1  # findings on one
    proc = diskplan("check", str(good), str(good))
    assert proc.returncode == 0 and proc.stdout.count("No findings") == 2  # text: one report after another
    proc = diskplan("check", str(good), str(odd))
    assert proc.returncode == 1 and proc.stdout.count("No findings") == 1


def test_guid_and_attribute_bits_are_the_raw_entrys(sparse_image: Callable[..., pathlib.Path]) -> None:
    good, _ = _images(sparse_image)
    proc = diskplan("check", "--json", str(good))
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)  # one target: its own object, now with format and version
    assert (doc["format"], doc["version"]) == ("diskplan-check", 1)
    uuids = {int(m[1]): m[2] for m in re.finditer(r"^\S+?(\d+) :.*uuid=([0-9A-F-]+)",
                                                   run("sfdisk", "--dump", str(good)), re.MULTILINE)}
    p1, p2 = doc["partitions"]
    assert (p1["guid"], p2["guid"]) == (uuids[1], uuids[2])
    assert p1["attribute_bits"] == f"0x{(1 << 48) | (1 << 63):016x}" and p2["attribute_bits"] == f"0x{0:016x}"
    assert p1["flags"] == ["guid:48", "no_automount"] and p2["flags"] == []


def test_many_targets_keep_their_order_across_workers(sparse_image: Callable[..., pathlib.Path]) -> None:
    """Enough targets to be split between forked workers: the document still lists them in the order given."""
    targets = []
    for i in range(40):
        img = sparse_image(8 * MiB, f"d{i:02}.img")
        run(need_tool("sfdisk"), "-q", str(img), input=f"label: gpt\nstart={2048 + i}, size=2048\n")
        targets.append(str(img))
    targets.insert(17, "/nonexistent/disk.img")
    proc = diskplan("check", "--json", *targets)
    doc = json.loads(proc.stdout)
    assert [d["target"] for d in doc["disks"]] == [t for t in targets if not t.startswith("/nonexistent")]
    assert [d["partitions"][0]["start"] for d in doc["disks"]] == [2048 + i for i in range(40)]
    assert doc["errors"] == [{"target": "/nonexistent/disk.img", "error": doc["errors"][0]["error"]}]
    assert proc.returncode == doc["status"] == 2
