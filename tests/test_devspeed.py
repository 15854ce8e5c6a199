"""The speed a data move is estimated at before anything is read: from sysfs, for devices and image files."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable

from diskplan.backend.move.devspeed import NVME, SPINNING, SSD, UNKNOWN, assumed_rate
from helpers.units import MiB


def _queue_of(path: str) -> str:
    st = os.stat(path)
    base = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    return next(os.path.join(d, "queue") for d in (base, base + "/..") if os.path.isdir(os.path.join(d, "queue")))


def test_an_image_file_goes_at_the_speed_of_the_disk_holding_it(sparse_image: Callable[..., pathlib.Path]) -> None:
    image = str(sparse_image(4 * MiB))
    rate, what = assumed_rate(image)
    with open(os.path.join(_queue_of(image), "rotational"), encoding="ascii") as f:
        spinning = f.read().strip() == "1"
    assert (rate == SPINNING) == spinning and rate in (SPINNING, SSD, NVME) and what.startswith("a")
    assert assumed_rate(image + ".missing") == (UNKNOWN, "a disk of unknown speed")


def test_a_loop_device_goes_at_the_speed_of_its_backing_file(sparse_image: Callable[..., pathlib.Path],
                                                             loop_device: Callable[..., str]) -> None:
    image = str(sparse_image(4 * MiB))
    dev = loop_device(image)
    rate, what = assumed_rate(dev)
    assert (rate, what) == (assumed_rate(image)[0], f"{assumed_rate(image)[1]} (behind the loop device)")
