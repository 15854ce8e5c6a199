"""`diskplan apply` and `diskplan restore` as a user runs them: what they show, what they write, their
exit statuses (0 written or nothing to do, 1 refused or not confirmed, 2 failed), and never a traceback."""

from __future__ import annotations

import json
import pathlib
import re
import sys
from collections.abc import Callable

import pytest

from helpers.cli import KEEP_1_SWAP_3, LINUX, diskplan, plan_file
from helpers.images import digest, expect_sfdisk, file_sha, fill, parted_parts, sfdisk_parts
from helpers.tools import need_tool, run
from helpers.units import MiB

BEFORE = "label: gpt\nstart=2048, size=20480\nstart=22528, size=20480\n"
SWAP = "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"


def image(sparse_image: Callable[..., pathlib.Path]) -> pathlib.Path:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input=BEFORE)
    return img


def test_without_yes_it_shows_everything_and_writes_nothing(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = image(sparse_image)
    before = file_sha(img)
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0  # a preview is not a refusal (as sfdisk --no-act)
    out = proc.stdout
    assert f"{img}: 131072 sectors × 512 B = 64 MiB" in out
    assert "delete 2 (22528..43007)" in out
    assert "create 3 at 43008..63487: 20480 sectors, Linux swap, 'swap'" in out
    assert "keep 1 at 2048..22527 (untouched)" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["1"], ["3"])]
    assert ["1", "2048", "22527", "20480", "10", "MiB", "primary", "Linux", "filesystem", "kept"] in rows
    assert ["3", "43008", "63487", "20480", "10", "MiB", "primary", "Linux", "swap", "swap", "new"] in rows
    assert "--yes" in out
    assert file_sha(img) == before and not (tmp_path / "b.dpbackup").exists()


def test_yes_writes_backs_up_and_restore_undoes_it(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = image(sparse_image)
    kept = fill(img, 2048, 20480, 512)
    before = file_sha(img)
    backup = tmp_path / "b.dpbackup"
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes", "--backup", str(backup))
    assert proc.returncode == 0, proc.stderr
    assert f"backup of the old table: {backup}" in proc.stdout and backup.is_file()
    assert "written and verified" in proc.stdout
    assert "[3/5] writing the table" in proc.stderr  # progress
    assert sfdisk_parts(img) == expect_sfdisk("gpt", [(1, 2048, 22527, LINUX, ""), (3, 43008, 63487, SWAP, "swap")])
    assert parted_parts(img) == [(1, 2048, 22527), (3, 43008, 63487)]
    assert digest(img, 2048, 20480, 512) == kept
    again = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes")
    assert again.returncode == 0 and "nothing to do" in again.stdout

    shown = diskplan("restore", str(backup), str(img))
    assert shown.returncode == 0 and "start=       22528, size=       20480" in shown.stdout
    done = diskplan("restore", str(backup), str(img), "--yes")
    assert done.returncode == 0, done.stderr
    assert "byte for byte" in done.stdout
    # Its progress counts steps, as apply's does, and says how many saved runs it wrote (an image file: no
    # kernel to tell); it once printed "[1/2] ... [2/2] writing the saved sectors back", counting runs.
    steps = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(steps) == 2 and steps[0] == "[1/2] locking the disk and checking that nothing uses it", steps
    assert re.fullmatch(r"\[2/2\] writing the saved sectors back \((1 run|[2-9]\d* runs)\) and reading them back",
                        steps[1]), steps
    assert file_sha(img) == before
    assert diskplan("restore", str(backup), str(img), "--yes").returncode == 0  # nothing to do


def test_sfdisk_dump_plan_on_a_4096_byte_loop(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img, sector_size=4096)
    plan = tmp_path / "plan.dump"
    plan.write_text(f"label: dos\nunit: sectors\nsector-size: 4096\n\n{dev}p1 : start=256, size=2560, type=83\n"
                    f"{dev}p2 : start=2816, size=5120, type=82\n")
    proc = diskplan("apply", str(plan), dev, "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0, proc.stderr
    assert "16384 sectors × 4096 B = 64 MiB" in proc.stdout
    assert "new msdos label" in proc.stdout
    assert sfdisk_parts(dev) == [(1, 256, 2560, "83", ""), (2, 2816, 5120, "82", "")]
    assert "warning" not in proc.stderr  # the kernel was told
    # Restored on a block device, the kernel is told too: a third step.
    back = diskplan("restore", str(tmp_path / "b.dpbackup"), dev, "--yes")
    assert back.returncode == 0, back.stderr
    steps = [line for line in back.stderr.splitlines() if line.startswith("[")]
    assert [s[:5] for s in steps] == ["[1/3]", "[2/3]", "[3/3]"], steps
    assert steps[2] == "[3/3] telling the kernel and checking its partition list" and "warning" not in back.stderr


def test_refusals_exit_1_and_name_the_reason(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = image(sparse_image)
    before = file_sha(img)
    dev = loop_device(img, read_only=True)
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), dev, "--yes")
    assert proc.returncode == 1
    assert f"refused: {dev} is read-only" in proc.stderr and "Nothing was written." in proc.stderr
    wrong = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3, sector_size=4096), str(img), "--yes")
    assert wrong.returncode == 1 and "4096-byte sectors" in wrong.stderr
    other = sparse_image(32 * MiB, "other.img")
    backup = tmp_path / "b.dpbackup"
    assert diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes", "--backup",
                    str(backup)).returncode == 0
    refused = diskplan("restore", str(backup), str(other), "--yes")
    assert refused.returncode == 1 and "wrong places" in refused.stderr
    assert file_sha(other) == file_sha(sparse_image(32 * MiB, "empty.img"))
    assert file_sha(img) != before  # written by the apply above, so the refused restore had work to do


