"""Moving and resizing partitions that hold data, from the planner: a plan whose only changes are data moves
and resizes, or the unfinished move a journal records (resume).

``backend.move.engine`` does the work (check, back up, journal, copy, verify, rewrite the entry, check again),
and ``backend.move.resize`` a resize (check, back up, the filesystem's own tool and the entry in the safe order,
check again); one write at a time, in the order ``diskplan apply`` writes the same plan (``Changes.steps``, from
model.plan.move.data_steps: every shrink, then the moves each into room the ones before left, then the grows), each
under the disk's write lock, in a worker thread. This screen lists them sector-exact, asks for the
device's name (or "yes" for an image), and shows the progress: bytes, rate and time left. Esc during the
copy stops at the next chunk boundary: the partition is then half-moved, its table entry still points at
the old place, and resume (M in the planner, or ``diskplan resume``) finishes it from the journal.
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from diskplan.backend.move.engine import (
    MoveOutcome,
    MoveProposal,
    execute_move,
    execute_resume,
    prepare_move,
    prepare_resume,
)
from diskplan.backend.move.planmoves import table_after
from diskplan.backend.move.resize import ResizeProposal, execute_resize, prepare_resize
from diskplan.backend.write.steps import CommitError, Host, Verdict, read_target
from diskplan.model.plan.fsresize import doing
from diskplan.model.plan.move import DataStep
from diskplan.model.plan.operations import Changes, Operation
from diskplan.model.safetext import safe
from diskplan.model.units import human_bytes, human_duration
from diskplan.model.value import replace
from diskplan.ui.commit_screen import VERDICT_STYLE
from diskplan.ui.dialogs import FORM_CSS
from diskplan.ui.explain import placed_path
from diskplan.ui.glyphs import bar


def moves_text(moves: tuple[Operation, ...], sector_size: int) -> str:
    """The moves as the confirmation lists them: sectors, end inclusive, and the bytes copied."""
    lines = []
    for op in moves:
        size = op.end - op.start + 1
        if op.kind == "resize":
            old = op.source_size
            fs = dict(op.partition.extra).get("content", "") if op.partition is not None else ""
            moved = (f"; then {op.nbytes:,} B moved to the new start" if size < old else
                     f"; first {op.nbytes:,} B moved to the new start") if op.nbytes else ""
            lines.append(f"  partition {op.number}: {op.source}..{op.source_end} -> {op.start}..{op.end} "
                         f"({'grow' if size > old else 'shrink'} {old} -> {size} sectors of {sector_size} B, "
                         f"{human_bytes(old * sector_size)} -> {human_bytes(size * sector_size)}; "
                         f"{doing(fs, old, size)}{moved})\n")
            continue
        way = "left" if op.start < op.source else "right"
        lines.append(f"  partition {op.number}: {op.source}..{op.source_end} -> {op.start}..{op.end} "
                     f"({size} sectors of {sector_size} B, {op.nbytes:,} B = "
                     f"{human_bytes(op.nbytes)}; shift {op.start - op.source:+}s, {way})\n")
    return "".join(lines)


class Meter:
    """Bytes, rate and time left of the phase in progress (the rate is measured since the phase began)."""

    def __init__(self) -> None:
        self.phase = ""
        self.began = time.monotonic()

    def line(self, done: int, total: int, phase: str, width: int = 24) -> str:
        now = time.monotonic()
        if phase != self.phase:
            self.phase, self.began = phase, now
        total = max(total, 1)
        drawn = bar(done, total, width)
        rate = done / (now - self.began) if now > self.began and done else 0.0
        left = f", {human_duration((total - done) / rate)} left" if rate and total > 1 else ""
        amount = f" {human_bytes(done)} of {human_bytes(total)}, {human_bytes(int(rate))}/s{left}" if total > 1 else ""
        return f"{drawn}{amount} - {phase}"


Proposal = MoveProposal | ResizeProposal


class MoveScreen(ModalScreen[MoveOutcome | None]):
    """Dismissed with the outcome of the last move tried (None when nothing was tried)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,ctrl+c", "back", "back"),  # moving: stop
        Binding("r", "retry", "retry", show=False),  # after an I/O error: resume the move now
    ]
    DEFAULT_CSS = "MoveScreen { align: center middle; }\n" + FORM_CSS + """
    MoveScreen > .form { width: 100%; height: 100%; }
    MoveScreen #move-body { height: 1fr; }
    MoveScreen #move-progress { height: auto; }
    MoveScreen #move-answer-row { height: 1; display: none; }
    MoveScreen #move-answer-row.-asking { display: block; }
    MoveScreen #move-answer-row .label { width: auto; padding-right: 1; }
    """

    def __init__(self, path: str, writes: Changes | None, host: Host, *, sector_size: int, model: str = "") -> None:
        """``writes``: a plan of data moves and resizes (its ``steps`` run in their order); None: finish the
        unfinished move recorded for ``path`` (resume)."""
        super().__init__()
        self.path, self.host = path, host
        self.moves: tuple[Operation, ...] = tuple(op for op in writes.operations if op.moves_data) if writes else ()
        self.steps: tuple[DataStep, ...] = writes.steps if writes else ()
        self.sector_size, self.model = sector_size, model
        self.first: Proposal | None = None
        self.outcome: MoveOutcome | None = None
        self.finished: list[str] = []  # what the moves before the last one tried did
        self.running = False
        self.answer = ""  # the confirmation typed: a retry after an I/O error writes with it again
        self.retry_from = -1  # after an I/O error: the step a retry resumes (its journal), then the rest
        self.stop = threading.Event()
        self.meter = Meter()

    @property
    def resuming(self) -> bool:
        return not self.moves

    def compose(self) -> ComposeResult:
        with Vertical(classes="form") as v:
            resizing = any(op.kind == "resize" for op in self.moves)
            v.border_title = "Finish the interrupted move" if self.resuming else \
                "Move and resize partitions with their data" if resizing else "Move partitions with their data"
            with VerticalScroll(id="move-body"):
                yield Static(id="move-outcome")
                yield Static("Reading the disk and checking the first move (nothing is written)...", id="move-plan")
            yield Static("", id="move-progress")
            with Horizontal(id="move-answer-row"):
                yield Static("", id="move-prompt", classes="label")
                yield Input(id="move-answer", classes="field", select_on_focus=False)
            yield Static("Esc: back to the planner (nothing is written)", id="move-keys", classes="keys")

    def on_mount(self) -> None:
        self._prepare()

    # --- before moving --------------------------------------------------------------------------------

    def _proposal(self, index: int) -> Proposal:
        """Write ``index`` checked against the disk as the ones before left it."""
        if self.resuming or index == self.retry_from:
            return prepare_resume(self.path, self.host)
        step = self.steps[index]
        if step.kind == "move":
            return prepare_move(self.path, step.number, step.to, self.host)
        return prepare_resize(self.path, step.number, step.new_length, self.host)

    @work(thread=True, exclusive=True, group="move")
    def _prepare(self) -> None:
        try:
            p = self._proposal(0)
            k = next((i for i, s in enumerate(self.steps) if s.number == p.number and s.kind == "move"), 0)
            if isinstance(p, ResizeProposal) and k and not p.refusals:
                # A shrink before a move: what would refuse the move, at the size it will have and with the
                # others where the steps between leave them, is said now, before the shrink is written (as
                # `diskplan move --size` does).
                later = self.steps[k]
                between = [s for s in self.steps[:k] if s.number != p.number]
                now = None
                if between:
                    disk = read_target(self.path, None)[1]
                    now = replace(disk, table=table_after(disk.table, between))
                mv = prepare_move(self.path, later.number, later.to, self.host, current=now, length=later.length)
                p = replace(p, refusals=mv.refusals, notes=(*p.notes, *mv.notes))
        except CommitError as exc:
            self.app.call_from_thread(self._cannot, str(exc))
            return
        except Exception as exc:  # the screen says what happened, never a traceback
            self.app.call_from_thread(self._cannot, " ".join(str(exc).split()) or type(exc).__name__)
            return
        self.app.call_from_thread(self._show, p)

    def _cannot(self, reason: str) -> None:
        self.query_one("#move-plan", Static).update(Content.assemble(("cannot move: ", "bold $error"), safe(reason)))

    def _show(self, p: Proposal) -> None:
        self.first = p
        parts: list[str | tuple[str, str]] = []
        model = safe(p.model or self.model)
        parts.append((f"{safe(p.target)}{f' ({model})' if model else ''}\n", "bold"))
        parts.append(f"{p.sectors:,} sectors x {p.sector_size} B = {human_bytes(p.sectors * p.sector_size)}\n\n")
        if isinstance(p, MoveProposal) and self.resuming:
            parts.append(("Unfinished move\n", "bold"))
            parts.append(f"  journal {safe(p.journal)}\n  partition {p.number}: {p.plan.start}.."
                         f"{p.plan.start + p.plan.length - 1} -> {p.plan.target}..{p.plan.target + p.plan.length - 1}"
                         f" ({human_bytes(p.nbytes)})\n")
        else:
            what = "moves and resizes" if any(op.kind == "resize" for op in self.moves) else "moves"
            parts.append((f"Data {what} ({len(self.moves)}), one write at a time\n", "bold"))
            parts.append(moves_text(self.moves, p.sector_size))
            if len({s.number for s in self.steps}) > 1:  # every shrink first, every grow last: say the order
                order = ", ".join(f"{s.kind} {s.number}" for s in self.steps)
                parts.append(f"written in this order, as `diskplan apply` writes it: {order}\n")
            if p.fs.fs:
                parts.append(f"partition {p.number} holds {safe(str(p.fs))}: checked before and after, UUID and "
                             "label compared\n")
            if isinstance(p, ResizeProposal) and p.minimum is not None:
                parts.append(f"its filesystem can shrink to {human_bytes(p.minimum)} ({p.minimum:,} B) at least\n")
            total = sum(op.nbytes for op in self.moves)
            rate = p.rate if isinstance(p, MoveProposal) else 0.0
            if rate and total:
                parts.append(f"estimate: {human_duration(3 * total / rate)} (every byte read, written and read back "
                             f"at {human_bytes(int(rate))}/s, measured by a short read just now)\n")
        parts.append("\n")
        if self.resuming or any(step.kind == "move" for step in self.steps):
            parts.append(("Each move: ", "bold"))
            parts.append("the filesystem is checked, the table backed up, a journal written, the data copied in "
                         "chunks and read back, and only then the table entry rewritten (its PARTUUID kept). A "
                         "partition being moved must not be mounted; an interrupted move is finished by resume.\n")
        if any(op.kind == "resize" for op in self.moves):
            parts.append(("Each resize: ", "bold"))
            parts.append("the filesystem is checked and the table backed up; a shrink resizes the filesystem with "
                         "its own tool first, then rewrites the entry's end; a grow the other way round; the "
                         "filesystem is checked again. A shrink comes before the partition's move, a grow after "
                         "it. The filesystem's tool is not journalled: do not stop it.\n")
        for note in p.notes:
            parts.append(("note: ", "$accent"))
            parts.append(f"{safe(note)}\n")
        for refusal in p.refusals:
            parts.append(("refused: ", "bold $warning"))
            parts.append(f"{safe(refusal)}\n")
        self.query_one("#move-plan", Static).update(Content.assemble(*parts))
        keys = self.query_one("#move-keys", Static)
        if p.refusals:
            keys.update("Nothing can be moved (see refused:). Esc: back to the planner")
            return
        prompt = p.prompt if len(self.steps) < 2 else (f"Type {p.confirm_word} to make {len(self.steps)} changes "
                                                       f"on {p.target}")
        self.query_one("#move-prompt", Static).update(safe(prompt) + ":")
        self.query_one("#move-answer-row").add_class("-asking")
        what = "move (the table is backed up and the move journalled first)" if self.resuming or any(
            step.kind == "move" for step in self.steps) else "resize (the table is backed up first)"
        keys.update(f"Enter: {what}   Esc: back, nothing written")
        self.query_one("#move-answer", Input).focus()

    @on(Input.Submitted, "#move-answer")
    def _answered(self, event: Input.Submitted) -> None:
        p = self.first
        if p is None or self.running or self.outcome is not None:
            return
        if not p.accepts(event.value):
            self.query_one("#move-progress", Static).update(
                Content.assemble(("not confirmed: ", "bold $warning"), f"type {p.confirm_word} exactly"))
            return
        self.running = True
        self.answer = event.value
        self.query_one("#move-answer-row").remove_class("-asking")
        self.query_one("#move-keys", Static).update("Writing. Esc or Ctrl+C: stop a move at the next chunk boundary "
                                                    "(resume finishes it), a resize once its tool is done")
        self.focus()
        self._run(p, event.value)

    # --- moving ---------------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="move")
    def _run(self, first: Proposal, answer: str) -> None:
        self._steps(first, answer, 0)

    def _steps(self, first: Proposal, answer: str, start: int) -> None:
        """Steps ``start``.. in a worker thread, ``first`` prepared already; the outcome goes to ``_done``."""
        outcome: MoveOutcome | None = None
        count = max(1, len(self.steps))
        for i in range(start, count):
            def progress(done: int, total: int, phase: str, i: int = i) -> None:
                self.app.call_from_thread(self._progress, i, count, done, total, phase)

            try:
                p = first if i == start else self._proposal(i)  # the disk as the moves before left it
                if isinstance(p, ResizeProposal):  # its tool runs to the end: a stop waits for the next write
                    outcome = execute_resize(p, answer, self.host, progress=progress)
                else:
                    run = execute_resume if self.resuming or i == self.retry_from else execute_move
                    outcome = run(p, answer, self.host, progress=progress, stop=self.stop.is_set)
            except Exception as exc:  # the engine reports its failures itself; this is for the unforeseen
                reason = " ".join(str(exc).split()) or type(exc).__name__
                outcome = MoveOutcome(Verdict.FAILED, f"the move failed: {reason}", self.path, resumable=True)
            if not outcome.complete:  # failed, or written but the kernel does not see it (exit status 3)
                self.retry_from = i if outcome.io_error and outcome.resumable else -1
                break
            if i + 1 < count:
                self.finished.append(outcome.message)
            if self.stop.is_set() and i + 1 < count:
                outcome = MoveOutcome(Verdict.WRITTEN, f"{outcome.message}; stopped before the next move (nothing "
                                      "of it was written)", outcome.target, outcome.details, outcome.backup_path)
                break
        self.app.call_from_thread(self._done, outcome)

    def _progress(self, i: int, count: int, done: int, total: int, phase: str) -> None:
        step = self.steps[i].kind if i < len(self.steps) else "move"
        which = f"{step} {i + 1} of {count}: " if count > 1 else ""
        stopping = " (stopping at the next chunk boundary)" if self.stop.is_set() else ""
        self.query_one("#move-progress", Static).update(which + self.meter.line(done, total, phase) + stopping)

    def _done(self, o: MoveOutcome | None) -> None:
        self.running = False
        self.outcome = o
        if o is None:
            return
        parts: list[str | tuple[str, str]] = []
        for message in self.finished:  # the moves done before the last one tried
            parts += [("WRITTEN: ", VERDICT_STYLE[Verdict.WRITTEN]), (safe(message) + "\n", "")]
        parts += [(f"{o.verdict.value.upper()}: ", VERDICT_STYLE[o.verdict]),
                  (safe(o.message) + "\n", VERDICT_STYLE[o.verdict])]
        for line in o.details:
            parts.append(f"  {safe(line)}\n")
        if o.kernel:  # written, but the kernel's partition list is not the table's: an error, as in `diskplan move`
            parts.append((f"error: {safe(o.kernel)}\n", "$error"))
        if o.backup_path:  # a long path breaks after a "/", never mid-name
            body = self.query_one("#move-body", VerticalScroll)
            width = body.content_region.width - body.styles.scrollbar_size_vertical
            parts.append(f"backup of the table: {placed_path(safe(o.backup_path), width, 21)}\n")
        if o.resumable:
            parts.append(("disk state: ", "bold $warning"))
            parts.append(f"the move is unfinished (journal {safe(o.journal_path)}); the partition must not be "
                         "mounted until it is finished: M in the planner")
            served = getattr(self.app, "served", False)  # a browser runs no command
            parts.append("\n" if served else ", or ")
            if not served:
                parts.append((safe(o.resume_command) + "\n", "bold"))
        self.query_one("#move-outcome", Static).update(Content.assemble(*parts))
        self.query_one("#move-body", VerticalScroll).scroll_home(animate=False)
        self.query_one("#move-progress", Static).update("")
        if o.io_error and o.resumable and self.retry_from >= 0:
            parts.append(("\nThe disk failed to read or write: ", "bold $warning"))
            parts.append("R tries again now (the move goes on from its journal: a loose cable or a busy USB bridge "
                         "often answers the next time); Esc stops here, and the move can be finished later.\n")
            self.query_one("#move-outcome", Static).update(Content.assemble(*parts))
            self.query_one("#move-keys", Static).update("R: retry   Esc or Enter: stop (back to the planner, the disk "
                                                        "is read again)")
        else:
            self.query_one("#move-keys", Static).update("Esc or Enter: back to the planner (the disk is read again)")
        self.refresh_bindings()

    def action_retry(self) -> None:
        """After an I/O error: resume the interrupted move now, with the confirmation given before."""
        if self.running or self.retry_from < 0 or self.outcome is None:
            return
        self.outcome, self.running = None, True
        self.stop.clear()
        self.query_one("#move-keys", Static).update("Writing. Esc or Ctrl+C: stop a move at the next chunk boundary")
        self.query_one("#move-progress", Static).update("trying again...")
        self._retry(self.retry_from)

    @work(thread=True, exclusive=True, group="move")
    def _retry(self, index: int) -> None:
        try:
            first: Proposal = prepare_resume(self.path, self.host)
        except Exception as exc:  # the journal or the disk cannot be read now: said as the move's outcome
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self.app.call_from_thread(self._done, MoveOutcome(Verdict.FAILED, f"cannot try again: {reason}", self.path,
                                                              resumable=True))
            return
        self._steps(first, self.answer, index)

    def key_enter(self) -> None:
        if self.outcome is not None and not self.running:
            self.dismiss(self.outcome)

    def action_back(self) -> None:
        if self.running:
            self.stop.set()
            self.query_one("#move-keys", Static).update("Stopping at the next chunk boundary...")
            return
        self.dismiss(self.outcome)
