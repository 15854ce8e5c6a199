"""The one sequence every write follows (backend.write.steps.Write.run), seen through a kind of write that only
records what it is asked to do: a stop before writing takes no lock, the checks again run under the lock,
nothing is written without a backup, the write runs with Ctrl-C ignored, and the backup is sealed after
it. The real kinds (table commit, GPT repair, restore) are tested on real disks in test_commit.py,
test_repair.py and test_restore_trust.py."""

from __future__ import annotations

import pathlib
import signal
import subprocess
from dataclasses import dataclass

from conftest import need_tool
from diskplan.backend.write import backup as bk
from diskplan.backend.write.steps import ConfirmedByName, DiskState, Host, Verdict, Write, WriteOutcome
from diskplan.model.extent import Extent
from diskplan.model.value import replace

HOST = Host(users=lambda path: [])


@dataclass(frozen=True)
class Asking(ConfirmedByName):
    target: str
    kind: str = "file"
    refusals: tuple[str, ...] = ()
    prompt: str = "Type yes to record"


class Recording(Write[Asking]):
    """A write that records each step, whether the disk is locked then, and Ctrl-C's handling."""

    def __init__(self, p: Asking, *, refuse_again: bool = False, no_backup: bool = False) -> None:
        super().__init__(p, HOST, progress=lambda step, steps, what: self.seen.append(f"step {step}/{steps}"))
        self.seen: list[str] = []
        self.refuse_again = refuse_again
        self.no_backup = no_backup

    def locked(self) -> bool:
        flock = need_tool("flock")
        return subprocess.run([flock, "-n", self.p.target, "true"], capture_output=True).returncode != 0

    def nothing(self) -> str:
        return ""

    def recheck(self, base: WriteOutcome) -> WriteOutcome | None:
        self.seen.append(f"recheck locked={self.locked()}")
        return replace(base, message="refused: changed meanwhile") if self.refuse_again else None

    def back_up(self, base: WriteOutcome) -> tuple[bk.TableBackup, WriteOutcome] | WriteOutcome:
        self.seen.append("back up")
        if self.no_backup:
            return replace(base, verdict=Verdict.FAILED, message="no backup, so nothing was written")
        saved = bk.capture(self.p.target, 512, 8, [Extent(0, 0)])
        return saved, replace(base, backup_path=bk.save(saved, self.p.target + ".dpbackup"))

    def write_and_verify(self, saved: bk.TableBackup, base: WriteOutcome) -> WriteOutcome:
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        self.seen.append(f"write locked={self.locked()} ctrl-c ignored={ignored}")
        return replace(base, verdict=Verdict.WRITTEN, state=DiskState.PLANNED, message="written")

    def seal(self, saved: bk.TableBackup, base: WriteOutcome) -> None:
        self.seen.append(f"seal {pathlib.Path(base.backup_path).name}")


def disk(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "disk.img"
    path.write_bytes(bytes(8 * 512))
    return str(path)


def test_the_steps_run_in_order_under_the_lock(tmp_path: pathlib.Path) -> None:
    w = Recording(Asking(disk(tmp_path)))
    o = w.run("yes")
    assert o.verdict is Verdict.WRITTEN and o.backup_path.endswith("disk.img.dpbackup")
    assert w.seen == ["step 1/5", "recheck locked=True", "back up", "write locked=True ctrl-c ignored=True",
                      "seal disk.img.dpbackup"]
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN  # Ctrl-C works again afterwards
    assert not w.locked()  # and the lock is let go


def test_a_stop_before_writing_takes_no_lock(tmp_path: pathlib.Path) -> None:
    path = disk(tmp_path)
    refused = Recording(Asking(path, refusals=("in use",)))
    assert refused.run("yes").message == "refused: in use" and refused.seen == []
    unconfirmed = Recording(Asking(path))
    o = unconfirmed.run("no")
    assert o.verdict is Verdict.REFUSED and o.message.startswith("not confirmed") and unconfirmed.seen == []


def test_a_refusal_under_the_lock_or_no_backup_writes_nothing(tmp_path: pathlib.Path) -> None:
    path = disk(tmp_path)
    again = Recording(Asking(path), refuse_again=True)
    assert again.run("yes").message == "refused: changed meanwhile"
    assert again.seen == ["step 1/5", "recheck locked=True"]
    unsaved = Recording(Asking(path), no_backup=True)
    assert unsaved.run("yes").verdict is Verdict.FAILED
    assert unsaved.seen == ["step 1/5", "recheck locked=True", "back up"]
