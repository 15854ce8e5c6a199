"""Every lesson and finding says what the experiments measured, and the flash-page rule: each statement is
pinned to the number it comes from (the experiment texts in ../shared/seeds when present, else the
numbers quoted in README "Where the numbers come from")."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from diskplan.model import codes as C
from diskplan.model import demos
from diskplan.model import findings as F
from diskplan.model.extent import Partition
from diskplan.model.geometry import Geometry
from diskplan.model.grain import libparted_optimum, optimal_grain
from diskplan.model.table import new_table

SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"
M4 = 500118192  # the Crucial M4's sectors


def _text(prefix: str) -> str:
    found = sorted(SEEDS.glob(f"{prefix}_*.txt")) if SEEDS.is_dir() else []
    if not found:
        pytest.skip("the experiment texts (../shared/seeds) are not here")
    return found[0].read_text()


def _codes(geom: Geometry, *parts: Partition, label: str = "gpt") -> dict[int, list[str]]:
    table = new_table(label, geom).with_partitions(parts)
    out: dict[int, list[str]] = {p.number: [] for p in parts}
    for f in F.analyze(geom, table):
        out[f.partition or 0].append(f.code)
    return out


def _finding(geom: Geometry, p: Partition, code: str) -> F.Finding:
    table = new_table("gpt", geom).with_partitions((p,))
    return next(f for f in F.analyze(geom, table) if f.code == code)


# --- the flash-page rule ----------------------------------------------------------------------------


def test_34s_on_a_non_rotational_512_512_device_is_a_warning_with_the_assumption() -> None:
    ssd = Geometry(sectors=M4, rotational=False)  # what the M4 reported: 512/512, rotational 0
    f = _finding(ssd, Partition(1, 34, M4 - 34), C.START_NOT_PAGE)
    assert f.severity == C.WARNING
    text = " ".join(f.explanation)
    assert "17408 B mod 4096 = 1024" in text
    assert "read-modify-write" in text and "assumption about flash" in text and "--physical-block" in text
    assert "sysfs queue/rotational = 0" in text
    assert _codes(ssd, Partition(1, 2048, M4 - 34)) == {1: []}


def test_ssd_marked_by_the_user_is_judged_the_same_and_says_why() -> None:
    image = Geometry(sectors=M4)  # an image file: rotational unknown
    marked = image.with_overrides(ssd=True)
    assert _codes(marked, Partition(1, 34, M4 - 34))[1] == [C.START_NOT_PAGE]
    assert "--ssd" in " ".join(_finding(marked, Partition(1, 34, M4 - 34), C.START_NOT_PAGE).explanation)
    assert marked.page == 4096 and image.page == 512
    # A larger page said with --physical-block: then the physical block itself is the rule.
    assert marked.with_overrides(physical=16384).page == 16384


def test_34s_on_a_rotational_512_512_disk_stays_a_notice() -> None:
    hdd = Geometry(sectors=M4, rotational=True)
    f = _finding(hdd, Partition(1, 34, M4 - 34), C.START_NOT_GRAIN)
    assert f.severity == C.NOTICE
    assert "hard disk with true 512 B sectors" in " ".join(f.explanation) and "--ssd" in " ".join(f.explanation)
    assert "hard disk" in hdd.page_rule()


def test_the_page_rule_names_its_reason() -> None:
    assert "sysfs queue/rotational = 0" in Geometry(sectors=10**6, rotational=False).page_rule()
    assert "--ssd" in Geometry(sectors=10**6, ssd=True).page_rule()
    assert "say --ssd" in Geometry(sectors=10**6).page_rule()
    # 4Kn flash: every LBA is a whole page already.
    assert Geometry(sectors=10**6, logical=4096, physical=4096, rotational=False).page == 4096


def test_the_flash_explanation_reads_as_one_sentence() -> None:
    """The rule is quoted once, not wrapped in its own word ("flash (flash (sysfs…" was on screen)."""
    ssd = Geometry(sectors=M4, rotational=False)
    text = " ".join(_finding(ssd, Partition(1, 34, M4 - 34), C.START_NOT_PAGE).explanation)
    assert ssd.page_rule() in text and "flash (flash" not in text


# --- the corrections, each pinned to its number --------------------------------------------------------


def _iops(text: str, kind: str) -> tuple[float, float]:
    """Mean IOPS of the misaligned and the aligned runs of ``kind`` in the fio experiment."""
    runs = [int(n) for n in re.findall(rf"^{kind}_\d :.*iops=(\d+)", text, re.M)]
    assert len(runs) == 10
    return statistics.mean(runs[:5]), statistics.mean(runs[5:])


def test_1_the_fio_runs_were_sequential_and_19x() -> None:
    text = _text("000")
    assert "fio fio.ini -rw ${TEST}" in text and "for TEST in read write" in text  # not randread/randwrite
    bad, good = _iops(text, "write")
    assert round(good / bad) == 19 and round(bad, -2) == 1500 and round(good, -3) == 28000
    rbad, _ = _iops(text, "read")
    assert round(rbad, -2) == 21400
    lesson = " ".join(demos.find("ssd-gpt-34").lesson)
    for said in (F.MEASURED_SSD, lesson):
        assert "random" not in said and "sequential" in said
        assert "19x" in said and "1,500" in said and "28,000" in said and "21,400" in said
    assert "512B/512B" in text and "512/512" in F.MEASURED_SSD


def test_2_physical_greater_than_logical_is_not_the_whole_rule() -> None:
    af = " ".join(demos.find("advanced-format").lesson)
    assert "alignment matters when physical > logical" not in af
    assert "true 512-byte sectors" in af and "512/512 still pays" in af
    demo = demos.find("ssd-gpt-34")
    assert (demo.physical, demo.rotational) == (512, False)  # what the drive reported, judged as flash
    assert demo.geometry().page == 4096


def test_3_the_stripe_finding_calls_parity_rmw_and_quotes_parted_s_192k() -> None:
    s = demos.find("stripe")
    geom = s.geometry()
    assert libparted_optimum(geom).sectors * 512 == 196608
    f = _finding(geom, Partition(1, 2048, 209717247), C.START_NOT_GRAIN)
    text = " ".join(f.explanation)
    assert "read-modify-write of parity" in text and "not free" in text
    assert "parted -a optimal on 192 KiB (384s)" in text and "fdisk and sfdisk start on 1 MiB (2048s)" in text
    assert "costs no read-modify-write" not in text
    assert "192 KiB optimal I/O size itself (384s)" in " ".join(s.lesson)


def test_4_suggested_starts_lie_in_the_usable_area() -> None:
    hdd = Geometry(sectors=M4, rotational=True)
    f = _finding(hdd, Partition(1, 34, M4 - 34), C.START_NOT_GRAIN)
    assert "0s" not in f.message and "Aligned starts nearby: 2048s." in " ".join(f.explanation)
    assert f.message.endswith("(nearest boundary 2048s)")  # one boundary, in the singular
    mid = _finding(hdd, Partition(1, 3000, M4 - 34), C.START_NOT_GRAIN)
    assert "(nearest boundaries 2048s or 4096s)" in mid.message


def test_5_the_dos_lesson_matches_the_pg_test_fsync_experiment() -> None:
    text = _text("003")
    assert re.search(r"/dev/sde1\s+63\s+1875444164", text)  # the misaligned partition's end
    assert "255 heads, 63 sectors/track" in text and "fdisk -c -u" in text
    s = demos.find("dos-63")
    (p,) = s.partitions
    assert (p.start, p.end) == (63, 1875444164) and (p.end + 1) % (255 * 63) == 0  # a cylinder boundary
    lesson = " ".join(s.lesson)
    four_k = [float(n.replace(",", "")) for n in re.findall(r"4 \*  4kB open_sync writes\s+([\d.]+)", text)]
    assert [round(n) for n in four_k] == [3991, 4989] and round(100 * (four_k[1] / four_k[0] - 1)) == 25
    fdatasync = [float(n) for n in re.findall(r"fdatasync\s+([\d.]+) ops/sec", text)][::2]  # one 16kB write
    assert round(100 * (fdatasync[1] / fdatasync[0] - 1)) == 8
    for said in (lesson, F.MEASURED_DOS):
        assert "3,991 -> 4,989" in said and "+25%" in said and "+8%" in said
    assert "fdisk -c -u" in lesson and "half" in lesson and "not for alignment" in lesson
    assert re.search(r"/dev/sde1\s+2048\s+1867775999", text) and "1,867,775,999 = 912,000 MiB - 1" in lesson
    assert (1867775999 + 1) * 512 == 912_000 * (1 << 20)
    assert "flush" in lesson and "19x" in lesson  # why the two experiments' ratios differ


def test_6_erase_blocks_are_not_said_to_divide_1mib() -> None:
    modern = " ".join(demos.find("modern").lesson)
    assert "most erase blocks divide" not in modern and "several MiB" in modern
    flash = Geometry(sectors=M4, rotational=False)
    f = _finding(flash, Partition(1, 4096 + 8, M4 - 34), C.START_NOT_GRAIN)
    assert "several MiB" in " ".join(f.explanation)


def test_7_read_modify_write_costs_small_writes_not_streams() -> None:
    text = _text("002")
    assert "x2.6" in text and "x1.6" in text
    af = Geometry(sectors=3907029168, physical=4096, rotational=True)
    f = _finding(af, Partition(1, 34, 2047), C.START_NOT_PHYSICAL)
    said = " ".join(f.explanation)
    assert "isolated small write" in said and "only at its two edges" in said and "2.6x" in said
    assert "for every write" not in said


def test_8_the_af_lesson_quotes_parted_s_1049kb_and_its_1mb_window() -> None:
    text = _text("002")
    assert "1 1049kB 20.0GB" in text
    lesson = " ".join(demos.find("advanced-format").lesson)
    assert "1049kB" in lesson and 2048 * 512 == 1_048_576
    assert "half a unit" in lesson and "-a optimal" in lesson and "1953.125s" in lesson
    assert 1_000_000 / 512 == 1953.125


def test_no_internal_jargon_in_findings() -> None:
    for name in ("MEASURED_SSD", "MEASURED_AF", "MEASURED_DOS", "MEASURED_STRIPE"):
        assert "seed" not in getattr(F, name).lower()
    geom = Geometry(sectors=M4, rotational=True)
    assert optimal_grain(geom).sectors == 2048


# --- the rule end to end: sysfs queue/rotational of a real loop device, and --ssd on an image ---------------


def _gpt_at_34(path: Path) -> None:
    import subprocess

    with open(path, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["parted", "-s", str(path), "mklabel", "gpt", "mkpart", "p", "34s", "100%"],
                   check=True, capture_output=True)


def _check(target: str, *extra: str) -> tuple[int, dict[str, object]]:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "diskplan", "check", target, "--json", *extra],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, json.loads(done.stdout)


def _severities(report: dict[str, object]) -> dict[str, str]:
    parts = report["partitions"]
    assert isinstance(parts, list)
    return {f["code"]: f["severity"] for f in parts[0]["findings"]}


def test_check_reads_rotational_from_sysfs(tmp_path: Path, loop_device) -> None:
    image = tmp_path / "m4.img"
    _gpt_at_34(image)
    dev = loop_device(image)
    rot = Path("/sys/block") / Path(dev).name / "queue" / "rotational"
    rot.write_text("0")
    if rot.read_text().strip() != "0":
        pytest.skip("this kernel does not let a loop device say it is not rotational")
    status, report = _check(dev)
    assert status == 1 and _severities(report) == {C.START_NOT_PAGE: C.WARNING}
    assert report["flash"] is True and report["page_size"] == 4096
    assert "sysfs queue/rotational = 0" in str(report["page_rule"])
    rot.write_text("1")
    status, report = _check(dev)
    assert _severities(report) == {C.START_NOT_GRAIN: C.NOTICE} and report["page_size"] == 512


def test_check_ssd_option_on_an_image(tmp_path: Path) -> None:
    image = tmp_path / "m4.img"
    _gpt_at_34(image)
    assert _severities(_check(str(image))[1]) == {C.START_NOT_GRAIN: C.NOTICE}
    status, report = _check(str(image), "--ssd")
    assert status == 1 and _severities(report) == {C.START_NOT_PAGE: C.WARNING}
    assert "--ssd" in str(report["page_rule"])


def test_topology_lists_the_schedulers(tmp_path: Path, loop_device) -> None:
    from diskplan.discovery.topology import topology

    image = tmp_path / "d.img"
    _gpt_at_34(image)
    dev = loop_device(image)
    topo = topology(dev)
    offered = (Path("/sys/block") / Path(dev).name / "queue" / "scheduler").read_text().split()
    assert topo is not None and topo.schedulers == tuple(w.strip("[]") for w in offered)
    assert f"[{topo.scheduler}]" in offered


def test_the_facts_panel_says_which_rule_and_why() -> None:
    from diskplan.model.grain import optimal_grain as og
    from diskplan.ui.explain import facts

    s = demos.find("ssd-gpt-34")
    disk = s.planned_disk()
    rows = dict(facts(disk, og(disk.geometry)))
    assert "assumed 4096 B page" in rows["Starts judged by"] and "rotational = 0" in rows["Starts judged by"]
    hdd = demos.find("advanced-format").planned_disk()
    assert "hard disk" in dict(facts(hdd, og(hdd.geometry)))["Starts judged by"]
    offered = Geometry(sectors=10**6, scheduler="none", schedulers=("none", "mq-deadline", "bfq"))
    from diskplan.model.disk import Disk
    from diskplan.model.table import no_table

    rows = dict(facts(Disk(offered, no_table(offered), source="x", kind="image"), og(offered)))
    assert rows["I/O scheduler"] == "none (available: mq-deadline, bfq)"


def test_no_ssd_overrides_sysfs() -> None:
    virtual = Geometry(sectors=M4, rotational=False).with_overrides(ssd=False)
    assert not virtual.flash and virtual.page == 512 and "--no-ssd" in virtual.page_rule()
    assert _codes(virtual, Partition(1, 34, M4 - 34))[1] == [C.START_NOT_GRAIN]
    assert "--no-ssd" in " ".join(_finding(Geometry(sectors=M4, rotational=False), Partition(1, 34, M4 - 34),
                                           C.START_NOT_PAGE).explanation)


def test_9_the_lvm_exercise_quotes_the_experiment_s_parted_command_and_its_size() -> None:
    """The lvm-whole-disk exercise asks for what seed 004 did next: `mkpart primary 1MB 6390GB`, so a PV
    partition of at least 6390 GB - 1 MB (parted's decimal units), stated as 6,389 GB."""
    from diskplan.model.exercise import GOALS

    text = _text("004")
    assert "mkpart primary 1MB 6390GB" in text and "pvremove" in text
    goal = GOALS["lvm-whole-disk"]
    said = " ".join(goal.task)
    assert "mkpart primary 1MB 6390GB" in said and "pvremove" in said
    ((need, _),) = goal.needs
    assert need <= 6390 * 10**9 - 10**6 and f"{need // 10**9:,} GB" in said
