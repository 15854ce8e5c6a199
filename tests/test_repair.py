"""Repairing a damaged GPT end to end on real images: GPTs made by sgdisk, damaged the way disks break
(primary header or entries, backup header or entries, the protective MBR), the repair planned, committed
through `diskplan repair` or backend.write.commit, then judged by the referees: `sgdisk -v` finds no problem,
`sfdisk --dump` is the dump of the undamaged table, the data in the partitions is byte-identical, and
`diskplan restore` brings back the exact damaged bytes. Without --yes nothing is written."""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Callable

import pytest

from diskplan.backend.raw import kernelparts
from diskplan.backend.read.reader import read
from diskplan.backend.write import backup as bk
from diskplan.backend.write import commit, gptrepair, restore
from diskplan.backend.write.steps import DiskState, Verdict
from diskplan.model.extent import Extent
from diskplan.model.findings.codes import GPT_BACKUP_DAMAGED
from diskplan.model.plan.history import History
from diskplan.model.plan.plan import Plan
from diskplan.model.value import replace
from helpers.cli import diskplan
from helpers.images import DAMAGE, HOST, digest, file_sha, flip, last_lba, mounted, partx_update, poke, sgdisk_clean
from helpers.tools import need_tool, run
from helpers.units import SECTOR, MiB

# Where the test data goes: the first and last MiB of every partition (next to both GPT copies).
PARTS = {1: (2048, 18431), 2: (18432, 51199), 3: (51200, 131038)}


REWRITTEN = {"primary-header-zeroed": "primary", "primary-header-flipped": "primary",
             "primary-entries-flipped": "primary", "backup-header-zeroed": "backup",
             "backup-entries-flipped": "backup", "protective-mbr-zeroed": "protective MBR"}


def sfdisk_dump(target: pathlib.Path | str) -> str:
    return run(need_tool("sfdisk"), "--dump", str(target))


