"""``diskplan measure --lab NAME``: each experiment behind diskplan (docs/sources.md) as a lab a student runs on
their own device, the experiment's number printed beside theirs.

Pure: what each lab runs (its shape, its offsets, the bytes it needs), what the experiment measured, what a
device here may be unable to show, the arithmetic of the striped-LV lab and the fio job file of the SSD lab.
backend.labrun times the operations; cli/measure.py chooses the bytes (free space or a new scratch file).
"""

from __future__ import annotations

from diskplan.model.units import KiB, MiB
from diskplan.model.value import value

SSD_JOBS, SSD_DEPTH = 8, 4  # the fio experiment: numjobs=8, iodepth=4
SSD_SLICE = 256 * KiB  # each job's own sequential stretch (the experiment's size=500m, made small: it wraps)
DD_WRITERS, DD_BLOCK, DD_EACH = 6, MiB, 4 * MiB  # six parallel dd bs=1024k oflag=direct, 4 MiB each here
LV_STRIPE = 8 * KiB  # lvcreate -i 2 -I 8


@value
class Lab:
    name: str
    title: str
    seed: str  # what the experiment measured, in one line (device, tool, numbers)
    shape: str  # what this lab runs here
    cannot: str  # what it cannot show on any device here, said once
    misaligned: int  # the misaligned offset's distance from the aligned one, in bytes (as LBA 34 or 63)
    span: int  # bytes it needs from a 1 MiB boundary

    def offsets(self) -> tuple[tuple[str, int], ...]:
        lba = 63 if self.misaligned == 63 * 512 else 34
        return ("aligned", 0), (f"as LBA {lba}", self.misaligned)


LABS: tuple[Lab, ...] = (
    Lab("ssd", "the SSD experiment's fio job: sequential 4 KiB direct writes and reads, 8 jobs x iodepth 4",
        "Crucial M4 SSD (reports 512/512), fio 8 jobs x iodepth 4, 10 s x 5 runs: writes ~1,500 IOPS from 34s vs "
        "~28,000 from 2048s (19x); reads ~21,400 vs ~28,700 (1.3x)",
        f"{SSD_JOBS} jobs x iodepth {SSD_DEPTH} = {SSD_JOBS * SSD_DEPTH} threads, each with one 4 KiB O_DIRECT "
        f"operation in flight, each going sequentially through its own {SSD_SLICE // KiB} KiB",
        "fio keeps 4 operations in flight per job with libaio; threads with one each are the same queue depth "
        "but not the same submission path: the job file runs the real shape",
        34 * 512, SSD_JOBS * SSD_DEPTH * SSD_SLICE + MiB),
    Lab("fsync", "the PCIe SSD experiment's pg_test_fsync: 4 x 4 kB open_sync writes, one 16 kB write + fdatasync",
        "OCZ RevoDrive3 X2, pg_test_fsync 5 s per test, start 63s vs 2048s: 4 x 4 kB open_sync 3,991 -> 4,989 "
        "ops/s (+25%); 16 kB write + fdatasync 9,700 -> 10,500 ops/s (+8%)",
        "pg_test_fsync's two lines: a group of four 4 KiB writes through O_DIRECT|O_SYNC, and one 16 KiB "
        "O_DIRECT write followed by fdatasync, each rewriting the same bytes as pg_test_fsync does",
        "the experiment wrote through ext4 on the partition (its 4 KiB blocks on the partition's grid); here the bytes "
        "are written directly at the same offsets",
        63 * 512, MiB + MiB),
    Lab("metadata", "the Advanced Format experiment's metadata pattern: bonnie++-like file creates",
        "2 TB Advanced Format disks (512e), bonnie++ -n 256:1024:1024:16, 34s vs 2048s: file creation up to 2.6x "
        "slower, random deletes 1.6x, sequential throughput barely changed",
        "each create as ext4 journals it: a 4 KiB inode-table write and a 4 KiB directory-block write at random "
        "4 KiB slots of the range, then fdatasync (the journal commit)",
        "bonnie++ timed a filesystem; this replays its block pattern without one (no allocator, no journal "
        "layout): the ratio is the part alignment decides",
        34 * 512, 8 * MiB + MiB),
    Lab("scheduler", "the scheduler experiment: each I/O scheduler the device offers, compared",
        "the same Crucial M4, fio 4 KiB buffered, cfq / deadline / noop: no scheduler wins everywhere (reads: cfq "
        "62,815 vs noop 57,809 IOPS; sequential writes within 0.2%); few, short runs",
        f"for each scheduler in queue/scheduler: {SSD_JOBS * SSD_DEPTH} threads of 4 KiB O_DIRECT reads, then "
        "writes, at the aligned offset; the scheduler the device had is put back afterwards",
        "cfq, deadline and noop are gone from today's kernels (bfq, mq-deadline, kyber, none replace them); "
        "the experiment's runs were buffered (page cache), these are direct",
        34 * 512, SSD_JOBS * SSD_DEPTH * SSD_SLICE + MiB),
    Lab("stripe", "the LVM stripe experiment: six parallel 1 MiB direct writes, and the striped LV's arithmetic",
        "two PCIe SSDs, lvcreate -i 2 -I 8, six parallel dd bs=1024k oflag=direct: 2.9 GB/s with the PVs on whole "
        "disks vs 5.9 GB/s on partitions from parted -a optimal 1MB",
        f"{DD_WRITERS} threads, each writing {DD_EACH // MiB} MiB in {DD_BLOCK // MiB} MiB O_DIRECT writes (dd "
        "bs=1024k oflag=direct), at the aligned offset and at one off it",
        "one device has no stripe: what a misaligned LV costs needs two devices; the arithmetic below says "
        "what each 1 MiB write becomes on an 8 KiB stripe",
        34 * 512, DD_WRITERS * DD_EACH + MiB),
)


