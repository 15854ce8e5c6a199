"""The floor diskplan's start-up is measured against: a minimal Textual app (Header, Static, Footer) that,
like ``diskplan`` under ``DISKPLAN_BENCH=first-frame``, writes a mark to the terminal once its first complete
frame is drawn, then exits."""

from __future__ import annotations

import os
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.widgets import Footer, Header, Static
from textual.widgets._footer import FooterKey

BENCH_MARK = "\x1b]2;diskplan-first-frame\x07"  # as diskplan.ui.opening writes it


class Floor(App[None]):
    BINDINGS: ClassVar = [("q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("hello")
        yield Footer()

    def on_mount(self) -> None:
        if os.environ.get("DISKPLAN_BENCH") == "first-frame":
            self.call_after_refresh(self._exit_when_complete)

    def _exit_when_complete(self) -> None:
        # A frame is complete once the Footer shows its keys (it fills them in after focus settles),
        # as diskplan's is when it exits: otherwise the floor would be measured on a half-drawn screen.
        if self.query(FooterKey):
            self.call_after_refresh(self._mark)
        else:
            self.call_after_refresh(self._exit_when_complete)

    def _mark(self) -> None:
        if self._driver is not None:  # behind the frame in the same output queue
            self._driver.write(BENCH_MARK)
            self._driver.flush()
        self.exit()


if __name__ == "__main__":
    Floor().run()
