"""What a measurement really measures: the device behind a path, named honestly (a loop device over a
file, a virtual disk, a file on a filesystem), with the facts to show beside the numbers."""

from __future__ import annotations

import os
import stat

from diskplan.discovery.sysfs import read, read_int, sysfs_dir
from diskplan.discovery.topology import topology
from diskplan.model.value import value

# Model strings and kernel names of disks that a hypervisor makes up.
VIRTUAL_MODELS = ("QEMU", "VBOX", "Virtual disk", "Virtual Disk", "VMware", "Msft Virtual")
VIRTUAL_NAMES = ("vd", "xvd", "nbd", "zram", "ram", "rbd")


@value
class DeviceKind:
    what: str  # one line: what the device is
    hardware: bool  # False: the ratio says nothing about a disk's hardware
    rotational: bool | None = None
    physical: int = 0
    scheduler: str | None = None
    partition_start: int | None = None  # a partition node: the byte of the disk its byte 0 is (sysfs start x 512)
    backing: str = ""  # a loop device: the file it reads (where holes are looked for)
    backing_offset: int = 0  # ... from this byte of that file (loop/offset)

    def facts(self) -> str:
        rot = {True: "1 (spinning)", False: "0 (not spinning)", None: "unknown"}[self.rotational]
        return (f"rotational {rot}, physical block {f'{self.physical} B' if self.physical else 'unknown'}, "
                f"scheduler {self.scheduler or 'none reported'}")


def _block(path: str, sys_root: str) -> DeviceKind:
    topo = topology(path, sys_root)
    d = sysfs_dir(path, sys_root) or ""
    name = os.path.basename(d)
    start: int | None = None
    if os.path.exists(os.path.join(d, "partition")):
        start = read_int(os.path.join(d, "start")) * 512  # sysfs counts 512-byte units whatever the sector size
        d = os.path.dirname(d)
        name = os.path.basename(d)
    facts = (topo.rotational, topo.physical, topo.scheduler) if topo else (None, 0, None)  # DeviceKind's defaults
    model = topo.model if topo else ""
    if name.startswith("loop"):
        backing = (read(os.path.join(d, "loop", "backing_file")) or "").removesuffix(" (deleted)")
        offset = read_int(os.path.join(d, "loop", "offset"))
        if read(os.path.join(d, "loop", "dio")) == "1":
            what = (f"{path} is a loop device over {backing or 'a file'} with direct I/O on (loop/dio 1): no page "
                    "cache, but each offset is an offset in that file, placed by the filesystem holding it: the "
                    "ratio measures that filesystem and the disk under it, not a disk's own alignment")
        else:
            what = (f"{path} is a loop device over {backing or 'a file'} (loop/dio 0): its I/O goes through the "
                    "page cache of that file, so the ratio measures memory and the filesystem holding the file, "
                    "not a disk's hardware")
        return DeviceKind(what, False, *facts, start, backing, offset)
    if name.startswith(VIRTUAL_NAMES) or any(model.startswith(m) for m in VIRTUAL_MODELS):
        label = f"model {model!r}" if model else f"kernel name {name}"
        return DeviceKind(f"{path} is a virtual disk ({label}): the ratio measures the hypervisor's storage, "
                          "which may say nothing about any disk's hardware", False, *facts, start)
    label = f" ({model})" if model else ""
    return DeviceKind(f"{path} is the block device {name}{label}", True, *facts, start)


def device_kind(path: str, sys_root: str = "/sys") -> DeviceKind:
    """What ``path`` is: a block device, or a file (an image, a scratch file) and the device under it."""
    try:  # a scratch file not made yet lands on its directory's filesystem
        st = os.stat(path if os.path.exists(path) else os.path.dirname(os.path.abspath(path)))
    except OSError:
        return DeviceKind(f"{path} cannot be examined", False)
    if stat.S_ISBLK(st.st_mode):
        return _block(path, sys_root)
    holder = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if os.major(st.st_dev) == 0 or not os.path.isdir(holder):
        return DeviceKind(f"{path} is a file on a filesystem with no block device under it (tmpfs, overlay, a "
                          "network filesystem): the ratio says nothing about a disk", False)
    node = "/dev/" + os.path.basename(os.path.realpath(holder))
    under = _block(node, sys_root) if os.path.exists(node) else DeviceKind(node, False)
    return DeviceKind(f"{path} is a file on {node}: its filesystem decides where each byte lands, so offsets in "
                      f"the file are not offsets on the disk ({under.what})", False,
                      under.rotational, under.physical, under.scheduler, backing=path)
