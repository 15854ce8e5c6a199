"""The planner shows the stack inside a partition: a PV whose data misses the flash page is flagged on the
partition, and the explain panel walks from the partition start down to pe_start with the sums."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from diskplan.cli.options import open_target
from diskplan.cli.planner import parser
from diskplan.model.codes import LAYER_NOT_PAGE
from diskplan.model.lvmformat import StripedVg, pv_header_pieces
from diskplan.ui.app import PlannerApp
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.target import Target

MiB = 1 << 20


def _image(tmp_path: Path) -> Path:
    """GPT, partition 1 at 1 MiB holding a PV whose pe_start is 1 MiB + 1 KiB (pvcreate --dataalignmentoffset 1k)."""
    img = tmp_path / "pv.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    subprocess.run(["parted", "-s", str(img), "mklabel", "gpt", "mkpart", "p", "1MiB", "100%"], check=True,
                   capture_output=True)
    vg = StripedVg("vgteach", 62 * MiB, MiB + 1024, 4 * MiB, 8192)
    with open(img, "r+b") as f:
        for off, data in pv_header_pieces(vg, 0):
            f.seek(MiB + off)
            f.write(data)
    return img


def test_the_explain_panel_walks_down_to_a_misaligned_pe_start(tmp_path: Path) -> None:
    img = _image(tmp_path)
    disk = open_target(str(img), parser().parse_args([str(img), "--ssd"]))
    assert [f.code for f in disk.findings if f.partition == 1] == [LAYER_NOT_PAGE]

    async def drive() -> str:
        app = PlannerApp(start=Target(disk, str(img), path=str(img)))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.pause()
            await pilot.press("e")
            await pilot.pause()
            return app.query_one(ViewsPanel).text("explain")

    text = asyncio.run(drive())
    assert f"[{LAYER_NOT_PAGE}]" in text
    assert "LVM2 physical volume at byte 1,048,576: extent 0 (pe_start) at +1,049,600 B = byte 2,098,176" in text
    assert "2,098,176 mod 4,096 = 1,024" in text and "pvcreate --dataalignment" in text
