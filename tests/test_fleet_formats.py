"""`diskplan export --format ansible|ignition|repart`: what each format says, the exact refusals when a plan does
not fit its model, and the real tools as referees. systemd-repart and ansible-playbook (community.general.parted)
partition an image or a loop device from the export, and the table they write is compared with the one `diskplan
apply` writes for the same plan on a disk of the same size. Ignition does not run here: its output is checked
against the partition schema of the Ignition v3.4.0 spec, read back as a plan, and played through sgdisk the way
Ignition drives sgdisk (--new=N:START:+SIZE, 0 for "default")."""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Callable

import pytest

from conftest import need_tool, run
from diskplan.model.formats.ansible import to_ansible
from diskplan.model.formats.ignition import ignition_config
from diskplan.model.formats.planfile import PlanFileError, load_plan
from diskplan.model.formats.repart import repart_files
from helpers.cli import diskplan
from helpers.images import sfdisk_parts
from helpers.schemas import schema_problems as problems_by

MiB = 2048  # sectors of 512 B
GiB = 1024 * MiB
SIZE = 10 << 30
EFI = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
SWAP = "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"


def plan(*parts: dict[str, object], label: str = "gpt") -> str:
    return json.dumps({"label": label, "partitions": list(parts)})


# Exact sectors, whole MiB, a 1 MiB gap before swap: every format can say this one.
FIXED = plan({"start": MiB, "size": 512 * MiB, "type": "EFI system", "name": "EFI"},
             {"start": 513 * MiB, "size": 6 * GiB, "name": "root"},
             {"start": 513 * MiB + 6 * GiB + MiB, "size": 2 * GiB, "type": "swap", "name": "swap"})
# The usual fleet layout: ESP, root takes the rest, swap at the end.
ESP_REST_SWAP = plan({"size": "512MiB", "type": "EFI system", "name": "EFI"}, {"size": "rest", "name": "root"},
                     {"size": "4GiB", "type": "swap", "name": "swap"})
HALVES = plan({"size": "30%", "name": "a"}, {"size": "rest", "name": "b"})


def refusal(fn: Callable[[], object]) -> str:
    with pytest.raises(PlanFileError) as exc:
        fn()
    assert "\n" not in str(exc.value)
    return str(exc.value)


# --- what each format says ------------------------------------------------------------------------------------


def test_ansible_writes_parteds_positions_for_a_relative_plan() -> None:
    text = to_ansible(load_plan(ESP_REST_SWAP), "/dev/sdb")
    starts_ends = [(line.split(": ")[1]) for line in text.splitlines() if "part_start" in line or "part_end" in line]
    assert starts_ends == ['"0%"', '"513MiB"', '"513MiB"', '"-4097MiB"', '"-4097MiB"', '"100%"']
    assert "align: none" not in text and "flags: [esp]" in text
    halves = to_ansible(load_plan(HALVES), "/dev/sdb")
    assert 'part_end: "30%"' in halves and 'part_start: "30%"' in halves and 'part_end: "100%"' in halves


def test_ansible_keeps_a_name_from_templating() -> None:
    text = to_ansible(load_plan(plan({"size": "rest", "name": "{{ lookup('pipe', 'id') }}"})), "/dev/sdb")
    assert "name: !unsafe \"{{ lookup('pipe', 'id') }}\"" in text


@pytest.mark.parametrize(("parts", "why"), [
    ([{"size": "1GiB"}, {"size": "50%"}], "ends a percentage of the disk after an offset in MiB"),
    ([{"size": "50%"}, {"size": "1GiB"}], "ends a fixed size after a percentage of the disk"),
    ([{"size": "1000s"}, {"size": "rest"}], "is 512000 bytes, not a whole MiB"),
    ([{"number": 2, "size": "1GiB"}], "parted would number partition 2 as 1"),
])
def test_ansible_says_why_not(parts: list[dict[str, object]], why: str) -> None:
    text = refusal(lambda: to_ansible(load_plan(plan(*parts)), "/dev/sdb"))
    assert text.startswith("ansible's parted module cannot express this plan: ") and why in text


