"""Read a disk so that no table can hurt the planner, and say everything odd about it.

libparted reads the table in a forked child with a deadline (backend.parted.isolate): it crashes (SIGSEGV) on
some truncated tables. Around that, pure-Python checks in this process: the size and sector size, both
GPT copies and their CRCs, hybrid MBRs, the EBR chain, filesystems on the whole disk, labels libparted
cannot read, a GPT written with another sector size. When libparted fails, diskplan's own parsers show
what they can, read-only.

Contract: ``read`` returns a Disk whenever the target has at least one sector, with its geometry, so the
planner can always offer a new label; what went wrong is in ``Disk.findings`` (codes in
model.findings.tablefindings; ``unreadable-table`` when libparted could not read it) and ``Table.read_only``.
It raises ReadError only when there is nothing to plan on: the target cannot be opened, or is smaller
than one sector.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

from diskplan.backend.parted import readahead
from diskplan.backend.parted.isolate import IsolatedFailure, IsolatedMap
from diskplan.backend.parted.readahead import ReadError, start
from diskplan.backend.raw import gptcheck, hybrid, rawtable
from diskplan.backend.raw.gptattrs import with_raw_attributes
from diskplan.backend.raw.look import one_look
from diskplan.backend.read import probe
from diskplan.model.disk import Disk
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.findings import tablefindings as tf
from diskplan.model.findings.codes import (
    EBR_CHAIN_DAMAGED,
    EXTENDED_WITHOUT_EBR,
    GPT_BACKUP_DAMAGED,
    GPT_PRIMARY_DAMAGED,
    TABLE_LARGER_THAN_DISK,
)
from diskplan.model.findings.placement import Finding
from diskplan.model.geometry import Geometry
from diskplan.model.labels import EXTENDED_IDS
from diskplan.model.plan.repair import GptRepair
from diskplan.model.table import MBR_LIMIT_SECTORS, Region, Table
from diskplan.model.units import MiB
from diskplan.model.value import replace

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~3.5 ms)
if TYPE_CHECKING:
    from typing import Any

    from diskplan.backend.parted.pedread import Rows

SUPERFLOPPY_FS = ("vfat", "ntfs", "exfat")  # boot sectors that carry 0x55AA, so libparted may call them msdos


__all__ = ["ReadError", "read", "read_here", "read_many", "survey"]  # ReadError lives in readahead, light to import


def _failure_reason(exc: IsolatedFailure) -> str:
    if exc.signal_number is not None:
        return exc.reason  # "libparted crashed (SIGSEGV)"
    if exc.timed_out:
        return f"libparted {exc.reason}"
    if exc.error_type == "BackendError":
        return exc.reason
    if exc.reason == exc.error_type:
        return f"the reader failed ({exc.error_type})"
    return f"the reader failed ({exc.error_type}: {exc.reason})"


def read(path: str, timeout: float = 30.0) -> Disk:
    (found,) = read_many([path], timeout)
    if isinstance(found, ReadError):
        raise found
    return found


def read_many(
    paths: Sequence[str], timeout: float = 30.0, lanes: int = 1, filesystems: bool = True
) -> Generator[Disk | ReadError, None, None]:
    """Each path's Disk (or the ReadError saying why there is nothing to plan on), in order. libparted's
    reads start at once, before the first is asked for, in ``lanes`` children side by side; each child
    reads its share one after another (``isolate.IsolatedMap``), each read bounded by ``timeout``.
    ``filesystems=False``: partitions are not probed for filesystems (their ``fs`` stays empty)."""
    return survey(paths, start(paths, timeout, lanes, filesystems))


def survey(paths: Sequence[str], reads: IsolatedMap[Rows]) -> Generator[Disk | ReadError, None, None]:
    """Each path's Disk from libparted's answer in ``reads`` (readahead.start of the same paths) and this
    process's own checks, or the ReadError saying why there is nothing to plan on."""
    answers = iter(reads)

    def disks() -> Generator[Disk | ReadError, None, None]:
        try:
            for path in paths:
                with one_look():  # this process's checks open the disk once and judge its GPT once
                    facts = _facts(path)
                    if not isinstance(facts, ReadError):  # read while libparted reads: kept by the look
                        gptcheck.check_gpt(path, facts.logical, facts.sectors)
                    answer = next(answers)  # (asked for even when unused: the answers come in order)
                    if isinstance(facts, ReadError):
                        found: Disk | ReadError = facts
                    elif isinstance(answer, IsolatedFailure):
                        found = _Survey(path, facts).finish(None, _failure_reason(answer))
                    else:
                        found = _Survey(path, facts).finish(*_made(readahead.disk, path, answer))
                yield found  # outside the look: the caller may write before asking for the next
        finally:
            answers.close()  # every child reaped now (or stopped, when the caller stopped asking)

    return disks()


