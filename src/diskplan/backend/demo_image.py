"""Build a demo scenario as a real disk: a sparse image file written by libparted, behind a loop device
when the scenario's sectors are not 512 bytes (an image file always reads as 512-byte sectors).

libparted runs in a forked child (``isolate.run_isolated``): it prints "udevadm: not found" and may
crash, and neither may reach the planner. Images live in one temporary directory per ``Workspace``,
removed (and loop devices detached) by ``Workspace.close``. The loop devices are autocleared
(backend.loopdev): a killed planner leaves none behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading

from diskplan.backend import loopdev
from diskplan.backend.parted.isolate import IsolatedFailure, run_isolated
from diskplan.model.extent import Partition
from diskplan.model.teach.demos import Scenario
from diskplan.model.value import value


class DemoUnavailable(Exception):
    """The scenario cannot be built here; ``str(exc)`` says why in one line a user can act on."""


@value
class DemoImage:
    scenario: str
    image: str  # the sparse file
    device: str  # what to open: the file itself, or the loop device over it
    loop: str | None = None


def _write(path: str, label: str, partitions: tuple[Partition, ...]) -> None:
    from diskplan.backend.parted.libparted import write_table  # only in the child: keeps parted out of the parent

    write_table(path, label, partitions)


def _write_pv(device: str, scenario: Scenario) -> None:
    """The LVM2 PV headers a scenario carries (model.formats.lvmformat), after the table: ``pvs`` reads them."""
    pieces = scenario.pv_pieces()
    if not pieces:
        return
    with open(device, "r+b") as f:
        for offset, data in pieces:
            f.seek(offset)
            f.write(data)


# The loop devices this process holds, by image path (backend.loopdev: autocleared, so they go when this
# process ends however it ends; a forked child inherits them and uses the one its parent attached).
_held: dict[str, loopdev.Loop] = {}


def _attach_loop(image: str, sector: int) -> str:
    held = _held.get(image)
    if held is not None:
        return held.path
    if os.geteuid() != 0:
        raise DemoUnavailable(
            f"a disk with {sector}-byte sectors needs a loop device (losetup --sector-size {sector}), "
            "which needs root; run as root to build it for real"
        )
    try:
        _held[image] = loopdev.attach(image, sector=sector, read_only=False)
    except loopdev.LoopError as exc:
        raise DemoUnavailable(f"no loop device could show the image with {sector}-byte sectors: "
                              f"{exc.strerror}") from exc
    return _held[image].path


def detach_loop(device: str) -> None:
    for image, loop in list(_held.items()):
        if loop.path == device:
            del _held[image]
            loop.close()


def _blank(scenario: Scenario, directory: str) -> str:
    """The scenario's sparse image file (left as it is when this process already shows it in a loop device)."""
    image = os.path.join(directory, f"{scenario.name}.img")
    if image not in _held:
        with open(image, "wb") as f:
            f.truncate(scenario.sectors * scenario.logical)  # sparse: only the tables take space
    return image


def reserve(scenario: Scenario, directory: str) -> None:
    """Attach the loop device a scenario needs in this process, before a forked child builds the image in it:
    the child's own hold ends with the child, this one lasts as long as the caller."""
    if scenario.needs_loop and os.geteuid() == 0:
        with contextlib.suppress(DemoUnavailable):  # the child says why, as it would have without this
            _attach_loop(_blank(scenario, directory), scenario.logical)


def build(scenario: Scenario, directory: str) -> DemoImage:
    """Write ``scenario`` to a sparse image in ``directory`` (and a loop device when needed)."""
    image = _blank(scenario, directory)
    loop = _attach_loop(image, scenario.logical) if scenario.needs_loop else None
    device = loop or image
    try:
        if scenario.label is not None:
            run_isolated(_write, device, scenario.label, scenario.partitions, timeout=60)
        _write_pv(device, scenario)
    except IsolatedFailure as exc:
        if loop:
            detach_loop(loop)
        raise DemoUnavailable(f"libparted could not write the {scenario.name} demo: {exc.reason}") from exc
    return DemoImage(scenario.name, image, device, loop)


class Workspace:
    """A temporary directory of demo images, built once each and cleaned up on ``close``."""

    def __init__(self) -> None:
        self._dir: str | None = None
        self._built: dict[str, DemoImage] = {}
        self._lock = threading.Lock()  # the planner builds in worker threads

    @property
    def directory(self) -> str:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="diskplan-demo-")
        return self._dir

    def image(self, scenario: Scenario) -> DemoImage:
        with self._lock:
            if scenario.name not in self._built:
                self._built[scenario.name] = build(scenario, self.directory)
            return self._built[scenario.name]

    def reserve(self, scenario: Scenario) -> None:
        """Before forking the child that builds ``scenario``: its loop device, held by this process."""
        reserve(scenario, self.directory)

    def built(self, name: str) -> DemoImage | None:
        return self._built.get(name)

    def adopt(self, image: DemoImage) -> None:
        """An image a forked child built in this workspace's directory: cleaned up with the others."""
        with self._lock:
            self._built.setdefault(image.scenario, image)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        for img in self._built.values():
            if img.loop:
                detach_loop(img.loop)
        self._built.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
