"""Plans against the real tools: the exported sfdisk script, applied by sfdisk to a sparse image, gives
exactly the planned table (`sfdisk --dump` read back); the exported parted commands, run by sh, give the
same table in `parted -m -s IMG unit s print` (and in `sfdisk --dump`, for the types libparted sets through
flags); diskplan's own reader agrees; and `sfdisk --dump` of real-world images loads as a plan."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from diskplan.backend.read.reader import read
from diskplan.model import ptypes
from diskplan.model.extent import Partition, Role, State
from diskplan.model.formats.planfile import (
    PlanFileError,
    PlanSpec,
    load_plan,
    sfdisk_ebr_problem,
    spec_from_table,
    to_parted,
    to_sfdisk,
)
from helpers.plans import specs
from helpers.tools import CORPUS, need_tool, run

GIB = 1 << 30
EFI = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
SRV = "3B8F8425-20E0-4F3B-907F-1A25A76F98E8"  # not one parted 3.5 can set


def P(number: int, start: int, end: int, ptype: str, name: str = "", flags: tuple[str, ...] = (),
      role: Role = Role.PRIMARY) -> Partition:
    return Partition(number, start, end, ptype, name, flags, role, State.PROPOSED)


def _gpt_types() -> list[str]:
    return [t.gpt for t in ptypes.TYPES if t.gpt]


def _mbr_types() -> list[str]:
    return [f"0x{t.mbr:02x}" for t in ptypes.TYPES if t.mbr is not None and t.mbr not in (0x05, 0x0F)]


def gpt_everything() -> PlanSpec:
    """Every GPT type diskplan names, every attribute, awkward names, numbers with holes."""
    names = ['EFI "system"', "back\\slash", "été", "", "x" * 36, "it's", "root", "home", "srv"]
    parts = [P(n, 2048 * (1 + 100 * i), 2048 * (1 + 100 * i) + 204799, t, names[i % len(names)])
             for i, (n, t) in enumerate(zip((2, 3, 5, 7, 8, 9, 10, 11, 12), _gpt_types(), strict=False))]
    parts.append(P(20, 2048 * 1001, 2048 * 1001 + 99, SRV, "srv",
                   ("guid:48", "hidden", "legacy_boot", "no_automount", "no_block_io")))
    return PlanSpec("gpt", 512, tuple(parts), 2 * GIB // 512, 34, 2 * GIB // 512 - 34)


def msdos_everything() -> PlanSpec:
    """Every MBR type diskplan names, a bootable one, a hole in the primaries, logicals 1 MiB apart as fdisk
    and diskplan's snapping lay them out."""
    parts = [P(1, 2048, 206847, "0x0c", flags=("boot",)), P(3, 206848, 411647, "0x83"),
             P(4, 411648, 4194303, "0x05", role=Role.EXTENDED)]
    for i, t in enumerate(_mbr_types()):
        start = 413696 + i * 102400
        parts.append(P(5 + i, start, start + 99_999, t, role=Role.LOGICAL))
    return PlanSpec("msdos", 512, tuple(parts), 2 * GIB // 512)


def msdos_packed() -> PlanSpec:
    """Logicals one EBR sector apart, the first right after the extended partition's own EBR."""
    parts = [P(2, 2048, 999_999, "0x0f", role=Role.EXTENDED)]
    start = 2049
    for i in range(5):
        parts.append(P(5 + i, start, start + 999, "0x83", role=Role.LOGICAL))
        start += 1001
    return PlanSpec("msdos", 512, tuple(parts), GIB // 512)


def dump_as_plan(target: str) -> PlanSpec:
    return load_plan(run(need_tool("sfdisk"), "--dump", target))


def apply_sfdisk(spec: PlanSpec, target: str) -> None:
    run(need_tool("sfdisk"), "--quiet", "--no-reread", "--no-tell-kernel", target, input=to_sfdisk(spec, target))


def without_size(spec: PlanSpec) -> PlanSpec:
    """What `sfdisk --dump` can say: it does not print the device size."""
    return PlanSpec(spec.label, spec.sector_size, spec.partitions, None, spec.first_lba, spec.last_lba)


@pytest.mark.parametrize("make", [gpt_everything, msdos_everything, msdos_packed])
def test_the_sfdisk_script_writes_exactly_the_plan(make: Callable[[], PlanSpec],
                                                    sparse_image: Callable[..., pathlib.Path]) -> None:
    spec = make()
    image = sparse_image((spec.sectors or 0) * 512)
    apply_sfdisk(spec, str(image))
    assert dump_as_plan(str(image)) == without_size(spec)


def test_diskplans_reader_sees_the_written_plan(sparse_image: Callable[..., pathlib.Path]) -> None:
    # every attribute bit, also those libparted 3.5 cannot read (1, 48-63): the reader takes them from the raw entries
    for spec in (msdos_everything(), gpt_everything()):
        image = sparse_image((spec.sectors or 0) * 512, name=f"{spec.label}.img")
        apply_sfdisk(spec, str(image))
        disk = read(str(image))
        assert spec_from_table(disk.table, disk.geometry) == spec


def test_sfdisk_refuses_what_the_script_warns_about(sparse_image: Callable[..., pathlib.Path]) -> None:
    spec = msdos_everything()
    squeezed = tuple(P(p.number, p.start - 1500 * (p.number - 5), p.end - 1500 * (p.number - 5), p.type,
                       role=p.role) if p.role is Role.LOGICAL else p for p in spec.partitions)
    spec = PlanSpec(spec.label, 512, squeezed, spec.sectors)
    script = to_sfdisk(spec, "disk.img")
    assert "# WARNING: sfdisk keeps 2048 sectors (1 MiB) before each logical partition" in script
    image = sparse_image((spec.sectors or 0) * 512)
    proc = subprocess.run([need_tool("sfdisk"), "--quiet", str(image)], input=script, capture_output=True, text=True)
    assert proc.returncode != 0 and "out of range" in proc.stderr


def _sfdisk_can(spec: PlanSpec) -> bool:
    return spec.sector_size == 512 and spec.sectors is not None and spec.sectors <= 2**33 and not sfdisk_ebr_problem(
        spec)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=specs().filter(_sfdisk_can))
def test_any_plan_survives_sfdisk(spec: PlanSpec, sparse_image: Callable[..., pathlib.Path]) -> None:
    image = sparse_image((spec.sectors or 0) * 512)
    apply_sfdisk(spec, str(image))
    assert dump_as_plan(str(image)) == without_size(spec)


def test_a_4kn_disk_takes_the_plan_in_4096_byte_sectors(sparse_image: Callable[..., pathlib.Path],
                                                        loop_device: Callable[..., str]) -> None:
    sectors = GIB // 4096
    spec = PlanSpec("gpt", 4096, (P(1, 256, 25855, EFI, "EFI"), P(2, 25856, sectors - 6, SRV, "srv")), sectors,
                    6, sectors - 6)
    dev = loop_device(sparse_image(GIB), sector_size=4096)
    apply_sfdisk(spec, dev)
    assert dump_as_plan(dev) == without_size(spec)


# --- parted ---------------------------------------------------------------------------------------------

def flags_parted_shows_for(label: str, code: str) -> set[str]:
    """The flag `parted print` shows for a type: GPT types are flags in libparted 3.5; on msdos only some."""
    t = ptypes.lookup(code)
    if t is None or t.flag is None:
        return set()
    if label == "msdos" and t.flag not in ("swap", "lvm", "raid", "esp", "lba"):
        return set()
    return {t.flag}


def parted_print(target: str) -> dict[int, tuple[int, int, str, set[str]]]:
    """number -> (start, end, name, flags) from `parted -m -s IMG unit s print`."""
    out = run(need_tool("parted"), "-m", "-s", target, "unit", "s", "print")
    rows = {}
    for line in out.splitlines()[2:]:
        number, start, end, _size, _fs, name, flags = line.rstrip(";").split(":", 6)
        rows[int(number)] = (int(start[:-1]), int(end[:-1]), name, {f for f in flags.split(", ") if f})
    return rows


def run_parted_script(spec: PlanSpec, target: str) -> None:
    proc = subprocess.run(["sh", "-s"], input=to_parted(spec, target), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def parted_gpt() -> PlanSpec:
    names = ['EFI "system"', "root", "it's", "", "été", "home", "x" * 36, "a b", "z"]
    parts = [P(i + 1, 2048 * (1 + 100 * i), 2048 * (1 + 100 * i) + 204799, t, names[i % len(names)],
               ("hidden", "legacy_boot") if i == 1 else ())
             for i, t in enumerate(_gpt_types())]
    return PlanSpec("gpt", 512, tuple(parts), GIB // 512, 34, GIB // 512 - 34)


def parted_msdos(extended: str) -> PlanSpec:
    parts = [P(1, 2048, 206847, "0x0c", flags=("boot",)), P(2, 206848, 411647, "0x8e"),
             P(3, 411648, 2097151, extended, role=Role.EXTENDED)]
    start = 413696
    for i, t in enumerate(_mbr_types()):
        parts.append(P(5 + i, start, start + 99_999, t, role=Role.LOGICAL))
        start += 102_400
    return PlanSpec("msdos", 512, tuple(parts), GIB // 512)


@pytest.mark.parametrize("spec", [parted_gpt(), parted_msdos("0x0f"), parted_msdos("0x05")],
                         ids=["gpt", "msdos-0f", "msdos-05"])
def test_the_parted_commands_write_exactly_the_plan(spec: PlanSpec,
                                                    sparse_image: Callable[..., pathlib.Path]) -> None:
    image = str(sparse_image((spec.sectors or 0) * 512))
    run_parted_script(spec, image)
    rows = parted_print(image)
    assert set(rows) == {p.number for p in spec.partitions}
    for p in spec.partitions:
        start, end, name, flags = rows[p.number]
        assert (start, end, name) == (p.start, p.end, p.name), p
        wanted = flags_parted_shows_for(spec.label, p.type) | set(p.flags)
        assert wanted <= flags, (p, flags)
    # The types themselves, as the raw table holds them.
    assert dump_as_plan(image) == without_size(spec)


def test_parted_notes_what_it_cannot_do_and_still_runs(sparse_image: Callable[..., pathlib.Path]) -> None:
    spec = PlanSpec("gpt", 512, (P(3, 2048, 4095, SRV, "it's \"x\"", ("no_automount",)),), GIB // 512)
    script = to_parted(spec, "IMG")
    assert "cannot set type" in script and "cannot set GUID:63" in script and "number partition 3 as 1" in script
    image = str(sparse_image(GIB))
    run_parted_script(spec, image)
    assert parted_print(image) == {1: (2048, 4095, "", set())}


# --- real images ----------------------------------------------------------------------------------------


def _corpus() -> list[dict[str, Any]]:
    manifest = CORPUS / "manifest.json"
    if not manifest.exists():
        return []
    return [e for e in json.loads(manifest.read_text())["images"]
            if e["table_type"] in ("dos", "gpt") and e["logical_sector_size"] == 512]


# What keeps a real image's table from being re-created as it is (its manifest tags say so).
UNPLANNABLE = {"partition-beyond-end-of-image", "gpt-backup-missing-or-invalid", "hybrid-mbr"}


@pytest.mark.corpus
@pytest.mark.parametrize("entry", _corpus(), ids=lambda e: e["name"])
def test_a_real_images_dump_loads_as_a_plan(entry: dict[str, Any], tmp_path: pathlib.Path) -> None:
    spec_ = importlib.util.spec_from_file_location("corpus_materialize", CORPUS / "materialize.py")
    assert spec_ and spec_.loader
    mat = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mat)
    mat.materialize(entry, str(tmp_path), root=str(CORPUS))
    image = str(tmp_path / f"{entry['name']}.img")
    proc = subprocess.run([need_tool("sfdisk"), "--dump", image], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    try:
        plan = load_plan(proc.stdout)
    except PlanFileError as exc:
        # A hybrid ISO's MBR: a type-0 entry over the MBR itself. Refused with the reason, never a crash.
        assert entry["name"].startswith("coreos-iso"), exc
        assert "empty MBR entry" in str(exc)
        return
    label = {"dos": "msdos", "gpt": "gpt"}[entry["table_type"]]
    if plan.label != label:  # sfdisk falls back to the protective MBR when the GPT is damaged
        assert UNPLANNABLE & set(entry["tags"]), plan.label
        return
    expected = {e["number"]: e for e in entry["expected_partitions"]
                if e["role"] in ("primary", "logical", "extended", "data")}
    got = {p.number: p for p in plan.partitions}
    assert set(got) == set(expected)
    for n, e in expected.items():
        assert (got[n].start, got[n].end) == (e["start"], e["end"]), n
        if e["role"] in ("primary", "logical", "extended"):
            assert got[n].role.value == e["role"], n
    if UNPLANNABLE & set(entry["tags"]):
        return
    # And the plan, written back by sfdisk on a blank disk of the same size, is the same table again.
    copy = tmp_path / "copy.img"
    with open(copy, "wb") as f:
        f.truncate(pathlib.Path(image).stat().st_size)
    apply_sfdisk(plan, str(copy))
    assert dump_as_plan(str(copy)) == plan