def read_here(path: str, filesystems: bool = True) -> Disk | ReadError:
    """``read`` with libparted in this very process: only for a process that is itself an isolated child
    (``check`` of many disks runs whole checks in children). A libparted crash ends this process; its
    parent must then read the disk again its own way. What libparted raises is said as ``read`` says it."""
    facts = _facts(path)
    if isinstance(facts, ReadError):
        return facts
    return _Survey(path, facts).finish(*_made(readahead.read, path, filesystems))


def _made(make: Callable[..., Disk], *args: Any) -> tuple[Disk | None, str]:
    """(``make(*args)``, "") or (None, why it failed, said as isolate reports what a child raised)."""
    try:
        return make(*args), ""
    except Exception as exc:
        return None, _failure_reason(IsolatedFailure(str(exc) or type(exc).__name__, error_type=type(exc).__name__))


def _facts(path: str) -> probe.DeviceFacts | ReadError:
    try:
        facts = probe.device_facts(path)
    except OSError as exc:
        return ReadError(f"cannot open it: {exc.strerror or exc}")
    if facts.sectors == 0:
        what = "empty (0 bytes)" if facts.size_bytes == 0 else f"{facts.size_bytes} B, less than one sector"
        return ReadError(f"it is {what}: there is nothing to read and no room for a table")
    return facts