def test_repart_writes_weights_and_fixed_sizes() -> None:
    files = dict(repart_files(load_plan(ESP_REST_SWAP)))
    assert list(files) == ["01-efi.conf", "02-root.conf", "03-swap.conf"]
    assert "SizeMinBytes=536870912\nSizeMaxBytes=536870912" in files["01-efi.conf"]
    assert "Weight=1000" in files["02-root.conf"] and "SizeMinBytes" not in files["02-root.conf"]
    halves = dict(repart_files(load_plan(plan({"size": "30%", "name": "a"}, {"size": "20%", "name": "b"}))))
    assert "Weight=30000" in halves["01-a.conf"]
    assert "Weight=20000" in halves["02-b.conf"] and "PaddingWeight=50000" in halves["02-b.conf"]  # 50% left free
    flagged = dict(repart_files(load_plan(plan({"size": "rest", "name": "x", "flags": ["no_automount"]}))))
    assert "Flags=0x8000000000000000" in flagged["01-x.conf"]


@pytest.mark.parametrize(("text", "why"), [
    (plan({"size": "rest"}, label="msdos"), "it is a msdos plan, and repart writes GPT only"),
    (plan({"start": 4096, "size": 2048}), "starts at sector 4096; repart starts the first partition at 1 MiB"),
    (plan({"start": 2048, "size": 2047}), "partition 1's size is 1048064 bytes, not a whole number of 4 KiB"),
    (plan({"start": 2048, "size": 2048, "number": 2}), "partition 2 comes 1 in the order on the disk"),
    (plan({"size": "1GiB"}, {"start": 8 * GiB, "size": "rest"}), "starts at sector 16777216, and repart places"),
    (plan({"size": "512MiB"}, {"size": "50%"}), "repart's Weight= shares out only what fixed sizes leave"),
])
def test_repart_says_why_not(text: str, why: str) -> None:
    said = refusal(lambda: repart_files(load_plan(text)))
    assert said.startswith("systemd-repart cannot express this plan: ") and why in said


@pytest.mark.parametrize(("text", "why"), [
    (plan({"size": "rest"}, label="msdos"), "it is a msdos plan, and Ignition writes GPT only"),
    (plan({"start": 34, "size": 2048}), "partition 1's start is 17408 bytes, not a whole MiB"),
    (HALVES, "asks for 30%, and Ignition sizes are MiB"),
    (ESP_REST_SWAP, "partition entry 2 takes the rest before partition entry 3"),
    (plan({"start": 2048, "size": 2048, "flags": ["legacy_boot"]}), "has the attribute legacy_boot"),
])
def test_ignition_says_why_not(text: str, why: str) -> None:
    said = refusal(lambda: ignition_config(load_plan(text), "/dev/vda"))
    assert said.startswith("Ignition cannot express this plan: ") and why in said


# The parts of the Ignition v3.4.0 config this export writes, as the spec describes them (docs/configuration-
# v3_4.md: ignition.version; storage.disks[]: device, wipeTable, partitions[]: label, number, sizeMiB, startMiB,
# typeGuid, guid, wipePartitionEntry, shouldExist, resize), closed with additionalProperties so that a key the
# spec does not have fails here (Ignition itself only warns about an unused key, and then ignores it).
_NULLABLE = {"string": ["string", "null"], "integer": ["integer", "null"], "boolean": ["boolean", "null"]}
IGNITION_SCHEMA: dict[str, object] = {
    "type": "object", "required": ["ignition"], "additionalProperties": False,
    "properties": {
        "ignition": {"type": "object", "required": ["version"], "properties": {"version": {"enum": ["3.4.0"]}}},
        "storage": {"type": "object", "additionalProperties": False, "properties": {"disks": {
            "type": "array", "items": {"type": "object", "required": ["device"], "additionalProperties": False,
            "properties": {
                "device": {"type": "string", "pattern": "^/"},
                "wipeTable": {"type": _NULLABLE["boolean"]},
                "partitions": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "label": {"type": _NULLABLE["string"], "maxLength": 36},
                        "number": {"type": "integer", "minimum": 0},
                        "sizeMiB": {"type": _NULLABLE["integer"], "minimum": 0},
                        "startMiB": {"type": _NULLABLE["integer"], "minimum": 0},
                        "typeGuid": {"type": _NULLABLE["string"],
                                     "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
                        "guid": {"type": _NULLABLE["string"]},
                        "wipePartitionEntry": {"type": _NULLABLE["boolean"]},
                        "shouldExist": {"type": _NULLABLE["boolean"]},
                        "resize": {"type": _NULLABLE["boolean"]},
                    }}},
            }}}}},
    },
}


