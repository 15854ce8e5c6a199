"""Disks for the data-move and resize tests: a loop device holding one real filesystem with files of known
SHA-256, a read-only view of a partition's byte range, the CLI run with its own state directory, and the
referees (sfdisk for the entry, each filesystem's checker, blkid, the files' checksums)."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from helpers.tools import REPO, need_tool, run
from helpers.units import MiB

PY = sys.executable
# Where a move can be killed (DISKPLAN_KILL_AT), in the order a chunk passes them.
POINTS = ("record", "hidden", "read", "torn", "write", "synced", "verified", "table")


@dataclass
class Disk:
    dev: str
    label: str
    number: int
    start: int
    size: int
    fs: str
    sums: dict[str, str]
    state: pathlib.Path


def state_env(state: pathlib.Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state), "DISKPLAN_MOVES_DIR": str(state / "moves"),
           "PYTHONPATH": str(REPO / "src")}
    env.pop("DISKPLAN_MOVE_KILL", None)
    return {**env, **extra}


def diskplan(d: Disk, *args: str, kill: str = "") -> subprocess.CompletedProcess[str]:
    env = state_env(d.state, **({"DISKPLAN_MOVE_KILL": kill} if kill else {}))
    return subprocess.run([PY, "-m", "diskplan", *args], capture_output=True, text=True, env=env, timeout=300,
                          stdin=subprocess.DEVNULL)


def unfinished_journal(target: str, size: int, name: str = "disk-20260101T000000Z") -> str:
    """An unfinished move's journal for ``target`` (``size`` bytes) as a move writes it, its disk's mark in the
    header (partition 1 of a GPT at LBA 2048 on its way to 40960): what a move killed before it finished leaves."""
    from diskplan.backend.move import movejournal as mj
    from diskplan.backend.move.diskmark import disk_mark

    mark = disk_mark(target, size)
    h = mj.Header(target, size, 512, "gpt", 1, "", 2048, 40960, 20480, 16384, f"/x/{name}.dpbackup",
                  created="2026-01-01T00:00:00Z", table_id=mark.table_id, serial=mark.serial)
    j = mj.Journal.create(mj.journal_path(f"/x/{name}.dpbackup"), h)
    j.close()
    return j.path


class View:
    """A loop device over a byte range of the disk (what the tests mount and check)."""

    def __init__(self, dev: str, start: int, size: int, read_only: bool = True) -> None:
        cmd = ["losetup", "--find", "--show", "--offset", str(start * 512), "--sizelimit", str(size * 512)]
        self.loop = run(*cmd, *(["--read-only"] if read_only else []), dev).strip()

    def __enter__(self) -> str:
        return self.loop

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["losetup", "--detach", self.loop], capture_output=True)


MKFS = {
    "ext4": ("mkfs.ext4", "-q", "-L", "moved", "-U", "2b5a0b6e-2f3c-4f55-9a40-0c7f0d5f7a11"),
    "xfs": ("mkfs.xfs", "-q", "-f", "-L", "moved"),
    "btrfs": ("mkfs.btrfs", "-q", "-f", "-L", "moved"),
    "vfat": ("mkfs.vfat", "-I", "-n", "MOVED"),  # -I: a free loop device may still list a former user's partitions
}
CHECK = {"ext4": ("e2fsck", "-fn"), "xfs": ("xfs_repair", "-n"), "btrfs": ("btrfs", "check", "--readonly"),
         "vfat": ("fsck.vfat", "-n")}


def fill(mnt: str, rng: random.Random) -> dict[str, str]:
    sums = {}
    for i, size in enumerate((1, 4095, 70_000, 3 * MiB + 17)):
        data = rng.randbytes(size)
        with open(os.path.join(mnt, f"f{i}"), "wb") as f:
            f.write(data)
        sums[f"f{i}"] = hashlib.sha256(data).hexdigest()
    return sums


def populate(loop: str, fs: str, tmp: pathlib.Path, seed: int) -> dict[str, str]:
    """Files of known checksums; FAT through mtools (this kernel may have no vfat driver)."""
    src = tempfile.mkdtemp(dir=tmp)
    if fs == "vfat":
        need_tool("mcopy")
        sums = fill(src, random.Random(seed))
        run("mcopy", "-i", loop, *(os.path.join(src, n) for n in sums), "::/")
        return sums
    run("mount", loop, src)
    try:
        return fill(src, random.Random(seed))
    finally:
        run("umount", src)


def file_sums(loop: str, fs: str, names: list[str]) -> dict[str, str]:
    if fs == "vfat":
        return {n: hashlib.sha256(subprocess.run(["mtype", "-i", loop, f"::/{n}"], capture_output=True,
                                                 check=True).stdout).hexdigest() for n in names}
    mnt = tempfile.mkdtemp()
    run("mount", "-o", "ro", loop, mnt)
    try:
        out = {}
        for n in names:
            with open(os.path.join(mnt, n), "rb") as f:
                out[n] = hashlib.sha256(f.read()).hexdigest()
        return out
    finally:
        run("umount", mnt)
        os.rmdir(mnt)


def make_image(tmp: pathlib.Path, *, label: str = "gpt", start: int, size: int, fs: str = "ext4", disk_mib: int = 96,
               seed: int = 0, name: str = "disk.img", head: str = "") -> tuple[str, dict[str, str]]:
    """An image file holding partition 1 with a filesystem and files of known checksums (``head``: more
    sfdisk header lines, e.g. a label-id); the image's path and the files' SHA-256."""
    need_tool(MKFS[fs][0])
    img = tmp / name
    with open(img, "wb") as f:
        f.truncate(disk_mib * MiB)
    head = ("label: gpt\nfirst-lba: 34\n" if label == "gpt" else "label: dos\n") + head
    run("sfdisk", "-q", str(img), input=f"{head}start={start}, size={size}, type=L\n")
    with View(str(img), start, size, read_only=False) as v:
        run(*MKFS[fs], v)
        sums = populate(v, fs, tmp, seed)
    return str(img), sums


def make_disk(loop_device: Callable[..., str], tmp: pathlib.Path, *, label: str = "gpt", start: int, size: int,
              fs: str = "ext4", disk_mib: int = 96, seed: int = 0) -> Disk:
    img, sums = make_image(tmp, label=label, start=start, size=size, fs=fs, disk_mib=disk_mib, seed=seed)
    return Disk(loop_device(img), label, 1, start, size, fs, sums, tmp / "state")


def entry(d: Disk) -> tuple[int, int, str]:
    """(start, size, PARTUUID or '') of partition 1 as sfdisk reads it."""
    p = json.loads(run("sfdisk", "--json", d.dev))["partitiontable"]["partitions"][0]
    return p["start"], p["size"], p.get("uuid", "")


def assert_intact(d: Disk, start: int, partuuid: str = "") -> None:
    got_start, got_size, uuid = entry(d)
    assert (got_start, got_size) == (start, d.size)
    assert uuid == partuuid
    with View(d.dev, start, d.size) as v:
        check = subprocess.run([*CHECK[d.fs], v], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        ids = run("blkid", "-p", "-o", "export", v)
        assert f"TYPE={d.fs}" in ids and ("LABEL=moved" in ids or "LABEL=MOVED" in ids)
        assert file_sums(v, d.fs, list(d.sums)) == d.sums


def move(d: Disk, to: int) -> None:
    before = entry(d)[2]
    dry = diskplan(d, "move", d.dev, "--partition", "1", "--to", str(to))
    assert dry.returncode == 0 and "moves" in dry.stdout and "Nothing written" in dry.stdout, dry.stderr
    assert entry(d)[0] == d.start  # the dry run wrote nothing
    done = diskplan(d, "move", d.dev, "--partition", "1", "--to", f"{to}s", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "moved and verified" in done.stdout
    assert_intact(d, to, before)