def data_digests(target: pathlib.Path | str) -> dict[int, str]:
    return {n: digest(target, s, e - s + 1, SECTOR) for n, (s, e) in PARTS.items()}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A 64 MiB GPT by sgdisk (names, types, 128 entries) with random data at both ends of each partition."""
    image = tmp_path_factory.mktemp("gpt") / "template.img"
    with open(image, "wb") as f:
        f.truncate(64 * MiB)
    run(need_tool("sgdisk"), "-n1:2048:+8M", "-c1:boot", "-t1:ef00", "-n2:0:+16M", "-c2:root", "-n3:0:0",
        "-c3:data", "-A3:set:2", str(image))
    for start, end in PARTS.values():
        poke(image, start * SECTOR, os.urandom(MiB))
        poke(image, (end + 1) * SECTOR - MiB, os.urandom(MiB))
    assert sgdisk_clean(image)
    return image


@pytest.fixture
def image(template: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    img = tmp_path / "disk.img"
    run("cp", "--sparse=always", str(template), str(img))
    return img


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_repair_command_fixes_each_damage_and_restore_brings_it_back(
    image: pathlib.Path, tmp_path: pathlib.Path, damage: str
) -> None:
    dump, data = sfdisk_dump(image), data_digests(image)
    DAMAGE[damage](image)
    assert not sgdisk_clean(image), "the referees see the damage"
    damaged = file_sha(image)
    backup = tmp_path / "repair.dpbackup"

    shown = diskplan("repair", str(image), "--backup", str(backup))
    assert shown.returncode == 0, shown.stderr
    assert "Nothing written" in shown.stdout and "--yes" in shown.stdout
    assert f"{image}: 131072 sectors × 512 B = 64 MiB" in shown.stdout
    assert re.search(r"repair: write sectors? \d+", shown.stdout)
    assert file_sha(image) == damaged and not backup.exists(), "without --yes nothing is written"

    done = diskplan("repair", str(image), "--yes", "--backup", str(backup))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "repaired and verified" in done.stdout and f"backup of the old table: {backup}" in done.stdout
    assert sgdisk_clean(image), run("sgdisk", "-v", str(image))
    assert sfdisk_dump(image) == dump, "the same table as before the damage: GUIDs, names, attributes"
    assert data_digests(image) == data
    again = read(str(image))
    assert again.repair is None and not again.table.read_only and again.findings == ()

    saved = bk.load(str(backup))
    lines = [line for line in dump.splitlines() if " : start=" in line]
    assert [line for line in saved.dump.splitlines() if " : start=" in line] == lines, \
        "the backup's sfdisk dump is the table from the good copy"
    held = [Extent(s, e) for s, e in PARTS.values()]
    assert not any(e.overlaps(h) for e in saved.extents for h in held), "partition data is never in the backup"
    assert diskplan("repair", str(image)).returncode == 0  # nothing left to repair
    back = diskplan("restore", str(backup), str(image), "--yes")
    assert back.returncode == 0, back.stderr
    assert file_sha(image) == damaged, "restore brings back the exact damaged bytes"


def test_a_disk_needing_two_repairs_is_told_to_run_it_again(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    dump = sfdisk_dump(image)
    DAMAGE["primary-header-zeroed"](image)
    DAMAGE["protective-mbr-zeroed"](image)
    first = diskplan("repair", str(image), "--yes", "--backup", str(tmp_path / "1.dpbackup"))
    assert first.returncode == 0, first.stderr
    assert "rewrite the primary GPT from the backup copy" in first.stdout
    assert "next: write a protective MBR" in first.stdout and f"diskplan repair {image}" in first.stdout
    second = diskplan("repair", str(image), "--yes", "--backup", str(tmp_path / "2.dpbackup"))
    assert second.returncode == 0, second.stderr
    assert sgdisk_clean(image) and sfdisk_dump(image) == dump


def test_nothing_to_repair_and_no_repair_offered(
    image: pathlib.Path, sparse_image: Callable[..., pathlib.Path]
) -> None:
    healthy = diskplan("repair", str(image))
    assert healthy.returncode == 0 and "nothing to repair" in healthy.stdout

    dos = sparse_image(16 * MiB, name="dos.img")
    run(need_tool("sfdisk"), "-q", str(dos), input="label: dos\nstart=2048, size=4096, type=83\n")
    assert diskplan("repair", str(dos)).returncode == 0

    flip(image, SECTOR + 60)
    flip(image, last_lba(image) * SECTOR + 60)  # both copies: nothing good to repair from
    before = file_sha(image)
    both = diskplan("repair", str(image), "--yes")
    assert both.returncode == 1
    assert "refused: no repair is offered: both GPT copies are damaged" in both.stderr
    assert file_sha(image) == before

    missing = diskplan("repair", str(image.parent / "nope.img"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


# --- the planner's path: Plan.repair -> commit.prepare(repair=) -> commit.execute --------------------------


def test_the_plan_step_commits_through_the_ordinary_commit_calls(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    dump, data = sfdisk_dump(image), data_digests(image)
    DAMAGE["backup-entries-flipped"](image)
    disk = read(str(image))
    assert disk.repair is not None and GPT_BACKUP_DAMAGED in {f.code for f in disk.findings}
    history = History(Plan.open(disk.geometry, disk.table, offer=disk.repair))
    assert history.apply(history.present.repair())
    plan = history.present
    assert [c.kind for c in plan.changes()] == ["repair", "repair"]
    assert plan.pending_repair is disk.repair

    p = commit.prepare(str(image), plan.table, HOST, sector_size=512, sectors=disk.geometry.sectors,
                       repair=plan.pending_repair)
    assert p.refusals == () and p.changes and p.repair is not None
    assert [op.kind for op in p.operations] == ["repair", "repair", "keep", "keep", "keep"]
    assert p.operations == plan.operations()  # the Changes panel showed what is written
    last = last_lba(image)
    assert [(op.start, op.end) for op in p.operations[:2]] == [(last - 32, last - 1), (last, last)]
    assert p.prompt == f"Type yes to repair the table on {image}"
    assert not p.accepts("no")
    refused = commit.execute(p, "no", HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert refused.verdict is Verdict.REFUSED and not (tmp_path / "b.dpbackup").exists()

    steps: list[str] = []
    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"),
                       progress=lambda n, total, what: steps.append(what))
    assert o.verdict is Verdict.WRITTEN and o.state is DiskState.PLANNED, (o.message, o.details)
    assert len(steps) == 4  # no kernel to tell for an image file
    assert sgdisk_clean(image) and sfdisk_dump(image) == dump and data_digests(image) == data


def test_a_repair_with_other_changes_or_a_stale_repair_is_refused(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    DAMAGE["primary-entries-flipped"](image)
    disk = read(str(image))
    plan = Plan.open(disk.geometry, disk.table, offer=disk.repair)
    repaired = plan.repair().plan
    # A caller that forgot the plan's rule (a repair is written on its own) is refused by the backend too.
    renamed = disk.table.with_partitions(tuple(
        replace(p, name="other") if p.number == 2 else p for p in disk.table.partitions))
    p = commit.prepare(str(image), renamed, HOST, repair=repaired.pending_repair)
    assert any("a repair is written on its own" in r for r in p.refusals)

    p = commit.prepare(str(image), repaired.table, HOST, repair=repaired.pending_repair)
    assert p.refusals == ()
    assert disk.repair is not None
    for lba, raw in disk.repair.writes:  # someone else repairs it meanwhile
        poke(image, lba * SECTOR, raw)
    fixed = file_sha(image)
    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert o.verdict is Verdict.REFUSED and "changed since" in o.message
    assert file_sha(image) == fixed and not (tmp_path / "b.dpbackup").exists()
    again = commit.prepare(str(image), repaired.table, HOST, repair=repaired.pending_repair)
    assert any("no longer offers this repair" in r for r in again.refusals)


def test_a_write_that_fails_half_way_is_reported_and_restored(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    DAMAGE["primary-header-zeroed"](image)
    damaged = file_sha(image)
    p = gptrepair.prepare_repair(str(image), HOST)
    assert p.repair is not None and len(p.repair.writes) == 2

    def torn(stage: str) -> None:
        if stage == "write":  # after the header, before the entries
            raise OSError(5, "Input/output error")

    o = gptrepair.execute_repair(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=torn)
    assert o.verdict is Verdict.FAILED and o.exit_code == 3 and o.state is DiskState.CHANGED
    assert "sectors 1..1 differ" in o.details[0] and o.restore_command
    r = restore.prepare_restore(o.backup_path, str(image), HOST)
    assert restore.execute_restore(r, "yes", HOST).verdict is Verdict.WRITTEN
    assert file_sha(image) == damaged


def test_verification_catches_a_repair_that_did_not_hold(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    DAMAGE["backup-header-zeroed"](image)
    p = gptrepair.prepare_repair(str(image), HOST)

    def meddle(stage: str) -> None:
        if stage == "verify":  # something scribbles on the new backup header right after the write
            flip(image, last_lba(image) * SECTOR + 60)

    o = gptrepair.execute_repair(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=meddle)
    assert o.verdict is Verdict.FAILED and o.state is DiskState.DIFFERENT
    assert any("do not read back as written" in d for d in o.details)
    assert any("backup GPT is still damaged" in d for d in o.details)
    assert o.restore_command.startswith("diskplan restore ")


# --- block devices --------------------------------------------------------------------------------------


@pytest.mark.parametrize("sector_size", [512, 4096])
def test_loop_device_repair_and_the_kernel_is_told(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path,
    sector_size: int,
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img, sector_size=sector_size)
    run(need_tool("sgdisk"), "-n1:0:+8M", "-c1:one", "-n2:0:+16M", "-c2:two", dev)
    dump = sfdisk_dump(dev)
    poke(dev, 0, bytes(sector_size))  # no protective MBR: the kernel reads no GPT behind it
    partx_update(dev)
    assert not kernelparts.kernel_list(dev)
    o_shown = diskplan("repair", dev)
    assert o_shown.returncode == 0 and "protective MBR" in o_shown.stdout
    done = diskplan("repair", dev, "--yes", "--backup", str(tmp_path / "b.dpbackup"))  # no terminal: --yes confirms
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stderr, done.stderr
    assert sgdisk_clean(dev) and sfdisk_dump(dev) == dump
    disk = read(dev)
    k = sector_size // 512
    assert kernelparts.kernel_list(dev) == {p.number: (p.start * k, p.size * k) for p in disk.table.partitions}


def test_a_mounted_partition_refuses_the_repair(
    image: pathlib.Path, loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    DAMAGE["backup-entries-flipped"](image)
    dev = loop_device(image)
    partx_update(dev)
    with mounted(f"{dev}p2", tmp_path / "mnt"):
        before = file_sha(image)
        proc = diskplan("repair", dev, "--yes", "--backup", str(tmp_path / "b.dpbackup"))
        assert proc.returncode == 1 and f"{dev}p2 is mounted" in proc.stderr
        assert file_sha(image) == before and not (tmp_path / "b.dpbackup").exists()
