"""The guest tier's power cut (for the crash-recovery tests, issue 23): a case says `guest-mark cut`, the
host kills QEMU at that moment, and a second boot on the same disk images sees what the guest had written
out (synced) and not what it had not."""

from __future__ import annotations

import pathlib

import pytest

from helpers.guest import Case, Disk, Machine, boot_guest, full_only

pytestmark = pytest.mark.guest

WRITE = r"""
printf synced | dd of=$DISK_d bs=512 seek=100 conv=fsync status=none
exec 3<$DISK_d  # held open: the last close of a block device writes its cache out, this one must not
printf cached | dd of=$DISK_d bs=512 seek=200 status=none  # in the guest's page cache only
guest-mark cut
echo "still running"
"""

READ = r"""
dd if=$DISK_d bs=512 skip=100 count=1 status=none | head -c 6; echo
dd if=$DISK_d bs=512 skip=200 count=1 iflag=direct status=none | tr -d '\000' | head -c 6; echo
"""


def test_a_power_cut_keeps_what_was_synced_and_loses_what_was_not(tmp_path: pathlib.Path):
    full_only()  # the tier's own power cut; the default run cuts a real move (tests/test_guest_powercut.py)
    disk = Disk("d", 8 << 20)

    def cut(machine: Machine) -> None:
        machine.kill()

    first = boot_guest([disk], [Case("write", WRITE)], workdir=tmp_path, handlers={"cut": cut})
    assert first.killed and first["write"].rc is None  # the power went while the case ran
    assert disk.image is not None and disk.image.read_bytes()[100 * 512:100 * 512 + 6] == b"synced"
    second = boot_guest([disk], [Case("read", READ)], workdir=tmp_path)
    assert second["read"].check().out.splitlines() == ["synced", ""]
