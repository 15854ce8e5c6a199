"""GPT attribute bits 1 and 48-63, which libparted 3.5 neither reports nor sets, read from the raw entries:
exported as sfdisk writes them, kept when diskplan writes the table again, and changed as a plan says."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable

from conftest import need_tool, run

MiB = 1 << 20
SCRIPT = ('label: gpt\nstart=2048, size=8192, attrs="RequiredPartition LegacyBIOSBootable GUID:48,56,63"\n'
          'start=10240, size=8192, attrs="GUID:60"\nstart=18432, size=8192\n')


def diskplan(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def _attrs(dump: str) -> dict[int, str]:
    return {int(m[1]): m[2] for m in re.finditer(r"^\S+?(\d+) :.*?attrs=\"([^\"]*)\"", dump, re.MULTILINE)}


def test_export_carries_bits_48_to_63_as_sfdisk_reads_them(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input=SCRIPT)
    theirs = _attrs(run("sfdisk", "--dump", str(img)))
    assert theirs == {1: "RequiredPartition LegacyBIOSBootable GUID:48,56,63", 2: "GUID:60"}
    proc = diskplan("export", str(img), "--format", "sfdisk")
    assert proc.returncode == 0 and _attrs(proc.stdout) == theirs
    plan = json.loads(diskplan("export", str(img)).stdout)
    assert [p["flags"] for p in plan["partitions"]] == [
        ["guid:48", "guid:56", "hidden", "legacy_boot", "no_automount"], ["guid:60"], []]


def test_a_plan_that_keeps_the_bits_writes_and_keeps_them(sparse_image: Callable[..., pathlib.Path],
                                                          tmp_path: pathlib.Path) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input=SCRIPT)
    plan = json.loads(diskplan("export", str(img)).stdout)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    proc = diskplan("apply", str(path), str(img), "--yes", "--backup", str(tmp_path / "a.dpbackup"))
    assert proc.returncode == 0 and "nothing to do" in proc.stdout + proc.stderr  # the disk is the plan
    plan["partitions"][0]["name"] = "renamed"  # a kept partition changes: its bits stay as they are
    path.write_text(json.dumps(plan))
    proc = diskplan("apply", str(path), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dump = run("sfdisk", "--dump", str(img))
    assert 'name="renamed"' in dump
    assert _attrs(dump) == {1: "RequiredPartition LegacyBIOSBootable GUID:48,56,63", 2: "GUID:60"}
    plan["partitions"][1]["flags"] = []  # dropping bit 60: libparted cannot, the raw patch after its commit does
    plan["partitions"][2]["flags"] = ["no_block_io", "guid:55"]
    del plan["made_against"]  # the disk was written since the export
    path.write_text(json.dumps(plan))
    proc = diskplan("apply", str(path), str(img), "--yes", "--backup", str(tmp_path / "c.dpbackup"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "guid:60 flag off" in proc.stdout
    assert _attrs(run("sfdisk", "--dump", str(img))) == {1: "RequiredPartition LegacyBIOSBootable GUID:48,56,63",
                                                        3: "NoBlockIOProtocol GUID:55"}
