"""The disks on this machine (pyudev over sysfs), and a watcher that says when one comes or goes.

Enumeration reads sysfs through libudev, so it works without udevd (containers, rescue systems); the
udev database only adds nicer names when it exists. The watcher prefers udev events, falls back to the
kernel's own uevents when udevd is not running, and to polling ``/sys/block`` when neither socket can
be opened. pyudev is imported lazily: the planner does not pay for it unless the picker opens.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from diskplan.discovery.sysfs import read, read_int
from diskplan.discovery.topology import topology
from diskplan.model.value import value

# Block devices that are never partitioning targets.
SKIP_PREFIXES = ("ram", "zram", "dm-", "md", "sr", "fd", "nbd")


@value
class DiskInfo:
    name: str  # kernel name: sda, nvme0n1, loop3
    node: str  # /dev/sda
    model: str
    size_bytes: int
    logical: int
    physical: int
    table: str  # "gpt", "dos", "none", or "?" when the disk could not be read
    rotational: bool | None
    scheduler: str | None
    removable: bool = False
    read_only: bool = False
    backing_file: str = ""  # for loop devices

    @property
    def kind(self) -> str:
        if self.name.startswith("loop"):
            return "loop"
        if self.rotational is None:
            return "disk"
        return "HDD" if self.rotational else "SSD"


def probe_table(node: str, logical: int) -> str:
    """The partition-table signature, read straight from the device: "gpt", "dos", "none", or why not."""
    try:
        fd = os.open(node, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return "no /dev node"
    except OSError:
        return "no access"
    try:
        head = os.pread(fd, 2 * max(logical, 512), 0)
    except OSError:
        return "?"
    finally:
        os.close(fd)
    if head[logical : logical + 8] == b"EFI PART":
        return "gpt"
    if len(head) >= 512 and head[510:512] == b"\x55\xaa":
        return "dos"
    return "none"


def _info(sys_path: str, node: str, props: dict[str, str]) -> DiskInfo | None:
    name = os.path.basename(sys_path)
    if name.startswith(SKIP_PREFIXES):
        return None
    sectors = read_int(os.path.join(sys_path, "size"))
    if sectors <= 0:
        return None  # an unused loop device, an empty card reader
    topo = topology(node) if os.path.exists(node) else None
    logical = (topo.logical if topo else 0) or read_int(os.path.join(sys_path, "queue/logical_block_size")) or 512
    physical = (topo.physical if topo else 0) or logical
    model = props.get("ID_MODEL", "").replace("_", " ") or (topo.model if topo else "")
    if not model and topo is not None and topo.serial:  # a virtio disk: no model, but its serial tells it apart
        model = f"serial {topo.serial}"
    table = props.get("ID_PART_TABLE_TYPE") or probe_table(node, logical)
    return DiskInfo(
        name=name,
        node=node,
        model=model,
        size_bytes=sectors * 512,  # sysfs counts 512-byte units whatever the sector size
        logical=logical,
        physical=physical,
        table=table,
        rotational=topo.rotational if topo else None,
        scheduler=topo.scheduler if topo else None,
        removable=read(os.path.join(sys_path, "removable")) == "1",
        read_only=bool(topo and topo.read_only),
        backing_file=read(os.path.join(sys_path, "loop/backing_file")) or "",
    )


def list_disks() -> list[DiskInfo]:
    """Whole disks with a size, sorted by name; partitions and unused loop devices are left out."""
    try:
        import pyudev

        context = pyudev.Context()
        found = [
            _info(dev.sys_path, dev.device_node or f"/dev/{dev.sys_name}", dict(dev.properties))
            for dev in context.list_devices(subsystem="block", DEVTYPE="disk")
        ]
    except Exception:  # no libudev at all: read sysfs ourselves
        found = [_info(os.path.realpath(f"/sys/block/{n}"), f"/dev/{n}", {}) for n in _sys_block()]
    return sorted((d for d in found if d is not None), key=lambda d: (d.name.startswith("loop"), d.name))


def _sys_block() -> list[str]:
    try:
        return sorted(os.listdir("/sys/block"))
    except OSError:
        return []


class _Monitor(Protocol):
    """The part of ``pyudev.Monitor`` the watcher uses (pyudev ships no types)."""

    def filter_by(self, subsystem: str) -> None: ...
    def start(self) -> None: ...
    def poll(self, timeout: float) -> Any: ...  # a pyudev.Device or None


class Watcher:
    """Calls ``on_change()`` (from a background thread) when a block device is added or removed.

    ``mode`` says how: "udev", "kernel" (udevd is not running: raw kernel uevents) or "poll"."""

    POLL_SECONDS = 2.0

    def __init__(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.mode = "off"

    def start(self) -> None:
        monitor = self._monitor()
        target = self._poll if monitor is None else (lambda: self._listen(monitor))
        self._thread = threading.Thread(target=target, name="diskplan-udev", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _monitor(self) -> _Monitor | None:
        try:
            import pyudev

            context = pyudev.Context()
            source = "udev" if os.path.exists("/run/udev/control") else "kernel"
            monitor: _Monitor = pyudev.Monitor.from_netlink(context, source=source)
            monitor.filter_by("block")
            monitor.start()
        except Exception:
            self.mode = "poll"
            return None
        self.mode = source
        return monitor

    def _listen(self, monitor: _Monitor) -> None:
        while not self._stop.is_set():
            try:
                device = monitor.poll(timeout=0.5)
            except Exception:
                self.mode = "poll"
                self._poll()
                return
            if device is not None and device.action in ("add", "remove", "change"):
                self._on_change()

    def _poll(self) -> None:
        seen = self._snapshot()
        while not self._stop.wait(self.POLL_SECONDS):
            now = self._snapshot()
            if now != seen:
                seen = now
                self._on_change()

    @staticmethod
    def _snapshot() -> dict[str, str | None]:
        return {n: read(f"/sys/block/{n}/size") for n in _sys_block()}
