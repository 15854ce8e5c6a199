"""`diskplan` as a user runs it (a subprocess, never a traceback), and the plan files the commands read."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"


def diskplan(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def plan_file(tmp_path: pathlib.Path, partitions: list[dict[str, object]], sector_size: int = 512) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"label": "gpt", "sector_size": sector_size, "partitions": partitions}))
    return str(path)


KEEP_1_SWAP_3 = [
    {"number": 1, "start": 2048, "end": 22527, "type": LINUX},
    {"number": 3, "start": 43008, "end": 63487, "type": "swap", "name": "swap"},
]
