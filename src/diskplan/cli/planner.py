"""``diskplan [TARGET] [--demo [NAME]]``: the interactive planner.

With no target, a device picker opens. The disk or demo the command line names is read (a demo built
first) in a child forked before Textual is imported, so the first frame can show it; disks chosen later
are read in a worker thread. Both go through the forked libparted reader. Demo images live in a temporary
directory that is removed, with any loop device, when the planner exits.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import sys
from typing import TYPE_CHECKING

from diskplan.cli.options import TargetError, add_overrides, apply_overrides, open_target
from diskplan.model.safetext import safe
from diskplan.model.teach import demos
from diskplan.ui.glyphs import console_wanted, mono_wanted
from diskplan.ui.target import Target

if TYPE_CHECKING:  # the backend is imported when a disk is opened (a demo's in a forked child)
    from diskplan.backend.demo_image import DemoImage
    from diskplan.backend.parted.isolate import Child
    from diskplan.ui.app import PlannerApp

DESCRIPTION = ("See where every partition lies on the disk's physical blocks, and why a misaligned one "
               "is slow. Nothing is written to the disk you open.")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan",
        description=DESCRIPTION,
        epilog="Other commands: see diskplan --help (each has --help). Keys inside the planner: press ? for help.",
    )
    p.add_argument("target", nargs="?", help="block device or image file; omit it to choose a device")
    add_options(p)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    """The planner's options, also the options of the whole command line's tree (cli.main)."""
    from diskplan import __version__

    p.add_argument("--version", action="version", version=f"diskplan {__version__}")
    p.add_argument(
        "--demo",
        nargs="?",
        const=demos.DEFAULT,
        metavar="NAME",
        help=f"open a built-in demo disk (default {demos.DEFAULT}; see --list-demos)",
    )
    p.add_argument("--list-demos", action="store_true", help="list the demo disks and exit")
    p.add_argument("--exercise", action="store_true",
                   help="open the demo as an exercise: fix its layout, k checks the plan, Enter walks through it")
    prof = p.add_mutually_exclusive_group()
    prof.add_argument(
        "--console",
        dest="console",
        action="store_const",
        const=True,
        help="Linux console profile: CP437 glyphs, 16 colours (automatic with TERM=linux or DISKPLAN_CONSOLE=1)",
    )
    prof.add_argument("--no-console", dest="console", action="store_const", const=False, help="never use it")
    p.add_argument("--no-color", "--no-colour", dest="mono", action="store_const", const=True,
                   help="draw without colour: partitions by their number, the cursor in reverse video "
                   "(automatic with NO_COLOR or a monochrome TERM)")
    p.add_argument("--theme", metavar="NAME",
                   help="Textual colour theme for this run (e.g. nord, gruvbox, textual-light); without it, the "
                   "theme last chosen in the command palette (ctrl+p, Theme), remembered in "
                   "$XDG_CONFIG_HOME/diskplan/settings.json. The console profile keeps its 16 colours")
    add_overrides(p)


class CliSource:
    """Opens what the planner asks for: real reads, real demo images, the command line's overrides.

    What the command line names is opened ahead, in a child forked before Textual is imported: it works on
    another core while this process imports, the backend's modules stay out of this process, and the first
    frame can show the disk."""

    def __init__(self, args: argparse.Namespace) -> None:
        from diskplan.backend.demo_image import Workspace

        self.args = args
        self.workspace = Workspace()
        # ("demo", name) or ("path", path): the child opening it
        self._early: dict[tuple[str, str], Child[tuple[Target | str, DemoImage | None]]] = {}

    def prefetch(self, kind: str, name: str) -> None:
        """Open a demo (``kind`` "demo") or a disk ("path") in a forked child. Fork before any thread starts."""
        from diskplan.backend.parted.isolate import start_isolated

        if kind == "demo":
            name = demos.find(name).name
            # the directory and a loop device are made here, so this process removes them whatever the child does
            self.workspace.reserve(demos.find(name))
        self._early[kind, name] = start_isolated(self._in_child, kind, name)

    def _in_child(self, kind: str, name: str) -> tuple[Target | str, DemoImage | None]:
        """(the target, or why not; a demo's image, which the parent must clean up either way)."""
        # libparted runs in children of this child (a write, a read): imported here once, they inherit it
        # instead of each importing it again.
        with contextlib.suppress(ImportError):
            import diskplan.backend.parted.libparted  # noqa: F401
        try:
            target: Target | str = self._open_demo(name) if kind == "demo" else self._open_path(name)
        except Exception as exc:
            target = " ".join(str(exc).split()) or type(exc).__name__
        return target, self.workspace.built(name) if kind == "demo" else None

    def _collect(self, key: tuple[str, str], timeout: float) -> Target:
        from diskplan.backend.parted.isolate import IsolatedFailure

        child = self._early.pop(key)
        try:
            target, image = child.result(timeout)
        except IsolatedFailure as exc:
            target, image = f"{key[1]} could not be opened: {exc.reason}", None
        if image is not None:
            self.workspace.adopt(image)
        if isinstance(target, str):
            raise TargetError(target)
        return target

    def ready(self, kind: str, name: str) -> Target | None:
        key = (kind, demos.find(name).name if kind == "demo" else name)
        child = self._early.get(key)
        if child is None or not child.answering():
            return None
        return self._collect(key, timeout=300)

    def open_path(self, path: str) -> Target:
        if ("path", path) in self._early:
            return self._collect(("path", path), timeout=300)
        return self._open_path(path)

    def open_demo(self, name: str) -> Target:
        name = demos.find(name).name
        if ("demo", name) in self._early:
            return self._collect(("demo", name), timeout=300)
        return self._open_demo(name)

    def _open_path(self, path: str) -> Target:
        disk = open_target(path, self.args)
        return Target(disk, path, path=path)

    def _open_demo(self, name: str) -> Target:
        from diskplan.backend.demo_image import DemoUnavailable

        s = demos.find(name)
        title = f"demo {s.name}"
        try:
            image = self.workspace.image(s)
        except DemoUnavailable as exc:
            disk = apply_overrides(s.planned_disk(), self.args)
            note = f"{exc}. Showing the planned table without writing an image."
            return Target(disk, title, s.lesson, note, s.name)
        disk = apply_overrides(s.dress(open_target(image.device)), self.args)
        return Target(disk, title, s.lesson, "", s.name, path=image.device)

    def close(self) -> None:
        for key in list(self._early):  # a child still at work: let it finish, so a demo's image is removed too
            with contextlib.suppress(TargetError):
                self._collect(key, timeout=60)
        self.workspace.close()


def list_demos() -> None:
    width = max(len(n) for n in demos.names())
    for s in demos.SCENARIOS:
        print(f"{s.name:<{width}}  {s.title}")
    print(f"\nOpen one with: diskplan --demo NAME (default {demos.DEFAULT})")


def unknown_theme(name: str) -> str:
    """Why ``--theme NAME`` cannot be used ("" when it can), with the names that can."""
    from diskplan.ui.settings import theme_names

    names = theme_names()
    return "" if name in names else f"unknown theme {safe(name)!r}; the themes are: {', '.join(names)}"


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.list_demos:
        list_demos()
        return 0
    if args.theme is not None and (why := unknown_theme(args.theme)):
        print(f"diskplan: {why}", file=sys.stderr)
        return 2
    start: tuple[str, str] | None
    if args.demo is not None:
        if args.target:
            print("diskplan: give a target or --demo, not both", file=sys.stderr)
            return 2
        try:
            start = ("demo", demos.find(args.demo).name)
        except KeyError as exc:
            print(f"diskplan: {safe(str(exc.args[0]))}", file=sys.stderr)
            return 2
    elif args.exercise:
        print("diskplan: --exercise opens a demo: give --demo NAME too", file=sys.stderr)
        return 2
    elif args.target:
        from diskplan.backend.raw.filekind import target_problem  # stat only: no libparted in this process

        problem = target_problem(args.target)  # the cheap checks; the read happens in the planner
        if problem:
            print(f"diskplan: {safe(problem)}", file=sys.stderr)
            return 2
        start = ("path", args.target)
    else:
        start = None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("diskplan: the planner needs a terminal; for a report use `diskplan check TARGET` (in a web "
              "browser: `diskplan serve`, demo disks only)", file=sys.stderr)
        return 2

    return run_planner(CliSource(args), start, console=console_wanted(os.environ, args.console),
                       mono=mono_wanted(os.environ, args.mono), exercise=args.exercise, theme=args.theme)


def _end_by_signal(app: PlannerApp, signum: int) -> None:
    """SIGTERM or SIGHUP: end the planner (PlannerApp.end_by_signal) from its own loop. The handler runs while
    the idle loop waits in select(), which it then resumes: a callback scheduled from here only runs once the
    loop wakes, so it is woken (call_soon_threadsafe), or the planner ignored the signal until a key came."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # before the loop starts or after it ended: nothing on the screen to end
        from diskplan.backend.write import write_began
        from diskplan.model.exitstatus import stopped

        raise SystemExit(stopped(bool(write_began()))) from None
    loop.call_soon_threadsafe(app.end_by_signal, signum)


def run_planner(source: CliSource, start: tuple[str, str] | None, *, console: bool, mono: bool,
                served: bool = False, exercise: bool = False, theme: str | None = None) -> int:
    """Run the planner on ``source`` until it quits; ``served``: in a browser (cli/serve.py), where the
    terminal is a web page and neither devices nor files of the server's are offered."""
    # Start-up allocates many objects that live as long as the program (modules, classes, styles, widgets):
    # the default collector would scan them again and again before the first frame. Collect rarely until
    # the first disk is drawn, then as usual.
    threshold = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    if start is not None:
        source.prefetch(*start)
    from diskplan.ui.app import PlannerApp  # Textual only when the planner really starts
    from diskplan.ui.settings import Settings

    gc.freeze()  # what is imported stays: never scanned again
    # Served, a browser's theme is not the server's to remember (no settings: nothing is saved).
    settings = None if served else Settings.from_env(os.environ)
    app = PlannerApp(source, start, console=console, mono=mono, served=served, exercise=exercise, theme=theme,
                     settings=settings)
    app.after_first_disk = lambda: gc.set_threshold(*threshold)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: _end_by_signal(app, signum))
    try:
        app.run()
    finally:
        source.close()
    return app.return_code or 0
