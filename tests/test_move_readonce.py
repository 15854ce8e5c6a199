"""A command reads its disk once (issue 28 item 2, backend.raw.look): one real `diskplan move` opens its image a
few times, not the ~93 of before (a dozen judgements of both GPT copies, four opens each; the backup three
times; each probe its own), and libparted is not left to spawn `sh -c dmidecode` where the answer is known.
And the safety side of it: inside a look, a write is seen by the next check, and a fresh look forgets."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from diskplan.backend.raw import gptcheck, look, sectorio
from helpers.movedisk import state_env
from helpers.tools import need_tool, run
from helpers.units import MiB

START, SIZE, TO = 2048, 16384, 40960
MOST_OPENS = 40  # 27 when this was written (93 before the look): room for a check or two, not for a dozen


def _image(tmp_path: pathlib.Path) -> pathlib.Path:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    run("sfdisk", "-q", str(img), input=f"label: gpt\nstart={START}, size={SIZE}, type=L\n")
    return img


def _dmidecode_can_be_skipped() -> bool:
    """backend.parted's rule: the answer is known from sysfs, or no SMBIOS table can be found at all."""
    return os.path.exists("/sys/class/dmi/id/sys_vendor") or not (
        os.path.exists("/sys/firmware/dmi/tables/smbios_entry_point") or os.path.exists("/dev/mem"))


def test_one_move_opens_its_disk_a_few_times(tmp_path) -> None:
    strace = need_tool("strace")
    if os.geteuid() != 0:
        pytest.skip("needs root: the move checks the filesystem through a loop device")
    img = _image(tmp_path)
    with open(img, "r+b") as f:  # bytes no tool knows: moved raw, so the count is the table's and the move's own
        f.seek(START * 512)
        f.write(os.urandom(SIZE * 512))
    trace = tmp_path / "trace"
    env = state_env(tmp_path / "state")
    env.pop("PARTED_GPT_APPLE", None)  # this process set it when it loaded libparted: the child must decide
    proc = subprocess.run([strace, "-f", "-qq", "-o", str(trace), "-e", "trace=openat,open,execve", sys.executable,
                           "-m", "diskplan", "move", str(img), "-N", "1", "--to", f"{TO}s", "--yes"],
                          capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and "moved and verified" in proc.stdout, proc.stdout + proc.stderr
    lines = trace.read_text().splitlines()
    opens = [ln for ln in lines if re.search(r"\bopen(at)?\(", ln) and f'"{img}"' in ln]
    assert 3 <= len(opens) <= MOST_OPENS, f"{len(opens)} opens of {img}:\n" + "\n".join(opens)
    if _dmidecode_can_be_skipped() and shutil.which("dmidecode", path="/usr/sbin:/sbin:/usr/bin:/bin"):
        spawned = [ln for ln in lines if "execve(" in ln and "dmidecode" in ln]
        assert not spawned, spawned


def _gpt(img: str) -> gptcheck.GptState:
    state = gptcheck.check_gpt(img, 512, 64 * MiB // 512)
    assert state is not None and state.backup.ok
    return state


def test_a_write_inside_a_look_is_seen_by_the_next_check(tmp_path) -> None:
    img = str(_image(tmp_path))
    with look.one_look():
        before = _gpt(img)
        assert before.primary.ok and _gpt(img) is before  # judged once within the look
        header = bytearray(sectorio.read_sectors(img, 1, 1, 512))
        header[16] ^= 0xFF  # the primary header's CRC no longer matches
        sectorio.write_sectors(img, [(1, bytes(header))], 512)
        assert not _gpt(img).primary.ok


def test_a_fresh_look_sees_a_change_made_behind_diskplan(tmp_path) -> None:
    """Another program writes (no diskplan write to forget by): a fresh look, as under the lock, reads again."""
    img = str(_image(tmp_path))
    with look.one_look():
        first = _gpt(img)
        with open(img, "r+b") as f:
            f.seek(512 + 16)
            f.write(b"\0\0\0\0")
        assert first.primary.ok and _gpt(img) is first  # the look's own view: by design
        with look.fresh_look():
            assert not _gpt(img).primary.ok
