"""The write lock (backend.write.lock) and "is this still the table the plan was made against?": two applies
at once never both write, every kind of write holds the lock from its last check to its verdict, a real
second process holding the lock is named, and a plan file's ``made_against`` is checked."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Callable

import pytest

from diskplan.backend.write import commit, gptrepair, restore
from diskplan.backend.write import lock as wlock
from diskplan.backend.write.steps import DiskState, Verdict
from diskplan.model.extent import Partition
from diskplan.model.table import Table
from helpers.images import HOST, file_sha, partx_update, sfdisk_parts
from helpers.lockholders import holding
from helpers.tools import need_tool, run
from helpers.units import MiB

LABEL_ID = "1B1E7E7E-0000-4000-8000-000000000001"
# A fixed disk GUID: every reset gives the same table, so plans exported once stay "made against" it.
BEFORE = f"label: gpt\nlabel-id: {LABEL_ID}\nstart=2048, size=20480, name=a\nstart=22528, size=20480, name=b\n"
LINUX = "0fc63daf-8483-4772-8e79-3d69d8477de4"
# Two applies raced: a sample of rounds in the default run (each round is two CLI processes), twenty with
# DISKPLAN_SLOW=1. Every round asserts everything; more rounds only see more of the orders the race can take.
ROUNDS = 20 if os.environ.get("DISKPLAN_SLOW") else 6


def diskplan(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def sfdisk(target: str | pathlib.Path, script: str) -> None:
    run(need_tool("sfdisk"), "-q", "--no-reread", "--wipe", "never", str(target), input=script)


def locked_now(path: str | pathlib.Path) -> bool:
    """Does another process (this test's ``flock -n``) find ``path`` locked?"""
    return subprocess.run([need_tool("flock"), "-n", str(path), "true"], capture_output=True).returncode != 0


def exported_plan(img: pathlib.Path, tmp_path: pathlib.Path, name: str, part: dict[str, object]) -> str:
    """The disk's table as `diskplan export` writes it (with made_against), partition 2 replaced by ``part``."""
    doc = json.loads(diskplan("export", str(img)).stdout)
    doc["partitions"] = [doc["partitions"][0], part]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_two_applies_at_once_one_writes_and_the_disk_holds_its_plan(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, BEFORE)
    plans = {
        "A": exported_plan(img, tmp_path, "A", {"number": 3, "start": 43008, "end": 63487, "name": "A"}),
        "B": exported_plan(img, tmp_path, "B", {"number": 2, "start": 22528, "end": 53247, "name": "B"}),
    }
    kept = (1, 2048, 20480, LINUX, "a")
    want = {"A": [kept, (3, 43008, 20480, LINUX, "A")], "B": [kept, (2, 22528, 30720, LINUX, "B")]}
    why: collections.Counter[str] = collections.Counter()
    for i in range(ROUNDS):
        sfdisk(img, BEFORE)
        procs = {
            who: subprocess.Popen([sys.executable, "-m", "diskplan", "apply", plan, str(img), "--yes", "--backup",
                                   str(tmp_path / f"{who}{i}.dpbackup")],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for who, plan in plans.items()
        }
        out = {who: (p.communicate(timeout=300), p.returncode) for who, p in procs.items()}
        won = [who for who, ((stdout, _), code) in out.items() if "written and verified" in stdout]
        assert len(won) == 1, f"round {i}: {out}"
        assert out[won[0]][1] == 0
        assert sfdisk_parts(img) == want[won[0]], f"round {i}: {won[0]} reported success"
        (_, err), code = out["B" if won[0] == "A" else "A"]
        assert code == 1 and "Traceback" not in err, err
        reason = next(r for r in ("locked", "changed since it was read", "made against") if r in err)
        why[reason] += 1
    print(f"\n{ROUNDS} rounds, the other apply refused because: {dict(why)}")


def test_a_second_process_holding_flock_on_the_image_is_named_and_nothing_is_written(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, BEFORE)
    plan = exported_plan(img, tmp_path, "A", {"number": 3, "start": 43008, "end": 63487, "name": "A"})
    before = file_sha(img)
    p = commit.prepare(str(img), exported_table(img), HOST)
    assert not p.refusals
    with holding("flock", img) as pid:
        who = f"{pathlib.Path(f'/proc/{pid}/comm').read_text().strip()} (pid {pid})"
        proc = diskplan("apply", plan, str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
        assert proc.returncode == 1
        assert f"{img} is locked: a BSD flock (write) held by {who}" in proc.stderr
        # Locked after the proposal was made: execute waits for the lock, then refuses.
        monkeypatch.setattr(wlock, "WAIT", 0.3)
        o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "c.dpbackup"))
    assert o.verdict is Verdict.REFUSED and o.state is DiskState.UNCHANGED
    assert o.message == (f"refused: {img} is locked by another program (its BSD flock, the lock partitioners and "
                         "systemd-udevd take; waited 0.3 s)")
    assert any(f"held by {who}" in d for d in o.details), o.details
    assert file_sha(img) == before and not (tmp_path / "c.dpbackup").exists()


def exported_table(img: pathlib.Path) -> Table:
    """Partition 2 replaced by a new one: a plan that changes the disk."""
    from diskplan.backend.read.reader import read

    t = read(str(img)).table
    return t.with_partitions((t.partitions[0], Partition(3, 43008, 63487, LINUX.upper(), "A")))


def test_the_lock_is_held_from_the_backup_through_the_verification(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, BEFORE)
    p = commit.prepare(str(img), exported_table(img), HOST)
    # Not beside the image: the writing child sees the image's directory with the image alone in it
    # (backend.parted.siblings), so a file written there from the child would not reach this process.
    log = pathlib.Path(tempfile.mkdtemp(prefix="diskplan-lock-probe-")) / "seen"

    def probe(stage: str) -> None:  # "write" and "verify" run in the writing child: a file carries the answer
        with open(log, "a") as f:
            f.write(f"{stage}={locked_now(img)}\n")

    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=probe)
    assert o.verdict is Verdict.WRITTEN, o.message
    assert log.read_text().split() == ["backup=True", "write=True", "verify=True"]
    assert not locked_now(img)  # released with the verdict