class _Survey:
    """The checks that run in this process around libparted's answer, collecting findings."""

    def __init__(self, path: str, facts: probe.DeviceFacts) -> None:
        self.path = path
        self.facts = facts
        self.findings: list[Finding] = []
        self.read_only: list[str] = []
        self.views: tuple[Table, ...] = ()
        self.repair: GptRepair | None = None
        self.filesystem = ""
        self.libparted_was_wrong = False  # its messages are about a table that is not there
        self.pmbr_repair: GptRepair | None = None

    # --- the pieces -----------------------------------------------------------------------------------

    def finish(self, disk: Disk | None, failure: str) -> Disk:
        f = self.facts
        if disk is None:
            geom = Geometry(sectors=f.sectors, logical=f.logical, physical=f.physical, path=self.path)
            disk = Disk(geom, Table(None, 0, f.sectors - 1), self.path)
        geom = disk.geometry
        if f.remainder:
            self.findings.append(tf.size_not_sector_multiple(f.size_bytes, geom.logical))
        if geom.size_bytes < MiB:
            self.findings.append(tf.tiny_disk(geom.sectors, geom.logical))
        gpt = gptcheck.check_gpt(self.path, geom.logical, geom.sectors)
        mbr = rawtable.mbr_layout(self.path, geom.logical, geom.sectors)
        table = disk.table
        self.filesystem = disk.filesystem
        if failure:
            table = self._salvage(geom, gpt, mbr, failure)
        elif table.label is None:
            table = self._no_label(geom, gpt)
        elif table.label == "msdos" and not table.partitions:
            table = self._superfloppy(geom, table)
        elif table.label == "mac":
            table = self._apm(geom) or table
        if gpt is not None and table.label in ("gpt", None):
            self._gpt(geom, gpt)
        table = with_raw_attributes(table, gpt)
        if table.label == "gpt" and mbr is not None and rawtable.is_hybrid_mbr(mbr):
            self.views = (hybrid.mbr_view(mbr, geom.sectors),)
            self.findings.append(tf.hybrid_mbr(hybrid.describe_views(mbr, table.partitions)))
            self.read_only.append("a hybrid MBR would be replaced by a protective one if this table were written")
        if table.label == "msdos" and mbr is not None and not failure:
            self._ebr_chain(mbr)
            table = with_ebrs(table, mbr)
        if table.label is not None and table.partitions:
            sniffed = probe.sniff_filesystem(self.path, f.size_bytes)
            if sniffed == "iso9660":
                self.findings.append(tf.hybrid_iso(sniffed))
        self._unsafe_to_write(geom, table)
        if self.read_only:
            reasons = [r for r in (table.read_only, *self.read_only) if r]
            table = replace(table, read_only="; ".join(dict.fromkeys(reasons)))
        return replace(
            disk,
            table=table,
            messages=() if self.libparted_was_wrong else _uncovered(disk.messages, self.findings, table, geom),
            filesystem=self.filesystem if table.label is None else "",
            findings=(*disk.findings, *self.findings),
            views=self.views,
            repair=self.repair,
        )

    def _salvage(
        self, geom: Geometry, gpt: gptcheck.GptState | None, mbr: rawtable.MbrLayout | None, failure: str
    ) -> Table:
        """libparted crashed, hung or refused: show what diskplan's own parsers can, read-only."""
        reason = "libparted could not read this table safely; it is shown from diskplan's own parser"
        self.read_only.append(reason)
        good = gpt.good if gpt else None
        fs = probe.sniff_filesystem(self.path, self.facts.size_bytes)
        table: Table | None = None
        recovered = ""
        if good is not None:
            table, recovered = gptcheck.gpt_table(good, geom.sectors, reason), f"the {good.which} GPT"
        elif (apm := self._apm(geom)) is not None:
            table, recovered = apm, "the Apple Partition Map"
        elif (bsd := self._bsd(geom)) is not None:
            table, recovered = bsd, "the BSD disklabel"
        elif fs in SUPERFLOPPY_FS:
            self.filesystem = fs
        elif mbr is not None and any(p.type_id != rawtable.PROTECTIVE_ID for p in mbr.primaries):
            table, recovered = _mbr_table(mbr, geom), "the MBR"
        self.findings.append(tf.unreadable(failure, recovered))
        if table is None:
            return Table(None, 0, geom.sectors - 1, read_only=reason)
        return table

    def _no_label(self, geom: Geometry, gpt: gptcheck.GptState | None) -> Table:
        """libparted found no label: a GPT whose primary header is gone (libparted 3.5 then ignores the
        good backup), a table it cannot read, a GPT of another sector size, a filesystem, or nothing."""
        empty = Table(None, 0, geom.sectors - 1)
        good = gpt.good if gpt else None
        if gpt is not None and good is not None:
            mbr = rawtable.mbr_layout(self.path, geom.logical, geom.sectors)
            protected = mbr is not None and any(p.type_id == rawtable.PROTECTIVE_ID for p in mbr.primaries)
            if not gpt.primary.ok:
                why = "libparted does not recognise this GPT until its primary copy is repaired"
            elif not protected:
                why = "libparted does not recognise a GPT without a protective MBR"
                self.pmbr_repair = gptcheck.protective_mbr_repair(self.path, gpt)
                self.findings.append(tf.gpt_without_protective_mbr(self.pmbr_repair.summary))
            else:
                why = "libparted does not recognise this GPT"
            self.read_only.append(why)
            return gptcheck.gpt_table(good, geom.sectors, why)
        other = probe.other_sector_size(self.path, geom.logical)
        if other:
            self.findings.append(tf.sector_size_mismatch(other, geom.logical))
            self.read_only.append(f"the table was written with {other} B sectors")
            return empty
        bsd = self._bsd(geom)
        if bsd is not None:
            return bsd
        foreign = probe.sniff_foreign_label(self.path)
        if foreign is not None:
            kind, where = foreign
            self.findings.append(tf.unknown_label(kind, where))
            self.read_only.append(f"a {kind} label diskplan cannot read is on this disk")
            return empty
        apm = self._apm(geom)
        if apm is not None:
            return apm
        self.filesystem = probe.sniff_filesystem(self.path, self.facts.size_bytes) or self.filesystem
        return empty

    def _superfloppy(self, geom: Geometry, table: Table) -> Table:
        """An "msdos" table with no partitions whose sector 0 is really a FAT/NTFS/exFAT boot sector."""
        fs = probe.sniff_filesystem(self.path, self.facts.size_bytes)
        if fs in SUPERFLOPPY_FS:
            self.filesystem = fs
            self.libparted_was_wrong = True
            return Table(None, 0, geom.sectors - 1)
        return table

    def _apm(self, geom: Geometry) -> Table | None:
        """The Apple Partition Map, converted from its own block size to our sectors (libparted 3.5 reads
        2048 B APM blocks on 512 B sectors as if they were sectors: every offset 4x too small)."""
        from diskplan.backend.raw.rawlabels import apm_entries

        block, entries = apm_entries(self.path)
        if not entries or block < geom.logical:
            return None
        k = block // geom.logical
        parts, meta = [], [Region("metadata", Extent(0, k - 1), "driver descriptor")]
        for e in entries:
            if e.count == 0 or e.type == "Apple_Free":
                continue
            start, end = e.start * k, (e.start + e.count) * k - 1
            if e.type == "Apple_partition_map":
                meta.append(Region("metadata", Extent(start, end), "Apple partition map"))
                continue
            parts.append(Partition(e.number, start, end, type=e.type, name=e.name, state=State.EXISTING))
        ddm = rawtable.read_bytes(self.path, 0, 8)
        described = int.from_bytes(ddm[4:8], "big") * k
        if described > geom.sectors:
            self.findings.append(tf.table_larger_than_disk("mac", described, geom.sectors, geom.logical))
        return Table(
            "mac",
            0,
            geom.sectors - 1,
            tuple(sorted(parts, key=lambda p: (p.start, p.number))),
            tuple(meta),
            max_partitions=max(len(entries), 1),
            read_only="diskplan writes gpt and msdos tables; this one is mac",
        )

    def _bsd(self, geom: Geometry) -> Table | None:
        from diskplan.backend.raw.rawlabels import bsd_label

        found = bsd_label(self.path)
        if found is None:
            return None
        _, slots = found
        parts = tuple(
            Partition(p.number, p.start, p.start + p.size - 1, type=f"0x{p.fstype:02x}", state=State.EXISTING)
            for p in slots
        )
        return Table(
            "bsd",
            0,
            geom.sectors - 1,
            tuple(sorted(parts, key=lambda p: (p.start, p.number))),
            max_partitions=22,
            read_only="diskplan writes gpt and msdos tables; this one is a BSD disklabel",
        )

    def _gpt(self, geom: Geometry, gpt: gptcheck.GptState) -> None:
        p, b = gpt.primary, gpt.backup
        self.repair = gptcheck.plan_repair(gpt) or self.pmbr_repair
        if p.ok and not b.ok and gpt.table_sectors > geom.sectors:
            self.repair = None
            self.findings.append(tf.table_larger_than_disk("gpt", gpt.table_sectors, geom.sectors, geom.logical))
            self.read_only.append("the table describes a larger disk than this one")
        elif p.ok != b.ok:
            bad, good = (b, p) if p.ok else (p, b)
            how = self.repair.summary if self.repair else ""
            self.findings.append(tf.gpt_copy_damaged(bad.which, bad.problem, good.which, how, _no_repair(good)))
        elif not p.ok and not b.ok:
            self.findings.append(tf.gpt_both_damaged(p.problem, b.problem))
        else:
            differ = gptcheck.copies_differ(gpt)
            if differ:
                self.findings.append(tf.gpt_copies_differ(differ))
            if b.lba != geom.sectors - 1:
                grown = gptcheck.grown_repair(self.path, gpt)
                self.repair = self.repair or grown
                self.findings.append(tf.gpt_backup_not_at_end(b.lba, geom.last_lba, geom.logical,
                                                              grown.summary if grown else ""))

    def _ebr_chain(self, mbr: rawtable.MbrLayout) -> None:
        for number, lba in mbr.missing_ebr:
            self.findings.append(tf.extended_without_ebr(number, lba))
        for number, detail in mbr.chain_problems:
            self.findings.append(tf.ebr_chain_damaged(number, detail))
            self.read_only.append(f"the chain of logical partitions in partition {number} is damaged")

    def _unsafe_to_write(self, geom: Geometry, table: Table) -> None:
        """Partitions past the end, or overlapping: libparted would refuse or "fix" them on a write."""
        live = [p for p in table.partitions if p.role is not Role.EXTENDED]
        past = [p.number for p in table.partitions if p.end > geom.last_lba]
        if past:
            self.read_only.append(f"partition(s) {_numbers(past)} end past the last LBA {geom.last_lba}")
        clash: set[int] = set()
        ordered = sorted(live, key=lambda p: (p.start, p.end))
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                if b.start > a.end:
                    break
                clash.update((a.number, b.number))
        if clash:
            self.read_only.append(f"partitions {_numbers(sorted(clash))} overlap")


