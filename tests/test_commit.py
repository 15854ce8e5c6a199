"""backend.write.commit on real targets: plans written through libparted to sparse images and loop devices (512
and 4096-byte sectors) read back by sfdisk and parted exactly as planned; kept partitions' data and GUIDs
untouched; refusals (not confirmed, read-only, mounted, swap) leave the table as it was; a target that
vanishes, and faults injected mid-commit, end in an exact state report and a byte-exact restore."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from diskplan.backend.write import commit, restore
from diskplan.backend.write import steps as write
from diskplan.backend.write.steps import DiskState, Verdict
from diskplan.model import ptypes
from diskplan.model.extent import Partition, Role
from diskplan.model.table import Table
from helpers.images import (
    HOST,
    digest,
    expect_sfdisk,
    file_sha,
    fill,
    mounted,
    parted_parts,
    partx_update,
    sfdisk_header,
    sfdisk_parts,
    sfdisk_uuids,
    swapping,
)
from helpers.tools import need_tool, run
from helpers.units import MiB

SWAP = "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"


def P(number: int, start: int, end: int, ptype: str = "", name: str = "", role: Role = Role.PRIMARY,
      flags: tuple[str, ...] = ()) -> Partition:
    return Partition(number, start, end, type=ptype, name=name, role=role, flags=flags)


def plan(label: str, *parts: Partition) -> Table:
    return Table(label, 0, 0, parts)


def apply(target: str, desired: Table, tmp_path: pathlib.Path, **kw: Any) -> write.WriteOutcome:
    proposal = commit.prepare(target, desired, HOST)
    assert proposal.refusals == (), proposal.refusals
    return commit.execute(proposal, proposal.confirm_word, HOST, backup_path=str(tmp_path / "old.dpbackup"), **kw)


def sfdisk(target: str | pathlib.Path, script: str) -> None:
    run(need_tool("sfdisk"), "-q", "--no-reread", str(target), input=script)


GPT_BEFORE = """label: gpt
start=2048, size=20480, name="root"
start=22528, size=20480, name="old"
start=43008, size=8192, name="data"
"""
# keep 1, delete 2, rename 3, create 2 elsewhere (swap), create 6 while 4 and 5 stay free.
GPT_PLAN = plan(
    "gpt",
    P(1, 2048, 22527, LINUX, "root"),
    P(3, 43008, 51199, LINUX, "renamed"),
    P(2, 51200, 61439, SWAP, "swap"),
    P(6, 90112, 100351, ESP, "esp"),
)

DOS_BEFORE = """label: dos
start=2048, size=10240, type=83, bootable
start=12288, size=60000, type=5
start=14336, size=4096, type=83
start=20480, size=4096, type=82
start=26624, size=4096, type=7
"""
# delete logical 5: libparted renumbers 6 and 7 to 5 and 6; add logical 7 and primary 3.
DOS_PLAN = plan(
    "msdos",
    P(1, 2048, 12287, "0x83", flags=("boot",)),
    P(2, 12288, 72287, "", role=Role.EXTENDED),
    P(5, 20480, 24575, "0x82", role=Role.LOGICAL),
    P(6, 26624, 30719, "0x07", role=Role.LOGICAL),
    P(7, 40000, 44095, "0x82", role=Role.LOGICAL),
    P(3, 80000, 88191, "0x0c"),
)
# A new logical partition numbered before the kept ones: every EBR is rewritten, data stays put.
DOS_RENUMBER = plan(
    "msdos",
    P(1, 2048, 12287, "0x83", flags=("boot",)),
    P(2, 12288, 72287, "", role=Role.EXTENDED),
    P(5, 15360, 17407, "0x83", role=Role.LOGICAL),
    P(6, 20480, 24575, "0x82", role=Role.LOGICAL),
    P(7, 26624, 30719, "0x07", role=Role.LOGICAL),
)


def _expected(desired: Table) -> tuple[list[tuple[int, int, int, str, str]], list[tuple[int, int, int]]]:
    label = desired.label or ""
    rows = []
    for p in desired.partitions:
        t = p.type or ("0x0f" if p.role is Role.EXTENDED else "0x83")
        rows.append((p.number, p.start, p.end, t, p.name))
    sf = expect_sfdisk(label, rows)
    if label == "msdos":  # sfdisk shows the extended partition's id as libparted wrote it: compare extents only
        sf = [(n, s, z, "" if n == 2 else t, name) for n, s, z, t, name in sf]
    return sf, sorted((p.number, p.start, p.end) for p in desired.partitions)


def _referees(target: str, desired: Table) -> None:
    sf, pa = _expected(desired)
    got = sfdisk_parts(target)
    if desired.label == "msdos":
        got = [(n, s, z, "" if n == 2 else t, name) for n, s, z, t, name in got]
    assert got == sf
    assert parted_parts(target) == pa


@pytest.mark.parametrize(
    ("before", "desired", "kept"),
    [
        (GPT_BEFORE, GPT_PLAN, [(2048, 20480), (43008, 8192)]),
        (DOS_BEFORE, DOS_PLAN, [(2048, 10240), (20480, 4096), (26624, 4096)]),
        (DOS_BEFORE, DOS_RENUMBER, [(2048, 10240), (20480, 4096), (26624, 4096)]),
    ],
    ids=["gpt", "msdos-logicals", "msdos-renumber"],
)
def test_image_holds_the_plan_and_kept_data(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path, before: str, desired: Table,
    kept: list[tuple[int, int]],
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, before)
    sums = [fill(img, s, n, 512) for s, n in kept]
    head = sfdisk_header(img)
    uuids = sfdisk_uuids(img)
    outcome = apply(str(img), desired, tmp_path)
    assert outcome.verdict is Verdict.WRITTEN, (outcome.message, outcome.details)
    assert outcome.state is DiskState.PLANNED and outcome.exit_code == 0
    _referees(str(img), desired)
    assert [digest(img, s, n, 512) for s, n in kept] == sums
    assert sfdisk_header(img)["label-id"] == head["label-id"]  # disk GUID / MBR signature kept (PARTUUIDs)
    if desired.label == "gpt":
        assert sfdisk_uuids(img)[1] == uuids[1] and sfdisk_uuids(img)[3] == uuids[3]
    assert pathlib.Path(outcome.backup_path).is_file()


def test_operations_say_what_happens(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, DOS_BEFORE)
    p = commit.prepare(str(img), DOS_PLAN, HOST)
    text = [str(op) for op in p.operations]
    assert "delete 5 (14336..18431): logical" in text
    assert any(t.startswith("create 7 at 40000..44095") for t in text)
    assert any(t.startswith("create 3 at 80000..88191") and "W95 FAT32 (LBA)" in t for t in text)
    assert "keep 5 at 20480..24575 (untouched): was number 6" in text
    assert p.kind == "file" and p.prompt == f"Type yes to write this table to {img}"
    assert p.accepts("yes") and not p.accepts("y")
    r = commit.prepare(str(img), DOS_RENUMBER, HOST)
    assert any(str(op).startswith("rewrite the EBR of logical 6 at 20480..24575") for op in r.operations)


@pytest.mark.parametrize(("sector", "label"), [(512, "gpt"), (4096, "gpt"), (4096, "msdos"), (512, "msdos")])
def test_loop_device_holds_the_plan_and_the_kernel_knows(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path,
    sector: int, label: str,
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img, sector_size=sector)
    u = MiB // sector  # sectors per MiB
    dos = "dos" if label == "msdos" else "gpt"
    sfdisk(dev, f"label: {dos}\nstart={u}, size={4 * u}\nstart={5 * u}, size={4 * u}\n")
    kept = fill(dev, u, 4 * u, sector)
    t = LINUX if label == "gpt" else "0x83"
    s = SWAP if label == "gpt" else "0x82"
    desired = plan(label, P(1, u, 5 * u - 1, t), P(3, 20 * u, 30 * u - 1, s), P(4, 40 * u, 50 * u - 1, t))
    outcome = apply(dev, desired, tmp_path)
    assert outcome.verdict is Verdict.WRITTEN, (outcome.message, outcome.details)
    _referees(dev, desired)
    assert digest(dev, u, 4 * u, sector) == kept
    assert outcome.kernel == ""  # libparted's BLKPG calls reached the kernel...
    seen = HOST.kernel_partitions(dev)
    k = sector // 512
    assert seen == {p.number: (p.start * k, p.size * k) for p in desired.partitions}  # ...as sysfs confirms


def test_nothing_to_do_and_not_confirmed_write_nothing(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    before = file_sha(img)
    same = plan("gpt", P(1, 2048, 22527, name="root"), P(2, 22528, 43007, name="old"), P(3, 43008, 51199, name="data"))
    p = commit.prepare(str(img), same, HOST)
    assert not p.changes
    assert commit.execute(p, "yes", HOST).verdict is Verdict.NOTHING
    p = commit.prepare(str(img), GPT_PLAN, HOST)
    o = commit.execute(p, "no", HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert o.verdict is Verdict.REFUSED and o.exit_code == 1
    assert file_sha(img) == before and not (tmp_path / "b.dpbackup").exists()


def test_a_plan_libparted_cannot_write_exactly_is_refused(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    bad = commit.prepare(str(img), plan("gpt", P(1, 2048, 22527), P(2, 20000, 30000)), HOST)
    assert any("overlap" in r for r in bad.refusals)
    odd_type = commit.prepare(str(img), plan("msdos", P(1, 2048, 22527, "0x0b")), HOST)  # no GPT patch for MBR ids
    assert any("cannot give partition 1" in r for r in odd_type.refusals)
    assert commit.execute(odd_type, "yes", HOST).verdict is Verdict.REFUSED


def test_read_only_loop_is_refused(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    before = file_sha(img)
    dev = loop_device(img, read_only=True)
    p = commit.prepare(dev, GPT_PLAN, HOST)
    assert any("read-only" in r for r in p.refusals), p.refusals
    o = commit.execute(p, p.confirm_word, HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert o.verdict is Verdict.REFUSED and "read-only" in o.message
    assert file_sha(img) == before


def test_mounted_partition_is_refused_by_name(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    dev = loop_device(img)
    partx_update(dev)
    with mounted(f"{dev}p1", tmp_path / "mnt"):
        before = file_sha(img)
        for target in (dev, str(img)):  # the loop device, and the image file behind it
            p = commit.prepare(target, GPT_PLAN, HOST)
            assert any(f"{dev}p1 is mounted on {tmp_path / 'mnt'}" in r for r in p.refusals), p.refusals
            assert commit.execute(p, p.confirm_word, HOST).verdict is Verdict.REFUSED
        assert any(f"({dev} reads this image)" in r for r in p.refusals)
        assert not any("busy" in r for r in p.refusals)  # the mount is the culprit, not its disk as well
        assert file_sha(img) == before


def test_swap_partition_is_refused_by_name(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    dev = loop_device(img)
    partx_update(dev)
    with swapping(f"{dev}p2"):
        p = commit.prepare(dev, GPT_PLAN, HOST)
        assert any(f"{dev}p2 is in use as swap" in r for r in p.refusals), p.refusals


def test_deleted_image_is_a_clear_refusal(sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    p = commit.prepare(str(img), GPT_PLAN, HOST)
    img.unlink()
    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert o.verdict is Verdict.REFUSED and "is gone" in o.message
    assert not img.exists() and not (tmp_path / "b.dpbackup").exists()
    with pytest.raises(write.CommitError, match="no such file"):
        commit.prepare(str(img), GPT_PLAN, HOST)


def test_loop_detached_mid_way_goes_only_once_the_write_is_verified(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """The write lock keeps the loop device open: `losetup --detach` during the write only marks it to
    go when the last opener closes it, so the write finishes, is verified, and then the device goes."""
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    dev = loop_device(img)
    p = commit.prepare(dev, GPT_PLAN, HOST)

    def detach(stage: str) -> None:
        if stage == "backup":
            subprocess.run(["losetup", "--detach", dev], check=True)

    o = commit.execute(p, p.confirm_word, HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=detach)
    assert o.verdict is Verdict.WRITTEN, o.message
    assert parted_parts(img) == sorted((q.number, q.start, q.end) for q in p.result.live)
    assert not os.path.exists(f"/sys/block/{os.path.basename(dev)}/loop/backing_file")


def test_truncated_image_mid_way_is_a_clear_failure(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    p = commit.prepare(str(img), GPT_PLAN, HOST)

    def truncate(stage: str) -> None:
        if stage == "backup":
            os.truncate(img, 32 * MiB)

    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=truncate)
    assert o.verdict is Verdict.FAILED and "vanished or" in o.message, o.message
    assert o.state is DiskState.UNKNOWN  # the backup's tail sectors no longer exist


@pytest.mark.parametrize(("before", "desired"), [(GPT_BEFORE, GPT_PLAN), (DOS_BEFORE, DOS_PLAN)], ids=["gpt", "msdos"])
def test_fault_after_a_partial_write_then_restore_gives_the_old_bytes(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path, before: str, desired: Table
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, before)
    fill(img, 2048, 10240, 512)
    old = file_sha(img)
    p = commit.prepare(str(img), desired, HOST)
    sectors = p.sectors

    def torn(stage: str) -> None:
        if stage == "write":  # in the child, right after libparted's commit: the tail half-written, then a crash
            fd = os.open(img, os.O_WRONLY)
            os.pwrite(fd, b"\xa5" * 512 * 8, (sectors - 8) * 512)
            os.close(fd)
            raise RuntimeError("power cut")

    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=torn)
    assert o.verdict is Verdict.FAILED and "power cut" in o.message
    assert o.state is DiskState.CHANGED and "partly written" in o.details[0]
    assert o.restore_command == f"diskplan restore {o.backup_path} {img} --yes"
    assert file_sha(img) != old
    r = restore.prepare_restore(o.backup_path, str(img), HOST)
    assert r.changed and r.refusals == ()
    done = restore.execute_restore(r, "yes", HOST)
    assert done.verdict is Verdict.WRITTEN and done.state is DiskState.RESTORED
    assert file_sha(img) == old  # every byte of the image, not only the table


def test_fault_before_the_write_leaves_the_disk_unchanged(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    old = file_sha(img)
    p = commit.prepare(str(img), GPT_PLAN, HOST)

    def crash(stage: str) -> None:
        if stage == "backup":
            raise OSError(5, "Input/output error")

    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=crash)
    assert o.verdict is Verdict.FAILED and o.state is DiskState.UNCHANGED
    assert o.restore_command == "" and "unchanged" in o.details[0]
    assert file_sha(img) == old


def test_verification_catches_a_table_that_differs(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    old = file_sha(img)
    p = commit.prepare(str(img), GPT_PLAN, HOST)

    def meddle(stage: str) -> None:
        if stage == "verify":  # someone else changes the table between our write and our check
            run(need_tool("sfdisk"), "-q", "--no-reread", "--delete", str(img), "6")

    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"), fault=meddle)
    assert o.verdict is Verdict.FAILED and o.state is DiskState.DIFFERENT
    assert "partition 6 (90112..100351) is missing" in o.details
    r = restore.prepare_restore(o.backup_path, str(img), HOST)
    assert restore.execute_restore(r, "yes", HOST).verdict is Verdict.WRITTEN
    assert file_sha(img) == old


def test_progress_is_reported(sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    seen: list[tuple[int, int, str]] = []
    apply(str(img), GPT_PLAN, tmp_path, progress=lambda *a: seen.append(a))
    assert [s[0] for s in seen] == [1, 2, 3, 4, 5] and all(s[1] == 5 for s in seen)
    assert any("backup" in s[2] for s in seen)


def test_new_label_replaces_another(sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, DOS_BEFORE)
    desired = plan("gpt", P(1, 2048, 43007, LINUX, "one"))
    p = commit.prepare(str(img), desired, HOST)
    assert str(p.operations[0]) == "new gpt label (every old partition is removed)"
    assert sum(op.kind == "delete" for op in p.operations) == 5
    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "b.dpbackup"))
    assert o.verdict is Verdict.WRITTEN
    _referees(str(img), desired)


def test_a_kernel_that_could_not_be_told_is_said_clearly(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """Someone opens partition 2 between the write and the kernel update: the kernel cannot drop it."""
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    dev = loop_device(img)
    partx_update(dev)
    held: list[int] = []

    def hold(stage: str) -> None:
        if stage == "write":  # in the child, which lives on through the kernel update
            held.append(os.open(f"{dev}p2", os.O_RDONLY))

    o = apply(dev, GPT_PLAN, tmp_path, fault=hold)
    assert o.verdict is Verdict.WRITTEN and o.state is DiskState.PLANNED  # the table itself is right...
    assert o.exit_code == 3  # ...but what runs next would use the old partitions: a failure
    assert "the kernel could not be told" in o.kernel and f"partx -u {dev}" in o.kernel
    assert "partition 2 is in use, the kernel cannot remove it" in o.kernel  # the ioctl's answer...
    assert "partition 2 at 22528+20480, not 51200+10240" in o.kernel  # ...and what sysfs still says
    _referees(dev, GPT_PLAN)


TYPES_GPT = [t for t in ptypes.TYPES if t.gpt and (t.fs or t.flag)]
TYPES_DOS = [t for t in ptypes.TYPES if t.mbr is not None and (t.fs or t.flag)]


@pytest.mark.parametrize("label", ["gpt", "msdos"])
def test_every_type_diskplan_offers_is_written_as_itself(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path, label: str
) -> None:
    """libparted 3.5 sets types only through flags and filesystem types (model.ptypes says which): the
    GUID or MBR id sfdisk reads back must be the one planned, for every type on both labels."""
    img = sparse_image(64 * MiB)
    if label == "gpt":
        codes = [t.gpt or "" for t in TYPES_GPT]
        parts = [P(i + 1, 2048 * (i + 1), 2048 * (i + 2) - 1, code) for i, code in enumerate(codes)]
    else:
        codes = [f"0x{t.mbr:02x}" for t in TYPES_DOS]
        parts = [P(n, 2048 * n, 2048 * (n + 1) - 1, codes[n - 1]) for n in (1, 2, 3)]
        parts.append(P(4, 2048 * 4, 2048 * 20 - 1, role=Role.EXTENDED))
        parts += [P(5 + i, 2048 * (5 + i), 2048 * (5 + i) + 1023, c, role=Role.LOGICAL)
                  for i, c in enumerate(codes[3:])]
    assert apply(str(img), plan(label, *parts), tmp_path).verdict is Verdict.WRITTEN
    got = {n: t for n, _, _, t, _ in sfdisk_parts(img)}
    want = [c.lower() if label == "gpt" else f"{int(c, 16):x}" for c in codes]
    assert [got[p.number] for p in parts if p.role is not Role.EXTENDED] == want


def test_gpt_attribute_flags_are_set_and_cleared(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    on = plan("gpt", P(1, 2048, 4095, LINUX, "a", flags=("legacy_boot",)), P(2, 4096, 8191, LINUX, "b"))
    assert apply(str(img), on, tmp_path).verdict is Verdict.WRITTEN
    dump = run(need_tool("sfdisk"), "--dump", str(img))
    assert 'name="a", attrs="LegacyBIOSBootable"' in dump and 'name="b"\n' in dump
    off = plan("gpt", P(1, 2048, 4095, LINUX, "a"), P(2, 4096, 8191, LINUX, "b", flags=("legacy_boot",)))
    p = commit.prepare(str(img), off, HOST)
    assert [str(op) for op in p.operations if op.kind == "change"] == [
        "change 1 (2048..4095): legacy_boot flag off", "change 2 (4096..8191): legacy_boot flag on"]
    o = commit.execute(p, "yes", HOST, backup_path=str(tmp_path / "second.dpbackup"))
    assert o.verdict is Verdict.WRITTEN, o.details
    dump = run(need_tool("sfdisk"), "--dump", str(img))
    assert 'name="a"\n' in dump and 'name="b", attrs="LegacyBIOSBootable"' in dump
    more = commit.prepare(str(img), plan("gpt", P(1, 2048, 4095, LINUX, "a"), P(3, 9000, 9999, flags=("guid:60",))),
                          HOST)
    assert not more.refusals  # a bit libparted cannot set is written into the raw entry after its commit
    o = commit.execute(more, "yes", HOST, backup_path=str(tmp_path / "third.dpbackup"))
    assert o.verdict is Verdict.WRITTEN, o.details
    assert 'attrs="GUID:60"' in run("sfdisk", "--dump", str(img))


def test_restoring_a_disk_that_had_no_table_empties_it_for_the_kernel_too(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    fill(img, 0, 4096, 512)  # whatever was there (no table), to come back byte for byte
    old = file_sha(img)
    dev = loop_device(img)
    o = apply(dev, plan("gpt", P(1, 2048, 4095, LINUX, "x"), P(2, 4096, 8191, SWAP, "y")), tmp_path)
    assert o.verdict is Verdict.WRITTEN and str(o.operations[0]) == "new gpt label (every old partition is removed)"
    assert set(HOST.kernel_partitions(dev) or {}) == {1, 2}
    r = restore.prepare_restore(o.backup_path, dev, HOST)
    assert r.backup.label == "none" and r.backup.dump == ""
    done = restore.execute_restore(r, r.confirm_word, HOST)
    assert done.verdict is Verdict.WRITTEN and done.kernel == "", done.kernel
    assert HOST.kernel_partitions(dev) == {}  # libparted removed them (BLKPG) as the table went away
    assert file_sha(img) == old


def test_ctrl_c_while_writing_does_not_tear_the_table(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT_BEFORE)
    before = signal.getsignal(signal.SIGINT)

    def ctrl_c(stage: str) -> None:
        if stage == "write":  # in the child: interrupt the parent, which is waiting for it
            os.kill(os.getppid(), signal.SIGINT)

    o = apply(str(img), GPT_PLAN, tmp_path, fault=ctrl_c)
    assert o.verdict is Verdict.WRITTEN, (o.message, o.details)
    _referees(str(img), GPT_PLAN)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_plan_made_on_a_blank_disk_is_written(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    """A disk with no label reads as label None: the planner's reviewed list (a new gpt, one partition) was
    refused as "no longer holds the table the plan was made on (the disk holds a no label, not )"."""
    from diskplan.backend.read.reader import read
    from diskplan.model.plan.plan import Plan

    img = str(sparse_image(64 * MiB))
    disk = read(img)
    assert disk.table.label is None
    made = Plan.open(disk.geometry, disk.table).new_label("gpt").plan.propose(2048, 20480, ptype=LINUX)
    assert made.ok, made.message
    proposal = commit.prepare(img, made.plan.writes(), HOST, current=disk)
    assert proposal.refusals == (), proposal.refusals
    done = commit.execute(proposal, proposal.confirm_word, HOST, backup_path=str(tmp_path / "old.dpbackup"))
    assert done.verdict is Verdict.WRITTEN, done
    assert [(n, s, z) for n, s, z, _, _ in sfdisk_parts(img)] == [(1, 2048, 20480)]