def _ignition_back(config: dict[str, object]) -> str:
    """An Ignition config's partitions read back as a diskplan plan: startMiB and sizeMiB 0 are the defaults."""
    disk = config["storage"]["disks"][0]  # type: ignore[index]
    parts = []
    for p in disk["partitions"]:
        entry = {"number": p["number"], "type": p["typeGuid"], "name": p["label"],
                 "size": f"{p['sizeMiB']}MiB" if p["sizeMiB"] else "rest"}
        if p.get("startMiB"):
            entry["start"] = f"{p['startMiB']}MiB"
        parts.append(entry)
    return plan(*parts)


def schema_problems(doc: object) -> list[str]:
    """Every way ``doc`` breaks IGNITION_SCHEMA, by python-jsonschema (helpers.schemas)."""
    return problems_by(IGNITION_SCHEMA, doc, draft="Draft4Validator")


@pytest.mark.parametrize("text", [FIXED, plan({"size": "512MiB", "type": "EFI system", "name": "EFI"},
                                              {"size": "rest", "name": "root"})], ids=["exact", "esp-rest"])
def test_ignition_matches_the_spec_and_reads_back_as_the_plan(text: str) -> None:
    config = ignition_config(load_plan(text), "/dev/vda")
    assert schema_problems(config) == []
    wrong = {**config, "storage": {"disks": [{"device": "vda", "partitions": [{"sizeMib": 1}]}]}}
    assert len(schema_problems(wrong)) == 2  # the schema does catch a relative path and a key the spec lacks
    back, spec = load_plan(_ignition_back(config)), load_plan(text)
    assert back.partitions == spec.partitions
    assert [(w.part, w.start, w.size) for w in back.relative or ()] == \
        [(w.part, w.start, w.size) for w in spec.relative or ()]


# --- the command line -----------------------------------------------------------------------------------------


