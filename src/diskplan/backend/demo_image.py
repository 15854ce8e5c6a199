"""Build a demo scenario as a real disk: a sparse image file written by libparted, behind a loop device
when the scenario's sectors are not 512 bytes (an image file always reads as 512-byte sectors).

libparted runs in a forked child (``isolate.run_isolated``): it prints "udevadm: not found" and may
crash, and neither may reach the planner. Images live in one temporary directory per ``Workspace``,
removed (and loop devices detached) by ``Workspace.close``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading

from diskplan.backend.isolate import IsolatedFailure, run_isolated
from diskplan.model.demos import Scenario
from diskplan.model.extent import Partition
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
    from diskplan.backend.libparted import write_table  # only in the child: keeps parted out of the parent

    write_table(path, label, partitions)


def _write_pv(device: str, scenario: Scenario) -> None:
    """The LVM2 PV headers a scenario carries (model.lvmformat), after the table: ``pvs`` reads them."""
    pieces = scenario.pv_pieces()
    if not pieces:
        return
    with open(device, "r+b") as f:
        for offset, data in pieces:
            f.seek(offset)
            f.write(data)


def _attach_loop(image: str, sector: int) -> str:
    if os.geteuid() != 0:
        raise DemoUnavailable(
            f"a disk with {sector}-byte sectors needs a loop device (losetup --sector-size {sector}), "
            "which needs root; run as root to build it for real"
        )
    losetup = shutil.which("losetup")
    if losetup is None:
        raise DemoUnavailable("losetup (util-linux) is not installed, so no loop device can be made")
    done = subprocess.run(
        [losetup, "--find", "--show", "--sector-size", str(sector), image],
        capture_output=True,
        text=True,
        timeout=20,
    )
    if done.returncode != 0 or not done.stdout.strip():
        reason = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise DemoUnavailable(f"losetup could not attach the image with {sector}-byte sectors: {reason}")
    return done.stdout.strip()


def detach_loop(device: str) -> None:
    losetup = shutil.which("losetup")
    if losetup:
        subprocess.run([losetup, "--detach", device], capture_output=True, timeout=20)


def build(scenario: Scenario, directory: str) -> DemoImage:
    """Write ``scenario`` to a sparse image in ``directory`` (and a loop device when needed)."""
    image = os.path.join(directory, f"{scenario.name}.img")
    with open(image, "wb") as f:
        f.truncate(scenario.sectors * scenario.logical)  # sparse: only the tables take space
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
