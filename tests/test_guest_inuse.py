"""Users of a disk this machine's kernel cannot make, refused in a guest (tests/helpers/guest.py): a dm-linear
table over a partition, an md array with a partition as its member, an open LUKS mapping, and a loop device
over the disk itself at an offset (issue 25). Each case sets one up, tries a write that would move data
under it, says the exit status and the refusal, then takes it down; the table must be what it was."""

from __future__ import annotations

import pytest

from helpers.guest import Case, Run, boot_guest, full_only, ssd

pytestmark = pytest.mark.guest

PREPARE = r"""
printf 'label: gpt\nstart=2048, size=20480\nstart=22528, size=20480\n' | sfdisk -q $DISK_a
blockdev --rereadpt $DISK_a || partx -u $DISK_a
sfdisk --dump $DISK_a > /tmp/table.before
"""

# the write tried under each user: partition 1 moved to where the second partition's bytes follow it
WRITE = r"""
rc=0; diskplan move $DISK_a --partition 1 --to 4096 --yes 2>/tmp/err || rc=$?
echo "rc=$rc"; cat /tmp/err
sfdisk --dump $DISK_a | cmp -s - /tmp/table.before && echo "table kept"
"""

DM = r"""
modprobe dm-mod
echo "0 20480 linear ${DISK_a}1 0" | DM_DISABLE_UDEV=1 dmsetup create lin
""" + WRITE + r"""
DM_DISABLE_UDEV=1 dmsetup remove lin
"""

MD = r"""
modprobe md-mod; modprobe raid1
mdadm --create /dev/md0 --run --quiet --level=1 --raid-devices=2 --metadata=1.2 ${DISK_a}1 missing
""" + WRITE + r"""
mdadm --stop /dev/md0
"""

LUKS = r"""
modprobe dm-mod; modprobe dm-crypt
printf 'a passphrase' > /tmp/key
cryptsetup luksFormat --batch-mode --type luks1 --pbkdf-force-iterations 1000 --key-file /tmp/key ${DISK_a}1
DM_DISABLE_UDEV=1 cryptsetup open --key-file /tmp/key ${DISK_a}1 secret
""" + WRITE + r"""
DM_DISABLE_UDEV=1 cryptsetup close secret
"""

LOOP = r"""
modprobe loop
l=$(losetup --find --show --offset $((22528 * 512)) --sizelimit $((20480 * 512)) $DISK_a)
echo "loop=$l"
""" + WRITE + r"""
losetup --detach $l
"""


@pytest.fixture(scope="module")
def run() -> Run:
    """A dm-linear table and a loop device over the disk (~1 minute; behind DISKPLAN_GUEST=all to keep make test
    within its budget: the host's tests/test_inuse.py covers loops over the disk on every run)."""
    full_only()
    return boot_guest([ssd("a")], [Case("prepare", PREPARE), Case("dm", DM), Case("loop", LOOP)])


@pytest.fixture(scope="module")
def run_full() -> Run:
    full_only()  # one more boot: an md member and an open LUKS mapping
    return boot_guest([ssd("a")], [Case("prepare", PREPARE), Case("md", MD), Case("luks", LUKS)])


def refused(run: Run, case: str) -> str:
    run["prepare"].check()
    out = run[case].check().out
    assert "rc=1" in out and "table kept" in out, out
    return out


def test_a_dm_linear_table_over_a_partition_is_named(run: Run) -> None:
    assert "1 is held by dm-0 (dm lin)" in refused(run, "dm")


def test_an_md_member_is_named_with_its_array(run_full: Run) -> None:
    assert "1 is held by md0 (md raid1 array)" in refused(run_full, "md")


def test_an_open_luks_mapping_is_named(run_full: Run) -> None:
    assert "(dm-crypt secret)" in refused(run_full, "luks")


def test_a_loop_device_over_the_disk_itself_is_named_with_its_bytes(run: Run) -> None:
    out = refused(run, "loop")
    loop = next(line[5:] for line in out.splitlines() if line.startswith("loop="))
    assert f"{loop} maps bytes {22528 * 512} to {43008 * 512 - 1} of " in out, out
