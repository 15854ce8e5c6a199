"""The real-world corpus (../shared/corpus: 55 images written by real tools, ground truth from sfdisk,
libblkid, gdisk and parted): every image loads with the partitions its manifest expects, or is refused
cleanly; `diskplan check` never prints a traceback and exits 0, 1 or 2; and where the manifest recorded
`parted align-check opt`, our `aligned_grain` gives the same verdict.

Images meant to be read with 4096-byte sectors are attached with `losetup --sector-size 4096 -r` (root);
as plain files they must say "this looks like a 4096-byte-sector disk"."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from diskplan.backend.read.reader import read
from diskplan.model.disk import Disk
from diskplan.model.findings.codes import (
    EXTENDED_WITHOUT_EBR,
    GPT_BACKUP_DAMAGED,
    HYBRID_ISO,
    HYBRID_MBR,
    OVERLAP,
    PAST_END,
    SECTOR_SIZE_MISMATCH,
    UNREADABLE,
    WHOLE_DISK_FS,
)
from diskplan.model.findings.report import build_report
from helpers.tools import CORPUS

pytestmark = pytest.mark.corpus

MANIFEST = CORPUS / "manifest.json"
MUST = {"primary", "logical", "extended", "data"}  # roles the manifest says must be reported
PARTED_LABEL = {"dos": "msdos", "gpt": "gpt", "sgi": "dvh", "sun": "sun", "mac": "mac", "atari": "atari", "bsd": "bsd"}

# Refused cleanly: libparted cannot read the label and diskplan has no parser for it; the user is told a
# table is there (finding unreadable-table, table read-only), never that the disk is empty.
REFUSED = {"ul-pt-dasd-cdl", "ul-pt-dasd-ldl"}
# Partitions we show that the manifest does not list, and why that is right.
KNOWN_EXTRAS = {
    # libparted models the Atari XGM chain as an extended partition numbered 0 (13..10239) holding #2;
    # the manifest notes libparted's view. The container is real; its number is libparted's.
    "ul-pt-atari-xgm": {0},
}
# Findings an image must raise, from its manifest notes (not from our own output).
NOTED_FINDINGS = {
    "node-mbr-rpi-sparse": {EXTENDED_WITHOUT_EBR},  # "extended partition 4 whose EBR is missing (zeros)"
    "bootcamp-hybrid-sparse": {HYBRID_MBR, GPT_BACKUP_DAMAGED},
    "coreos-iso-2023-03-x86_64": {HYBRID_ISO},
    "coreos-iso-2023-07-x86_64": {HYBRID_ISO},
}


def _manifest() -> list[dict[str, Any]]:
    if not MANIFEST.exists():
        return []
    images: list[dict[str, Any]] = json.loads(MANIFEST.read_text())["images"]
    return images


IMAGES = {e["name"]: e for e in _manifest()}


def _materializer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("corpus_materialize", CORPUS / "materialize.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    if not IMAGES:
        pytest.skip(f"the corpus is not present at {CORPUS} (it lives beside the repository)")
    out = tmp_path_factory.mktemp("corpus")
    mat = _materializer()
    for entry in IMAGES.values():
        mat.materialize(entry, str(out), root=str(CORPUS))
    return out


@pytest.fixture
def target(corpus_dir: pathlib.Path, loop_device: Callable[..., str]) -> Iterator[Callable[[str], str]]:
    """name -> what to open: the image file, or a read-only loop device with the manifest's sector size."""

    def open_as(name: str) -> str:
        entry, image = IMAGES[name], corpus_dir / f"{name}.img"
        if entry["logical_sector_size"] != 512:
            return loop_device(image, sector_size=entry["logical_sector_size"], read_only=True)
        return str(image)

    yield open_as


def _codes(disk: Disk, partition: int | None = None) -> set[str]:
    report = build_report(disk)
    if partition is None:
        return {f.code for f in report.all_findings}
    return {f.code for f in report.all_findings if f.partition == partition}


def test_the_corpus_is_here() -> None:
    if not IMAGES:
        pytest.skip(f"the corpus is not present at {CORPUS}")
    assert len(IMAGES) >= 55


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_image_loads_with_the_expected_partitions(name: str, target: Callable[[str], str]) -> None:
    entry = IMAGES[name]
    disk = read(target(name))
    assert disk.geometry.logical == entry["logical_sector_size"]
    assert disk.geometry.sectors == entry["device_sectors"]
    got = {p.number: (p.start, p.end) for p in disk.table.partitions}
    must = {p["number"]: (p["start"], p["end"]) for p in entry["expected_partitions"] if p["role"] in MUST}
    optional = {(p["number"], p["start"], p["end"]) for p in entry["expected_partitions"] if p["role"] not in MUST}
    codes = _codes(disk)

    if name in REFUSED:
        assert not got, "a refused table shows no partitions"
        assert UNREADABLE in codes and disk.table.read_only
        return
    assert {n: got.get(n) for n in must} == must
    extras = {n for n, (s, e) in got.items() if n not in must and (n, s, e) not in optional}
    assert extras == KNOWN_EXTRAS.get(name, set())

    kind = entry["table_type"]
    if kind == "none":
        assert disk.table.label is None
        fs = entry["tool_views"].get("blkid_probe", {}).get("TYPE")
        if fs:
            assert disk.filesystem == fs and WHOLE_DISK_FS in codes
    else:
        assert disk.table.label == PARTED_LABEL[kind]
    if kind not in ("dos", "gpt", "none"):
        assert disk.table.read_only, "labels other than gpt/msdos are read-only"
    assert NOTED_FINDINGS.get(name, set()) <= codes


