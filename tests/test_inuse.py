"""discovery.inuse: every use of a disk named — parsed from fake /proc and /sys trees (escapes, dm names),
and seen on real loop devices (exclusive opens, a loop reading an image, the kernel's partition list)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable

from conftest import need_tool, run
from diskplan.discovery import inuse
from test_commit_support import partx_update

MiB = 1 << 20
TWO = "label: gpt\nstart=2048, size=20480\nstart=22528, size=20480\n"


def test_mountinfo_names_the_mount_point_with_its_escapes(tmp_path: pathlib.Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountinfo").write_text(
        "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        "95 22 259:3 / /mnt/my\\040disk rw,relatime shared:50 - ext4 /dev/sdz1 rw\n"
    )
    uses = inuse.mounts({(259, 3): "/dev/sdz1", (8, 240): "/dev/sdz"}, proc_root=str(tmp_path))
    assert [str(u) for u in uses] == ["/dev/sdz1 is mounted on /mnt/my disk (ext4)"]
    assert uses[0].blocking


def test_a_swap_file_that_is_the_image_is_named(tmp_path: pathlib.Path) -> None:
    img = tmp_path / "swap image"
    img.write_bytes(b"\0" * 4096)
    (tmp_path / "swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        f"{str(img).replace(' ', chr(92) + '040')}\tfile\t\t4\t\t0\t\t-2\n"
    )
    uses = inuse.swaps({}, os.stat(img), proc_root=str(tmp_path))
    assert [str(u) for u in uses] == [f"{img} is in use as swap (file file)"]


def test_holders_name_lvm_and_md(tmp_path: pathlib.Path) -> None:
    disk = tmp_path / "block" / "sdz"
    for holder in ("dm-0", "md0"):
        (disk / "sdz1" / "holders" / holder).mkdir(parents=True)
    dm = tmp_path / "class" / "block" / "dm-0" / "dm"
    dm.mkdir(parents=True)
    (dm / "name").write_text("vg0-root\n")
    (dm / "uuid").write_text("LVM-abcdef\n")
    nodes = [inuse.Node("sdz", (8, 240), str(disk)), inuse.Node("sdz1", (8, 241), str(disk / "sdz1"))]
    uses = inuse.holders(nodes, sys_root=str(tmp_path))
    assert [str(u) for u in uses] == ["/dev/sdz1 is held by dm-0 (LVM vg0-root)", "/dev/sdz1 is held by md0"]


def test_an_exclusive_opener_is_named_busy(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input=TWO)
    dev = loop_device(img)
    partx_update(dev)
    assert [u for u in inuse.find_users(dev) if u.blocking] == []
    fd = os.open(f"{dev}p2", os.O_RDONLY | os.O_EXCL)  # as mount, md or dm-crypt would claim it
    try:
        uses = [str(u) for u in inuse.find_users(dev)]
        assert uses == [f"{dev}p2 is busy: the kernel or another program holds it open exclusively"]
        assert inuse.culprits(str(img)) == [f"{uses[0]} ({dev} reads this image)"]
    finally:
        os.close(fd)


def test_an_idle_loop_over_an_image_is_a_note_not_a_refusal(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(64 * MiB)
    assert inuse.find_users(str(img)) == []
    dev = loop_device(img)
    uses = inuse.find_users(str(img))
    assert len(uses) == 1 and not uses[0].blocking
    assert str(uses[0]).startswith(f"{dev} reads this image") and f"partx -u {dev}" in str(uses[0])
    assert inuse.culprits(str(img)) == []


def test_kernel_partitions_follow_sysfs(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str]
) -> None:
    img = sparse_image(64 * MiB)
    assert inuse.kernel_partitions(str(img)) is None  # an image file has no kernel view
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img), input=TWO)
    dev = loop_device(img, sector_size=4096)
    run(need_tool("sfdisk"), "-q", "--no-reread", dev, input="label: gpt\nstart=256, size=512\n")
    partx_update(dev)
    assert inuse.kernel_partitions(dev) == {1: (256 * 8, 512 * 8)}  # sysfs counts 512-byte units
    assert [n.name for n in inuse.nodes(inuse.disk_sysdir(dev) or "")] == [os.path.basename(dev),
                                                                            f"{os.path.basename(dev)}p1"]
