"""``S`` on a partition: plan the stack above it aligned (model.stackplan), as ``diskplan stack`` does.

A dialog, keyboard-driven: the intent in the command line's words (prefilled with what the partition holds
now, if anything), Enter shows the commands and their arithmetic (and the stack there now against them), Esc
closes. It runs nothing.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from diskplan.model.disk import Disk
from diskplan.model.extent import Partition, State
from diskplan.model.safetext import safe
from diskplan.model.stackplan import IntentError, compare, intent_of, intent_words, parse_intent, plan_lines, plan_stack

DEFAULT_WORDS = "--lvm --fs ext4"


class StackScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "close")]
    DEFAULT_CSS = """
    StackScreen { align: center middle; }
    StackScreen > Vertical { width: 96%; height: 90%; border: solid $accent; background: $surface; padding: 0 1; }
    StackScreen Input { border: solid $primary; }
    StackScreen #stack-error { color: $error; height: auto; }
    StackScreen VerticalScroll { height: 1fr; }
    """

    def __init__(self, disk: Disk, partition: Partition | None) -> None:
        """``partition``: one of the plan's; a partition on the disk is planned where it was read, with the
        stack read from it, a proposed one where the plan puts it, with nothing above it yet. None: the whole
        disk, which has no table and holds a stack (an md array or a PV on a whole disk)."""
        super().__init__()
        self.disk = disk
        if partition is None:
            self.place_name, self.first_lba, self.span_bytes = "the whole disk", 0, disk.geometry.size_bytes
            self.part_number: int | None = None
            self.stack = disk.stack(0)
            return
        read = next((q for q in disk.table.live if q.number == partition.number), None)
        on_disk = partition.state is not State.PROPOSED and read is not None
        p = read if on_disk and read is not None else partition
        self.place_name, self.first_lba, self.span_bytes, self.part_number = (f"partition {p.number}", p.start,
                                                          p.size * disk.geometry.logical, p.number)
        self.stack = disk.stack(partition.number) if on_disk else ()

    def compose(self) -> ComposeResult:
        words = intent_words(intent_of(self.stack)) if self.stack else DEFAULT_WORDS
        with Vertical() as v:
            v.border_title = f"Plan the stack on {self.place_name}"
            yield Static("What goes above it, in `diskplan stack`'s words (--raid 5 --members 4 --chunk 64KiB "
                         "--lvm --extent 4MiB --lv-stripes 2 --lv-stripe-size 64KiB --luks luks2 --fs ext4|xfs); "
                         "Enter plans, Esc closes. Nothing is run.")
            yield Input(value=words, id="stack-input", select_on_focus=False)
            yield Static("", id="stack-error")
            with VerticalScroll():
                yield Static("", id="stack-plan")

    def on_mount(self) -> None:
        self.show(self.query_one("#stack-input", Input).value)

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.show(event.value)

    def show(self, words: str) -> None:
        geom = self.disk.geometry
        dev = f"PARTITION{self.part_number}" if self.part_number is not None else "DISK"
        error = self.query_one("#stack-error", Static)
        try:
            intent = parse_intent(words, geom.logical)
            if intent is None and not self.stack:
                raise IntentError("say what goes above the partition: --raid, --lvm, --luks or --fs")
            if self.stack:
                plan, verdicts = compare(geom, self.first_lba, self.span_bytes, self.stack, self.part_number, intent,
                                         dev)
            else:
                assert intent is not None
                plan, verdicts = plan_stack(geom, self.first_lba, self.span_bytes, intent, dev), ()
        except IntentError as exc:
            error.update(Text(safe(str(exc))))
            return
        error.update("")
        lines = plan_lines(self.place_name[0].upper() + self.place_name[1:], plan, verdicts)
        self.query_one("#stack-plan", Static).update(Text("\n".join(safe(line) for line in lines)))
