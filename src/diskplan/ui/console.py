"""The console profile's hold on Textual: glyphs a CP437 console font has, everywhere on the screen.

Textual draws some borders (tall, wide, hkey, vkey, round...) and scrollbar ends with eighth blocks and
quadrants that the Linux console cannot show (Textual issues #5011, #3086). While the console profile
is active we swap those glyph sets for box drawing and full blocks, and give the command palette an
ASCII search icon. ``tests/test_ui_console.py`` renders every screen and checks each character
encodes to CP437, so a Textual upgrade that draws something new is caught.
"""

from __future__ import annotations

from typing import ClassVar

from textual import _border
from textual.command import CommandPalette, SearchIcon
from textual.scrollbar import ScrollBar, ScrollBarRender

_SOLID = _border.BORDER_CHARS["solid"]
_DOUBLE = _border.BORDER_CHARS["double"]
_LINES = (("─", "─", "─"), (" ", " ", " "), ("─", "─", "─"))
_BARS = (("│", " ", "│"), ("│", " ", "│"), ("│", " ", "│"))
_THICK = _border.BORDER_CHARS["thick"]

# Border types whose glyphs a console font lacks, and what to draw instead.
REPLACEMENTS = {
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
        self._chars: dict[str, object] = {}
        self._locations: dict[str, object] = {}
        self._renderer: type[ScrollBarRender] | None = None

    def apply(self) -> None:
        if self._renderer is not None:
            return
        for name, chars in REPLACEMENTS.items():
            self._chars[name] = _border.BORDER_CHARS[name]  # type: ignore[index]
            self._locations[name] = _border.BORDER_LOCATIONS[name]  # type: ignore[index]
            _border.BORDER_CHARS[name] = chars  # type: ignore[index]
            _border.BORDER_LOCATIONS[name] = _PLAIN  # type: ignore[index]
        _border.get_box.cache_clear()
        self._renderer = ScrollBar.renderer
        ScrollBar.renderer = ConsoleScrollBarRender

    def restore(self) -> None:
        if self._renderer is None:
            return
        for name, chars in self._chars.items():
            _border.BORDER_CHARS[name] = chars  # type: ignore[index, assignment]
            _border.BORDER_LOCATIONS[name] = self._locations[name]  # type: ignore[index, assignment]
        _border.get_box.cache_clear()
        ScrollBar.renderer = self._renderer
        self._renderer = None
