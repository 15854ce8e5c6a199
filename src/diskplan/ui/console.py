"""The console profile's hold on Textual: glyphs a CP437 console font has, everywhere on the screen.

Textual draws some borders (tall, wide, hkey, vkey, round...) and scrollbar ends with eighth blocks and
quadrants that the Linux console cannot show (Textual issues #5011, #3086). While the console profile
is active we swap those glyph sets for box drawing and full blocks, and give the command palette an
ASCII search icon. ``tests/test_ui_console.py`` renders every screen and checks each character
encodes to CP437, so a Textual upgrade that draws something new is caught.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.command import CommandPalette, SearchIcon
from textual.css.types import EdgeType
from textual.scrollbar import ScrollBar, ScrollBarRender

from diskplan.ui.textual_private import BORDER_CHARS, BORDER_LOCATIONS, border_glyphs_changed

_SOLID = BORDER_CHARS["solid"]
_DOUBLE = BORDER_CHARS["double"]
# A border's three rows of three: its glyphs, or where each glyph takes its colour from
_T = TypeVar("_T")
_Rows = tuple[tuple[_T, _T, _T], tuple[_T, _T, _T], tuple[_T, _T, _T]]

_LINES = (("─", "─", "─"), (" ", " ", " "), ("─", "─", "─"))
_BARS = (("│", " ", "│"), ("│", " ", "│"), ("│", " ", "│"))
_THICK = BORDER_CHARS["thick"]

# Border types whose glyphs a console font lacks, and what to draw instead.
REPLACEMENTS: dict[EdgeType, _Rows[str]] = {
    "round": _SOLID,
    "dashed": _SOLID,
    "heavy": _DOUBLE,
    "tall": _SOLID,
    "panel": _SOLID,
    "wide": _SOLID,
    "tab": _SOLID,
    "hkey": _LINES,
    "vkey": _BARS,
    "inner": _THICK,
    "outer": _THICK,
}
_PLAIN = ((0, 0, 0), (0, 0, 0), (0, 0, 0))


class ConsoleScrollBarRender(ScrollBarRender):
    """Scrollbars in whole cells: no eighth blocks at the thumb's ends."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


class ConsoleCommandPalette(CommandPalette):
    """The command palette with an ASCII search icon (the default is an emoji)."""

    def on_mount(self) -> None:
        self.query_one(SearchIcon).icon = ">"


class ConsoleGlyphs:
    """Swap Textual's drawing glyphs for console-safe ones; ``restore`` puts them back."""

    def __init__(self) -> None:
        self._chars: dict[EdgeType, _Rows[str]] = {}
        self._locations: dict[EdgeType, _Rows[int]] = {}
        self._renderer: type[ScrollBarRender] | None = None

    def apply(self) -> None:
        if self._renderer is not None:
            return
        for name, chars in REPLACEMENTS.items():
            self._chars[name] = BORDER_CHARS[name]
            self._locations[name] = BORDER_LOCATIONS[name]
            BORDER_CHARS[name] = chars
            BORDER_LOCATIONS[name] = _PLAIN
        border_glyphs_changed()
        self._renderer = ScrollBar.renderer
        ScrollBar.renderer = ConsoleScrollBarRender

    def restore(self) -> None:
        if self._renderer is None:
            return
        for name, chars in self._chars.items():
            BORDER_CHARS[name] = chars
            BORDER_LOCATIONS[name] = self._locations[name]
        border_glyphs_changed()
        ScrollBar.renderer = self._renderer
        self._renderer = None
