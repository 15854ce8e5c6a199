"""The characters the sector map draws, per display profile.

The console profile is for the Linux text console and serial terminals (``TERM=linux``, rescue
systems): only glyphs every CP437 console font has (box drawing, blocks, shades), 16 colours.
``DISKPLAN_CONSOLE=1`` / ``DISKPLAN_ASCII=1`` or ``--console`` force it; ``--no-console`` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Glyphs:
    name: str
    free: str  # unpartitioned sectors
    metadata: str  # partition-table structures (MBR, GPT header and entries, EBRs)
    partition: str  # fill of a partition with nothing to report
    flagged: str  # fill of a partition with findings: survives a monochrome screen
    proposed: str  # fill of a planned, not yet written partition
    deleting: str  # fill of an existing partition the plan deletes
    problem: str  # the cell where a finding's boundary lies
    grid_physical: str  # a physical-block boundary falls in this cell
    grid_mib: str  # a 1 MiB boundary
    grid_grain: str  # a boundary of the alignment grain, when it is not 1 MiB
    separator: str  # between fields of the status line
    ok: str  # a partition with no findings, in the list
    sel_start: str = "["  # the cell of the selected partition's first sector (drag it to move that edge)
    sel_end: str = "]"  # the cell of its last sector

    def all(self) -> str:
        return "".join(
            (
                self.free,
                self.metadata,
                self.partition,
                self.flagged,
                self.proposed,
                self.deleting,
                self.problem,
                self.grid_physical,
                self.grid_mib,
                self.grid_grain,
                self.separator,
                self.ok,
                self.sel_start,
                self.sel_end,
            )
        )


# Left-edge eighth blocks put a boundary exactly where it is: at the left edge of its cell.
UNICODE = Glyphs(
    name="unicode",
    free="·",
    metadata="▒",
    partition=" ",
    flagged="░",
    proposed="∙",
    deleting="x",
    problem="!",
    grid_physical="▏",
    grid_mib="▎",
    grid_grain="▍",
    separator="│",
    ok="✓",
)

CONSOLE = Glyphs(
    name="console",
    free="·",
    metadata="▒",
    partition=" ",
    flagged="░",
    proposed="∙",
    deleting="x",
    problem="!",
    grid_physical="│",
    grid_mib="║",
    grid_grain="▌",
    separator="│",
    ok="√",
)

TRUTHY = ("1", "yes", "true", "on")


def console_wanted(environ: Mapping[str, str], flag: bool | None = None) -> bool:
    """Whether to use the console profile: the flag wins, then DISKPLAN_CONSOLE/ASCII, then TERM."""
    if flag is not None:
        return flag
    for var in ("DISKPLAN_CONSOLE", "DISKPLAN_ASCII"):
        value = environ.get(var, "").strip().lower()
        if value:
            return value in TRUTHY
    term = environ.get("TERM", "")
    return term == "linux" or term.startswith(("vt100", "vt220", "ansi", "cons25"))
