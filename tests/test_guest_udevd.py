"""Writes on a system where systemd-udevd runs (issue 24, defect 1), in one guest boot: udevd waits for the
disk's BSD lock before it probes, so nothing may wait for udevd while diskplan holds that lock (Debian's
libparted ran `udevadm settle` inside its commit: each write stalled 2 x 120 s and a grow left the kernel
with the old size). Each write here must end well inside those 120 s, and the kernel's view (sysfs) and
udev's (the /dev/disk/by-partuuid links) must show the new partitions."""

from __future__ import annotations

import pytest

from helpers.guest import Case, Run, boot_guest, e512

pytestmark = pytest.mark.guest

# a write that ran into libparted's settle takes > 120 s: 100 s says "stalled" without waiting it all out
STALLED = 100

PREPARE = r"""
printf 'label: gpt\nstart=2048, size=32768\n' | sfdisk -q $DISK_grow
udevadm settle -t 30
mkfs.ext4 -q ${DISK_grow}1
printf 'label: gpt\nstart=2048, size=20480\nstart=22528, size=20480\n' > /tmp/plan.sfdisk
"""

APPLY = rf"""
rc=0; timeout {STALLED} diskplan apply /tmp/plan.sfdisk $DISK_blank --yes || rc=$?
echo "rc=$rc"
d=${{DISK_blank#/dev/}}
k=""; for n in 1 2; do k="$k $(cat /sys/block/$d/$d$n/start)+$(cat /sys/block/$d/$d$n/size)"; done
echo "kernel=$k"
udevadm settle -t 30
for n in 1 2; do
  uuid=$(sfdisk --part-uuid $DISK_blank $n | tr A-Z a-z)
  echo "link$n=$(readlink -f /dev/disk/by-partuuid/$uuid)"
done
"""

RESIZE = rf"""
rc=0; timeout {STALLED} diskplan resize $DISK_grow --partition 1 --size 32MiB --yes || rc=$?
echo "rc=$rc"
d=${{DISK_grow#/dev/}}
echo "kernel=$(cat /sys/block/$d/${{d}}1/size)"
"""

MOVE = rf"""
rc=0; timeout {STALLED} diskplan move $DISK_blank --partition 2 --to 90112 --yes || rc=$?
echo "rc=$rc"
d=${{DISK_blank#/dev/}}
echo "kernel=$(cat /sys/block/$d/${{d}}2/start)+$(cat /sys/block/$d/${{d}}2/size)"
"""


@pytest.fixture(scope="module")
def run() -> Run:
    return boot_guest([e512("blank"), e512("grow", 128 << 20)],
                      [Case("prepare", PREPARE), Case("apply", APPLY), Case("resize", RESIZE), Case("move", MOVE)],
                      udevd=True)


def values(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_apply_on_a_blank_512e_disk_does_not_wait_for_udevd(run):
    run["prepare"].check()
    got = values(run["apply"].check().out)
    assert got["rc"] == "0", run["apply"].err  # 124: still writing after 100 s (waiting for udevd)
    assert got["kernel"].split() == ["2048+20480", "22528+20480"]  # the kernel's view, as sysfs says it
    dev = run.devices["blank"]
    assert (got["link1"], got["link2"]) == (f"{dev}1", f"{dev}2")  # udevd probed them once the lock was gone


def test_resize_grow_updates_the_kernels_view(run):
    got = values(run["resize"].check().out)
    assert got["rc"] == "0", run["resize"].err
    assert got["kernel"] == str(32 << 11)  # 32 MiB in 512-byte sectors: the grown size, not the old 16 MiB


def test_move_updates_the_kernels_view(run):
    got = values(run["move"].check().out)
    assert got["rc"] == "0", run["move"].out + run["move"].err
    assert got["kernel"] == "90112+20480"  # the partition's new place, as sysfs says it
