"""A grown disk: the backup GPT is not at the end. `check` names the repair that moves it there (what
`sgdisk -e` does) in the same words `repair` shows before it performs it; afterwards `sgdisk -v` finds no
problem, the last usable LBA takes in the new space, the partitions are `sgdisk -e`'s, and `restore` brings
back the old bytes. On images grown with truncate (512 B sectors) and on a 4096-byte-sector loop device."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
from collections.abc import Callable

import pytest

from diskplan.backend.raw import kernelparts
from diskplan.backend.read.reader import read
from diskplan.backend.write import gptrepair, restore
from diskplan.backend.write.steps import DiskState, Verdict
from diskplan.model.findings.codes import GPT_BACKUP_NOT_AT_END
from helpers.cli import diskplan
from helpers.images import HOST, file_sha, sfdisk_parts, sgdisk_clean
from helpers.tools import need_tool, run
from helpers.units import MiB


def _summary(out: str) -> str:
    """The repair's words as `repair` shows them ("Repair: ...")."""
    m = re.search(r"^Repair: (.*)$", out, re.MULTILINE)
    assert m, out
    return m[1]


def _last_usable(target: pathlib.Path | str) -> int:
    said = run(need_tool("sgdisk"), "-p", str(target))
    m = re.search(r"last usable sector is (\d+)", said)
    assert m, said
    return int(m[1])


def _grown(tmp_path: pathlib.Path, sector: int = 512) -> pathlib.Path:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    if sector == 512:
        run(need_tool("sgdisk"), "-n1:0:+8M", "-c1:one", "-t1:ef00", "-n2:0:+16M", "-c2:two", "-A2:set:60", str(img))
        os.truncate(img, 96 * MiB)
    return img


def test_check_and_repair_say_the_same_and_repair_moves_the_backup_as_sgdisk_e(tmp_path: pathlib.Path) -> None:
    img = _grown(tmp_path)
    before, old_last = file_sha(img), _last_usable(img)
    referee = tmp_path / "referee.img"
    run("cp", "--sparse=always", str(img), str(referee))
    run("sgdisk", "-e", str(referee))

    doc = json.loads(diskplan("check", "--json", str(img)).stdout)
    assert GPT_BACKUP_NOT_AT_END in {f["code"] for f in doc["findings"]}
    checked = diskplan("check", str(img))
    shown = diskplan("repair", str(img))
    assert shown.returncode == 0 and file_sha(img) == before  # without --yes nothing is written
    words = _summary(shown.stdout)
    assert words.startswith("move the backup GPT to the end of the disk") and "sgdisk -e" in words
    assert doc["repair"]["summary"] == words
    assert f"Repair, offered as a planned operation (nothing is written until you commit): {words}." in checked.stdout
    assert "diskplan repair does not" not in shown.stdout + checked.stdout

    done = diskplan("repair", str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "moved to the end of the disk" in done.stdout
    assert sgdisk_clean(img)
    assert _last_usable(img) == _last_usable(referee) == 96 * MiB // 512 - 34 > old_last
    assert sfdisk_parts(img) == sfdisk_parts(referee)
    assert "Attribute flags: 1000000000000000" in run("sgdisk", "-i2", str(img))  # attributes kept
    again = read(str(img))
    assert GPT_BACKUP_NOT_AT_END not in {f.code for f in again.findings} and again.repair is None
    assert again.table.last_usable == _last_usable(img)
    assert "nothing to repair" in diskplan("repair", str(img)).stdout

    undo = diskplan("restore", str(tmp_path / "b.dpbackup"), str(img), "--yes")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert file_sha(img) == before


def test_a_move_cut_short_is_reported_and_restored(tmp_path: pathlib.Path) -> None:
    img = _grown(tmp_path)
    before = file_sha(img)
    p = gptrepair.prepare_repair(str(img), HOST)
    assert p.repair is not None and p.repair.moved_from == 64 * MiB // 512 - 1

    def torn(stage: str) -> None:
        if stage == "write":  # the new backup's entries are written, nothing else
            raise OSError(5, "Input/output error")

    o = gptrepair.execute_repair(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=torn)
    assert o.verdict is Verdict.FAILED and o.state is DiskState.CHANGED and o.restore_command
    r = restore.prepare_restore(o.backup_path, str(img), HOST)
    assert restore.execute_restore(r, "yes", HOST).verdict is Verdict.WRITTEN
    assert file_sha(img) == before


def test_a_shrunk_image_is_not_offered_the_move(tmp_path: pathlib.Path) -> None:
    img = _grown(tmp_path)
    os.truncate(img, 32 * MiB)  # the backup's place is gone: read-only, nothing moved
    disk = read(str(img))
    assert disk.repair is None and GPT_BACKUP_NOT_AT_END not in {f.code for f in disk.findings}


def test_a_grown_4096_byte_sector_loop_device(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path,
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img, sector_size=4096)
    run(need_tool("sgdisk"), "-n1:0:+8M", "-c1:one", "-n2:0:+16M", "-c2:two", dev)
    parts = sfdisk_parts(dev)
    old_last = _last_usable(dev)
    os.truncate(img, 128 * MiB)
    subprocess.run(["losetup", "--set-capacity", dev], check=True)
    assert int(run("blockdev", "--getsz", dev)) == 128 * MiB // 512

    shown = diskplan("check", "--json", dev)
    assert GPT_BACKUP_NOT_AT_END in {f["code"] for f in json.loads(shown.stdout)["findings"]}
    done = diskplan("repair", dev, "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sgdisk_clean(dev)
    # 4096 B sectors: 128 entries take 4 sectors, so the last usable LBA is 6 before the end
    assert _last_usable(dev) == 128 * MiB // 4096 - 6 > old_last
    assert sfdisk_parts(dev) == parts
    disk = read(dev)
    assert kernelparts.kernel_list(dev) == {p.number: (p.start * 8, p.size * 8) for p in disk.table.partitions}


@pytest.mark.parametrize("grow", [1, 3])
def test_a_disk_grown_by_less_than_its_entry_array(tmp_path: pathlib.Path, grow: int) -> None:
    """The new entry array covers the old backup header: nothing is erased there, and sgdisk agrees."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(16 * MiB)
    run(need_tool("sgdisk"), "-n1:0:+4M", str(img))
    os.truncate(img, 16 * MiB + grow * 512)
    done = diskplan("repair", str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "erased" not in done.stdout
    assert sgdisk_clean(img) and _last_usable(img) == 16 * MiB // 512 + grow - 34