@pytest.mark.parametrize("name", sorted(n for n, e in IMAGES.items() if any("crash" in t for t in e["tags"])))
def test_a_libparted_crash_is_survived_and_said(name: str, corpus_dir: pathlib.Path) -> None:
    disk = read(str(corpus_dir / f"{name}.img"))
    unreadable = [f for f in build_report(disk).table_findings if f.code == UNREADABLE]
    assert unreadable and unreadable[0].message == "this table could not be read safely: libparted crashed (SIGSEGV)"
    assert disk.table.read_only
    assert disk.geometry.sectors == IMAGES[name]["device_sectors"], "the geometry survives: a new label can be planned"


@pytest.mark.parametrize(
    "name", sorted(n for n, e in IMAGES.items() if "partition-beyond-end-of-image" in e["tags"] and n not in REFUSED)
)
def test_partitions_past_the_end_are_flagged_and_read_only(name: str, corpus_dir: pathlib.Path) -> None:
    disk = read(str(corpus_dir / f"{name}.img"))
    beyond = [p["number"] for p in IMAGES[name]["expected_partitions"] if p["beyond_end_of_image"]]
    shown = [n for n in beyond if disk.table.by_number(n) is not None]
    assert shown
    for n in shown:
        assert PAST_END in _codes(disk, n)
    assert disk.table.read_only


def test_overlapping_partitions_are_flagged(corpus_dir: pathlib.Path) -> None:
    names = [n for n, e in IMAGES.items() if "overlapping-partitions" in e["tags"]]
    assert names
    for name in names:
        disk = read(str(corpus_dir / f"{name}.img"))
        assert OVERLAP in _codes(disk) and "overlap" in disk.table.read_only


@pytest.mark.parametrize("name", sorted(n for n, e in IMAGES.items() if e["logical_sector_size"] == 4096))
def test_a_4kn_image_opened_as_a_plain_file_says_how_to_attach_it(name: str, corpus_dir: pathlib.Path) -> None:
    disk = read(str(corpus_dir / f"{name}.img"))
    found = [f for f in disk.findings if f.code == SECTOR_SIZE_MISMATCH]
    assert found and found[0].message == (
        "this looks like a 4096-byte-sector disk: attach it with losetup --sector-size 4096"
    )
    assert disk.table.read_only and not disk.table.partitions


def _check(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diskplan", "check", "--json", path], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def checked(corpus_dir: pathlib.Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """`diskplan check --json` run once on every image file, as a user would."""
    return {name: _check(str(corpus_dir / f"{name}.img")) for name in sorted(IMAGES)}


def test_check_never_prints_a_traceback_and_exits_0_1_or_2(
    checked: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    seen = {}
    for name, proc in checked.items():
        assert proc.returncode in (0, 1, 2), name
        assert "Traceback" not in proc.stdout + proc.stderr, name
        if proc.returncode == 2:
            assert len(proc.stderr.strip().splitlines()) == 1, name
        else:
            assert proc.stderr == "", f"{name}: {proc.stderr}"  # libparted never reaches the terminal
            seen[name] = json.loads(proc.stdout)
    for name in (n for n, e in IMAGES.items() if any("crash" in t for t in e["tags"])):
        messages = [f["message"] for f in seen[name]["findings"]]
        assert any(m.startswith("this table could not be read safely: ") for m in messages), name


ALIGN_CHECKED = sorted(
    n
    for n, e in IMAGES.items()
    if any("libparted_cli_align_check_opt" in p["alignment"] for p in e["expected_partitions"])
)
# Where our verdict may differ from `parted align-check opt`, and why. (None so far: on files and loop
# devices without I/O hints both use a 1 MiB grain.)
ALIGN_EXCEPTIONS: dict[str, set[int]] = {}


@pytest.mark.parametrize("name", ALIGN_CHECKED)
def test_aligned_grain_agrees_with_parted_align_check(
    name: str, target: Callable[[str], str], checked: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    proc = checked[name] if IMAGES[name]["logical_sector_size"] == 512 else _check(target(name))
    assert proc.returncode in (0, 1), proc.stderr
    ours = {p["number"]: p["aligned_grain"] for p in json.loads(proc.stdout)["partitions"]}
    theirs = {
        p["number"]: p["alignment"]["libparted_cli_align_check_opt"]
        for p in IMAGES[name]["expected_partitions"]
        if "libparted_cli_align_check_opt" in p["alignment"] and p["number"] in ours
    }
    assert theirs, "no partition to compare"
    skip = ALIGN_EXCEPTIONS.get(name, set())
    assert {n: ours[n] for n in theirs if n not in skip} == {n: v for n, v in theirs.items() if n not in skip}


def test_check_json_of_every_image_matches_the_published_schema(
    checked: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    """src/diskplan/schemas/check-v1.schema.json holds for what check printed on all the real tables."""
    from diskplan import schemas
    from helpers.schemas import schema_problems

    docs = [json.loads(proc.stdout) for proc in checked.values() if proc.returncode in (0, 1)]
    assert len(docs) >= 40
    assert schema_problems(schemas.load("check-v1"), *docs) == []
