"""Put a table backup (backend.write.backup) back on a disk, byte for byte, then tell the kernel — the shared
steps of backend.write.steps (``RestoreWrite`` is one kind of ``Write``; its backup is the one it puts back, so
it saves and seals none): ``prepare_restore`` checks and says what would change, ``execute_restore``
writes after the user's answer. A disk of another size or sector size, or one in use, is refused; so is a disk the
backup was not taken from (``backup.foreign``), unless ``force_foreign``. Saved sectors inside a partition
of the table now on the disk are never written (``backup.plan_put_back``)."""

from __future__ import annotations

import contextlib
import os

from diskplan.backend.parted.isolate import IsolatedFailure, run_isolated
from diskplan.backend.read.reader import ReadError, read
from diskplan.backend.write import backup as bk
from diskplan.backend.write.steps import (
    CommitError,
    ConfirmedByName,
    DiskState,
    Host,
    Identity,
    Progress,
    Verdict,
    Write,
    WriteOutcome,
    half_moved,
    identity,
    inform_kernel_child,
    kernel_differences,
    recheck,
    refused,
    state_after_failure,
    unsafe,
)
from diskplan.model.extent import Extent
from diskplan.model.value import replace, value


@value
class RestoreProposal(ConfirmedByName):
    backup: bk.TableBackup
    backup_path: str
    target: str
    kind: str
    refusals: tuple[str, ...]
    notes: tuple[str, ...]
    changed: tuple[Extent, ...]  # saved sectors that now differ on the disk (empty: nothing to do)
    identity: Identity | None = None
    kept: tuple[Extent, ...] = ()  # saved sectors inside a partition now on the disk: left alone

    @property
    def prompt(self) -> str:
        return f"Type {self.confirm_word} to put the old table back on {self.target}"


def prepare_restore(backup_path: str, target: str, host: Host, *, force_foreign: bool = False) -> RestoreProposal:
    """Load the backup (every byte checked) and check the target. Raises CommitError when either cannot
    be read. ``force_foreign``: a disk the backup does not recognise is a note, not a refusal."""
    try:
        b = bk.load(backup_path)
    except bk.BackupError as exc:
        raise CommitError(str(exc)) from exc
    if not os.path.exists(target):
        raise CommitError(f"{target}: no such file or device")
    try:
        bk.disk_kind(target)
        ident = identity(target)
    except bk.BackupError as exc:
        raise CommitError(str(exc)) from exc
    except OSError as exc:
        raise CommitError(f"{target}: {exc.strerror}") from exc
    refusals: list[str] = half_moved(target, ident.size)
    notes: list[str] = []
    changed: list[Extent] = []
    kept: tuple[Extent, ...] = ()
    if ident.size != b.sectors * b.sector_size:
        refusals.append(
            f"{target} has {ident.size} bytes; the backup is of a disk of {b.sectors} × {b.sector_size} B: "
            "its sectors would land in the wrong places"
        )
    else:
        try:
            facts_ss = _sector_size(target)
            if facts_ss != b.sector_size:
                refusals.append(f"{target} has {facts_ss} B sectors; the backup was taken with {b.sector_size} B")
            plan = bk.plan_put_back(b, target)
            changed = bk.differing(plan.writes, target, b.sector_size)
            kept = plan.kept
            other = bk.foreign(b, target) if changed and not refusals else []
        except (OSError, bk.BackupError) as exc:
            raise CommitError(f"{target}: {getattr(exc, 'strerror', None) or exc}") from exc
        if other and force_foreign:
            notes += [f"--force-foreign: {why}" for why in other]
        elif other:
            refusals += [f"{why} (if it is the right disk after all, run restore again with --force-foreign)"
                         for why in other]
    if os.path.realpath(b.target) != os.path.realpath(target):
        notes.append(f"the backup was taken from {b.target}")
    if kept:
        runs = ", ".join(f"{e.start}..{e.end}" for e in kept[:6]) + (" …" if len(kept) > 6 else "")
        notes.append(f"saved sectors {runs} lie inside a partition now on {target} and are left alone")
    blocking, idle = unsafe(target, host)
    refusals += blocking
    notes += idle
    kind = "block" if ident.kind == "block" else "file"
    return RestoreProposal(b, os.path.abspath(backup_path), target, kind, tuple(refusals), tuple(notes),
                           tuple(changed), ident, kept)


