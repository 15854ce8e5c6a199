"""What the planner's forms that ask, then run one piece of work in a worker (the commit, a measurement),
share: Esc goes back except while the work runs, and PageUp/PageDown page the form's body."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

R = TypeVar("R")


class WorkForm(ModalScreen[R]):
    """A form whose work, once confirmed, runs to its end: going back then would leave the work (a write half
    done, test data half written) without anyone to show its outcome to, so Esc waits for it. A subclass
    says where its body is (``body_id``), when it is busy and what going back answers."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back"),
        Binding("pageup", "scroll(-1)", show=False),
        Binding("pagedown", "scroll(1)", show=False),
    ]
    body_id: ClassVar[str]  # the id of the VerticalScroll that PageUp/PageDown page

    @property
    def busy(self) -> bool:
        """The work runs: the form may not be left."""
        raise NotImplementedError

    def result(self) -> R:
        """What the form is dismissed with when the user goes back."""
        raise NotImplementedError

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return not self.busy
        return True

    def action_back(self) -> None:
        if not self.busy:
            self.dismiss(self.result())

    def action_scroll(self, direction: int) -> None:
        """A page up or down: the body's height less one line, so the line at the edge stays in view."""
        body = self.query_one(f"#{self.body_id}", VerticalScroll)
        body.scroll_relative(y=direction * max(1, body.size.height - 1), animate=False)
