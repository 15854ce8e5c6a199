"""How a data write (a move, a resize, a resume) shows itself on the command line: its progress (rich's on
a terminal, plain lines otherwise), Ctrl+C as a request to stop at the next chunk boundary, and its outcome.
``diskplan move``, ``realign``, ``resume`` and ``resize`` share it."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from diskplan.backend.move.datamove import Progress
from diskplan.backend.move.engine import MoveOutcome
from diskplan.cli.textout import Out
from diskplan.model.exitstatus import Exit
from diskplan.model.units import human_bytes

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID


def render_outcome(o: MoveOutcome, console: Out, err: Out) -> None:
    if o.backup_path:
        console.print("backup of the table: ", (o.backup_path, "bold"))
    if o.journal_path:
        console.print("move journal: ", o.journal_path)
    ok = o.exit_code == 0
    style = "green" if ok else "bold red" if o.exit_code == Exit.FAILED else "yellow"
    (console if ok else err).print(o.message, style=style)
    for line in o.details:
        err.print(f"  {line}")
    if o.kernel:
        err.print(f"error: {o.kernel}", style="bold red")
    if o.resume_command:
        err.print(f"to finish the move: {o.resume_command}", style="bold")


UNSTOPPABLE = "a resize cannot stop half-way: its tool finishes the step it is in…"
ROLLBACK_UNSTOPPABLE = ("a rollback cannot stop half-way: it copies back what the move wrote over the old place, "
                        "puts the entry back and checks the filesystem…")


@contextlib.contextmanager
def stop_on_interrupt(err: Out, said: str = "stopping at the next chunk boundary…") -> Iterator[Callable[[], bool]]:
    """Ctrl+C asks the move to stop at the next chunk boundary (a second one is ignored: stopping
    mid-chunk would gain nothing, the journal makes either resumable, but the boundary is cleaner).
    A resize has no boundary to stop at: its tool finishes (it runs in a session of its own, out of the
    terminal's reach), and ``said`` tells the user so."""
    asked = [False]

    def handler(signum: int, frame: object) -> None:
        if not asked[0]:
            err.print(said, style="yellow")
        asked[0] = True

    try:
        old = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield lambda: asked[0]
        return
    try:
        yield lambda: asked[0]
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def progress_display(err: Out, bar_console: Console | None = None) -> Iterator[Progress]:
    """rich's progress bar on a terminal (bytes, rate, time left); plain lines every few seconds otherwise.
    On a terminal each copy gets a bar of its own, which ends where it is when the next step begins, so the
    steps after a copy ("rewriting the partition's table entry", "checking the filesystem at its new place")
    print below its bar, in the order they run (a live bar stays at the bottom, and a line printed while it
    lives would land above it). ``bar_console``: where the bars go (a test's recording console)."""
    if bar_console is not None or sys.stderr.isatty():
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn, TransferSpeedColumn
        from rich.progress import Progress as Bar

        live: list[tuple[str, Bar, TaskID]] = []  # the copy whose bar is drawn now: at most one
        said: set[str] = set()

        def close() -> None:
            if live:
                live.pop()[1].stop()  # not transient: the finished bar stays on the screen, above what follows

        def show(done: int, total: int, phase: str) -> None:
            if total <= 1:  # a step, not bytes
                if phase not in said:
                    close()
                    said.add(phase)
                    (bar_console or err).print(phase, style="dim")
                return
            if not live or live[0][0] != phase:
                close()
                bar = Bar(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                          TimeRemainingColumn(), transient=False, console=bar_console)
                bar.start()
                live.append((phase, bar, bar.add_task(phase, total=total)))
            live[0][1].update(live[0][2], completed=done, total=total)

        try:
            yield show
        finally:
            close()
        return
    shown = {"at": 0.0}
    phases: list[str] = []

    def line(done: int, total: int, phase: str) -> None:
        now = time.monotonic()
        if not phases or phase != phases[-1] or now - shown["at"] >= 2.0 or done >= total:
            pct = f" {100 * done // total}%" if total > 1 else ""
            err.print(f"{phase}{pct}" + (f" ({human_bytes(done)} of {human_bytes(total)})" if total > 1 else ""),
                      style="dim")
            shown["at"] = now
            phases.append(phase)

    yield line
