"""What the planner shows and where it comes from.

The UI never opens disks itself: the entry point hands it a ``Source`` (cli/planner.py reads through
the forked libparted reader and builds demo images), so the UI stays free of the CLI layer and tests
can hand it disks built from the model.
"""

from __future__ import annotations

from typing import Protocol

from diskplan.model.disk import Disk
from diskplan.model.value import value


@value
class Target:
    disk: Disk
    title: str  # short, for the title bar: "demo ssd-gpt-34", "/dev/sda", "disk.img"
    lesson: tuple[str, ...] = ()  # a demo's teaching text
    note: str = ""  # e.g. why a demo is shown from the model instead of a real image
    demo: str | None = None  # the demo's name
    path: str = ""  # the file or device a commit writes to; "" when there is none (a model-only demo)


def why_not_writable(target: Target | None) -> str:
    """Why a plan for ``target`` cannot be written ("" when it can)."""
    if target is None or not target.path:
        return "this disk is shown from the model: there is nothing to write to"
    return ""


class Source(Protocol):
    """Opens what the user asks for; raises an exception whose text is one line for the user."""

    def open_path(self, path: str) -> Target: ...

    def open_demo(self, name: str) -> Target: ...

    def ready(self, kind: str, name: str) -> Target | None:
        """A demo (``kind`` "demo") or a disk ("path") if it can be had without waiting (opened ahead, or
        cheap), else None: then the planner calls ``open_demo``/``open_path`` in a worker."""
        ...


class ModelSource:
    """Demos straight from the model, without images or root: for tests and when nothing else works."""

    def open_path(self, path: str) -> Target:
        raise OSError(f"{path}: this planner was started without disk access")

    def ready(self, kind: str, name: str) -> Target | None:
        return self.open_demo(name) if kind == "demo" else None  # a demo is built from the model: no wait

    def open_demo(self, name: str) -> Target:
        from diskplan.model.teach.demos import find

        s = find(name)
        return Target(s.planned_disk(), f"demo {s.name}", s.lesson, "shown from the model, no image written", s.name)