# libparted messages that a finding of ours already says better (with the numbers): not repeated.
_COVERED = (
    ("GPT table is corrupt", (GPT_BACKUP_DAMAGED, GPT_PRIMARY_DAMAGED, TABLE_LARGER_THAN_DISK)),
    ("wrong signature", (EXTENDED_WITHOUT_EBR, EBR_CHAIN_DAMAGED)),
)


def with_ebrs(table: Table, mbr: rawtable.MbrLayout) -> Table:
    """``table`` with its logical partitions' EBR sectors from the raw chain, when the chain is whole and
    holds the partitions libparted read (the planner's logical data moves need them exactly)."""
    logicals = sorted((p for p in table.partitions if p.role is Role.LOGICAL), key=lambda p: p.number)
    if mbr.chain_problems or [(p.number, p.start, p.end) for p in logicals] != [
            (q.number, q.start, q.end) for q in mbr.logicals]:
        return table
    return replace(table, ebrs=tuple(q.ebr for q in mbr.logicals))


def _uncovered(messages: tuple[str, ...], findings: list[Finding], table: Table, geom: Geometry) -> tuple[str, ...]:
    codes = {f.code for f in findings}
    past_end = any(p.end > geom.last_lba for p in table.partitions)
    out = []
    for m in messages:
        if any(text in m and codes.intersection(by) for text, by in _COVERED):
            continue
        if "partition outside the disk" in m and past_end:
            continue
        if "driver descriptor says the physical block size" in m and table.label == "mac":
            continue  # read from the map in its own block size (see _Survey._apm)
        out.append(m)
    return tuple(out)


