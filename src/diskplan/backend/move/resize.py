"""Grow or shrink a partition that holds data, its start unchanged, its content resized by its own tool.

``prepare_resize(target, number, length, host)`` says what would change, the smallest size a shrink can
reach and what forbids it; nothing is written. ``execute_resize`` then, holding the disk's write lock:

1. checks the filesystem (backend.fs.fscheck) and refuses a dirty one;
2. saves a backup of the table (no partition's data in it);
3. in the safe order (model.plan.fsresize): to shrink, the filesystem first (backend.fs.fsresize, through a
   writable loop device over the partition's old bytes), then the table entry's end; to grow, the entry
   first (backend.move.moveentry: only its end changes, its PARTUUID stays), then the filesystem, over the new
   bytes (an LVM physical volume on a disk: through the kernel's partition node, told its new size first,
   never a loop device LVM would activate its volume group on);
4. tells the kernel and checks the filesystem again: same type, UUID and label, clean.

A crash between the two steps leaves a filesystem smaller than its partition: harmless; the same command
run again finishes either: a shrink as before, a grow by growing the filesystem alone to fill the entry it
already has (a *fill*: ``fills``, the filesystem's size read from its superblock, backend.fs.fssize). A crash
inside the filesystem's tool is that tool's to survive (resize2fs, for one, is not crash-safe: the backup of the
table does not cover it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from diskplan.backend.fs import fscheck, fssize
from diskplan.backend.fs import fsresize as tools
from diskplan.backend.move.datamove import Progress
from diskplan.backend.move.engine import (
    MoveOutcome,
    check_after,
    checked_entry,
    in_use_or_half_moved,
    logical_move,
    movable_label,
    partuuid_kept,
    placement,
)
from diskplan.backend.move.moveentry import EntryError, rewrite_entry
from diskplan.backend.move.proposal import PartitionProposal
from diskplan.backend.raw import kernelparts, look
from diskplan.backend.raw.look import fresh_look, in_one_look
from diskplan.backend.write import backup as bk
from diskplan.backend.write.steps import (
    Host,
    Identity,
    Verdict,
    read_target,
    recheck,
    refused,
    save_backup,
    stop_before_writing,
    take_lock,
)
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Role
from diskplan.model.plan.fsresize import Limits, steps
from diskplan.model.plan.fsresize import limits as fs_limits
from diskplan.model.plan.fsresize import refusals as fs_refusals
from diskplan.model.units import human_bytes
from diskplan.model.value import field, replace, value


@value
class ResizeProposal(PartitionProposal):
    """Resizing a partition with its filesystem: what would be done, and what refuses it."""

    old: int  # sectors
    new: int  # sectors
    refusals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    identity: Identity | None = None
    fs: fscheck.Identity = field(default_factory=fscheck.Identity)
    minimum: int | None = None  # bytes: the smallest the filesystem can shrink to (None: unknown or cannot)
    protect: tuple[Extent, ...] = ()
    fills: int = 0  # bytes: a filesystem this small in its unchanged entry is grown to fill it (a grow cut short)

    @property
    def order(self) -> tuple[str, ...]:
        return ("filesystem",) if self.fills else steps(self.old, self.new)

    @property
    def prompt(self) -> str:
        return f"Type {self.confirm_word} to resize partition {self.number} on {self.target}"

    @property
    def nothing(self) -> str:
        """Why there is nothing to resize ("" when there is)."""
        if self.new != self.old or self.fills:
            return ""
        return f"nothing to do: partition {self.number} already has {self.new} sectors"


@in_one_look  # the disk read once for every check (backend.raw.look); nothing is written
def prepare_resize(
    target: str, number: int, length: int, host: Host, *, current: Disk | None = None
) -> ResizeProposal:
    """What resizing partition ``number`` of ``target`` to ``length`` sectors would do. Writes nothing.
    Raises CommitError when the target cannot be read."""
    ident, disk = read_target(target, current)
    ss = disk.geometry.logical
    label = movable_label(disk)
    p = disk.table.by_number(number)
    old = p.size if p is not None else 0
    refusals: list[str] = []
    notes: list[str] = []
    entry = None
    if not label:
        refusals.append(f"diskplan resizes partitions on gpt and msdos tables, not {disk.table.label or 'no table'}")
    elif p is not None:
        refusals += placement(disk, number, p.start, length)
    else:
        refusals.append(f"{target} has no partition {number}")
    if not refusals and p is not None and p.role is Role.LOGICAL:
        lm = logical_move(target, disk, number, p.start, length)  # the next EBR, the extended's growth
        if isinstance(lm, str):
            refusals.append(lm)
    if not refusals:
        entry = checked_entry(target, label, number, ss, disk.geometry.sectors, p, refusals)
    refusals += in_use_or_half_moved(target, host, ident.size, ss, notes)
    fs, least, fills = fscheck.Identity(read=False), None, 0
    if not refusals and p is not None and length == old and fssize.unfilled(target, p.start * ss, old * ss):
        # a grow cut after its entry: its filesystem smaller (its superblock read first, blkid only then: "nothing
        # to do" stays one read; blkid's type must agree)
        found = fscheck.identify_at(target, p.start * ss, old * ss)
        fills = (fssize.unfilled(target, p.start * ss, old * ss, found.fs) or 0) if found.fs else 0
        if fills:
            fs = found
            why = tools.missing(fs.fs) or fscheck.missing_tool(fs.fs)
            refusals += [why] if why else fs_refusals(fs.fs, fills, old * ss, None)
    if not refusals and p is not None and length != old:
        try:
            fs, why, least = _content(target, p.start * ss, old * ss, length < old)
            if why:
                refusals.append(why)
        except (fscheck.CheckError, tools.ResizeError) as exc:
            refusals.append(str(exc))
        refusals += fs_refusals(fs.fs, old * ss, length * ss, least)
    protect = (*(q.extent for q in disk.table.live if q.role is not Role.EXTENDED),)
    return ResizeProposal(target, "block" if ident.kind == "block" else "file", disk.geometry.model,
                          disk.geometry.sectors, ss, number, entry, old, length, tuple(refusals), tuple(notes), ident,
                          fs, least, protect, fills)


def content_limits(target: str, start: int, sectors: int, sector_size: int) -> Limits:
    """How far the content of the partition at ``start`` (``sectors`` long) can be resized: what blkid sees
    in it, whether its tool is here, and the smallest size a shrink can reach (``resize2fs -P``,
    ``ntfsresize --info``, ...). Reads only, through a read-only view. What the planner measures before a
    resize or a realign that shrinks (in a worker: a tool may take a moment)."""
    try:
        fs, missing, least = _content(target, start * sector_size, sectors * sector_size, None)
    except (fscheck.CheckError, tools.ResizeError, OSError) as exc:
        return Limits("", False, False, None, f"its content could not be measured: {exc}")
    return fs_limits(fs.fs, least, missing)


def _content(target: str, offset: int, size: int, shrink: bool | None) -> tuple[fscheck.Identity, str, int | None]:
    """What blkid sees in ``size`` bytes at ``offset`` (probed in place), why it cannot be resized here ("" when
    it can) and, for a shrink, the least size it can reach (``shrink`` None: whenever it can shrink at all).
    A loop device is set up only when a tool must read the filesystem through one (a shrink's minimum,
    whether a FAT can be resized), never only to identify it: over an LVM or md member it would make LVM or
    mdadm find the volume a second time and activate it there (backend.fs.fscheck.identify_at)."""
    fs = fscheck.identify_at(target, offset, size)
    why = tools.missing(fs.fs) or fscheck.missing_tool(fs.fs)
    if why or not fs.fs:
        return fs, why, None
    if shrink is None:
        shrink = fs_limits(fs.fs, None, "").shrink
    if not tools.needs_view(fs.fs, shrink):
        return fs, "", tools.FIXED_MINIMUM.get(fs.fs) if shrink else None
    with fscheck.view(target, offset, size) as loop:
        why = tools.unresizable(loop, fs.fs)
        least = tools.minimum(loop, fs.fs) if shrink and not why else None
    return fs, why, least


@contextlib.contextmanager
def _tool_view(p: ResizeProposal, fs: str, start: int, size: int) -> Iterator[str]:
    """Where the content's tool works on ``size`` sectors from ``start``: a private writable loop device over
    those bytes, but on a disk, for content a loop must not show (``tools.ON_THE_NODE``: an LVM physical
    volume, which LVM would activate on the loop), the kernel's own partition node, told the size first."""
    if p.kind == "block" and fs in tools.ON_THE_NODE:
        try:
            yield kernelparts.partition_node(p.target, p.number, start, size, p.sector_size)
        finally:
            look.forget()  # the tool wrote through the node, past every diskplan write that forgets by itself
        return
    with fscheck.view(p.target, start * p.sector_size, size * p.sector_size, read_only=False) as loop:
        yield loop


