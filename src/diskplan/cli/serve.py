"""``diskplan serve``: the planner in web browsers (textual-serve), for a classroom: demo disks only.

Each browser that connects gets its own planner, run as ``python -m diskplan.cli.serve NAME``: its only
input is a demo's name. That planner opens no device and no file of the server's (no device picker, no plan
files; a path given to its source is refused), and everything it writes — the demo images, a write's table
backup, a move's journal — stays in its own temporary directory, removed when the browser's session ends.
The server listens on 127.0.0.1 unless told otherwise, and warns when it is told otherwise.

Exit status: 0 stopped (Ctrl+C), 2 could not serve (a bad option, the port taken, textual-serve missing).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import ipaddress
import os
import shlex
import signal
import socket
import sys

from diskplan.backend.move.movejournal import MOVES_ENV
from diskplan.cli.options import TargetError
from diskplan.cli.planner import CliSource, run_planner
from diskplan.cli.planner import parser as planner_parser
from diskplan.model.safetext import safe
from diskplan.model.teach import demos
from diskplan.ui.target import Target

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_PLANNERS = 40  # a classroom, each browser a planner of ~60 MB
IDLE_TIMEOUT = 1800.0
MISSING = "diskplan serve: needs the serve extra (textual-serve): pip install 'diskplan[serve]'"
NOT_SERVED = "the planner served to browsers opens demo disks only, never a device or a file of the server's"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan serve",
        description="Serve the planner to web browsers (each gets its own planner on the demo disks; never "
        "this machine's devices or files). Open the address it prints.",
        epilog="Exit status: 0 stopped, 2 could not serve.",
    )
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: this machine only; 0.0.0.0 for the network)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    p.add_argument("--demo", default=demos.DEFAULT, metavar="NAME",
                   help=f"the demo each browser starts on (default {demos.DEFAULT}; d in the planner chooses another)")
    p.add_argument("--max-planners", type=int, default=MAX_PLANNERS, metavar="N",
                   help=f"at most N browsers' planners at once; more are refused until one ends (default "
                        f"{MAX_PLANNERS})")
    p.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT, metavar="SECONDS",
                   help=f"end a planner nobody has typed into for SECONDS (default {IDLE_TIMEOUT:g}: "
                        f"{IDLE_TIMEOUT / 60:g} minutes)")
    return p


def local_only(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (a loopback address or "localhost")."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def cannot_listen(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host`` port ``port`` (None: it can), found by binding as asyncio
    will (every address the host has, SO_REUSEADDR, IPv6 only on IPv6), before "serving at" is said: the
    server says where it serves before it binds, so a port in use would follow that line with a failure."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        return f"no such address ({exc.strerror if isinstance(exc, socket.gaierror) else exc})"
    addresses = {(family, kind, address) for family, kind, _, _, address in found}
    for family, kind, address in sorted(addresses, key=str):
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return "the port is in use (another program listens there; --port chooses another)"
                return exc.strerror or str(exc)
    return None


def served_argv(demo: str) -> list[str]:
    """What runs for each browser: this interpreter, this module, a demo's name."""
    return [sys.executable, "-m", "diskplan.cli.serve", demos.find(demo).name]


def served_command(demo: str) -> str:
    """``served_argv`` as a shell command."""
    return shlex.join(served_argv(demo))


def main(argv: list[str]) -> int:
    args, extra = parser().parse_known_args(argv)
    if extra:
        print(f"diskplan serve: {NOT_SERVED}: remove {safe(' '.join(extra))}", file=sys.stderr)
        return 2
    try:
        demo = demos.find(args.demo).name
    except KeyError as exc:
        print(f"diskplan serve: {safe(str(exc.args[0]))}", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"diskplan serve: --port {args.port} is not a port (1-65535)", file=sys.stderr)
        return 2
    if args.max_planners < 1 or not args.idle_timeout > 0:
        print("diskplan serve: --max-planners and --idle-timeout must be above 0", file=sys.stderr)
        return 2
    try:
        from diskplan.cli.servedweb import GuardedServer
    except ImportError:
        print(MISSING, file=sys.stderr)
        return 2
    problem = cannot_listen(args.host, args.port)
    if problem:
        print(f"diskplan serve: cannot listen on {safe(args.host)} port {args.port}: {problem}", file=sys.stderr)
        return 2
    if not local_only(args.host):
        print(f"diskplan serve: warning: listening on {safe(args.host)}: anyone who can reach port {args.port} "
              "of this machine can use the planner (demo disks only; nothing else of this machine is offered)",
              file=sys.stderr)

    server = GuardedServer(served_argv(demo), host=args.host, port=args.port, title=f"diskplan: demo {demo}",
                           local=local_only(args.host), max_planners=args.max_planners, idle=args.idle_timeout)
    try:
        server.serve()
    except OSError as exc:  # taken since cannot_listen looked
        print(f"diskplan serve: cannot listen on {safe(args.host)} port {args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    finally:
        server.remove_root()
    return 0


# --- the planner each browser gets ------------------------------------------------------------------------


class DemoSource(CliSource):
    """Demos only: a path (a device, an image, a file) is refused whoever asks."""

    def prefetch(self, kind: str, name: str) -> None:
        if kind != "demo":
            raise TargetError(NOT_SERVED)
        super().prefetch(kind, name)

    def ready(self, kind: str, name: str) -> Target | None:
        if kind != "demo":
            raise TargetError(NOT_SERVED)
        return super().ready(kind, name)

    def open_path(self, path: str) -> Target:
        raise TargetError(NOT_SERVED)


PR_SET_PDEATHSIG = 1


def own_group() -> None:
    """The served planner's own process group (what `serve` ends, with whatever the planner started), and
    SIGKILL when `serve` itself dies (even by SIGKILL, which runs none of its clean-up)."""
    import ctypes

    os.setpgid(0, 0)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def served(argv: list[str]) -> int:
    """One browser's planner: ``argv`` is a demo's name and nothing else."""
    if len(argv) != 1 or argv[0] not in demos.names():
        print(f"diskplan: the served planner takes one demo name ({', '.join(demos.names())})", file=sys.stderr)
        return 2
    if "TEXTUAL_DRIVER" not in os.environ and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("diskplan: the served planner runs under `diskplan serve` (or at a terminal)", file=sys.stderr)
        return 2
    if "TEXTUAL_DRIVER" in os.environ:  # under `diskplan serve`: a process group of its own, ended with it
        own_group()
    source = DemoSource(planner_parser().parse_args([]))  # no overrides: a demo as it is defined
    # A write's table backup and a move's journal go where the demo images are (backup.state_dir,
    # movejournal.moves_dir), removed with them when the session ends: nothing is written anywhere else.
    state = os.path.join(source.workspace.directory, "state")
    os.mkdir(state, 0o700)
    os.environ["XDG_STATE_HOME"] = state
    os.environ[MOVES_ENV] = os.path.join(state, "diskplan", "moves")
    return run_planner(source, ("demo", argv[0]), console=False, mono=False, served=True)


if __name__ == "__main__":  # what textual-serve runs: served_command
    from diskplan.cli.main import main as guarded  # one line for any failure, no traceback

    raise SystemExit(guarded(sys.argv[1:], run=served))
