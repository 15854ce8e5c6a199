"""What a measurement really measures: the device behind a path, named honestly (a loop device over a
file, a virtual disk, a file on a filesystem), with the facts to show beside the numbers."""

from __future__ import annotations

import os
import stat

from diskplan.discovery.sysfs import read, sysfs_dir
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

    def facts(self) -> str:
        rot = {True: "1 (spinning)", False: "0 (not spinning)", None: "unknown"}[self.rotational]
        return (f"rotational {rot}, physical block {f'{self.physical} B' if self.physical else 'unknown'}, "
                f"scheduler {self.scheduler or 'none reported'}")


def _block(path: str, sys_root: str) -> DeviceKind:
    topo = topology(path, sys_root)
    d = sysfs_dir(path, sys_root) or ""
    name = os.path.basename(d)
    if os.path.exists(os.path.join(d, "partition")):
        d = os.path.dirname(d)
        name = os.path.basename(d)
    facts = (topo.rotational, topo.physical, topo.scheduler) if topo else (None, 0, None)  # DeviceKind's defaults
    model = topo.model if topo else ""
    if name.startswith("loop"):
        backing = read(os.path.join(d, "loop", "backing_file")) or "a file"
        return DeviceKind(f"{path} is a loop device over {backing}: the ratio measures the page cache and the "
                          f"filesystem holding that file, not a disk's hardware", False, *facts)
    if name.startswith(VIRTUAL_NAMES) or any(model.startswith(m) for m in VIRTUAL_MODELS):
        label = f"model {model!r}" if model else f"kernel name {name}"
        return DeviceKind(f"{path} is a virtual disk ({label}): the ratio measures the hypervisor's storage, "
                          "which may say nothing about any disk's hardware", False, *facts)
    label = f" ({model})" if model else ""
    return DeviceKind(f"{path} is the block device {name}{label}", True, *facts)


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
                      under.rotational, under.physical, under.scheduler)