def test_export_repart_to_a_directory(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "plan.json"
    src.write_text(ESP_REST_SWAP)
    out = tmp_path / "repart.d"
    proc = diskplan("export", str(src), "--format", "repart", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["01-efi.conf", "02-root.conf", "03-swap.conf"]
    again = diskplan("export", str(src), "--format", "repart", "-o", str(out))
    assert again.returncode == 2 and "already holds 01-efi.conf" in again.stderr
    assert again.stderr.count("\n") == 1


def test_export_says_why_a_format_cannot_hold_a_relative_plan(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "plan.json"
    src.write_text(HALVES)
    proc = diskplan("export", str(src), "--format", "sfdisk")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "this plan's sizes are relative: `diskplan apply PLAN DISK` resolves it" in proc.stderr
    ign = diskplan("export", str(src), "--format", "ignition")
    assert ign.returncode == 2 and "Ignition cannot express this plan: partition entry 1 asks for 30%" in ign.stderr


# --- the real tools -------------------------------------------------------------------------------------------


def blank(tmp_path: pathlib.Path, name: str) -> pathlib.Path:
    img = tmp_path / name
    with open(img, "wb") as f:
        f.truncate(SIZE)
    return img


def applied(tmp_path: pathlib.Path, text: str, name: str = "ours.img", on: str = "") -> pathlib.Path | str:
    """``diskplan apply`` of the plan on a new blank image ``name``, or on the device ``on``."""
    src = tmp_path / f"{name}.json"
    src.write_text(text)
    target = on or blank(tmp_path, name)
    proc = diskplan("apply", str(src), str(target), "--yes")
    assert proc.returncode == 0, proc.stderr
    return target


def by_repart(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    tool = need_tool("systemd-repart")
    src, defs, img = tmp_path / "repart.json", tmp_path / "repart.d", tmp_path / "repart.img"
    src.write_text(text)
    proc = diskplan("export", str(src), "--format", "repart", "-o", str(defs))
    assert proc.returncode == 0, proc.stderr
    run(tool, "--dry-run=no", "--empty=create", f"--size={SIZE}", f"--definitions={defs}", str(img))
    return img


def test_repart_writes_an_exact_plan_as_apply_does(tmp_path: pathlib.Path) -> None:
    assert sfdisk_parts(by_repart(tmp_path, FIXED)) == sfdisk_parts(applied(tmp_path, FIXED))


def test_repart_places_the_rest_by_its_own_4k_grain(tmp_path: pathlib.Path) -> None:
    """Same partitions; the one difference is the end: repart ends the last partition on the last 4 KiB
    boundary (20971479), diskplan (like parted's 100% and sfdisk) on the last MiB boundary (20969471)."""
    ours, theirs = sfdisk_parts(applied(tmp_path, ESP_REST_SWAP)), sfdisk_parts(by_repart(tmp_path, ESP_REST_SWAP))
    assert ours[0] == theirs[0] == (1, MiB, 512 * MiB, EFI.lower(), "EFI")
    last_4k, last_mib = (SIZE // 512 - 34 + 1) // 8 * 8 - 1, (SIZE // 512 - 34 + 1) // MiB * MiB - 1
    assert ours[2][1] + ours[2][2] - 1 == last_mib and theirs[2][1] + theirs[2][2] - 1 == last_4k
    assert ours[2][2] == theirs[2][2] == 4 * GiB
    shift = last_4k - last_mib
    assert ours[1][:2] == theirs[1][:2] and theirs[1][2] - ours[1][2] == shift == 2008


def test_repart_weights_share_out_what_apply_shares_out_within_a_grain(tmp_path: pathlib.Path) -> None:
    """30% and the rest: repart's Weight= gives 30% of the space to its 4 KiB end, rounded to 4 KiB; diskplan 30%
    of the space to its MiB end, rounded to MiB. Every start and size agrees to within one MiB."""
    ours, theirs = sfdisk_parts(applied(tmp_path, HALVES)), sfdisk_parts(by_repart(tmp_path, HALVES))
    assert [p[0] for p in ours] == [p[0] for p in theirs] == [1, 2]
    for a, b in zip(ours, theirs, strict=True):
        assert abs(a[1] - b[1]) < MiB and abs(a[2] - b[2]) < MiB and a[3:] == b[3:]
    assert ours[0][2] == 3071 * MiB and theirs[0][2] == 6290824  # measured: 30% of 10238 MiB / of 20969432 s


@pytest.fixture(scope="module")
def ansible_playbook() -> str:
    tool = need_tool("ansible-playbook")
    doc = subprocess.run([need_tool("ansible-doc"), "-t", "module", "community.general.parted"],
                         capture_output=True, text=True)
    if doc.returncode != 0 or "community.general.parted" not in doc.stdout:
        pytest.skip("the community.general collection is not installed (Debian's ansible package has it)")
    return tool


MSDOS = plan({"start": MiB, "size": 512 * MiB, "flags": ["boot"]}, {"size": "2GiB", "type": "swap"},
             {"size": "rest", "type": "lvm"}, label="msdos")
EXTENDED = plan({"start": MiB, "size": 512 * MiB}, {"start": 513 * MiB, "size": 4 * GiB, "type": "0x0f"},
                {"number": 5, "start": 514 * MiB, "size": GiB, "type": "swap", "role": "logical"},
                {"number": 6, "start": 514 * MiB + GiB + MiB, "size": GiB, "role": "logical"}, label="msdos")


@pytest.mark.parametrize("text", [FIXED, ESP_REST_SWAP, plan({"size": "30%"}, {"size": "rest", "name": "b"}), MSDOS,
                                  EXTENDED],
                         ids=["exact", "esp-rest-swap", "30%-rest, one unnamed", "msdos", "msdos, logical"])
def test_ansible_partitions_a_loop_device_as_apply_does(tmp_path: pathlib.Path, ansible_playbook: str,
                                                        loop_device: Callable[..., str], text: str) -> None:
    # both on loop devices: libparted makes a new msdos extended partition 0x0f on a device, 0x05 in a file
    ours = applied(tmp_path, text, on=loop_device(blank(tmp_path, "ours.img")))
    dev = loop_device(blank(tmp_path, "theirs.img"))
    src, book = tmp_path / "plan.json", tmp_path / "playbook.yml"
    src.write_text(text)
    proc = diskplan("export", str(src), "--format", "ansible", "--device", dev, "-o", str(book))
    assert proc.returncode == 0, proc.stderr
    env = {"ANSIBLE_NOCOLOR": "1", "LC_ALL": "C.UTF-8", "HOME": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    played = subprocess.run([ansible_playbook, "-c", "local", "-i", "localhost,", str(book)], capture_output=True,
                            text=True, timeout=300, env=env)
    assert played.returncode == 0, played.stdout[-2000:]
    assert sfdisk_parts(dev) == sfdisk_parts(ours)


def _sgdisk_as_ignition(config: dict[str, object], image: pathlib.Path) -> None:
    """What Ignition's disks stage runs for these partitions (sgdisk --zap-all for wipeTable, then per partition
    --new=N:START:+SIZE with 0 for an absent startMiB or a sizeMiB of 0, --change-name, --typecode)."""
    sgdisk = need_tool("sgdisk")
    disk = config["storage"]["disks"][0]  # type: ignore[index]
    run(sgdisk, "--zap-all", str(image))
    args = []
    for p in disk["partitions"]:
        start = f"{p['startMiB'] * MiB}" if p.get("startMiB") else "0"
        size = f"+{p['sizeMiB'] * MiB}" if p["sizeMiB"] else "0"
        args += [f"--new={p['number']}:{start}:{size}", f"--change-name={p['number']}:{p['label']}",
                 f"--typecode={p['number']}:{p['typeGuid']}"]
    run(sgdisk, *args, str(image))


def test_ignition_through_sgdisk_writes_what_apply_writes(tmp_path: pathlib.Path) -> None:
    """Exact: the same table. ESP + rest: the same but the rest's end, which sgdisk's default puts on the last
    usable sector (20971486) and diskplan on the last MiB boundary (20969471)."""
    for text, same in ((FIXED, True), (plan({"size": "512MiB", "type": "EFI system", "name": "EFI"},
                                            {"size": "rest", "name": "root"}), False)):
        ours = sfdisk_parts(applied(tmp_path, text, "ours.img"))
        img = blank(tmp_path, "ignition.img")
        _sgdisk_as_ignition(ignition_config(load_plan(text), "/dev/vda"), img)
        theirs = sfdisk_parts(img)
        if same:
            assert theirs == ours
        else:
            assert theirs[0] == ours[0] and theirs[1][:2] == ours[1][:2] and theirs[1][3:] == ours[1][3:]
            assert theirs[1][1] + theirs[1][2] - 1 == SIZE // 512 - 34 and ours[1][1] + ours[1][2] - 1 == 20969471
        for p in (tmp_path / "ours.img", img):
            p.unlink()


def test_the_refusal_of_a_relative_plan_offers_only_formats_that_hold_it() -> None:
    """`a parted script` (not "an"), and Ignition offered only when no size is a percentage (it refuses them)."""
    from diskplan.model.formats.registry import render

    for fmt, text, offered in (("parted", HALVES, "--format ansible or repart)"),
                               ("sfdisk", '{"label": "gpt", "partitions": [{"size": "1GiB"}, {"size": "rest"}]}',
                                "--format ansible, ignition or repart)")):
        spec = load_plan(text)
        with pytest.raises(PlanFileError) as exc:
            render(spec, fmt, "/dev/sda")
        said = str(exc.value)
        assert said.startswith(f"{'an' if fmt == 'sfdisk' else 'a'} {fmt} script is in exact sectors") and \
            said.endswith(offered), said
        if "ignition" in offered:
            assert render(spec, "ignition", "/dev/sda")  # what it offers, it prints


def test_export_offers_and_renders_exactly_the_registry_s_formats() -> None:
    """One registry (model.formats.registry): export's --format choices are its names, each renders, and a name
    it does not know is refused rather than rendered as repart (the old if-chain's fallback)."""
    from diskplan.cli.export import parser
    from diskplan.model.formats.registry import FORMATS, render

    choices = next(a.choices for a in parser()._actions if a.dest == "format")
    assert choices is not None
    assert list(choices) == list(FORMATS) == ["json", "sfdisk", "parted", "ansible", "ignition", "repart"]
    spec = load_plan('{"label": "gpt", "partitions": [{"start": 2048, "size": 4096, "type": "linux"}]}')
    texts = {name: render(spec, name, "/dev/sda") for name in FORMATS}
    assert len(set(texts.values())) == len(FORMATS) and all(texts.values())
    with pytest.raises(PlanFileError, match="unknown export format 'yaml'"):
        render(spec, "yaml", "/dev/sda")
