"""The characters the sector map draws, per display profile.

The console profile is for the Linux text console and serial terminals (``TERM=linux``, rescue
systems): only glyphs every CP437 console font has (box drawing, blocks, shades), 16 colours.
``DISKPLAN_CONSOLE=1`` / ``DISKPLAN_ASCII=1`` or ``--console`` force it; ``--no-console`` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping

from diskplan.model.value import replace, value


@value
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
    layer: str = "»"  # the cell where the data of a layer inside a partition (LVM, LUKS, md) begins
    notice: str = "!"  # the problem glyph of a notice (colour tells it from a warning; without colour, this)
    ellipsis: str = "…"  # ends a text cut to fit (the console font has no "…")
    mono: bool = False  # no colour: each partition's cells carry its character (part_char) instead of a fill

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
                self.notice,
                self.layer,
                self.ellipsis,
                PART_CHARS if self.mono else "",
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
    layer="▸",
)

# The unicode profile's fills and marks are CP437 glyphs already: the console profile differs only where a
# console font lacks the glyph (eighth blocks, ✓, ▸, …), so that a fill changed in one is changed in both.
CONSOLE = replace(
    UNICODE,
    name="console",
    grid_physical="│",
    grid_mib="║",
    grid_grain="▌",
    ok="√",
    layer="»",
    ellipsis="...",
)

# Without colour a partition's cells carry its number (1-9), then a letter (A-Z): one character per cell.
PART_CHARS = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def bar(done: int, total: int, width: int) -> str:
    """``[####....]``: a progress bar every terminal and console font can draw."""
    filled = width * min(max(done, 0), total) // max(total, 1)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def part_char(number: int) -> str:
    return PART_CHARS[number - 1] if 1 <= number <= len(PART_CHARS) else "#"


def without_colour(g: Glyphs) -> Glyphs:
    """The same glyphs for a screen without colour: partitions by character, notices by their own glyph."""
    return replace(g, name=f"{g.name}-mono", notice="?", mono=True)


TRUTHY = ("1", "yes", "true", "on")
# Terminals that show no colour (terminfo's "-m"/"-mono" variants name monochrome ones).
MONO_TERMS = ("vt52", "vt100", "vt102", "vt220", "dumb")


def mono_wanted(environ: Mapping[str, str], flag: bool | None = None) -> bool:
    """Whether to draw without colour: --no-color wins, then NO_COLOR (set at all: Textual then removes every
    colour, so the map must not rely on any), then a monochrome TERM."""
    if flag is not None:
        return flag
    if "NO_COLOR" in environ:
        return True
    term = environ.get("TERM", "")
    return term.startswith(MONO_TERMS) or term.endswith(("-m", "-mono"))


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
