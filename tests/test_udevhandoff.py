"""The hand-off to udevd at a write's end (backend.write.udevhandoff): what counts as udevd's answer, and how
long the partition is held. The guest tier runs it against a real udevd and LVM (tests/test_guest_stack.py:
a resize of a deactivated group's PV leaves the group inactive); here the uevents come through a socket
pair, as the kernel's netlink socket hands them: ``ACTION@DEVPATH`` then NUL-separated fields."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
import threading
import time

import pytest

from diskplan.backend.write import udevhandoff
from diskplan.backend.write.udevhandoff import Held
from helpers.images import partx_update


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


def listening(path: pathlib.Path) -> pathlib.Path:
    """A control socket someone listens on, as udevd's (closed when the test's process ends)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(str(path))
    s.listen(4)
    _LISTENERS.append(s)
    return path


_LISTENERS: list[socket.socket] = []


def test_a_control_socket_nobody_answers_on_holds_nothing(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, loop_device
) -> None:
    """udevd stopped but its control socket left behind (or a plain file there): nothing is held, where the
    release used to wait the whole WAIT (10 s a write, measured) for an answer that never came. A socket
    that is listened on still gets the hold, on a loop device with a partition."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(8 << 20)
    subprocess.run(["sfdisk", "-q", str(img)], input="label: gpt\nstart=2048, size=4096\n", text=True, check=True)
    dev = loop_device(img)
    partx_update(dev)
    if not os.path.exists(dev + "p1"):
        pytest.skip("no partition node for the loop device")
    stale = tmp_path / "stale"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(str(stale))
    s.close()  # the socket's file stays, nobody listens: ECONNREFUSED
    plain = tmp_path / "plain"
    plain.touch()
    for control in (stale, plain, tmp_path / "missing"):
        monkeypatch.setattr(udevhandoff, "UDEVD_CONTROL", str(control))
        assert udevhandoff.hold(dev) is None, control
    monkeypatch.setattr(udevhandoff, "UDEVD_CONTROL", str(listening(tmp_path / "control")))
    got = udevhandoff.hold(dev)
    assert got is not None
    got.wait(wait=0.05)


def test_nothing_is_held_for_an_image_file(tmp_path) -> None:
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * 4096)
    assert udevhandoff.hold(str(img)) is None


def test_a_disk_gone_from_sysfs_is_not_held_and_raises_nothing(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose disk has left sysfs (unplugged while locked; here a node of a loop minor no kernel device
    has): hold() raised FileNotFoundError from listing its sysfs directory, out of the lock's release, with
    the lock's descriptor left open."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mknod")
    control = listening(tmp_path / "control")  # udevd "runs"
    monkeypatch.setattr(udevhandoff, "UDEVD_CONTROL", str(control))
    node = tmp_path / "gone"
    os.mknod(node, 0o600 | 0o060000, os.makedev(7, 1048000))  # a block node: loop minor 1048000 does not exist
    assert not os.path.exists("/sys/dev/block/7:1048000")
    assert udevhandoff.hold(str(node)) is None


def test_the_lock_descriptor_is_closed_whatever_hold_raises(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from diskplan.backend.write import lock

    def boom(path: str) -> None:
        raise OSError(5, "sysfs went away")

    img = tmp_path / "img"
    img.write_bytes(b"\0" * 4096)
    held = lock.take(str(img))
    fd = held._fd
    assert fd is not None
    monkeypatch.setattr(udevhandoff, "hold", boom)
    with contextlib.suppress(OSError):
        held.release()
    try:
        os.fstat(fd)
    except OSError:
        return  # closed: the lock went with it
    os.close(fd)
    raise AssertionError("the lock's descriptor stayed open after release raised")
