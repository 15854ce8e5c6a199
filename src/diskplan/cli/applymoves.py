"""``diskplan apply`` for a plan that keeps partitions with their content (``keeps``) and moves or resizes
them: every step shown sector-exact, in the order it runs, with the bytes copied and an estimate; one
confirmation; then the steps one at a time (backend.move.planmoves), each with its progress and outcome."""

from __future__ import annotations

import argparse
import shlex

from diskplan.backend.move.engine import MoveOutcome, MoveProposal
from diskplan.backend.move.planmoves import PlanMoves, execute_plan_moves, fingerprints_after, prepare_plan_moves
from diskplan.backend.move.planrest import RestPlan, fingerprint_now
from diskplan.backend.write.steps import CommitError, Host, Verdict
from diskplan.cli.confirm import before_writing, confirm
from diskplan.cli.dataprogress import progress_display, render_outcome, stop_on_interrupt
from diskplan.cli.move import render_move
from diskplan.cli.resize import render
from diskplan.cli.textout import Out
from diskplan.model.disk import Disk
from diskplan.model.formats.planfile import PlanSpec
from diskplan.model.table import Table
from diskplan.model.units import human_bytes, human_duration


def render_steps(pm: PlanMoves, console: Out) -> None:
    """Every step in the order it runs, as ``diskplan move`` and ``diskplan resize`` show one."""
    n = len(pm.steps)
    console.print(f"Data moves and resizes, one partition at a time, in this order ({n} step{'s' * (n > 1)}):",
                  style="bold")
    for i, (s, p) in enumerate(pm.steps, 1):
        console.print(f"step {i}: {s.kind} partition {s.number}: {s.start}..{s.start + s.length - 1} -> "
                      f"{s.to}..{s.to + s.new_length - 1}", style="bold")
        if isinstance(p, MoveProposal):
            render_move(p, console)
        elif p is not None:
            render(p, console)
    if pm.nbytes:
        est = f"; estimate {human_duration(pm.estimate)} for the copies (read, written and read back at " \
              f"{human_bytes(int(pm.rate))}/s)" if pm.estimate else ""
        console.print(f"in all: {pm.nbytes:,} B = {human_bytes(pm.nbytes)} copied{est}")


def run_plan_moves(args: argparse.Namespace, spec: PlanSpec, disk: Disk, desired: Table, host: Host,
                   console: Out, err: Out) -> int | None:
    """The exit status, or None when the plan moves and resizes nothing (the ordinary table write then)."""
    try:
        pm = prepare_plan_moves(args.target, disk, spec, desired, host)
    except CommitError as exc:
        err.print(f"diskplan apply: {exc}")
        return 2
    for note in pm.unfilled:
        console.print(("note: ", "cyan"), note)
    if not pm.steps and not pm.refusals:
        return None
    if pm.steps:
        render_steps(pm, console)
    code = before_writing(pm.refusals, "", args.yes, "move and resize them (each step backs up the table and "
                          "journals its move first)", console, err)
    if code is not None:
        return code
    answer = confirm(pm, args.yes)
    steps = [s for s, _ in pm.steps]
    rest, after = RestPlan(args.plan, spec), fingerprints_after(disk, steps)

    def before(i: int) -> str:
        # A move: the table before it (a cut before its journal exists leaves that one); the move makes it the table
        # after it right before its journal is marked done (backend.move.planrest.resave). A resize (no journal):
        # the table after it.
        if len(steps) < 2 or not rest.save(after[i - 1] if steps[i - 1].kind == "move" else after[i]):
            return ""
        if i == 1:
            t = shlex.quote(args.target)
            console.print(f"the rest of the plan is saved in {rest.path}: should this stop part-way, even killed, "
                          f"`diskplan resume {t} --yes` (if a move is unfinished) then "
                          f"`diskplan apply {shlex.quote(rest.path)} {t}` finish it")
        return rest.path

    with stop_on_interrupt(err) as stop, progress_display(err) as show:
        outcomes = execute_plan_moves(pm, answer, host, backup_path=args.backup, progress=lambda i, s: show,
                                      stop=stop, finished=lambda o: render_outcome(o, console, err), before=before)
    finish_line(rest, outcomes, len(steps), after, args.target, err)
    return outcomes[-1].exit_code


def finish_line(rest: RestPlan, outcomes: list[MoveOutcome], n: int, after: list[str], target: str,
                err: Out) -> None:
    """Say the one command that finishes a plan stopped part-way (its rest saved by backend.move.planrest), or
    remove the rest plan when every step is done or none (then the plan itself still applies)."""
    done = sum(o.verdict is Verdict.WRITTEN for o in outcomes)
    last = outcomes[-1]
    if not rest.path or done == n or (done == 0 and not last.resumable):
        rest.discard()
        if rest.problem and done < n:
            err.print(rest.problem, style="yellow")
        return
    if not last.resumable and not rest.save(fingerprint_now(target, after[done])):  # the table as it is now
        err.print(rest.problem, style="yellow")
        return
    then = f"{last.resume_command}, then " if last.resumable else ""
    err.print(f"to finish the plan: {then}diskplan apply {shlex.quote(rest.path)} {shlex.quote(target)}", style="bold")
