"""``diskplan``: dispatch to a subcommand; never let a traceback reach the user.

The whole command line is one argparse tree (:func:`parser`): the planner's options, then one subparser per
command, each its module's own ``parser()``. ``--help``, a mistyped command, the man page and the shell
completions come from that tree. Running a command needs only its own module, so the tree is built only
for those: a command's module parses its arguments itself, with the same parser the tree holds.
"""

from __future__ import annotations

import gc
import os
import sys

from diskplan.backend.write import write_began
from diskplan.cli.textout import fit_streams
from diskplan.model.safetext import safe

# argparse and re are imported where used (the help, a mistyped command), and so is the exit status scheme
# (model.exitstatus: enum): a command's module imports argparse itself when it parses, and `check` starts its
# reads before that (~10 ms of argparse, re, enum, gettext; collections for collections.abc's Callable).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

# Subcommands live in their own modules and are imported only when used (start-up stays light).
COMMANDS = {
    "check": ("diskplan.cli.check", "check every partition's alignment and explain each finding"),
    "export": ("diskplan.cli.export", "print a table or plan as JSON, sfdisk, parted, ansible, ignition or repart"),
    "apply": ("diskplan.cli.apply", "write a planned partition table (JSON plan or sfdisk script)"),
    "restore": ("diskplan.cli.restore", "put a table backup made by apply back, byte for byte"),
    "repair": ("diskplan.cli.repair", "rebuild a damaged GPT copy or a lost protective MBR from the good copy"),
    "move": ("diskplan.cli.move", "move a partition and its data to a new start, crash-safe"),
    "realign": ("diskplan.cli.realign", "move misaligned partitions and their data to the nearest grain"),
    "resume": ("diskplan.cli.resume", "finish an interrupted partition move"),
    "resize": ("diskplan.cli.resize", "grow or shrink a partition and its filesystem with the filesystem's own tool"),
    "stack": ("diskplan.cli.stack", "plan md RAID, LVM, LUKS and the filesystem above a partition aligned: the "
              "commands, with the arithmetic"),
    "measure": ("diskplan.cli.measure", "time small direct writes and reads at aligned and misaligned offsets"),
    "serve": ("diskplan.cli.serve", "serve the planner on the demo disks to web browsers (a classroom)"),
    "lesson": ("diskplan.cli.lesson", "write a demo's lesson as a Markdown or HTML handout with an SVG of the map"),
}
PLANNER = "diskplan.cli.planner"
USAGE = "diskplan [OPTIONS] [TARGET]\n       diskplan COMMAND [ARGS] (diskplan COMMAND --help for its own)"
# Patterns are compiled where first used (re caches them): a check never uses these, and each compile at
# import cost every command ~0.1 ms.
_WORD = r"[a-z][a-z-]*"


def parser() -> argparse.ArgumentParser:
    """The whole command line: imports every command's module, so only help, man page and completions use it."""
    import argparse

    from diskplan.cli import planner
    from diskplan.model.exitstatus import SUMMARY

    top = argparse.ArgumentParser(
        prog="diskplan",
        usage=USAGE,
        description=planner.DESCRIPTION + " With no COMMAND, the interactive planner opens TARGET "
        "(a block device or image file; without one, a device picker).",
        epilog="Keys inside the planner: press ? for help. " + SUMMARY,
    )
    planner.add_options(top)
    sub = top.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, (module, summary) in COMMANDS.items():
        own = _module(module).parser()
        sub.add_parser(name, parents=[own], add_help=False, help=summary, prog=own.prog,
                       description=own.description, epilog=own.epilog)
    return top


def _module(name: str) -> Any:
    """The module ``name``, imported (importlib.import_module, without importing importlib's package)."""
    __import__(name)
    return sys.modules[name]


def _mistyped_command(word: str) -> bool:
    """A first argument that can only have meant a command: a lower-case word that names no file."""
    import re

    return word not in COMMANDS and re.fullmatch(_WORD, word) is not None and not os.path.exists(word)


def _run(argv: list[str]) -> int:
    if argv and argv[0] in COMMANDS:
        return int(_module(COMMANDS[argv[0]][0]).main(argv[1:]) or 0)
    if (argv and _mistyped_command(argv[0])) or any(a in ("-h", "--help") for a in argv):
        parser().parse_args(argv)  # argparse says "invalid choice" (or prints the help) and exits
        return 2
    return int(_module(PLANNER).main(argv) or 0)


def _reader_gone() -> int:
    """The reader of standard output closed it (``diskplan export | head -1``): end quietly, with the status
    a shell gives a program that SIGPIPE ended (128 + 13), as other tools do."""
    import signal  # here: its enums cost every command's start-up ~1 ms

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # what Python would still flush at exit goes nowhere, silently
    os.close(devnull)
    return 128 + signal.SIGPIPE


def interrupted() -> str:
    """What a Ctrl+C that reached the top can truthfully say: "nothing was written" only while no write
    has saved its backup (backend.write.write_began)."""
    began = write_began()
    if not began:
        return "diskplan: interrupted; nothing was written."
    return (f"diskplan: interrupted after a write had begun (its backup: {safe(began)}); its outcome is as "
            "reported above, and `diskplan check` shows the disk as it is now.")


def _stopped() -> int:
    """The status of a command that a Ctrl+C or an internal error ended (model.exitstatus.stopped)."""
    from diskplan.model.exitstatus import stopped

    return stopped(bool(write_began()))


def main(argv: list[str] | None = None, run: Callable[[list[str]], int] = _run) -> int:
    """``run``: what runs the command line (the served planner has its own, cli/serve.py)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    fit_streams()  # an ASCII or Latin-1 terminal (a serial line, LANG=C) gets lookalikes, not an error
    try:
        code = run(argv)
        sys.stdout.flush()  # a reader that went away (| head) is found here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print(interrupted(), file=sys.stderr)
        return _stopped()
    except SystemExit as exc:  # argparse's usage errors and --help
        return exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:
        if os.environ.get("DISKPLAN_DEBUG"):
            raise
        detail = safe(" ".join(str(exc).split())) or type(exc).__name__
        began = write_began()
        after = f"; a write had begun, its backup {safe(began)}: `diskplan check` shows the disk now" if began else ""
        print(f"diskplan: {detail} (internal error{after}; run with DISKPLAN_DEBUG=1 for details)", file=sys.stderr)
        return _stopped()


def program() -> None:
    """The installed command (and ``python -m diskplan``): ``main`` on this process's arguments, then its exit.
    What is still alive then is freed only by the exit, so it is frozen for the garbage collector first: the
    interpreter's last collection would walk every object a command made (~5 ms of a 128-partition check's 70).
    A command of ENDS_AT_ONCE skips the interpreter's finalization altogether."""
    code = main()
    if sys.argv[1:2] and sys.argv[1] in ENDS_AT_ONCE:
        _end_now(code)
    gc.freeze()
    raise SystemExit(code)


# Commands whose process holds nothing for the interpreter's finalization to close or flush but the standard
# streams: they only read, start no threads, make no temporary files and register no atexit work (their children
# are reaped before ``main`` returns). They end with os._exit once the streams are flushed: tearing down every
# module they imported took ~2.5 ms of a 128-partition `check --json`'s ~45 (Nov 27, interleaved runs).
ENDS_AT_ONCE = frozenset({"check"})


def _end_now(code: int) -> None:
    """Flush the standard streams and end the process with ``code`` at once; returns only when a flush failed
    (the usual exit then says so, with the status Python gives that)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # (a reader gone since ``main`` flushed, a stream closed)
        return
    os._exit(code)


if __name__ == "__main__":
    program()
