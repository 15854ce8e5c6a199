"""I/O topology of a block device from sysfs (``/sys/block/<dev>/queue``): what libparted cannot tell us.

Partitions of a disk report their own alignment_offset; the queue limits are the whole disk's.
"""

from __future__ import annotations

import os

from diskplan.discovery.sysfs import read, read_int, sysfs_dir
from diskplan.model.value import value


@value
class Topology:
    """What sysfs says about a block device's topology (zeros: not said)."""
    logical: int = 0
    physical: int = 0
    min_io: int = 0
    optimal_io: int = 0
    alignment_offset: int = 0
    discard_granularity: int = 0
    rotational: bool | None = None
    scheduler: str | None = None
    schedulers: tuple[str, ...] = ()  # every scheduler the kernel offers for this queue
    model: str = ""
    serial: str = ""  # what the device reports: a virtio disk has no model, but a serial (QEMU's serial=)
    read_only: bool = False


def _scheduler(text: str | None) -> str | None:
    # "mq-deadline kyber [bfq] none" -> "bfq"
    if not text:
        return None
    for word in text.split():
        if word.startswith("["):
            return word.strip("[]")
    return text.split()[0]


def _schedulers(text: str | None) -> tuple[str, ...]:
    return tuple(w.strip("[]") for w in (text or "").split())


def _serial(d: str) -> str:
    """The serial number sysfs shows: virtio-blk's ``serial``, NVMe's ``device/serial``, or a SCSI disk's
    unit serial number VPD page (0x80: four header bytes, then the text)."""
    said = read(os.path.join(d, "serial")) or read(os.path.join(d, "device", "serial"))
    if said:
        return said
    try:
        with open(os.path.join(d, "device", "vpd_pg80"), "rb") as f:
            page = f.read()
    except OSError:
        return ""
    return page[4:].decode("ascii", "replace").strip(" \0")


def topology(path: str, sys_root: str = "/sys") -> Topology | None:
    d = sysfs_dir(path, sys_root)
    if d is None:
        return None
    q = os.path.join(d, "queue")
    if not os.path.isdir(q):  # a partition: its queue is its parent's
        q = os.path.join(os.path.dirname(d), "queue")
    rot = read(os.path.join(q, "rotational"))
    sched = read(os.path.join(q, "scheduler"))
    return Topology(
        logical=read_int(os.path.join(q, "logical_block_size")),
        physical=read_int(os.path.join(q, "physical_block_size")),
        min_io=read_int(os.path.join(q, "minimum_io_size")),
        optimal_io=read_int(os.path.join(q, "optimal_io_size")),
        alignment_offset=read_int(os.path.join(d, "alignment_offset")),
        discard_granularity=read_int(os.path.join(q, "discard_granularity")),
        rotational=None if rot is None else rot == "1",
        scheduler=_scheduler(sched),
        schedulers=_schedulers(sched),
        model=read(os.path.join(d, "device/model")) or "",
        serial=_serial(d if os.path.isdir(os.path.join(d, "queue")) else os.path.dirname(d)),
        read_only=read(os.path.join(d, "ro")) == "1",
    )
