"""Writing the plan: every operation and the resulting table, sector-exact, with the device's model and size;
the confirmation (a block device's name, or "yes" for an image file); progress; and the outcome.

``backend.write.commit`` does the work; it reads and writes the disk, so it runs in worker threads and this
screen only shows what they report. Nothing is written before the answer is accepted, and once the
write has begun the screen cannot be left until the outcome is known.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Input, Static

from diskplan.backend.write.commit import execute, prepare
from diskplan.backend.write.proposal_text import proposal_lines
from diskplan.backend.write.steps import CommitError, Host, Proposal, Verdict, WriteOutcome
from diskplan.model.plan.operations import Changes
from diskplan.model.plan.repair import GptRepair
from diskplan.model.safetext import safe
from diskplan.model.table import Table
from diskplan.ui.dialogs import FORM_CSS
from diskplan.ui.explain import fold_path, placed_path
from diskplan.ui.glyphs import bar
from diskplan.ui.workform import WorkForm

STYLE = {"title": "bold", "heading": "bold", "table-head": "bold", "note": "$accent", "flag": "bold $warning",
         "op:repair": "bold $accent",
         "op:label": "bold $error", "op:delete": "$error", "op:create": "$success", "op:change": "$warning",
         "op:rewrite": "$accent", "op:keep": "$text-muted"}
VERDICT_STYLE = {Verdict.WRITTEN: "bold $success", Verdict.NOTHING: "bold $success", Verdict.REFUSED: "bold $warning",
                 Verdict.FAILED: "bold $error"}


def proposal_text(p: Proposal, model_hint: str = "") -> Content:
    """What will be written, the lines ``diskplan apply`` prints (backend.write.proposal_text), then what
    refuses it. ``model_hint``: the model the planner knows when the target cannot say (an image file, a
    demo)."""
    parts: list[str | tuple[str, str]] = []
    # The target, its model, names, notes and libparted's messages come from outside: shown through safe().
    for line in proposal_lines(p, model_hint, times="x"):  # "x": the console font has no "×"
        if line[0][1] == "heading":
            parts.append("\n")
        parts += [(safe(text), STYLE.get(role, "")) for text, role in line]
        parts.append("\n")
    for refusal in p.refusals:
        parts.append(("refused: ", "bold $warning"))
        parts.append(f"{safe(refusal)}\n")
    return Content.assemble(*parts)


def outcome_text(o: WriteOutcome, width: int = 0) -> Content:
    """``width``: the text's (0: unknown); a path wider than a line breaks after a "/", never mid-name."""
    parts: list[str | tuple[str, str]] = [(f"{o.verdict.value.upper()}: ", VERDICT_STYLE[o.verdict]),
                                          (safe(o.message) + "\n", VERDICT_STYLE[o.verdict])]
    if o.backup_path:
        label = "backup of the old table: "
        parts.append(label)
        parts.append((placed_path(safe(o.backup_path), width, len(label)) + "\n", "bold"))
    if o.verdict is Verdict.FAILED:
        parts.append(f"disk state: {o.state.value}\n")
    for line in o.details:
        parts.append(f"  {safe(line)}\n")
    if o.kernel:
        parts.append((f"error: {safe(o.kernel)}\n", "$error"))
    if o.restore_command:
        parts.append("to put the old table back: ")
        command = " ".join(fold_path(word, width) for word in safe(o.restore_command).split(" "))
        parts.append((command + "\n", "bold"))
    return Content.assemble(*parts)


def progress_bar(step: int, steps: int, width: int = 20) -> str:
    return f"{bar(step, steps, width)} {step}/{steps}"


