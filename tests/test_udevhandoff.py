"""The hand-off to udevd at a write's end (backend.write.udevhandoff): what counts as udevd's answer, and how
long the partition is held. The guest tier runs it against a real udevd and LVM (tests/test_guest_stack.py:
a resize of a deactivated group's PV leaves the group inactive); here the uevents come through a socket
pair, as the kernel's netlink socket hands them: ``ACTION@DEVPATH`` then NUL-separated fields."""

from __future__ import annotations

import os
import socket
import threading
import time

from diskplan.backend.write import udevhandoff
from diskplan.backend.write.udevhandoff import Held


def uevent(action: str, name: str) -> bytes:
    path = f"/devices/pci0000:00/0000:00:05.0/virtio2/block/{name}"
    return f"{action}@{path}\0ACTION={action}\0DEVPATH={path}\0SUBSYSTEM=block\0DEVNAME={name}\0".encode()


def held() -> tuple[Held, socket.socket]:
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    return Held("vda", os.open(os.devnull, os.O_RDONLY), ours), kernel


def test_only_a_change_of_the_disk_itself_is_the_answer() -> None:
    h, kernel = held()
    try:
        assert h.answered(uevent("change", "vda"))
        assert not h.answered(uevent("change", "vda1"))  # udevd's change of a partition comes with it
        assert not h.answered(uevent("add", "vda"))
        assert not h.answered(uevent("change", "vdab"))
    finally:
        h.wait(wait=0.0)
        kernel.close()


def test_the_partition_is_held_until_udevd_answered_and_quiet() -> None:
    h, kernel = held()

    def udevd() -> None:
        time.sleep(0.3)
        kernel.send(uevent("change", "vda1"))
        kernel.send(uevent("change", "vda"))
        time.sleep(0.2)
        kernel.send(uevent("change", "vda"))  # a second close answered: the quiet time starts again

    t0 = time.monotonic()
    threading.Thread(target=udevd).start()
    assert h.wait(wait=5.0, quiet=0.4)
    took = time.monotonic() - t0
    assert 0.85 <= took < 3.0, took  # 0.3 + 0.2 + the quiet 0.4 after the last answer, not the 5 s bound
    kernel.close()


def test_no_answer_lets_go_at_the_bound() -> None:
    h, kernel = held()
    kernel.send(uevent("change", "vdb"))  # another disk's
    t0 = time.monotonic()
    assert not h.wait(wait=0.5, quiet=0.1)
    assert 0.45 <= time.monotonic() - t0 < 2.0
    kernel.close()


def test_nothing_is_held_for_an_image_file(tmp_path) -> None:
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * 4096)
    assert udevhandoff.hold(str(img)) is None