def find(name: str) -> Lab:
    for lab in LABS:
        if lab.name == name:
            return lab
    raise KeyError(f"no lab called {name!r}; choose one of: {', '.join(lab.name for lab in LABS)}")


def stripe_chunks(offset: int, size: int = DD_BLOCK, stripe: int = LV_STRIPE) -> int:
    """How many stripe chunks a write of ``size`` bytes at ``offset`` (from the LV's data start) touches."""
    return (offset + size - 1) // stripe - offset // stripe + 1


def stripe_arithmetic(misaligned: int) -> list[str]:
    """What one 1 MiB write becomes on a 2-device LV with 8 KiB stripes, aligned and ``misaligned`` bytes off,
    and what the experiment's pe_start (not printed there) would have had to be."""
    whole = stripe_chunks(0)
    off = stripe_chunks(misaligned % LV_STRIPE or LV_STRIPE // 2)
    return [
        f"a 1 MiB write on an LV with {LV_STRIPE // KiB} KiB stripes over 2 devices: from a stripe boundary it is "
        f"{whole} chunks, {whole // 2} per device, each whole",
        f"{misaligned % LV_STRIPE or LV_STRIPE // 2:,} B off a boundary it touches {off} chunks, the first and last "
        "partial: one device gets one more, smaller piece and each device's pieces start off its chunks (no "
        "parity: nothing is read back)",
        "LVM places extent 0 at pe_start (1 MiB by default) from the PV's start: a partition at 1 MiB or the whole "
        "disk leave the same remainder modulo 8 KiB, so the experiment's doubling needs another cause "
        "(demo lvm-partition)",
    ]


def fio_job(filename: str, aligned: int, misaligned: int, seconds: int) -> str:
    """The SSD experiment's job file (its [global] section as the experiment printed it, with direct=1), for the
    student's own device: ``fio FILE`` runs writes then reads at the aligned offset and as from LBA 34, one
    after the other, each job sequentially through its own stretch (offset_increment), as the lab does."""
    head = [
        "; diskplan measure --lab ssd: the fio experiment's job, at the aligned offset and as from LBA 34",
        "; run: fio THIS_FILE   (it writes only into the bytes diskplan chose and showed)",
        "[global]",
        f"filename={filename}",
        f"size={SSD_DEPTH * SSD_SLICE}",
        f"offset_increment={SSD_DEPTH * SSD_SLICE}",
        f"numjobs={SSD_JOBS}",
        f"iodepth={SSD_DEPTH}",
        "time_based",
        f"runtime={seconds}",
        "ioengine=libaio",
        "bs=4k",
        "direct=1",
        "group_reporting",
        "stonewall",
    ]
    jobs = []
    for rw in ("write", "read"):
        for name, at in (("aligned", aligned), ("as-lba-34", misaligned)):
            jobs += ["", f"[{rw}-{name}]", f"rw={rw}", f"offset={at}"]
    return "\n".join((*head, *jobs, ""))
