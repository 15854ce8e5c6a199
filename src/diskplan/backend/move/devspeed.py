"""How fast a device probably copies: an assumption from sysfs, for the planner's estimate of a data
move before anything is read (the move's confirmation measures a short read instead). Never a promise."""

from __future__ import annotations

import os
import stat

# Sequential bytes/s, deliberately modest: a move reads, writes and reads back every byte.
SPINNING, SSD, NVME, UNKNOWN = 120e6, 400e6, 1500e6, 200e6


def _sys_queue(dev: int) -> str:
    """The queue directory of the block device ``dev`` (a partition's is its disk's)."""
    base = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    for where in (base, os.path.join(base, "..")):
        if os.path.isdir(os.path.join(where, "queue")):
            return os.path.realpath(os.path.join(where, "queue"))
    return ""


def assumed_rate(path: str) -> tuple[float, str]:
    """Bytes/s and what the figure assumes ("a spinning disk", "an SSD", ...), for the block device at
    ``path`` or the device holding the image file ``path``."""
    try:
        st = os.stat(path)
    except OSError:
        return UNKNOWN, "a disk of unknown speed"
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    queue = _sys_queue(dev)
    name = os.path.basename(os.path.dirname(queue))
    if stat.S_ISBLK(st.st_mode) and name.startswith("loop"):  # as fast as the file behind it (its own flag says 1)
        try:
            with open(os.path.join(os.path.dirname(queue), "loop", "backing_file"), encoding="utf-8") as f:
                backing = f.read().strip()
        except OSError:
            backing = ""
        if backing and backing != path:
            rate, what = assumed_rate(backing)
            return rate, f"{what} (behind the loop device)"
    try:
        with open(os.path.join(queue, "rotational"), encoding="ascii") as f:
            rotational = f.read().strip() == "1"
    except OSError:
        return UNKNOWN, "a disk of unknown speed"
    if rotational:
        return SPINNING, "a spinning disk"
    if name.startswith("nvme"):
        return NVME, "an NVMe SSD"
    return SSD, "an SSD"
