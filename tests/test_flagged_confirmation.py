"""Writing a layout the findings flag says so in the confirmation, once per partition, with the finding's
arithmetic: `diskplan apply` of a 63s msdos layout (typed as a user would, an sfdisk script on stdin), and `w`
in the planner on a partition off the grain whose name is changed. A partition kept as it is says nothing."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Callable

from diskplan.ui.app import PlannerApp
from diskplan.ui.commit_screen import CommitScreen
from diskplan.ui.dialogs import PartitionScreen
from helpers.pilot import image_target, run, started, text_of, wait_for
from helpers.tools import need_tool
from helpers.tools import run as tool
from helpers.units import MiB


def apply(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", "apply", *args], input=stdin, capture_output=True,
                          text=True)
    assert "Traceback" not in proc.stderr
    return proc


def test_apply_of_a_63s_layout_says_it_is_flagged_once_with_the_arithmetic(
    sparse_image: Callable[..., pathlib.Path]
) -> None:
    img = str(sparse_image(1024 * MiB))
    proc = apply("-", img, stdin="label: dos\nstart=63, size=204800, type=83\nstart=206848, size=204800\n")
    assert proc.returncode == 0  # no --yes: shown, not written (a preview exits 0: model.exitstatus)
    flagged = [line for line in proc.stdout.splitlines() if line.startswith("flagged: ")]
    assert len(flagged) == 1, proc.stdout  # partition 2 is on the grain: nothing said about it
    assert flagged[0].startswith("flagged: partition 1: ")
    assert "63 × 512 B = 32256 B" in flagged[0]  # the finding's arithmetic
    assert "and 1 more finding" in flagged[0]  # the others are counted, not repeated


@run
async def test_w_on_a_flagged_partition_says_so_in_the_confirmation(sparse_image) -> None:
    img = sparse_image(64 << 20)
    script = "label: gpt\nstart=2055, size=16384, type=L\nstart=20480, size=8192\n"
    tool(need_tool("sfdisk"), "-q", str(img), input=script)
    app = PlannerApp(start=image_target(img))
    async with app.run_test(size=(100, 32)) as pilot:
        smap = await started(app, pilot)
        smap.move_to(2055)
        await pilot.press("t")
        assert isinstance(app.screen, PartitionScreen)
        await pilot.press("tab", *"data", "enter")  # a new name: partition 1 is written (changed)
        await pilot.press("w")
        screen = app.screen
        assert isinstance(screen, CommitScreen)
        await wait_for(pilot, lambda: screen.proposal is not None)
        text = text_of(screen)
        assert text.count("flagged: ") == 1, text
        assert "flagged: partition 1: starts off the 1 MiB grain" in text
        assert "2055 × 512 B = 1052160 B" in text.replace("\n", " ")
        await pilot.press("escape")
