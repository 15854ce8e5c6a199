"""The planner in tmux in the guest, with udevd and without (the kernel's own uevents over netlink, as on a
rescue system or in an initramfs): its device picker is open when a disk is plugged in and pulled out
through QMP (real PCI hotplug events), and shows it come and go."""

from __future__ import annotations

import pytest

from helpers.guest import Case, Machine, Run, boot_guest, e512, full_only

pytestmark = pytest.mark.guest

PICKER = r"""
wait_for() {  # wait_for PRESENT|ABSENT TEXT SECONDS: poll the planner's screen
  i=0
  while :; do
    if tmux capture-pane -p -t dp | grep -q "$2"; then [ "$1" = PRESENT ] && return 0
    else [ "$1" = ABSENT ] && return 0; fi
    i=$((i + 1)); [ $i -gt $(($3 * 4)) ] && return 1
    sleep 0.25
  done
}
echo "udevd=$(test -e /run/udev/control && echo yes || echo no)"
tmux new-session -d -s dp -x 100 -y 30 "diskplan"
wait_for PRESENT "$DISK_a" 120 || { tmux capture-pane -p -t dp; echo "no picker"; exit 1; }
t0=$(date +%s.%N)
guest-mark plug
wait_for PRESENT /dev/vdb 30 && echo "plugged=$(echo "$(date +%s.%N) - $t0" | bc)"
tmux capture-pane -p -t dp > /tmp/with
guest-mark unplug
t0=$(date +%s.%N)
wait_for ABSENT /dev/vdb 30 && echo "unplugged=$(echo "$(date +%s.%N) - $t0" | bc)"
tmux capture-pane -p -t dp > /tmp/without
tmux kill-server
echo "--- with"; cat /tmp/with; echo "--- without"; cat /tmp/without
"""

# the watcher alone, its poll slowed to an hour: only a uevent (udevd's, or the kernel's own over netlink)
# can tell it of the disk plugged in next
WATCHER = """
import subprocess, threading, time
from diskplan.discovery.udev import Watcher
seen = threading.Event()
w = Watcher(seen.set)
w.POLL_SECONDS = 3600.0
w.start()
print(f"mode={w.mode}")
time.sleep(0.5)
subprocess.run(["guest-mark", "plug2"], check=True)
t0 = time.monotonic()
print(f"seen={seen.wait(30)} after={time.monotonic() - t0:.2f}")
"""


@pytest.fixture(scope="module", params=[True, False], ids=["udevd", "no-udevd"])
def run(request: pytest.FixtureRequest) -> Run:
    full_only()

    def plug(machine: Machine) -> None:
        machine.hotplug(e512("hot", 48 << 20))

    def unplug(machine: Machine) -> None:
        machine.unplug("hot")

    def plug2(machine: Machine) -> None:
        machine.hotplug(e512("hot2", 40 << 20))

    return boot_guest([e512("a")], [Case("picker", PICKER), Case("watcher", WATCHER, python=True)],
                      udevd=request.param, handlers={"plug": plug, "unplug": unplug, "plug2": plug2})


def test_a_disk_plugged_in_shows_in_the_open_picker(run, request):
    out = run["picker"].check().out
    udevd = request.node.callspec.params["run"]
    assert f"udevd={'yes' if udevd else 'no'}" in out, out  # the boot is the one asked for
    assert "plugged=" in out, out
    with_hot = out.split("--- with")[1].split("--- without")[0]
    assert "/dev/vdb" in with_hot and "48" in with_hot, with_hot  # its node and its size


def test_a_disk_pulled_out_leaves_the_open_picker(run):
    out = run["picker"].check().out
    assert "unplugged=" in out, out
    assert "/dev/vdb" not in out.split("--- without")[1]


def test_the_watcher_hears_the_uevent_with_or_without_udevd(run, request):
    got = dict(line.split("=", 1) for line in run["watcher"].check().out.split() if "=" in line)
    # without udevd the kernel's own uevents (netlink group 1): no poll, which was slowed to an hour
    assert got["mode"] == ("udev" if request.node.callspec.params["run"] else "kernel"), run["watcher"].out
    assert got["seen"] == "True", run["watcher"].out + run["watcher"].err
