"""``diskplan``: dispatch to a subcommand; never let a traceback reach the user."""

from __future__ import annotations

import importlib
import os
import signal
import sys

from diskplan.model.safetext import safe

# Subcommands live in their own modules and are imported only when used (start-up stays light).
COMMANDS = {
    "check": "diskplan.cli.check",
    "export": "diskplan.cli.export",
    "apply": "diskplan.cli.apply",
    "restore": "diskplan.cli.restore",
    "repair": "diskplan.cli.repair",
    "move": "diskplan.cli.move",
    "realign": "diskplan.cli.realign",
    "resume": "diskplan.cli.resume",
    "resize": "diskplan.cli.resize",
    "measure": "diskplan.cli.measure",
}
PLANNER = "diskplan.cli.planner"


def _reader_gone() -> int:
    """The reader of standard output closed it (``diskplan export | head -1``): end quietly, with the status
    a shell gives a program that SIGPIPE ended (128 + 13), as other tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # what Python would still flush at exit goes nowhere, silently
    os.close(devnull)
    return 128 + signal.SIGPIPE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    module = PLANNER
    if argv and argv[0] in COMMANDS:
        module = COMMANDS[argv.pop(0)]
    try:
        code = int(importlib.import_module(module).main(argv) or 0)
        sys.stdout.flush()  # a reader that went away (| head) is found here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print("diskplan: interrupted; nothing was written.", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse's usage errors and --help
        return exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:
        if os.environ.get("DISKPLAN_DEBUG"):
            raise
        detail = safe(" ".join(str(exc).split())) or type(exc).__name__
        print(f"diskplan: {detail} (internal error; run with DISKPLAN_DEBUG=1 for details)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
