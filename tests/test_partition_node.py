"""``kernelparts.partition_node``: the kernel's own node of a partition, for a tool that must not be given a
loop device (an LVM physical volume's pvresize, backend.move.resize): told a grow first, checked against
sysfs and /dev, refused when the kernel holds the partition elsewhere. On loop devices of 512 and 4096-byte
sectors (the guest tier runs the resize itself: tests/test_guest_stack.py)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

from diskplan.backend.raw import kernelparts
from diskplan.backend.raw.kernelparts import NodeError, partition_node
from helpers.images import partx_update
from helpers.tools import run
from helpers.units import MiB


@pytest.mark.parametrize("sector", [512, 4096])
def test_the_node_of_a_partition_told_its_new_size(
    tmp_path: pathlib.Path, loop_device: Callable[..., str], sector: int
) -> None:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(32 * MiB)
    dev = loop_device(img, sector_size=sector)
    start, size = MiB // sector, 8 * MiB // sector
    run("sfdisk", "-q", dev, input=f"label: gpt\nstart={start}, size={size}\n")
    partx_update(dev)
    k = sector // 512
    assert partition_node(dev, 1, start, size, sector) == f"{dev}p1"
    # a grow whose entry is written: the kernel is told the new size before the node is handed out
    assert partition_node(dev, 1, start, 2 * size, sector) == f"{dev}p1"
    assert kernelparts.kernel_list(dev) == {1: (start * k, 2 * size * k)}
    with pytest.raises(NodeError, match="the kernel has partition 1 at"):
        partition_node(dev, 1, start + 1, size, sector)  # held elsewhere: never resized into another place
    assert kernelparts.kernel_list(dev) == {1: (start * k, 2 * size * k)}
    with pytest.raises(NodeError, match="does not know partition 2"):
        partition_node(dev, 2, start + 2 * size, size, sector)


def test_an_image_file_has_no_node(tmp_path: pathlib.Path) -> None:
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * MiB)
    with pytest.raises(NodeError, match="not a block device"):
        partition_node(str(img), 1, 2048, 8, 512)
