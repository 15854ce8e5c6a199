"""What the write commands (apply, repair, restore) share between showing a proposal and writing it:
refusals, "nothing to do", the --yes gate, the typed confirmation and the step lines."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from diskplan.backend.write.steps import Asked, Progress
from diskplan.cli.textout import Out


def confirm(p: Asked, yes: bool) -> str:
    """The answer to give ``execute``: with --yes, the confirm word, except that a person at a terminal
    must type a block device's name."""
    if not yes:
        return ""
    if p.kind == "block" and sys.stdin.isatty():
        try:
            return input(p.prompt + ": ")
        except EOFError:
            return ""
    return p.confirm_word


def before_writing(refusals: Sequence[str], nothing: str, yes: bool, hint: str, console: Out, err: Out) -> int | None:
    """The exit status when the command stops before writing (model.exitstatus): refused (1), nothing to do
    (``nothing``: the message, "" when there is something to write; 0), or no --yes (0: a preview, as asked;
    ``hint`` says what --yes would do). None: go on and write."""
    if refusals:
        for r in refusals:
            err.print(f"refused: {r}", style="yellow")
        err.print("Nothing was written.")
        return 1
    if nothing:
        console.print(nothing, style="green")
        return 0
    if not yes:
        console.print(f"Nothing written: run again with --yes to {hint}.")
        return 0
    return None


def progress_lines(err: Out) -> Progress:
    """Each step of the write as a dim ``[n/steps] what`` line on ``err``."""

    def progress(step: int, steps: int, what: str) -> None:
        err.print(f"[{step}/{steps}] {what}", style="dim")

    return progress