def test_failures_exit_2_or_3_with_one_line(sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path) -> None:
    """2: an input could not be read; 3: the write began (its backup) and failed, nothing written."""
    img = image(sparse_image)
    before = file_sha(img)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = diskplan("apply", str(bad), str(img), "--yes")
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(tmp_path / "missing.img"), "--yes")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes", "--backup",
                    str(blocker / "b.dpbackup"))
    assert proc.returncode == 3 and "no backup, so nothing was written" in proc.stderr
    assert file_sha(img) == before
    proc = diskplan("restore", str(bad), str(img), "--yes")
    assert proc.returncode == 2 and "not a diskplan backup" in proc.stderr


def test_a_person_at_a_terminal_types_the_device_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from diskplan.backend.write.steps import accepts
    from diskplan.backend.write.steps import confirm_word as word_for
    from diskplan.cli.confirm import confirm

    class Block:
        kind, target = "block", "/dev/loop7"
        confirm_word = word_for("block", "/dev/loop7")
        prompt = "Type loop7 to write this table to /dev/loop7"
        refusals: tuple[str, ...] = ()

        def accepts(self, answer: str) -> bool:
            return accepts("block", "/dev/loop7", answer)

    typed: list[str] = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)

    def type_yes(prompt: str) -> str:
        typed.append(prompt)
        return "yes"

    monkeypatch.setattr("builtins.input", type_yes)
    answer = confirm(Block(), yes=True)
    assert typed == ["Type loop7 to write this table to /dev/loop7: "]
    assert answer == "yes" and not accepts("block", "/dev/loop7", answer)  # "yes" is not the name
    assert accepts("block", "/dev/loop7", "loop7") and accepts("block", "/dev/loop7", "/dev/loop7")
    assert confirm(Block(), yes=False) == ""
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert confirm(Block(), yes=True) == "loop7"  # a script: --yes is the consent


def test_two_active_msdos_partitions_are_refused_before_writing(sparse_image, tmp_path) -> None:
    """libparted keeps the boot flag on one msdos partition only: such a plan used to be written and then fail
    its verification ("written, but not as planned"); it is refused before anything is written."""
    img = sparse_image(64 * MiB)
    before = img.read_bytes()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "diskplan-plan", "version": 1, "label": "msdos", "partitions": [
        {"start": 2048, "size": 2048, "flags": ["boot"]}, {"start": 4096, "size": 2048, "flags": ["boot"]}]}))
    proc = diskplan("apply", str(plan), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 2 and "msdos marks one partition active (boot), not 2" in proc.stderr
    assert img.read_bytes() == before and not (tmp_path / "b.dpbackup").exists()


@pytest.mark.parametrize(("asked", "dumped"), [("0x0f", "f"), ("0x05", "5")])
def test_an_extended_partition_gets_the_id_the_plan_names(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path, asked: str, dumped: str
) -> None:
    """libparted's own choice differs between an image (0x05) and a device (0x0f): the plan's id is written,
    whichever it is (the 0x0f plan was written as 0x05 and still "verified")."""
    img = sparse_image(64 * MiB)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"label": "msdos", "partitions": [
        {"number": 1, "start": 2048, "end": 22527, "type": "0x83"},
        {"number": 2, "start": 22528, "end": 126975, "type": asked, "role": "extended"},
        {"number": 5, "start": 24576, "end": 45055, "type": "0x83", "role": "logical"}]}))
    proc = diskplan("apply", str(plan), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0 and "written and verified" in proc.stdout, proc.stdout + proc.stderr
    dump = run("sfdisk", "--dump", str(img))
    assert f"start=       22528, size=      104448, type={dumped}" in dump, dump


def test_a_linux_extended_id_is_refused_before_writing(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    before = file_sha(img)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"label": "msdos", "partitions": [
        {"number": 2, "start": 22528, "end": 126975, "type": "0x85", "role": "extended"}]}))
    proc = diskplan("apply", str(plan), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode in (1, 2) and "0x85" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and file_sha(img) == before