def test_a_table_written_by_another_program_after_the_proposal_is_refused(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    for change in ("rename", "disk-guid"):
        sfdisk(img, BEFORE)
        p = commit.prepare(str(img), exported_table(img), HOST)
        if change == "rename":
            run(need_tool("sfdisk"), "-q", "--part-label", str(img), "2", "now-in-use")
        else:
            run(need_tool("sfdisk"), "-q", "--disk-id", str(img), "0D15C0DE-0000-4000-8000-000000000002")
        changed = file_sha(img)
        o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / f"{change}.dpbackup"))
        assert o.verdict is Verdict.REFUSED, (change, o.message)
        assert o.message == (f"refused: the table on {img} changed since it was read (another program wrote it "
                             "meanwhile): read the disk again and plan anew")
        assert file_sha(img) == changed


def test_a_whole_disk_filesystem_made_after_the_proposal_is_refused(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    p = commit.prepare(str(img), Table("gpt", 34, 131038, (Partition(1, 2048, 22527, LINUX.upper()),)), HOST)
    assert not p.refusals and p.changes
    run(need_tool("mkfs.ext4"), "-q", "-F", str(img))
    made = file_sha(img)
    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert o.verdict is Verdict.REFUSED and "changed since it was read" in o.message, o.message
    assert file_sha(img) == made


def test_a_repair_and_a_restore_hold_the_lock_too(tmp_path: pathlib.Path) -> None:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    run(need_tool("sgdisk"), "-n1:2048:+8M", "-c1:boot", "-n2:0:+16M", "-c2:root", str(img))
    fd = os.open(img, os.O_WRONLY)
    os.pwrite(fd, bytes(512), 512)  # the primary GPT header is gone: a repair is offered
    os.close(fd)
    p = gptrepair.prepare_repair(str(img), HOST)
    assert p.repair is not None and not p.refusals
    seen = {}

    def probe(stage: str) -> None:
        seen[stage] = locked_now(img)

    o = gptrepair.execute_repair(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=probe)
    assert o.verdict is Verdict.WRITTEN, o.message
    assert seen == {"backup": True, "write": True, "verify": True}
    assert not locked_now(img)

    r = restore.prepare_restore(o.backup_path, str(img), HOST)
    steps: list[tuple[str, bool]] = []
    o = restore.execute_restore(r, "yes", HOST, progress=lambda n, total, what: steps.append((what, locked_now(img))))
    assert o.verdict is Verdict.WRITTEN and len(steps) == 2, steps
    assert steps[0][0].startswith("locking") and steps[1][1]  # said as the lock is taken; the write under it
    assert not locked_now(img)
    with holding("flock", img):
        r = restore.prepare_restore(str(tmp_path / "b.dpbackup"), str(img), HOST)
        assert any("is locked: a BSD flock" in x for x in r.refusals), r.refusals


def test_the_lock_of_a_partition_is_its_whole_disk(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, BEFORE)
    dev = loop_device(img)
    partx_update(dev)
    assert wlock.whole_disk(f"{dev}p2") == dev and wlock.whole_disk(dev) == dev
    with wlock.take(f"{dev}p2"):
        assert locked_now(dev) and not locked_now(f"{dev}p2")
    assert not locked_now(dev)


def test_a_plan_made_against_another_table_is_refused_and_says_how_to_override(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, BEFORE)
    plan = exported_plan(img, tmp_path, "A", {"number": 3, "start": 43008, "end": 63487, "name": "A"})
    assert json.loads(pathlib.Path(plan).read_text())["made_against"].startswith("sha256:")
    run(need_tool("sfdisk"), "-q", "--part-label", str(img), "2", "written-since")
    changed = file_sha(img)
    proc = diskplan("apply", plan, str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 1 and file_sha(img) == changed
    assert f"refused: the plan was made against another table than the one on {img} now" in proc.stderr
    assert 'delete "made_against" from the plan file' in proc.stderr

    doc = json.loads(pathlib.Path(plan).read_text())
    del doc["made_against"]  # the override: apply to whatever the disk holds now
    pathlib.Path(plan).write_text(json.dumps(doc))
    assert diskplan("apply", plan, str(img), "--yes", "--backup", str(tmp_path / "c.dpbackup")).returncode == 0
    assert [p[0] for p in sfdisk_parts(img)] == [1, 3]


def test_a_plan_already_on_the_disk_is_nothing_to_do_not_a_refusal(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, BEFORE)
    plan = exported_plan(img, tmp_path, "A", {"number": 3, "start": 43008, "end": 63487, "name": "A"})
    assert diskplan("apply", plan, str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup")).returncode == 0
    again = diskplan("apply", plan, str(img), "--yes", "--backup", str(tmp_path / "c.dpbackup"))
    assert again.returncode == 0 and "nothing to do" in again.stdout + again.stderr


def test_made_against_round_trips_through_a_plan_file_and_must_be_a_string() -> None:
    from diskplan.model.formats.planfile import PlanFileError, load_plan, save_plan, to_json
    from diskplan.model.geometry import Geometry
    from diskplan.model.plan.plan import Plan
    from diskplan.model.table import new_table

    geom = Geometry(sectors=131072, logical=512, physical=512)
    plan = Plan.open(geom, new_table("gpt", geom).with_partitions((Partition(1, 2048, 22527, LINUX.upper()),)))
    text = save_plan(plan, "sha256:" + "ab" * 32)
    spec = load_plan(text)
    assert spec.made_against == "sha256:" + "ab" * 32 and to_json(spec) == text
    assert "made_against" not in save_plan(plan)  # a plan not made from a disk records nothing
    with pytest.raises(PlanFileError, match="made_against must be a string"):
        load_plan(text.replace('"sha256:' + "ab" * 32 + '"', "[1]"))


def test_the_planner_saves_what_its_plan_was_made_against_and_apply_checks_it(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    import asyncio

    from textual.widgets import Input

    from diskplan.backend.read.reader import read
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.target import Target

    img = sparse_image(64 * MiB)
    sfdisk(img, BEFORE)
    saved = tmp_path / "saved.json"

    async def go() -> None:
        app = PlannerApp(start=Target(read(str(img)), "disk.img", path=str(img)))
        async with app.run_test(size=(80, 25)) as pilot:
            await pilot.pause()
            assert app.session is not None
            assert app._step(app.session.plan.delete(2))
            await pilot.press("ctrl+s")
            app.screen.query_one("#path", Input).value = str(saved)
            await pilot.press("enter")
            await pilot.pause()

    asyncio.run(go())
    doc = json.loads(saved.read_text())
    assert doc["made_against"] == json.loads(diskplan("export", str(img)).stdout)["made_against"]
    run(need_tool("sfdisk"), "-q", "--part-label", str(img), "1", "written-since")
    proc = diskplan("apply", str(saved), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 1 and "the plan was made against another table" in proc.stderr
