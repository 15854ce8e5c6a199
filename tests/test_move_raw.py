"""Content diskplan has no checker for is moved as raw bytes, size unchanged (issue 14): a LUKS2 header
(cryptsetup's own, its referee `cryptsetup luksDump`: same UUID after the move) and bytes no tool knows.
The checksum of every byte of the partition, taken before, is found at the new place; the PARTUUID stays."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

from helpers.movedisk import View, state_env
from helpers.tools import need_tool, run
from helpers.units import MiB

START, SIZE, TO = 34, 40960, 2048


def _disk(loop_device, tmp_path: pathlib.Path) -> str:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    run("sfdisk", "-q", str(img), input=f"label: gpt\nfirst-lba: 34\nstart={START}, size={SIZE}, type=L\n")
    return str(loop_device(img))


def _digest(dev: str, start: int) -> str:
    with View(dev, start, SIZE) as v, open(v, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _move(dev: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diskplan", "move", dev, "--partition", "1", "--to", f"{TO}s",
                           "--yes"], capture_output=True, text=True, env=state_env(tmp_path / "state"), timeout=300,
                          stdin=subprocess.DEVNULL)


def _partuuid(dev: str) -> str:
    return str(json.loads(run("sfdisk", "--json", dev))["partitiontable"]["partitions"][0]["uuid"])


def test_a_luks_partition_moves_as_raw_bytes(loop_device, tmp_path) -> None:
    need_tool("cryptsetup")
    dev = _disk(loop_device, tmp_path)
    key = tmp_path / "key"
    key.write_bytes(b"correct horse battery staple")
    with View(dev, START, SIZE, read_only=False) as v:
        run("cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations",
            "1000", "--key-file", str(key), v)
        uuid = run("cryptsetup", "luksUUID", v).strip()
    before, partuuid = _digest(dev, START), _partuuid(dev)
    proc = _move(dev, tmp_path)
    assert proc.returncode == 0 and "moved and verified" in proc.stdout, proc.stdout + proc.stderr
    assert _digest(dev, TO) == before and _partuuid(dev) == partuuid
    with View(dev, TO, SIZE) as v:
        assert run("cryptsetup", "luksUUID", v).strip() == uuid
        assert "Keyslots:" in run("cryptsetup", "luksDump", v)


def test_bytes_no_tool_knows_move_unchanged(loop_device, tmp_path) -> None:
    dev = _disk(loop_device, tmp_path)
    with View(dev, START, SIZE, read_only=False) as v, open(v, "r+b") as f:
        f.write(os.urandom(SIZE * 512))
    before, partuuid = _digest(dev, START), _partuuid(dev)
    proc = _move(dev, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _digest(dev, TO) == before and _partuuid(dev) == partuuid
