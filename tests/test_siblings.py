"""backend.parted.siblings gives each libparted child a mount namespace of its own. Where mounts are private (this
machine; rescue systems), that namespace's copy of a filesystem mounted elsewhere is not unmounted by an
``umount`` there: the filesystem would live on until the child exits, its last writes not yet on its disk,
its loop device not detached. The child lets go of every disk filesystem but the image's own."""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable

from diskplan.backend.parted import isolate, siblings
from diskplan.model.mountinfo import disk_mounts
from helpers.images import mounted
from helpers.tools import need_tool, run
from helpers.units import MiB


def test_disk_mounts_are_the_device_backed_ones_deepest_first() -> None:
    text = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "22 27 0:21 / /proc rw - proc proc rw\n"
        "90 27 7:3 / /mnt/my\\040disk rw - ext4 /dev/loop3 rw\n"
        "91 90 7:4 / /mnt/my\\040disk/inner rw shared:5 - btrfs /dev/loop4 rw\n"
        "92 27 0:40 / /tmp/t rw - tmpfs tmpfs rw\n"
        "93 27 0:41 / /media/usb rw - fuseblk /dev/sdb1 rw\n"
    )
    assert disk_mounts(text) == ["/mnt/my disk/inner", "/mnt/my disk", "/media/usb", "/"]


def _alone_until(image: str, go: str) -> bool:
    """In the child: hide ``image``'s neighbours, then wait (at most 30 s) until ``go`` exists."""
    done = siblings.stand_alone(image)
    end = time.monotonic() + 30
    while not os.path.exists(go) and time.monotonic() < end:
        time.sleep(0.02)
    return done


def _own_namespace(pid: int) -> None:
    mine = os.readlink("/proc/self/ns/mnt")
    end = time.monotonic() + 30
    while os.readlink(f"/proc/{pid}/ns/mnt") == mine:
        assert time.monotonic() < end, "the child made no mount namespace"
        time.sleep(0.02)


def test_a_child_reading_an_image_does_not_keep_a_filesystem_alive_after_its_umount(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path,
) -> None:
    dev = loop_device(sparse_image(32 * MiB, "fs.img"))
    (tmp_path / "images").mkdir()
    image = tmp_path / "images" / "disk.img"
    image.write_bytes(bytes(MiB))
    go = tmp_path / "go"
    with mounted(dev, tmp_path / "mnt"):
        child = isolate.start_isolated(_alone_until, str(image), str(go))
        _own_namespace(child.pid)
    try:
        # umount has returned: the filesystem is gone, not still mounted in the child's namespace
        assert not os.path.exists(f"/sys/fs/ext4/{os.path.basename(dev)}")
    finally:
        go.touch()
        assert child.result(timeout=60) is True  # and the child did hide the image's neighbours


def _starts(images: list[str]) -> list[list[int]]:
    from diskplan.backend.parted.libparted import read_disk

    return [[p.start for p in read_disk(i, filesystems=False).table.partitions] for i in images]


def test_one_child_reads_images_on_two_filesystems(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path,
) -> None:
    """Each image's namespace lets go of the other's filesystem: the child goes back home between them."""
    devs = [loop_device(sparse_image(32 * MiB, f"fs{i}.img")) for i in (1, 2)]
    with mounted(devs[0], tmp_path / "m1"), mounted(devs[1], tmp_path / "m2"):
        images = []
        for i, where in ((1, "m1"), (2, "m2")):
            img = tmp_path / where / "disk.img"
            with open(img, "wb") as f:
                f.truncate(8 * MiB)
            run(need_tool("sfdisk"), "-q", str(img), input=f"label: gpt\nstart={2048 * i}, size=2048\n")
            images.append(str(img))
        got = isolate.run_isolated(_starts, [*images, images[0]], timeout=60)
    assert got == [[2048], [4096], [2048]]