class CommitScreen(WorkForm[WriteOutcome | None]):
    """Dismissed with the outcome of the write (None when nothing was tried)."""

    body_id = "commit-body"
    DEFAULT_CSS = "CommitScreen { align: center middle; }\n" + FORM_CSS + """
    CommitScreen > .form { width: 100%; height: 100%; }
    CommitScreen #commit-body { height: 1fr; }
    CommitScreen #commit-progress { height: auto; }
    CommitScreen #commit-answer-row { height: 1; display: none; }
    CommitScreen #commit-answer-row.-asking { display: block; }
    CommitScreen #commit-answer-row .label { width: auto; padding-right: 1; }
    """

    def __init__(self, path: str, desired: Table | Changes, host: Host, *, sector_size: int, sectors: int,
                 model: str = "", repair: GptRepair | None = None) -> None:
        """``desired``: the plan's one list of operations (``Plan.writes()``: listed here as the Changes
        panel showed it, and executed), or a table. ``repair``: the plan's pending repair
        (``Plan.pending_repair``), written instead of a table."""
        super().__init__()
        self.repair = repair
        self.model = model
        self.path = path
        self.desired = desired
        self.host = host
        self.sector_size = sector_size
        self.sectors = sectors
        self.proposal: Proposal | None = None
        self.outcome: WriteOutcome | None = None
        self.writing = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="form") as v:
            v.border_title = "Write the plan"
            with VerticalScroll(id="commit-body"):
                yield Static(id="commit-outcome")
                yield Static("Reading the disk and asking libparted to build the table in memory "
                             "(nothing is written)...", id="commit-proposal")
            yield Static("", id="commit-progress")
            with Horizontal(id="commit-answer-row"):
                yield Static("", id="commit-prompt", classes="label")
                yield Input(id="commit-answer", classes="field", select_on_focus=False)
            yield Static("Esc: back to the planner (nothing is written)", id="commit-keys", classes="keys")

    def on_mount(self) -> None:
        self._prepare()

    # --- before writing -------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="commit")
    def _prepare(self) -> None:
        try:
            proposal = prepare(self.path, self.desired, self.host, sector_size=self.sector_size,
                               sectors=self.sectors, repair=self.repair)
        except CommitError as exc:
            self.app.call_from_thread(self._cannot, str(exc))
            return
        except Exception as exc:  # the screen must say what happened, never leave a traceback
            self.app.call_from_thread(self._cannot, " ".join(str(exc).split()) or type(exc).__name__)
            return
        self.app.call_from_thread(self._show_proposal, proposal)

    def _cannot(self, reason: str) -> None:
        self.query_one("#commit-proposal", Static).update(Content.assemble(("cannot write: ", "bold $error"),
                                                                          reason))

    def _show_proposal(self, p: Proposal) -> None:
        self.proposal = p
        self.query_one("#commit-proposal", Static).update(proposal_text(p, self.model))
        keys = self.query_one("#commit-keys", Static)
        if p.refusals:
            keys.update("Nothing can be written (see refused:). Esc: back to the planner")
            return
        if not p.changes:
            keys.update("Nothing to do: the disk already holds the plan. Esc: back to the planner")
            return
        self.query_one("#commit-prompt", Static).update(p.prompt + ":")
        self.query_one("#commit-answer-row").add_class("-asking")
        keys.update("Enter: write (the old table is backed up first)   Esc: back, nothing written")
        self.query_one("#commit-answer", Input).focus()

    @on(Input.Submitted, "#commit-answer")
    def _answered(self, event: Input.Submitted) -> None:
        p = self.proposal
        if p is None or self.writing or self.outcome is not None:
            return
        if not p.accepts(event.value):
            self.query_one("#commit-progress", Static).update(
                Content.assemble(("not confirmed: ", "bold $warning"), f"type {p.confirm_word} exactly"))
            return
        self.writing = True
        self.query_one("#commit-answer-row").remove_class("-asking")
        self.query_one("#commit-keys", Static).update("Writing: this cannot be interrupted...")
        self.refresh_bindings()
        self._execute(p, event.value)

    # --- writing --------------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="commit")
    def _execute(self, p: Proposal, answer: str) -> None:
        def progress(step: int, steps: int, what: str) -> None:
            self.app.call_from_thread(self._progress, step, steps, what)

        try:
            outcome = execute(p, answer, self.host, progress=progress)
        except Exception as exc:  # execute reports failures itself; this is for the unforeseen
            from diskplan.backend.write.steps import DiskState

            reason = " ".join(str(exc).split()) or type(exc).__name__
            outcome = WriteOutcome(Verdict.FAILED, f"the write failed: {reason}", DiskState.UNKNOWN, target=p.target)
        self.app.call_from_thread(self._show_outcome, outcome)

    def _progress(self, step: int, steps: int, what: str) -> None:
        self.query_one("#commit-progress", Static).update(f"{progress_bar(step, steps)} {what}")

    def _show_outcome(self, o: WriteOutcome) -> None:
        self.writing = False
        self.outcome = o
        self._fit_outcome()
        self.query_one("#commit-body", VerticalScroll).scroll_home(animate=False)
        done = "the disk is read again" if o.verdict is Verdict.WRITTEN else "the plan is kept"
        self.query_one("#commit-keys", Static).update(f"Esc or Enter: back to the planner ({done})")
        self.query_one("#commit-progress", Static).update("")
        self.refresh_bindings()
        self.focus()

    def _fit_outcome(self) -> None:
        """The outcome, its paths folded to the body's width (less a scrollbar's, which a long text brings)."""
        if self.outcome is not None:
            body = self.query_one("#commit-body", VerticalScroll)
            width = body.content_region.width - body.styles.scrollbar_size_vertical
            self.query_one("#commit-outcome", Static).update(outcome_text(self.outcome, width))

    def on_resize(self) -> None:
        self._fit_outcome()

    def key_enter(self) -> None:
        if self.outcome is not None:
            self.dismiss(self.outcome)

    @property
    def busy(self) -> bool:
        return self.writing

    def result(self) -> WriteOutcome | None:
        return self.outcome