def execute_resize(
    p: ResizeProposal, answer: str, host: Host, *, backup_path: str | None = None, progress: Progress | None = None
) -> MoveOutcome:
    """Check, back up, resize in the safe order, tell the kernel, check again (see the module's doc)."""
    base = MoveOutcome(Verdict.REFUSED, "", p.target)
    gate = stop_before_writing(p, answer, base, p.nothing)
    if gate is not None:
        return gate
    assert p.entry is not None

    def step(what: str) -> None:
        if progress:
            progress(1, 1, what)

    held = take_lock(p.target, host, base)
    if isinstance(held, MoveOutcome):
        return held
    ss, start = p.sector_size, p.entry.start
    with held, fresh_look():  # the disk seen afresh under the lock, then once until each write (backend.raw.look)
        now = recheck(p, host)
        if now:
            return refused(base, now)
        step("checking the filesystem")
        try:
            fs, clean, said = fscheck.referee(p.target, start * ss, p.old * ss)
        except fscheck.CheckError as exc:
            return replace(base, message=f"refused: {exc}")
        if not clean or fs != p.fs:
            why = "is not clean; repair it first" if not clean else "changed since it was read"
            return replace(base, message=f"refused: the {fs.fs} filesystem on partition {p.number} {why}; nothing "
                           "was written", details=(said,) if said else ())
        got = save_backup(p, backup_path, base)
        if not isinstance(got, tuple):
            return got
        base = replace(got[1], verdict=Verdict.FAILED)
        done: list[str] = []
        for what in p.order:
            try:
                if what == "entry":
                    step("rewriting the partition's table entry")
                    rewrite_entry(p.target, p.entry, start, ss, p.sectors, length=p.new)
                else:
                    step(f"resizing the {fs.fs} filesystem")
                    # a shrink runs over the old bytes, a grow (and mkswap, which fills its device) over the new
                    size = p.new if p.new > p.old or fs.fs == "swap" else p.old
                    with _tool_view(p, fs.fs, start, size) as where:
                        tools.resize(where, fs, p.new * ss)
            except (EntryError, OSError, bk.BackupError, fscheck.CheckError, tools.ResizeError,
                    kernelparts.NodeError) as exc:
                where = "; ".join(done) or "nothing was changed"
                return replace(base, message=f"the resize of partition {p.number} stopped: {exc} ({where})")
            done.append("the filesystem is resized" if what != "entry" else "the table entry is rewritten")
        checked = check_after(p.target, p.kind, start, p.new, ss, fs, base, "resized", step,
                              "checking the filesystem at its new size")
        if isinstance(checked, MoveOutcome):
            return checked
        after, kernel = checked
    verb = "grown" if p.new > p.old or p.fills else "shrunk"
    was = human_bytes(p.fills) + " (its filesystem)" if p.fills else human_bytes(p.old * ss)
    return replace(base, verdict=Verdict.WRITTEN, kernel=kernel,
                   message=f"{verb}: partition {p.number} ({start}..{start + p.new - 1}), "
                   f"{was} → {human_bytes(p.new * ss)}; {after}{partuuid_kept(p.entry.guid)}")