def _sector_size(path: str) -> int:
    from diskplan.backend.read.probe import device_facts

    return device_facts(path).logical


class RestoreWrite(Write[RestoreProposal]):
    """The saved sectors written back (``backup.put_back``), then the kernel told. The refusals and the
    answer are looked at once the lock is held, from its checks to the kernel's news."""

    done = DiskState.RESTORED
    asks_under_lock = True

    def __init__(self, p: RestoreProposal, host: Host, *, progress: Progress | None = None) -> None:
        self.steps = 3 if p.kind == "block" else 2  # an image file has no kernel to tell
        super().__init__(p, host, progress=progress)

    def nothing(self) -> str:
        return "" if self.p.changed else f"nothing to do: {self.p.target} already holds the backup"

    def recheck(self, base: WriteOutcome) -> WriteOutcome | None:
        now = recheck(self.p, self.host)
        return refused(base, now) if now else None

    def back_up(self, base: WriteOutcome) -> tuple[bk.TableBackup, WriteOutcome]:
        return self.p.backup, base  # the backup is what is written: no other is saved

    def seal(self, saved: bk.TableBackup, base: WriteOutcome) -> None:
        pass  # the backup put back is sealed already

    def write_and_verify(self, saved: bk.TableBackup, base: WriteOutcome) -> WriteOutcome:
        r, host = self.p, self.host

        def each(done: int, total: int) -> None:  # runs written: the step is said once, with their count
            if done == 1:
                runs = f"{total} runs" if total != 1 else "1 run"
                self.step(2, f"writing the saved sectors back ({runs}) and reading them back")

        try:
            done = bk.put_back(r.backup, r.target, each)
        except (OSError, bk.BackupError) as exc:
            state, how = state_after_failure(r.backup, r.target)
            state = DiskState.CHANGED if state is DiskState.UNCHANGED else state
            why = getattr(exc, "strerror", None) or str(exc)
            again = f"the backup is untouched: {r.backup_path}; try again once the disk is writable"
            return replace(base, verdict=Verdict.FAILED, state=state, message=f"the restore failed: {why}",
                           details=(how, again))
        kernel = ""
        if r.kind == "block":
            self.step(3, "telling the kernel and checking its partition list")
            try:
                told, why_not = run_isolated(inform_kernel_child, r.target, timeout=60.0)
            except IsolatedFailure as exc:
                told, why_not = False, exc.reason
            stale: list[str] = []
            with contextlib.suppress(ReadError):  # unreadable: libparted's answer is all there is
                stale = kernel_differences(r.target, read(r.target).table, r.backup.sector_size, host)
            if not told or stale:
                what = "; ".join([*([why_not] if why_not else []), *stale])
                kernel = (
                    f"the old table is back on the disk, but the kernel could not be told ({what}); run "
                    f"`partx -u {r.target}` or reboot before using its partitions"
                )
        spared = sum(e.size for e in done.kept)
        but = f", except {spared} sectors inside its partitions, left alone" if spared else ""
        return replace(base, verdict=Verdict.WRITTEN, state=DiskState.RESTORED, kernel=kernel,
                       message=f"restored: {r.target} holds the backed-up sectors byte for byte{but}")


def execute_restore(
    r: RestoreProposal, answer: str, host: Host, *, progress: Progress | None = None
) -> WriteOutcome:
    """The restore, under the write lock (backend.write.lock) from its checks to the kernel's news."""
    return RestoreWrite(r, host, progress=progress).run(answer)
