"""``diskplan apply`` of plans that keep partitions with their content (``keeps``): real ext4 filesystems with
files of known SHA-256 on images and loop devices, moved and resized by the plan; e2fsck, blkid and
``sfdisk --dump`` as referees. A plan whose keeps does not name the disk's partition, that would shrink below
the filesystem's minimum, or that also changes the table is refused with the image byte-identical; a plan
without keeps deletes and creates, as before."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from helpers.movedisk import View, file_sums, populate, state_env
from helpers.tools import need_tool, run
from helpers.units import MiB

Doc = dict[str, Any]  # a plan or sfdisk's JSON, as parsed

PY_STATE = "state"


class Img:
    """An image (or a loop device over it) with ext4 partitions, each holding files of known checksums."""

    def __init__(self, tmp: pathlib.Path, parts: list[tuple[int, int]], *, label: str = "gpt", mib: int = 64) -> None:
        need_tool("mkfs.ext4")
        self.tmp, self.path = tmp, tmp / "disk.img"
        with open(self.path, "wb") as f:
            f.truncate(mib * MiB)
        head = "label: gpt\nfirst-lba: 34\n" if label == "gpt" else "label: dos\n"
        run("sfdisk", "-q", str(self.path), input=head + "".join(f"start={s}, size={n}, type=L\n" for s, n in parts))
        self.dev = str(self.path)
        self.sums: dict[int, dict[str, str]] = {}
        for i, (start, size) in enumerate(parts, 1):
            with View(self.dev, start, size, read_only=False) as v:
                run("mkfs.ext4", "-q", "-L", f"part{i}", v)
                self.sums[i] = populate(v, "ext4", tmp, seed=i)
        self.state = tmp / PY_STATE

    def cli(self, *args: str, kill: str = "") -> subprocess.CompletedProcess[str]:
        env = state_env(self.state, **({"DISKPLAN_MOVE_KILL": kill} if kill else {}))
        proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                              env=env, timeout=300, stdin=subprocess.DEVNULL)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
        return proc

    def table(self) -> dict[int, Doc]:
        doc = json.loads(run("sfdisk", "--json", self.dev))["partitiontable"]
        return {int(p["node"][len(p["node"].rstrip("0123456789")):]): p for p in doc["partitions"]}

    def digest(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def intact(self, number: int, start: int, size: int, uuid: str = "") -> None:
        p = self.table()[number]
        assert (p["start"], p["size"]) == (start, size)
        assert not uuid or p["uuid"] == uuid
        with View(self.dev, start, size) as v:
            check = subprocess.run(["e2fsck", "-fn", v], capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
            assert f"LABEL=part{number}" in run("blkid", "-p", "-o", "export", v)
            assert file_sums(v, "ext4", list(self.sums[number])) == self.sums[number]

    def export(self) -> Doc:
        got = self.cli("export", self.dev)
        assert got.returncode == 0, got.stderr
        doc: Doc = json.loads(got.stdout)
        return doc

    def plan(self, doc: Doc) -> str:
        path = self.tmp / "plan.json"
        path.write_text(json.dumps(doc))
        return str(path)


def place(doc: Doc, number: int, start: int, size: int | None = None) -> Doc:
    """The plan with partition ``number`` at ``start`` (and ``size`` sectors): start, end and size together."""
    for p in doc["partitions"]:
        if p["number"] == number:
            size = size or p["size"]
            p.update(start=start, end=start + size - 1, size=size)
    return doc


def test_export_edit_apply_realigns_a_partition_at_34(tmp_path) -> None:
    d = Img(tmp_path, [(34, 40960)])
    doc = d.export()
    part = doc["partitions"][0]
    uuid = d.table()[1]["uuid"]
    assert part["keeps"] == {"number": 1, "guid": uuid}  # export says which partition it is
    plan = d.plan(place(doc, 1, 2048))
    before = d.digest()
    dry = d.cli("apply", plan, d.dev)
    assert dry.returncode == 0 and "step 1: move partition 1: 34..40993 -> 2048..43007" in dry.stdout, dry.stdout
    assert "40960 sectors = 20 MiB by 2014 sectors right" in dry.stdout and "Nothing written" in dry.stdout
    assert "in all: 20,971,520 B = 20 MiB copied" in dry.stdout
    assert d.digest() == before
    done = d.cli("apply", plan, d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "moved and verified" in done.stdout
    d.intact(1, 2048, 40960, uuid)
    again = d.cli("apply", plan, d.dev, "--yes")  # the disk holds the plan now
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr


def test_two_moves_run_in_the_order_the_room_allows(loop_device, tmp_path) -> None:
    # Both move right by 28672 sectors: partition 1's new place is partition 2's old one, so 2 goes first.
    d = Img(tmp_path, [(2048, 20480), (22528, 20480)], mib=48)
    img = d.path
    d.dev = loop_device(img)
    doc = place(place(d.export(), 1, 30720), 2, 51200)
    uuids = {n: d.table()[n]["uuid"] for n in (1, 2)}
    plan = d.plan(doc)
    dry = d.cli("apply", plan, d.dev)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    out = dry.stdout
    assert out.index("step 1: move partition 2: 22528..43007 -> 51200..71679") < out.index(
        "step 2: move partition 1: 2048..22527 -> 30720..51199"), out
    done = d.cli("apply", plan, d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("moved and verified") == 2
    d.intact(1, 30720, 20480, uuids[1])
    d.intact(2, 51200, 20480, uuids[2])
    dump = run("sfdisk", "--dump", d.dev)
    assert "start=       30720, size=       20480" in dump and "start=       51200, size=       20480" in dump


def test_a_plan_killed_in_its_first_move_is_finished_by_resume_then_apply(tmp_path) -> None:
    d = Img(tmp_path, [(2048, 20480), (22528, 20480)], mib=48)
    doc = place(place(d.export(), 1, 30720), 2, 51200)
    uuids = {n: d.table()[n]["uuid"] for n in (1, 2)}
    killed = d.cli("apply", d.plan(doc), d.dev, "--yes", kill="verified:1")  # step 1 (partition 2), read back
    assert killed.returncode == -9 and "moved and verified" not in killed.stdout
    done = d.cli("resume", d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    d.intact(2, 51200, 20480, uuids[2])
    stale = d.cli("apply", d.plan(doc), d.dev, "--yes")  # the disk is no longer the table the plan was made on
    assert stale.returncode == 1 and "made_against" in stale.stderr
    del doc["made_against"]
    rest = d.cli("apply", d.plan(doc), d.dev, "--yes")  # what is left: partition 1 only
    assert rest.returncode == 0 and "step 1: move partition 1" in rest.stdout and "step 2" not in rest.stdout, \
        rest.stdout + rest.stderr
    d.intact(1, 30720, 20480, uuids[1])
    d.intact(2, 51200, 20480, uuids[2])


def test_shrink_then_move_in_one_plan(tmp_path) -> None:
    need_tool("resize2fs")
    d = Img(tmp_path, [(34, 40960)])
    uuid = d.table()[1]["uuid"]
    plan = d.plan(place(d.export(), 1, 2048, 32768))
    dry = d.cli("apply", plan, d.dev)
    out = dry.stdout
    assert "step 1: shrink partition 1: 34..40993 -> 34..32801" in out and "step 2: move partition 1: 34..32801 -> " \
        "2048..34815" in out, out + dry.stderr
    done = d.cli("apply", plan, d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shrunk" in done.stdout and "moved and verified" in done.stdout
    d.intact(1, 2048, 32768, uuid)


def test_move_then_grow_in_one_plan(tmp_path) -> None:
    need_tool("resize2fs")
    d = Img(tmp_path, [(34, 20480)], mib=32)
    uuid = d.table()[1]["uuid"]
    plan = d.plan(place(d.export(), 1, 2048, 30720))
    dry = d.cli("apply", plan, d.dev)
    assert "step 1: move partition 1: 34..20513 -> 2048..22527" in dry.stdout and "step 2: grow partition 1: " \
        "2048..22527 -> 2048..32767" in dry.stdout, dry.stdout + dry.stderr
    done = d.cli("apply", plan, d.dev, "--yes")
    assert done.returncode == 0 and "grown" in done.stdout, done.stdout + done.stderr
    d.intact(1, 2048, 30720, uuid)
    with View(d.dev, 2048, 30720) as v:  # the filesystem fills the partition now
        blocks = run("dumpe2fs", "-h", v)
    fields = dict(re.findall(r"^(Block count|Block size):\s+([0-9]+)", blocks, re.M))
    count, size = int(fields["Block count"]), int(fields["Block size"])
    assert count * size == 30720 * 512


def test_a_plan_one_resize_ahead_of_the_disk_applies_and_one_move_ahead_is_stale(tmp_path) -> None:
    """A rest plan saved before a resize step is made against the table after it (a resize has no journal), so
    a power cut before the resize's entry write leaves the disk one step behind its file: applying it then does
    that step and the rest (the crash-state suite found it refused as stale, a dead end). Only a resize: a
    plan made against the table a move would leave is refused as before (a move's rest plan is saved by its
    journal)."""
    need_tool("resize2fs")
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    d = Img(tmp_path / "a", [(2048, 24576), (28672, 16384)])
    doc = place(place(d.export(), 1, 2048, 16384), 2, 20480)
    ahead = tmp_path / "ahead.img"  # the same disk after the plan's first step, a shrink
    ahead.write_bytes(d.path.read_bytes())
    got = d.cli("resize", str(ahead), "--partition", "1", "--size", "16384s", "--yes")
    assert got.returncode == 0, got.stdout + got.stderr
    doc["made_against"] = json.loads(d.cli("export", str(ahead)).stdout)["made_against"]
    done = d.cli("apply", d.plan(doc), d.dev, "--yes")
    assert done.returncode == 0 and "shrunk" in done.stdout and "moved and verified" in done.stdout, \
        done.stdout + done.stderr
    d.intact(1, 2048, 16384)
    d.intact(2, 20480, 16384)

    e = Img(tmp_path / "b", [(2048, 16384), (20480, 16384)])
    doc = place(place(e.export(), 2, 40000), 1, 2048, 30000)  # step 1: move 2 right; step 2: grow 1
    moved = tmp_path / "moved.img"
    moved.write_bytes(e.path.read_bytes())
    got = e.cli("move", str(moved), "--partition", "2", "--to", "40000", "--yes")
    assert got.returncode == 0, got.stdout + got.stderr
    doc["made_against"] = json.loads(e.cli("export", str(moved)).stdout)["made_against"]
    refused(e, doc, "made against another table")


def test_a_kept_filesystem_smaller_than_its_entry_is_said_with_the_command_that_grows_it(tmp_path) -> None:
    """A grow cut after its entry write leaves the table as the plan wants it and the filesystem its old size:
    the rest plan has nothing left to do, and says so with the command that finishes the grow (it said nothing
    before: the crash-state suite found the filesystem left small). The plan itself grows nothing."""
    d = Img(tmp_path, [(2048, 16384)])
    doc = place(d.export(), 1, 2048, 30000)
    run("sfdisk", "-q", "--no-reread", "-N", "1", d.dev, input="2048,30000\n")  # the grow's entry, then the cut
    doc["made_against"] = d.export()["made_against"]
    before = d.digest()
    got = d.cli("apply", d.plan(doc), d.dev, "--yes")
    out = got.stdout
    assert got.returncode == 0 and "nothing to do" in out, out + got.stderr
    assert "partition 1: its filesystem spans 8 MiB of its 14.6 MiB" in out
    assert f"`diskplan resize {d.dev} --partition 1 --size 30000s` grows it" in out
    assert d.digest() == before
    assert d.cli("resize", d.dev, "--partition", "1", "--size", "30000s", "--yes").returncode == 0
    d.intact(1, 2048, 30000)
    again = d.cli("apply", d.plan(doc), d.dev, "--yes")
    assert again.returncode == 0 and "spans" not in again.stdout, again.stdout


def test_nothing_to_do_on_a_torn_gpt_says_how_to_repair_it(tmp_path) -> None:
    """A table write a crash cut short leaves one GPT copy failing its CRC; libparted reads the other. A plan the
    table already matches is "nothing to do", and says the copy is torn with the command that rebuilds it (it
    said only "nothing to do" before, the disk left with one whole copy)."""
    d = Img(tmp_path, [(2048, 16384)])
    plan = d.plan(d.export())
    with open(d.path, "r+b") as f:  # a byte of the backup entry array (it ends before the last LBA's header)
        f.seek((64 * MiB // 512 - 2) * 512)
        f.write(b"\xff")
    got = d.cli("apply", plan, d.dev, "--yes")
    assert got.returncode == 0 and "nothing to do" in got.stdout, got.stdout + got.stderr
    assert "note: the backup GPT copy fails its checks" in got.stdout
    assert f"`diskplan repair {d.dev}` rebuilds it from the other" in got.stdout


def refused(d: Img, doc: Doc, why: str) -> None:
    before = d.digest()
    got = d.cli("apply", d.plan(doc), d.dev, "--yes")
    assert got.returncode == 1 and why in got.stderr, got.stdout + got.stderr
    assert "Nothing was written" in got.stderr
    assert d.digest() == before  # byte-identical


def test_keeps_that_do_not_name_the_disks_partition_are_refused(tmp_path) -> None:
    d = Img(tmp_path, [(34, 20480), (22528, 20480)], mib=32)
    doc = place(d.export(), 1, 2048)
    wrong = json.loads(json.dumps(doc))
    wrong["partitions"][0]["keeps"]["guid"] = "0E8B5A1C-4D2F-4B8E-9C11-2A3B4C5D6E7F"
    refused(d, wrong, "the plan is for another partition or another disk")
    swapped = json.loads(json.dumps(doc))  # partition 2's GUID on partition 1
    swapped["partitions"][0]["keeps"]["guid"] = swapped["partitions"][1]["keeps"]["guid"]
    refused(d, swapped, "but partition 1 of")
    unknown = json.loads(json.dumps(doc))
    del unknown["made_against"]
    unknown["partitions"].append({"number": 3, "start": 45056, "size": 2048, "keeps": {"number": 3}})
    refused(d, unknown, "the plan keeps partition 3, which")
    bare = json.loads(json.dumps(doc))
    del bare["partitions"][0]["keeps"]["guid"]
    refused(d, bare, "without its GUID")


def test_without_keeps_a_moved_partition_is_deleted_and_created_as_before(tmp_path) -> None:
    d = Img(tmp_path, [(34, 20480)], mib=32)
    doc = place(d.export(), 1, 2048)
    del doc["partitions"][0]["keeps"]
    before = d.digest()
    got = d.cli("apply", d.plan(doc), d.dev)
    assert got.returncode == 0 and "delete 1 (34..20513)" in got.stdout and "create 1 at 2048..22527" in got.stdout
    assert "step 1" not in got.stdout and d.digest() == before


def test_a_shrink_below_the_filesystems_minimum_is_refused(tmp_path) -> None:
    need_tool("resize2fs")
    d = Img(tmp_path, [(2048, 40960)], mib=32)
    refused(d, place(d.export(), 1, 2048, 4096), "below the smallest size its ext4 filesystem can shrink to")


def test_a_plan_that_also_changes_the_table_is_refused_as_a_whole(tmp_path) -> None:
    d = Img(tmp_path, [(34, 20480)], mib=32)
    doc = place(d.export(), 1, 2048)
    doc["partitions"].append({"number": 2, "start": 24576, "size": 8192})
    refused(d, doc, "also changes the table (create 2 at 24576..32767")
    doc["partitions"].pop()
    doc["partitions"][0]["name"] = "renamed"
    refused(d, doc, "apply it in two steps")


def test_a_move_over_a_partition_the_plan_deletes_is_refused(tmp_path) -> None:
    d = Img(tmp_path, [(34, 20480), (20514, 16384)], mib=32)
    doc = place(d.export(), 1, 2048)
    doc["partitions"].pop()
    refused(d, doc, "over partition 2 (20514..36897), which stays there while data moves: apply in two steps")


@pytest.mark.parametrize("label", ["msdos"])
def test_msdos_keeps_by_number_and_made_against(tmp_path, label) -> None:
    d = Img(tmp_path, [(63, 20480)], label=label, mib=32)
    doc = d.export()
    assert doc["partitions"][0]["keeps"] == {"number": 1}
    doc = place(doc, 1, 2048)
    blind = json.loads(json.dumps(doc))
    del blind["made_against"]
    refused(d, blind, "must carry made_against")
    done = d.cli("apply", d.plan(doc), d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    d.intact(1, 2048, 20480)


def test_an_extended_partition_kept_and_grown_is_a_table_write_as_before(tmp_path) -> None:
    """It holds no data of its own: its logical partitions' EBRs are rewritten in place by the table write."""
    img = tmp_path / "ext.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    run("sfdisk", "-q", str(img), input="label: dos\nstart=2048, size=20480, type=83\nstart=22528, size=20480, "
        "type=5\nstart=24576, size=8192, type=83\n")
    env = state_env(tmp_path / "state")
    doc = json.loads(run_env(env, "export", str(img)))
    assert [p.get("keeps") for p in doc["partitions"]] == [{"number": 1}, {"number": 2}, {"number": 5}]
    place(doc, 2, 22528, 40960)
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    got = subprocess.run([sys.executable, "-m", "diskplan", "apply", str(tmp_path / "plan.json"), str(img), "--yes"],
                         capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    assert got.returncode == 0 and "step 1" not in got.stdout and "create 2 at 22528..63487" in got.stdout, \
        got.stdout + got.stderr
    dump = run("sfdisk", "--dump", str(img))
    assert "start=       22528, size=       40960, type=5" in dump and "start=       24576, size=        8192" in dump


def run_env(env: dict[str, str], *args: str) -> str:
    got = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True, env=env,
                         stdin=subprocess.DEVNULL, timeout=300)
    assert got.returncode == 0, got.stderr
    return got.stdout