def _numbers(ns: list[int]) -> str:
    return ", ".join(str(n) for n in ns)


def _no_repair(good: gptcheck.GptCopy) -> str:
    h = good.header
    if good.which == "primary" and h is not None and h.last_usable >= h.backup - 1:
        return (
            f"the usable area reaches LBA {h.last_usable}, so there is no room for a backup entry array "
            f"before the backup header at LBA {h.backup} (writing a new table makes room)"
        )
    return f"the {good.which} copy's layout leaves no room to rebuild the other one on this disk"


def _mbr_table(mbr: rawtable.MbrLayout, geom: Geometry) -> Table:
    parts = []
    for p in (*mbr.primaries, *mbr.logicals):
        if p.type_id == rawtable.PROTECTIVE_ID:
            continue
        role = Role.LOGICAL if p.number > 4 else Role.EXTENDED if p.type_id in EXTENDED_IDS else Role.PRIMARY
        parts.append(
            Partition(p.number, p.start, p.end, type=f"0x{p.type_id:02x}", role=role, state=State.EXISTING)
        )
    return Table(
        "msdos",
        1,
        max(1, min(geom.sectors, MBR_LIMIT_SECTORS) - 1),
        tuple(sorted(parts, key=lambda p: (p.start, p.number))),
        (Region("mbr", Extent(0, 0), "MBR"),),
        max_partitions=4,
    )

