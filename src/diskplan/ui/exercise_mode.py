"""A demo opened as an exercise ("fix this layout"): the goal beside the lesson, ``k`` judges the present plan
(model.teach.exercise.check) and says what is still wrong or, once right, what the experiment measured; ``Enter``
walks through the goal's steps, moving the cursor and the zoom with one line of why per step. A mixin of
``PlannerApp``, which declares the bindings; what it needs from the app is ``PlannerView``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from diskplan.model.teach.exercise import GOALS, Goal, Verdict, check

if TYPE_CHECKING:
    from textual.app import App

    from diskplan.ui.plan_base import PlannerView

    class _Base(App[int], PlannerView): ...

else:
    _Base = object


class ExerciseActions(_Base):
    exercise_wanted = False  # open demos as exercises (--exercise, the palette's "Exercise: NAME")
    goal: Goal | None = None  # the open demo's exercise, while it is one
    verdict: Verdict | None = None  # the last check
    walk_step = 0  # the walk-through's next step

    def open_demo_as(self, name: str, *, exercise: bool) -> None:
        """Open the demo ``name``, as an exercise or not (the palette, the demo picker)."""
        self.exercise_wanted = exercise
        self.open_demo(name)  # type: ignore[attr-defined]  # PlannerApp's

    def start_exercise(self, demo: str | None) -> None:
        """A disk was opened: it is an exercise when a demo was asked for as one."""
        self.goal = GOALS.get(demo or "") if self.exercise_wanted else None
        self.verdict = None
        self.walk_step = 0

    def exercise_lines(self) -> list[tuple[str, str]]:
        """For the facts view, after the lesson: (text, style) lines of the goal, the walk-through and the
        last verdict."""
        goal = self.goal
        if goal is None:
            return []
        out = [("Exercise: fix this layout\n", "bold")]
        if self.walk_step:  # the step just taken, whole (the status line cuts it at 80 columns), first
            out.append((f"Step {self.walk_step}/{len(goal.steps)}: {goal.steps[self.walk_step - 1].text}\n",
                        "bold"))
        out += [(f"{line}\n", "") for line in goal.task]
        if self.verdict is not None:  # before the steps: what k said is what the student looks for
            style = "$success" if self.verdict.solved else "$warning"
            out += [(f"{line}\n", style) for line in self.verdict.lines()]
        out.append(("k checks your plan; Enter walks through it step by step.\n", "$text-muted"))
        for i, step in enumerate(goal.steps):
            style = "bold" if i == self.walk_step - 1 else "$text-muted"
            out.append((f"  {i + 1}. {step.text}\n", style))
        out.append(("\n", ""))
        return out

    def action_exercise_check(self) -> None:
        """k: judge the present plan against the goal."""
        if self.goal is None or self.session is None:
            return
        self.verdict = check(self.goal, self.session.plan)
        self.refresh_facts()
        self.action_view("facts")
        lines = self.verdict.lines()
        if self.verdict.solved:
            self.notify("\n".join(lines[1:2] + lines[-1:]), title="Exercise solved", timeout=12)
        else:
            self.notify("\n".join(lines[1:3]), title=lines[0], severity="warning", timeout=12)
        self.say(f"{lines[0]} {lines[1] if self.verdict.solved else lines[1][2:]}")

    def exercise_plan_changed(self) -> None:
        """Once checked, every step is judged again: the verdict shown is never one of an older plan."""
        if self.goal is not None and self.verdict is not None and self.session is not None:
            self.verdict = check(self.goal, self.session.plan)
            self.refresh_facts()

    def action_exercise_step(self) -> None:
        """Enter: the next step of the walk-through (after the last, the first again)."""
        goal = self.goal
        if goal is None or not goal.steps:
            return
        i = self.walk_step % len(goal.steps)
        step = goal.steps[i]
        smap = self.sector_map
        smap.move_to(step.lba)
        if step.zoom == "sector":
            smap.action_zoom_sector()
        elif step.zoom == "fit":
            smap.action_zoom_fit()
        smap.move_to(step.lba, force=True)  # in view at the new zoom
        self.walk_step = i + 1
        self.refresh_facts()
        self.show_lesson()  # type: ignore[attr-defined]  # PlannerApp's: the facts stay, the step on top
        self.say(f"Step {i + 1}/{len(goal.steps)}: {step.text}")

    def refresh_facts(self) -> None:
        """The facts view again (it holds the goal and the verdict)."""
