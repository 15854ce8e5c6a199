"""Writing the plan from the planner (w): the commit's confirmation (ui.commit_screen), or for data moves the
move dialog (ui.move_screen); an unfinished move found on the open disk offered (M) and resumed; the disk
read again afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING

from diskplan.model.plan.plan import Plan
from diskplan.ui.plan_base import PlanBase, default_host, unnested
from diskplan.ui.target import why_not_writable

# Dialogs, plan files and the commit are imported when first used: start-up (to the first frame) needs none.
if TYPE_CHECKING:
    from diskplan.backend.move.engine import MoveOutcome
    from diskplan.backend.write.steps import WriteOutcome


class WriteActions(PlanBase):
    """The commit and data moves (a mixin of ``PlannerApp``, through ``PlanActions``)."""

    move_journal: str = ""  # an unfinished data move recorded for the open disk: M (resume) finishes it

    def action_write(self) -> None:
        from diskplan.ui.commit_screen import CommitScreen

        s = self._plan_session()
        if s is None or self.target is None:
            return
        why = why_not_writable(self.target)
        if why:
            self.notify(why[0].upper() + why[1:] + (f" ({self.target.note})" if self.target.note else ""),
                        title="Cannot write", severity="warning", timeout=8)
            return
        if not s.plan.dirty:
            self.notify("Nothing to write: the plan is the table on the disk.", timeout=4)
            return
        geom = s.plan.geometry
        writes = s.plan.writes()
        if writes.move:
            self._write_moves(s.plan)
            return
        screen = CommitScreen(self.target.path, s.plan.writes(), self.host or default_host(),
                              sector_size=geom.logical, sectors=geom.sectors, model=unnested(geom.model),
                              repair=s.plan.pending_repair)
        self.push_confirmation(screen, self._written)

    def _write_moves(self, plan: Plan) -> None:
        """A plan of data moves: backend.move.engine runs them one at a time (ui.move_screen). Table changes are
        written by the commit first, on their own: the engine moves a partition against the table on disk."""
        from diskplan.ui.move_screen import MoveScreen

        assert self.target is not None
        if plan.problems():
            self.notify(plan.problems()[0], title="Cannot write", severity="warning", timeout=10)
            return
        screen = MoveScreen(self.target.path, plan.writes(), self.host or default_host(),
                            sector_size=plan.geometry.logical, model=unnested(plan.geometry.model))
        self.push_confirmation(screen, self._moved)

    def offer_resume(self) -> bool:
        """Whether the open disk has an unfinished data move (its journal, backend.move.movejournal); if so, say so
        once and offer M. The footer follows."""
        from diskplan.backend.move.movejournal import unfinished
        from diskplan.backend.write.steps import identity

        path = self.target.path if self.target is not None else ""
        found = ""
        if path:
            try:
                found = next(iter(unfinished(path, identity(path).size)), "")
            except OSError:
                found = ""
        changed = found != self.move_journal
        self.move_journal = found
        if changed:
            self.refresh_bindings()
        if found:
            command = "" if self.served else " (or `diskplan resume`)"  # a browser runs no command
            self.notify(f"A data move on {path} was interrupted (journal {found}): the partition is half-moved "
                        f"and must not be mounted. M finishes the move{command}.",
                        title="Unfinished move", severity="warning", timeout=15)
        return bool(found)

    def action_resume_move(self) -> None:
        from diskplan.ui.move_screen import MoveScreen

        s = self._plan_session()
        if s is None or self.target is None or not self.target.path:
            return
        if not self.move_journal:
            self.notify("No unfinished move is recorded for this disk.", title="Resume", timeout=4)
            return
        screen = MoveScreen(self.target.path, None, self.host or default_host(), sector_size=s.plan.geometry.logical,
                            model=unnested(s.plan.geometry.model))
        self.push_confirmation(screen, self._moved)

    def _moved(self, outcome: MoveOutcome | None) -> None:
        from diskplan.backend.write.steps import Verdict

        if outcome is None or self.target is None:
            return
        if outcome.verdict is Verdict.FAILED:
            resume = "M finishes it" if self.served else f"{outcome.resume_command} (or M)"
            self.notify(outcome.message + (f" - {resume}" if outcome.resumable else ""),
                        title="The move did not finish", severity="error", timeout=15)
        if outcome.verdict in (Verdict.WRITTEN, Verdict.FAILED):  # either may have changed the disk
            self.say(f"{outcome.message}; reading the disk again...")
            self.reread(self.target.path)

    def _written(self, outcome: WriteOutcome | None) -> None:
        from diskplan.backend.write.steps import Verdict

        if outcome is None or self.target is None:
            return
        if outcome.verdict is Verdict.WRITTEN:
            self.say(f"{outcome.message}; reading the disk again...")
            self.reread(self.target.path)
        elif outcome.verdict is Verdict.FAILED:
            self.notify(outcome.message + (f" - {outcome.restore_command}" if outcome.restore_command else ""),
                        title="The write failed", severity="error", timeout=15)
