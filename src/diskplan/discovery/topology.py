"""I/O topology of a block device from sysfs (``/sys/block/<dev>/queue``): what libparted cannot tell us.

Partitions of a disk report their own alignment_offset; the queue limits are the whole disk's.
"""

from __future__ import annotations

import os
import stat

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
    read_only: bool = False


def sysfs_dir(path: str, sys_root: str = "/sys") -> str | None:
    """The sysfs directory of the block device at ``path``, or None for a regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    d = f"{sys_root}/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    return os.path.realpath(d) if os.path.isdir(d) else None


def _read(d: str, name: str) -> str | None:
    try:
        with open(os.path.join(d, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def _int(d: str, name: str) -> int:
    v = _read(d, name)
    try:
        return int(v) if v is not None else 0
    except ValueError:
        return 0


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


def topology(path: str, sys_root: str = "/sys") -> Topology | None:
    d = sysfs_dir(path, sys_root)
    if d is None:
        return None
    q = os.path.join(d, "queue")
    if not os.path.isdir(q):  # a partition: its queue is its parent's
        q = os.path.join(os.path.dirname(d), "queue")
    rot = _read(q, "rotational")
    model = (_read(d, "device/model") or "").strip()
    return Topology(
        logical=_int(q, "logical_block_size"),
        physical=_int(q, "physical_block_size"),
        min_io=_int(q, "minimum_io_size"),
        optimal_io=_int(q, "optimal_io_size"),
        alignment_offset=_int(d, "alignment_offset"),
        discard_granularity=_int(q, "discard_granularity"),
        rotational=None if rot is None else rot == "1",
        scheduler=_scheduler(_read(q, "scheduler")),
        schedulers=_schedulers(_read(q, "scheduler")),
        model=model,
        read_only=_read(d, "ro") == "1",
    )
