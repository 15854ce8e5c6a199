"""What the planner remembers between runs: the theme chosen in the command palette, and the folder plans
were last saved to or loaded from.

One JSON object in ``$XDG_CONFIG_HOME/diskplan/settings.json`` (``~/.config`` when the variable is unset or
relative, as the XDG Base Directory spec says). It is replaced whole and atomically (a temporary file in
the same directory, renamed over it), so a crash never leaves half a file. A file that is missing,
unreadable, not JSON or not an object, or a value of the wrong kind, is ignored: the defaults apply, and
nothing but the planner's own state is at stake, so no error is shown for it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping

from diskplan.model.formats.jsontext import as_text

FILE = "settings.json"
MAX_BYTES = 64 << 10  # far above what it holds: a larger file is not ours to parse


def config_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "diskplan")


def plans_dir(env: Mapping[str, str]) -> str:
    """Where plan files go when no folder was used yet: ``$XDG_DATA_HOME/diskplan/plans`` (``~/.local/share``
    when the variable is unset or relative): the user's own, writable, and not a checkout or a live medium's
    read-only working directory."""
    base = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "diskplan", "plans")


class Settings:
    """The settings file in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, FILE)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(config_dir(env))

    def load(self) -> dict[str, object]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
            data = json.loads(raw) if len(raw) <= MAX_BYTES else None
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def plan_dir(self) -> str | None:
        """The folder the last plan was saved to or loaded from (Ctrl+S, Ctrl+O start there)."""
        value = self.load().get("plan_dir")
        return value if isinstance(value, str) and os.path.isabs(value) else None

    @property
    def theme(self) -> str | None:
        value = self.load().get("theme")
        return value if isinstance(value, str) and value else None

    def remember(self, key: str, value: object) -> str:
        """Store ``key``; "" when done, else why not (one line: the planner shows it and goes on)."""
        data = self.load()
        data[key] = value
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".tmp", dir=directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(as_text(data, sort_keys=True))
                    f.write("\n")
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            return f"could not save {self.path}: {exc.strerror or exc}"
        return ""


def theme_names() -> list[str]:
    """Textual's themes, the names ``--theme`` and the palette's Theme command offer."""
    from textual.theme import BUILTIN_THEMES  # Textual only when a theme is named

    return sorted(BUILTIN_THEMES)
