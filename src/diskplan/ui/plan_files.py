"""Plan files in the planner: Ctrl+S saves the plan as JSON (with the fingerprint of the disk's table and its
partitions' GUIDs), Ctrl+O loads a JSON plan or an sfdisk dump; both start in the folder last used."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from diskplan.model.value import replace
from diskplan.ui.plan_base import PlanBase
from diskplan.ui.planning import Session


class PlanFileActions(PlanBase):
    """Saving and loading plans (a mixin of ``PlannerApp``, through ``PlanActions``)."""

    _plan_dir_used = ""  # the folder of the plan last saved or loaded in this run

    def _plan_folder(self) -> tuple[str, str]:
        """Where Ctrl+S and Ctrl+O start, and what that folder is: the one last used (this run, or remembered
        in the settings), else diskplan's plans folder. Never the working directory, which may be a checkout
        or a read-only medium."""
        from diskplan.ui.settings import plans_dir

        settings = getattr(self, "settings", None)
        last = self._plan_dir_used or (settings.plan_dir if settings is not None else None)
        if last and os.path.isdir(last):
            return last, "the folder last used"
        return plans_dir(os.environ), "diskplan's plans folder, $XDG_DATA_HOME/diskplan/plans"

    def _default_plan_path(self) -> str:
        title = self.target.title if self.target else "plan"
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-") or "plan"
        return os.path.join(self._plan_folder()[0], f"diskplan-{slug}.json")

    def _plan_prompt(self, what: str) -> str:
        folder, why = self._plan_folder()
        return f"{what}\nFolder: {folder} ({why})"

    def _used_plan_folder(self, path: str) -> None:
        """Remember the folder of a plan saved or loaded: the next Ctrl+S or Ctrl+O starts there."""
        folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
        self._plan_dir_used = folder
        settings = getattr(self, "settings", None)
        if settings is not None:
            settings.remember("plan_dir", folder)  # best effort: a folder not remembered is no error

    def _made_against(self, s: Session) -> str | None:
        """The fingerprint of the disk's table the plan starts from, which `diskplan apply` checks; None
        for a disk without a file or device (a demo shown from the model)."""
        from diskplan.backend.raw.tableid import table_fingerprint

        if self.target is None or not self.target.path:
            return None
        return table_fingerprint(s.plan.base, self.target.path, s.plan.geometry, self.target.disk.filesystem)

    def _guids(self) -> dict[int, str]:
        """The GPT unique GUIDs of the open disk's partitions (a saved plan's ``keeps`` name them)."""
        from diskplan.backend.raw.gptattrs import partition_guids

        if self.target is None or not self.target.path:
            return {}
        try:
            return partition_guids(replace(self.target.disk, source=self.target.path))
        except OSError:
            return {}

    def action_save_plan(self, then: Callable[[], object] | None = None) -> None:
        """Save the plan as a JSON file; ``then``: what to do once it is saved (not when cancelled)."""
        from diskplan.model.formats.planfile import PlanFileError, save_plan
        from diskplan.ui.dialogs import PathScreen

        s = self._plan_session()
        if s is None or self.served:  # no file of the server's is written
            return

        def save(path: str) -> str | None:
            try:
                text = save_plan(s.plan, self._made_against(s), self._guids())
            except PlanFileError as exc:
                return str(exc)
            full = os.path.expanduser(path)
            try:
                if os.path.dirname(os.path.abspath(full)) == self._plan_folder()[0]:
                    os.makedirs(os.path.dirname(os.path.abspath(full)), mode=0o700, exist_ok=True)
                with open(full, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as exc:
                return f"cannot write {path}: {exc.strerror or exc}"
            self._used_plan_folder(full)
            self._saved_plan = s.plan
            self.notify(f"plan saved to {path}", timeout=4)
            return None

        def saved(path: str | None) -> None:
            if path is not None and then is not None:
                then()

        self.push_screen(PathScreen("Save plan", self._plan_prompt(
            "The wanted table as a JSON plan file (diskplan apply and diskplan export read it)."),
            self._default_plan_path(), save), saved)

    def action_load_plan(self) -> None:
        from diskplan.model.formats.planfile import PlanFileError, load_into
        from diskplan.ui.dialogs import PathScreen

        s = self._plan_session()
        if s is None or self.served:  # no file of the server's is read
            return

        def load(path: str) -> str | None:
            from diskplan.backend.read.planread import read_plan_text

            try:  # bounded, and never a wait on a FIFO
                text = read_plan_text(os.path.expanduser(path))
            except OSError as exc:
                return f"cannot read {path}: {exc.strerror or exc}"
            except PlanFileError as exc:
                return str(exc)
            outcome = load_into(s.plan, text)
            if not outcome.ok:
                return outcome.message
            self._used_plan_folder(path)
            self._step(outcome)
            return None

        self.keep_or_lose("loading a plan", lambda: self.push_screen(PathScreen(
            "Load plan", self._plan_prompt(
                "A JSON plan or an `sfdisk --dump` text; it becomes the plan (undo takes it back)."),
            self._default_plan_path(), load)))
