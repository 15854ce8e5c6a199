"""The whole stack planned aligned (model.stackplan, issue 29): properties of the plan for any geometry and
intent, and the printed commands run for real on this host (pvcreate/vgcreate on a loop device standing in
for the array, cryptsetup luksFormat and mkfs on image files), their results read back by pvs, vgs,
cryptsetup luksDump, dumpe2fs and xfs_info and equal to the prediction; then ``diskplan check`` on what they
made finds the stack aligned. (mdadm --create needs the md driver, which this host lacks: the guest tier
runs that part.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import need_tool, run
from diskplan.model import stack as S
from diskplan.model.findings import stackfindings as SF
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.stackplan import LUKS_DEFAULT, Intent, IntentError, StackPlan, intent_of, plan_stack

MiB, KiB = 1 << 20, 1 << 10
ENV = {**os.environ, "LVM_SUPPRESS_FD_WARNINGS": "1"}


# --- properties ---------------------------------------------------------------------------------------


@st.composite
def geometries(draw: st.DrawFn) -> Geometry:
    logical = draw(st.sampled_from([512, 4096]))
    physical = draw(st.sampled_from([p for p in (512, 4096) if p >= logical]))
    offset = draw(st.sampled_from([0, 3584])) if (logical, physical) == (512, 4096) else 0
    hints = draw(st.sampled_from([(0, 0), (65536, 196608), (65536, 262144), (131072, 393216)]))
    return Geometry(sectors=(4 << 40) // logical, logical=logical, physical=physical, alignment_offset=offset,
                    min_io=hints[0], optimal_io=hints[1], rotational=draw(st.booleans()))


@st.composite
def intents(draw: st.DrawFn) -> Intent:
    raid = draw(st.sampled_from([None, 0, 1, 4, 5, 6, 10]))
    members = draw(st.integers(2, 8))
    if raid is not None:
        members = max(members, {4: 3, 5: 3, 6: 4}.get(raid, 2))
        if raid == 10:
            members += members % 2
    lvm = draw(st.booleans())
    stripes = draw(st.integers(1, 4)) if lvm else 1
    return Intent(raid, members if raid is not None else 0, draw(st.sampled_from([4, 16, 64, 128, 512])) * KiB,
                  lvm, draw(st.sampled_from([1 * MiB, 4 * MiB, 32 * MiB, 128 * MiB])), stripes,
                  draw(st.sampled_from([4, 8, 64, 256])) * KiB, draw(st.sampled_from(["", "luks1", "luks2"])),
                  draw(st.sampled_from(["", "ext4", "xfs"])))


@settings(max_examples=300, deadline=None)
@given(geom=geometries(), intent=intents(), extra=st.integers(0, 50))
def test_every_layer_s_data_is_on_the_grain_of_the_layer_below(geom: Geometry, intent: Intent, extra: int) -> None:
    grain = optimal_grain(geom)
    start = grain.align_up(34) + extra * grain.sectors
    plan = plan_stack(geom, start, 1 << 40, intent)
    off = geom.alignment_offset
    for step in plan.steps:
        rel = step.data - (off if step.space == "disk" else 0)
        assert rel % step.grain == 0, (step.layer, step.data, step.grain, step.sums)
        assert step.data % geom.page == (off % geom.page if step.space == "disk" else 0), step.layer
    md, pv, vg, luks = plan.step("md"), plan.step("lvm2-pv"), plan.step("vg"), plan.step(intent.luks or "-")
    full = dict(md.values)["full_stripe"] if md else 0
    if md:
        assert md.data_offset % plan.disk_grain == 0 and md.data_offset >= dict(md.values)["mdadm_default"]
    if pv and vg:
        pe, ext = dict(pv.values)["pe_start"], dict(vg.values)["extent_size"]
        assert pe >= MiB and pe % (full or 1) == 0 and pe % (intent.lv_stripe_size if intent.lv_stripes > 1 else 1) == 0
        assert ext >= intent.extent and ext % (full or geom.page) == 0
        assert ext & (ext - 1) == 0 or ext >= 128 * KiB  # what vgcreate -s accepts
        if intent.lv_stripes > 1:
            assert ext % intent.lv_stripe_size == 0
    if luks:
        payload = luks.data_offset
        assert payload >= LUKS_DEFAULT[intent.luks] and payload % 4096 == 0
        assert f"--offset {payload // 512} " in luks.command
    fs = plan.step(intent.fs or "-")
    if fs and plan.stripe != (0, 0) and plan.stripe[0] % intent.fs_block == 0:
        unit, width = plan.stripe
        values = dict(fs.values)
        assert (values["unit"], values["width"]) == (unit, width) and width % unit == 0
        below = intent.lv_stripes > 1 or (intent.raid not in (None, 1))
        if below:  # the stripe the filesystem is told is the one its data sits on
            assert fs.grain == width


def test_bad_intents_are_one_line_errors() -> None:
    geom = Geometry(sectors=1 << 30)
    for bad, said in [(Intent(raid=5, members=2), "at least 3 members"), (Intent(raid=7, members=4), "RAID level 7"),
                      (Intent(raid=0, members=2, chunk=96 * KiB), "power of 2"),
                      (Intent(lv_stripes=2), "need LVM"), (Intent(lvm=True, extent=1000), "extent size")]:
        with pytest.raises(IntentError, match=said):
            plan_stack(geom, 2048, 1 << 30, bad)


def test_raid5_of_4_the_issue_s_numbers() -> None:
    """4 x 64 KiB chunks: a 192 KiB full stripe, pe_start 6 of them, extents of 22 full stripes (not 4 MiB)."""
    geom = Geometry(sectors=(20 << 30) // 512, physical=4096)
    plan = plan_stack(geom, 2048, 10 << 30, Intent(raid=5, members=4, chunk=64 * KiB, lvm=True, fs="xfs"), "/dev/sda1")
    cmds = plan.commands()
    assert cmds[0].startswith("mdadm --create /dev/md0 --metadata=1.2 --level=5 --raid-devices=4 --chunk=64K "
                              "--data-offset=")
    assert "pvcreate --dataalignment 196608B /dev/md0" in cmds and "vgcreate -s 4325376B vg0 /dev/md0" in cmds
    assert "mkfs.xfs -d su=64k,sw=3 /dev/vg0/lv0" in cmds
    assert "4,194,304 mod 196,608 = 65,536" in " ".join(plan.step("vg").sums)  # type: ignore[union-attr]


def test_the_mdadm_default_data_offset_as_mdadm_computes_it() -> None:
    """super1.c validate_geometry1: 12 KiB + bitmap space + headroom (128 MiB halved to about 0.1 %),
    rounded up to 1 MiB: 128 MiB + 1 MiB headroom on large members, less on small ones."""
    from diskplan.model.stackplan import mdadm_data_offset

    assert mdadm_data_offset(1 << 40, 512 * KiB) == 129 * MiB  # 128 MiB + 12 KiB + 128 KiB bitmap -> 129 MiB
    assert mdadm_data_offset(10 * 10**9, 64 * KiB) == 9 * MiB
    assert mdadm_data_offset(100 * MiB, 512 * KiB) == 2 * MiB  # headroom halved no lower than 2 chunks: 1 MiB


# --- the printed commands, run for real ---------------------------------------------------------------


def _run_plan(plan: StackPlan, devices: dict[str, str], key: Path, skip: tuple[str, ...] = ()) -> None:
    """Run the plan's commands (those whose layer is not in ``skip``), with the plan's device names replaced
    by ``devices`` and the non-interactive flags a test needs (a key file, a fast PBKDF, -y)."""
    for step in plan.steps:
        if not step.command or step.layer in skip:
            continue
        argv = shlex.split(step.command)
        argv = [devices.get(a, a) for a in argv]
        if argv[0] == "cryptsetup":
            argv[2:2] = ["-q", "--key-file", str(key), "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"]
        elif argv[0] in ("pvcreate", "vgcreate"):
            argv.insert(1, "-y")
        elif argv[0] == "mkfs.ext4":
            argv[1:1] = ["-q", "-F"]
        elif argv[0] == "mkfs.xfs":
            argv[1:1] = ["-q", "-f"]
        need_tool(argv[0])
        done = subprocess.run(argv, capture_output=True, text=True, env=ENV)
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.stderr.strip()}"


def _num(cmd: list[str], *env: str) -> int:
    return int(subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=True).stdout.strip())


@pytest.mark.parametrize(("members", "full"), [(3, 131072), (4, 196608)])
def test_the_pv_and_vg_commands_give_the_predicted_pe_start_and_extents(sparse_image, loop_device, members: int,
                                                                        full: int) -> None:
    """RAID5 of 3 (a power-of-two full stripe) and of 4 (not): the PV and VG commands, run on a loop device
    standing in for /dev/md0, give the pe_start and extent size predicted; diskplan check of that device,
    told the array's minimum/optimal I/O, finds the stack aligned (no stack finding at all)."""
    geom = Geometry(sectors=(64 << 30) // 512, physical=4096)
    plan = plan_stack(geom, 2048, 32 << 30, Intent(raid=5, members=members, chunk=64 * KiB, lvm=True))
    dev = loop_device(sparse_image(256 * MiB, "md0.img"))
    try:
        _run_plan(plan, {"/dev/md0": dev}, Path("/nonexistent"), skip=("md", "lv"))
        pe = _num(["pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", dev])
        ext = _num(["vgs", "--noheadings", "--units", "b", "--nosuffix", "-o", "vg_extent_size", "vg0"])
        assert pe == dict(plan.step("lvm2-pv").values)["pe_start"] == (MiB if members == 3 else 1_179_648)  # type: ignore[union-attr]
        assert ext == dict(plan.step("vg").values)["extent_size"] and ext % full == 0  # type: ignore[union-attr]
        done = subprocess.run([sys.executable, "-m", "diskplan", "check", dev, "--min-io", "65536", "--optimal-io",
                               str(full), "--ssd", "--json"], capture_output=True, text=True, timeout=60)
        report = json.loads(done.stdout)
        assert report["layers"][0]["data_start"] == pe
        assert [f["code"] for f in report["findings"] if f["code"] in SF.STACK_CODES] == []
    finally:
        subprocess.run(["vgremove", "-f", "--driverloaded", "n", "vg0"], capture_output=True, env=ENV)
        subprocess.run(["pvremove", "-y", dev], capture_output=True, env=ENV)


def _blank(path: Path, size: int) -> Path:
    """A sparse file standing in for /dev/md0 (the array's bytes: the plan's offsets above md count from 0)."""
    with open(path, "wb") as f:
        f.truncate(size)
    return path


@pytest.mark.parametrize("version", ["luks1", "luks2"])
def test_luksformat_gives_the_predicted_payload(tmp_path: Path, version: str) -> None:
    """LUKS over a RAID5 of 4 (192 KiB full stripe), no LVM: the payload rounded up to the full stripe."""
    geom = Geometry(sectors=(64 << 30) // 512)
    plan = plan_stack(geom, 2048, 32 << 30, Intent(raid=5, members=4, chunk=64 * KiB, luks=version))
    img = _blank(tmp_path / "md0.img", 64 * MiB)
    key = tmp_path / "key"
    key.write_bytes(b"teach")
    _run_plan(plan, {"/dev/md0": str(img)}, key, skip=("md", "luks-open"))
    dump = run(need_tool("cryptsetup"), "luksDump", str(img))
    if version == "luks1":
        got = int(re.search(r"Payload offset:\s+(\d+)", dump).group(1)) * 512  # type: ignore[union-attr]
    else:
        got = int(re.search(r"offset:\s+(\d+) \[bytes\]", dump).group(1))  # type: ignore[union-attr]
    step = plan.step(version)
    assert step is not None and got == step.data_offset and got % 196608 == 0
    assert got == (2_162_688 if version == "luks1" else 16_908_288)
    (layer,) = S.walk(lambda off, n: img.read_bytes()[off:off + n], 64 * MiB)  # diskplan reads what it planned
    assert layer.data_offset == got


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_mkfs_gives_the_predicted_stripe_hints(tmp_path: Path, fs: str) -> None:
    """RAID6 of 6 x 128 KiB chunks: 4 data disks, a 512 KiB full stripe; dumpe2fs / xfs_info agree."""
    geom = Geometry(sectors=(64 << 30) // 512)
    plan = plan_stack(geom, 2048, 32 << 30, Intent(raid=6, members=6, chunk=128 * KiB, fs=fs))
    img = _blank(tmp_path / "md0.img", 1 << 30)
    _run_plan(plan, {"/dev/md0": str(img)}, tmp_path / "k", skip=("md",))
    assert plan.stripe == (128 * KiB, 512 * KiB)
    if fs == "ext4":
        dump = run(need_tool("dumpe2fs"), "-h", str(img))
        stride = int(re.search(r"RAID stride:\s+(\d+)", dump).group(1))  # type: ignore[union-attr]
        width = int(re.search(r"RAID stripe width:\s+(\d+)", dump).group(1))  # type: ignore[union-attr]
        assert (stride * 4096, width * 4096) == plan.stripe
    else:
        info = run(need_tool("xfs_info"), str(img))
        bs = int(re.search(r"bsize=(\d+)", info).group(1))  # type: ignore[union-attr]
        sunit, swidth = (int(x) for x in re.search(r"sunit=(\d+)\s+swidth=(\d+) blks", info).groups())  # type: ignore[union-attr]
        assert (sunit * bs, swidth * bs) == plan.stripe
    data = img.read_bytes()[:1 << 16]
    (layer,) = S.walk(lambda off, n: data[off:off + n], 1 << 30)
    assert (layer.stripe, layer.full_stripe) == plan.stripe


def test_an_existing_stack_s_intent_is_read_from_its_headers() -> None:
    md = S.Layer("md", MiB, 65536, 196608, level=5, devices=4)
    pv = S.Layer("lvm2-pv", MiB, extent=4 * MiB)
    fs = S.Layer("ext4", 0, 0, 0, (("block size", "4096 B"),))
    assert intent_of((md, pv, fs)) == Intent(5, 4, 65536, True, 4 * MiB, 1, 64 * KiB, "", "ext4", 4096)


# --- diskplan stack --------------------------------------------------------------------------------------


def _stack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diskplan", "stack", *args], capture_output=True, text=True,
                          timeout=60)


def test_the_stack_command_prints_the_plan_and_its_json(sparse_image) -> None:
    img = sparse_image(20 << 30)
    run("parted", "-s", str(img), "mklabel", "gpt", "mkpart", "p", "1MiB", "100%")
    intent = ["--raid", "5", "--members", "4", "--chunk", "64KiB", "--lvm", "--luks", "luks2", "--fs", "xfs"]
    done = _stack(str(img), *intent)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for cmd in ("mdadm --create /dev/md0 --metadata=1.2 --level=5 --raid-devices=4 --chunk=64K --data-offset=17408K "
                "PARTITION1 MEMBER2 MEMBER3 MEMBER4", "pvcreate --dataalignment 196608B /dev/md0",
                "vgcreate -s 4325376B vg0 /dev/md0", "cryptsetup luksFormat --type luks2 --offset 33024 /dev/vg0/lv0",
                "mkfs.xfs -d su=64k,sw=3 /dev/mapper/crypt0"):
        assert f"  {cmd}\n" in text, cmd
    assert "4,194,304 mod 196,608 = 65,536" in text
    doc = json.loads(_stack(str(img), *intent, "--json").stdout)
    steps = {s["layer"]: s for s in doc["steps"]}
    assert steps["lvm2-pv"]["values"]["pe_start"] == 1_179_648 and doc["filesystem_stripe"] == {"unit": 65536,
                                                                                                 "width": 196608}
    assert doc["commands"][0].startswith("mdadm --create") and doc["existing"] == []
    for bad, said in [(["--raid", "5"], "--raid needs --members"), ([], "nothing to plan"),
                      (["--raid", "5", "--members", "2"], "at least 3 members")]:
        done = _stack(str(img), *bad)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1


def test_an_existing_stack_is_compared_layer_by_layer(tmp_path: Path, sparse_image, loop_device) -> None:
    """A RAID5 member (4 x 64 KiB) in partition 1 holding a PV whose pe_start is 1 MiB (not a multiple of the
    192 KiB full stripe): the md layer is what mdadm's default makes on a 127 MiB member (1 MiB), the PV costs (its
    extents straddle stripes), and the steps that would mend it are said with their cost, every byte moved."""
    from helpers.stacks import md_image, md_super, pv_head

    head, pe = pv_head(loop_device, sparse_image, 32 * MiB, "--dataalignment", "1m")
    assert pe == MiB
    img = tmp_path / "disk.img"
    md_image(img, 128 * MiB, b"", 0)
    run("parted", "-s", str(img), "mklabel", "gpt", "mkpart", "p", "1MiB", "100%")
    with open(img, "r+b") as f:
        f.seek(MiB + 4096)
        f.write(md_super(5, 4, 128, 2048, 100 * MiB // 512))
        f.seek(2 * MiB)
        f.write(head)
    done = _stack(str(img), "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    verdicts = {v["layer"]: v for v in doc["existing"]}
    assert verdicts["md"]["status"] == "as planned"
    assert verdicts["lvm2-pv"]["status"] == "costs"
    why = " ".join(verdicts["lvm2-pv"]["explanation"])
    assert "pvcreate --dataalignment 196608B /dev/md0" in why and "Every byte on it moves" in why
    assert "pvmove" in why and "diskplan measure" in why
    assert "data at +1,048,576 B; it is at +1,048,576 B" in " ".join(verdicts["md"]["explanation"])
    text = _stack(str(img)).stdout
    assert "The stack there now, against the plan:" in text and "  lvm2-pv: costs" in text


# --- the planner's dialog (S) ----------------------------------------------------------------------------


def test_s_plans_the_stack_on_the_partition_at_the_cursor() -> None:
    """The lvm-partition demo: S on partition 1 shows the PV there against its plan (the intent read from its
    headers: LVM, 128 MiB extents, an LV striped 2 x 8 KiB); typing another intent and Enter plans that; a
    bad word is one line in the dialog; Esc closes it."""
    from textual.widgets import Input

    from diskplan.ui.app import PlannerApp
    from diskplan.ui.stack_screen import StackScreen
    from helpers.pilot import demo, screen_text, started, wait_for
    from helpers.pilot import run as run_pilot

    @run_pilot
    async def go() -> None:
        app = PlannerApp(start=demo("lvm-partition"))
        async with app.run_test(size=(120, 50)) as pilot:
            await started(app, pilot)
            await pilot.press("]", "S")
            await wait_for(pilot, lambda: isinstance(app.screen, StackScreen), 10, what="the stack dialog")
            field = app.screen.query_one("#stack-input", Input)
            assert field.value == "--lvm --extent 134217728B --lv-stripes 2 --lv-stripe-size 8KiB"
            await wait_for(pilot, lambda: "The stack there now, against the plan:" in screen_text(app), 10,
                           what="the existing stack's verdicts")
            assert "lvm2-pv: as planned" in screen_text(app)
            field.value = ""
            await pilot.press(*"--raid 5 --members 4 --chunk 64KiB --lvm --fs xfs", "enter")
            await wait_for(pilot, lambda: "pvcreate --dataalignment 196608B /dev/md0" in screen_text(app), 10,
                           what="the new plan")
            assert "mkfs.xfs -d su=64k,sw=3" in screen_text(app)
            field.value = ""
            await pilot.press(*"--raid 9", "enter")
            await wait_for(pilot, lambda: "--raid needs --members N" in screen_text(app), 10, what="the error")
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, StackScreen), 10, what="the dialog closed")

    go()


# --- the lesson and exercise built on it: demo lvm-raid5 ---------------------------------------------------


def test_the_lvm_raid5_demo_carries_a_pv_pvs_reads_and_its_numbers(tmp_path: Path) -> None:
    """The demo image's PV header, read by pvs/vgs through a read-only loop device: pe_start 6 full stripes,
    4 MiB extents; check finds only the extent notice; stack says the PV is as planned and the extents differ
    (exit 0: nothing to move); and the exercise's numbers are the demo's own."""
    from diskplan.backend.demo_image import build
    from diskplan.model.teach import demos
    from diskplan.model.teach.exercise import GOALS

    need_tool("pvs")
    s = demos.find("lvm-raid5")
    image = build(s, str(tmp_path))
    loop = run("losetup", "--find", "--show", "--read-only", image.image).strip()
    try:
        out = subprocess.run(["pvs", "--noheadings", "--units", "b", "--nosuffix", "-o",
                              "vg_name,pe_start,vg_extent_size", loop], capture_output=True, text=True, env=ENV)
    finally:
        run("losetup", "--detach", loop)
    assert out.stdout.split() == ["vgraid", "1179648", "4194304"], out.stderr
    hints = ["--optimal-io", "196608", "--min-io", "65536"]
    report = json.loads(subprocess.run([sys.executable, "-m", "diskplan", "check", image.device, "--json", *hints],
                                       capture_output=True, text=True, timeout=60).stdout)
    assert [f["code"] for f in report["findings"] if f["code"] in SF.STACK_CODES] == ["extent-not-full-stripe"]
    done = _stack(image.device, *hints, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [(v["layer"], v["status"]) for v in doc["existing"]] == [("lvm2-pv", "differs")]
    assert "vgcreate -s 4325376B vg0 DISK" in doc["commands"]
    why = " ".join(doc["existing"][0]["explanation"])
    assert "data at +1,179,648 B; it is at +1,179,648 B" in why and "pvmove" not in why
    steps = " ".join(st.text for st in GOALS["lvm-raid5"].steps)
    pe, ext, full = s.pv.pe_start, s.pv.extent_size, s.optimal_io  # type: ignore[union-attr]
    for k, lba in ((0, 2304), (1, 10496), (3, 26880)):
        assert (pe + k * ext) // 512 == lba and f"LBA {lba:,}" in steps
    assert (pe + ext) % full == 65536 and (pe + 3 * ext) % full == 0 and (pe + 4_325_376) % full == 0
    assert "5,373,952 mod 196,608 = 65,536" in steps and "5,505,024 = 28 × 196,608" in steps


def test_s_on_the_raid5_demo_plans_the_whole_disk_s_stack() -> None:
    """The exercise's last step: S on a disk without a table that holds a PV plans the stack of the whole disk."""
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.stack_screen import StackScreen
    from helpers.pilot import demo, screen_text, started, wait_for
    from helpers.pilot import run as run_pilot

    @run_pilot
    async def go() -> None:
        app = PlannerApp(start=demo("lvm-raid5"))
        async with app.run_test(size=(120, 50)) as pilot:
            await started(app, pilot)
            await pilot.press("S")
            await wait_for(pilot, lambda: isinstance(app.screen, StackScreen), 10, what="the stack dialog")
            await wait_for(pilot, lambda: "vgcreate -s 4325376B vg0 DISK" in screen_text(app), 10,
                           what="the planned extents")
            assert "Plan the stack on the whole disk" in screen_text(app)
            assert "lvm2-pv: differs" in screen_text(app)

    go()
