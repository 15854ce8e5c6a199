"""argparse's help formatter, asking the terminal's width only when help is printed (cli.check, cli.stack).
Apart from cli.options so that opening a target imports no argparse."""

from __future__ import annotations

import argparse


class LateWidthFormatter(argparse.HelpFormatter):
    """argparse's own help formatter, but it asks the terminal's width only when it formats help: argparse
    makes a formatter for every ``add_argument``, and the width costs importing shutil (~5 ms), which a
    command that prints no help never needs."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        self._asked = max_help_position, width
        self._sizes: tuple[int, int] | None = None
        super().__init__(prog, indent_increment, max_help_position, width=0)  # the sizes come from _late

    def _late(self) -> tuple[int, int]:
        """(max help position, width) as argparse's __init__ computes them."""
        if self._sizes is None:
            max_help_position, width = self._asked
            if width is None:
                import shutil

                width = shutil.get_terminal_size().columns - 2
            self._sizes = min(max_help_position, max(width - 20, self._indent_increment * 2)), width
        return self._sizes

    @property
    def _width(self) -> int:
        return self._late()[1]

    @_width.setter
    def _width(self, value: int) -> None:
        pass  # argparse's __init__ sets it from the placeholder width

    @property
    def _max_help_position(self) -> int:
        return self._late()[0]

    @_max_help_position.setter
    def _max_help_position(self, value: int) -> None:
        pass
