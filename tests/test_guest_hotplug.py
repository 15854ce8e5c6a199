"""The planner in tmux in the guest, with udevd: its device picker is open when a disk is plugged in and
pulled out through QMP (real PCI hotplug events), and shows it come and go."""

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


@pytest.fixture(scope="module")
def run() -> Run:
    full_only()

    def plug(machine: Machine) -> None:
        machine.hotplug(e512("hot", 48 << 20))

    def unplug(machine: Machine) -> None:
        machine.unplug("hot")

    return boot_guest([e512("a")], [Case("picker", PICKER)], udevd=True, handlers={"plug": plug, "unplug": unplug})


def test_a_disk_plugged_in_shows_in_the_open_picker(run):
    out = run["picker"].check().out
    assert "plugged=" in out, out
    with_hot = out.split("--- with")[1].split("--- without")[0]
    assert "/dev/vdb" in with_hot and "48" in with_hot, with_hot  # its node and its size


def test_a_disk_pulled_out_leaves_the_open_picker(run):
    out = run["picker"].check().out
    assert "unplugged=" in out, out
    assert "/dev/vdb" not in out.split("--- without")[1]