def test_an_exported_plan_on_another_disk_says_how_to_copy_the_layout(tmp_path: pathlib.Path) -> None:
    """An export keeps the disk's own partitions: on a blank disk there are none to keep, and the refusal says
    what to delete to copy the layout instead (the blank disk untouched)."""
    img = Img(tmp_path, [(2048, 40960)])
    doc = json.loads(img.cli("export", img.dev).stdout)
    del doc["made_against"]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    blank = tmp_path / "blank.img"
    with open(blank, "wb") as f:
        f.truncate(64 * MiB)
    proc = img.cli("apply", str(plan), str(blank), "--yes")
    assert proc.returncode == 1 and 'delete every "keeps"' in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert blank.read_bytes().count(0) == 64 * MiB
    for part in doc["partitions"]:
        del part["keeps"]
    plan.write_text(json.dumps(doc))
    proc = img.cli("apply", str(plan), str(blank), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(run("sfdisk", "--json", str(blank)))["partitiontable"]["partitions"][0]["start"] == 2048


def two_moves(tmp_path: pathlib.Path, label: str, grow: int = 0) -> tuple[Img, Doc, str]:
    """Two partitions that both move right, partition 2 first (step 1), then partition 1 into its old place;
    ``grow``: then partition 2 grows by that many sectors (step 3)."""
    d = Img(tmp_path, [(2048, 20480), (22528, 20480)], label=label, mib=64)
    doc = place(place(d.export(), 1, 30720), 2, 51200, 20480 + grow)
    return d, doc, d.plan(doc)


@pytest.mark.parametrize("label", ["msdos", "gpt"])
def test_a_plan_killed_in_its_last_step_is_done_after_resume_and_its_rest_says_so(tmp_path, label) -> None:
    d, _, plan = two_moves(tmp_path, label)
    killed = d.cli("apply", plan, d.dev, "--yes", kill="verified:2")  # step 2 (partition 1), read back
    rest = tmp_path / "plan.rest.json"
    assert killed.returncode == -9 and f"the rest of the plan is saved in {rest}" in killed.stdout, killed.stdout
    assert d.cli("resume", d.dev, "--yes").returncode == 0
    done = d.cli("apply", str(rest), d.dev, "--yes")
    assert done.returncode == 0 and "nothing to do" in done.stdout, done.stdout + done.stderr
    d.intact(1, 30720, 20480)
    d.intact(2, 51200, 20480)


@pytest.mark.parametrize("label", ["msdos", "gpt"])
def test_a_plan_killed_in_its_second_step_is_finished_by_resume_then_its_rest(tmp_path, label) -> None:
    """The killed apply said where the rest is before its first step; after resume the plan itself is stale
    (and on msdos could not go without made_against), the rest plan does what is left, then nothing."""
    need_tool("resize2fs")
    d, doc, plan = two_moves(tmp_path, label, grow=8192)
    killed = d.cli("apply", plan, d.dev, "--yes", kill="verified:2")  # step 2 (partition 1), read back
    rest = tmp_path / "plan.rest.json"
    assert killed.returncode == -9 and f"the rest of the plan is saved in {rest}" in killed.stdout, killed.stdout
    assert f"`diskplan resume {d.dev} --yes` (if a move is unfinished) then `diskplan apply {rest} {d.dev}`" \
        in killed.stdout
    saved = json.loads(rest.read_text())
    assert saved["partitions"] == doc["partitions"] and saved["made_against"] != doc["made_against"]
    assert d.cli("resume", d.dev, "--yes").returncode == 0
    stale = d.cli("apply", plan, d.dev, "--yes")
    assert stale.returncode == 1 and "made_against" in stale.stderr
    done = d.cli("apply", str(rest), d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "step 1: grow partition 2: 51200..71679 -> 51200..79871" in done.stdout and "step 2" not in done.stdout
    d.intact(1, 30720, 20480)
    d.intact(2, 51200, 28672)
    again = d.cli("apply", str(rest), d.dev, "--yes")
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr


def test_a_plan_stopped_between_steps_says_the_one_command_that_finishes_it(tmp_path) -> None:
    """Ctrl+C in step 1's last chunk: step 1 finishes, step 2 never starts; the message names the rest plan
    (made against the disk as read then), and applying it finishes the plan. An existing plan.rest.json is
    left alone."""
    d, _, plan = two_moves(tmp_path, "msdos")
    theirs = tmp_path / "plan.rest.json"
    theirs.write_text("mine\n")
    stopped = d.cli("apply", plan, d.dev, "--yes", kill="synced:1:INT")
    rest = tmp_path / "plan.rest-2.json"
    assert stopped.returncode == 3 and "stopped before step 2 of 2" in stopped.stderr
    assert f"to finish the plan: diskplan apply {rest} {d.dev}" in stopped.stderr, stopped.stdout + stopped.stderr
    assert theirs.read_text() == "mine\n"
    done = d.cli("apply", str(rest), d.dev, "--yes")
    assert done.returncode == 0 and "step 2" not in done.stdout, done.stdout + done.stderr
    d.intact(1, 30720, 20480)
    d.intact(2, 51200, 20480)


def test_a_step_the_kernel_does_not_see_stops_the_plan_as_a_failure(loop_device, tmp_path) -> None:
    """Step 1 is written, but the kernel cannot show partition 2 at its new place (a partition 2 of its own
    stands elsewhere, held open): exit status 3 at once, step 2 never starts (it would be checked against the
    kernel's old partitions), and the message names the rest plan that finishes it once the kernel is told."""
    need_tool("addpart")
    d = Img(tmp_path, [(2048, 20480), (22528, 20480)], mib=64)
    d.dev = loop_device(d.path)
    plan = d.plan(place(place(d.export(), 1, 30720), 2, 51200))
    env = state_env(d.state, DISKPLAN_MOVE_KILL="table:1:STOP")  # step 1's entry rewritten, the kernel not told
    proc = subprocess.Popen([sys.executable, "-m", "diskplan", "apply", plan, d.dev, "--yes"], text=True, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    held = -1
    try:
        deadline = time.monotonic() + 240
        while pathlib.Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        run("addpart", d.dev, "2", "22528", "1024")  # where the hidden partition 2 was, 1024 sectors
        held = os.open(f"{d.dev}p2", os.O_RDONLY)  # the kernel cannot remove it while it is open
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
        if held >= 0:
            os.close(held)
    assert proc.returncode == 3, out + err
    assert (out + err).count("moved and verified: partition 2") == 1, out + err  # step 1 only, said as a failure
    assert "moved and verified" not in out, out
    assert "error: the kernel could not be told" in err and "partition 2 is in use" in err, err
    assert "step 2 of 2" not in err and d.table()[1]["start"] == 2048, out + err  # partition 1 untouched, shown
    assert "to finish the plan: diskplan apply " in err, err


def test_the_rest_plan_is_refused_on_another_disk(tmp_path) -> None:
    d, _, plan = two_moves(tmp_path, "msdos")
    (tmp_path / "other").mkdir()
    other = Img(tmp_path / "other", [(2048, 20480), (22528, 20480)], label="msdos", mib=64)  # the same layout
    killed = d.cli("apply", plan, d.dev, "--yes", kill="verified:2")
    assert killed.returncode == -9
    rest = str(tmp_path / "plan.rest.json")
    before = other.digest()
    got = other.cli("apply", rest, other.dev, "--yes")
    assert got.returncode == 1 and "made_against" in got.stderr and "Nothing was written" in got.stderr, \
        got.stdout + got.stderr
    assert other.digest() == before


def test_ctrl_c_in_a_later_move_says_resume_then_the_rest(tmp_path) -> None:
    """Ctrl+C in step 2's copy leaves that move unfinished: the line names resume first, then the rest plan."""
    need_tool("resize2fs")
    d, _, plan = two_moves(tmp_path, "msdos", grow=8192)
    stopped = d.cli("apply", plan, d.dev, "--yes", kill="read:3:INT")  # step 2's first chunk
    rest = tmp_path / "plan.rest.json"
    line = f"to finish the plan: diskplan resume {d.dev} --yes, then diskplan apply {rest} {d.dev}"
    assert stopped.returncode == 3 and line in stopped.stderr, stopped.stdout + stopped.stderr
    assert d.cli("resume", d.dev, "--yes").returncode == 0
    done = d.cli("apply", str(rest), d.dev, "--yes")
    assert done.returncode == 0 and "step 1: grow partition 2" in done.stdout, done.stdout + done.stderr
    d.intact(1, 30720, 20480)
    d.intact(2, 51200, 28672)


def test_the_rest_of_a_plan_read_from_stdin_goes_to_the_state_directory(tmp_path, monkeypatch) -> None:
    from diskplan.backend.move.planrest import RestPlan
    from diskplan.model.formats.planfile import load_plan

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    spec = load_plan(json.dumps({"label": "msdos", "partitions": [{"number": 1, "start": 2048, "size": 2048,
                                                                     "keeps": {"number": 1}}]}))
    first, second = RestPlan("-", spec), RestPlan("-", spec)
    assert first.save("sha256:" + "0" * 64) and second.save("sha256:" + "1" * 64)
    where = tmp_path / "diskplan" / "plans"
    assert (first.path, second.path) == (str(where / "plan.rest.json"), str(where / "plan.rest-2.json"))
    saved = load_plan((where / "plan.rest.json").read_text())
    assert saved.made_against == "sha256:" + "0" * 64 and saved.partitions == spec.partitions
    assert saved.keeps == spec.keeps
    first.discard()
    assert not (where / "plan.rest.json").exists() and (where / "plan.rest-2.json").exists()


@pytest.mark.parametrize("label", ["msdos", "gpt"])
def test_a_rollback_of_a_later_step_makes_the_rest_plan_start_from_the_table_it_left(tmp_path, label) -> None:
    """Killed in step 2's copy (partition 1 into free space: its old place untouched), then `resume --rollback`:
    the disk holds the table after step 1, so the rest plan saved before step 2 (made against the table after
    step 2) would be refused as stale. The rollback makes it start from the table as it is, says so and names
    the command; applying it does step 2 again and nothing else."""
    d, doc, plan = two_moves(tmp_path, label)
    killed = d.cli("apply", plan, d.dev, "--yes", kill="write:3")  # step 2's first chunk, written, not synced
    rest = tmp_path / "plan.rest.json"
    assert killed.returncode == -9 and f"the rest of the plan is saved in {rest}" in killed.stdout, killed.stdout
    back = d.cli("resume", d.dev, "--rollback", "--yes")
    said = back.stdout + back.stderr
    assert back.returncode == 0 and "rolled back" in said, said
    assert f"diskplan apply {rest} {d.dev}" in said and "starts from the table as it is now" in said, said
    d.intact(1, 2048, 20480)
    d.intact(2, 51200, 20480)
    saved = json.loads(rest.read_text())
    assert saved["partitions"] == doc["partitions"]
    done = d.cli("apply", str(rest), d.dev, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "step 1: move partition 1: 2048..22527 -> 30720..51199" in done.stdout and "step 2" not in done.stdout
    d.intact(1, 30720, 20480)
    d.intact(2, 51200, 20480)
