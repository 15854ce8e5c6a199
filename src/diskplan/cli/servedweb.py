"""The web side of ``diskplan serve``: textual-serve's server, guarded for a classroom whose browsers also visit
other pages. Imported only once textual-serve (the ``diskplan[serve]`` extra) is known to be installed.

What textual-serve leaves open, and what is done here instead of its own WebSocket handler:

- any web page the teacher's browser visits could open a WebSocket to the 127.0.0.1 server: only the
  server's own origin is let in (the Origin header names the page that opened the socket; a browser always
  sends it), and on a loopback address only a loopback host name (a rebound DNS name is no origin of ours);
- the terminal size comes from the URL and from the browser's resize messages: clamped (one planner grew
  to 543 MB at a size asked in the URL);
- every connection starts a planner: at most ``max_planners`` run at once, and one nobody has typed into
  for ``idle`` seconds is ended;
- a planner whose browser vanished (no close, a reset) kept running, spinning and ignoring SIGTERM, after
  ``serve`` itself had ended: each planner runs in its own process group (cli/serve.py ``served``) with
  its own temporary directory; when its browser goes, it is asked to quit, then its group gets SIGTERM,
  then SIGKILL, and its directory is removed; when ``serve`` stops, every group still running does too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import tempfile
from typing import Any
from urllib.parse import urlsplit

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

COLUMNS = (20, 300)  # the terminal sizes a browser may ask for (cells)
ROWS = (8, 120)
QUIT_GRACE = 3.0  # seconds a planner has to quit when asked, then as long again after SIGTERM


def clamp(value: object, bounds: tuple[int, int], default: int) -> int:
    """A size from the URL or a resize message, as a number within ``bounds`` (``default``: not a number)."""
    try:
        number = int(str(value))
    except ValueError:
        return default
    return max(bounds[0], min(bounds[1], number))


def loopback_name(host: str) -> bool:
    """Whether ``host`` (a Host header's name, no port) can only mean this machine."""
    import ipaddress

    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def foreign(origin: str | None, scheme: str, host: str, local: bool) -> str:
    """Why a WebSocket opened by the page at ``origin`` to ``scheme``://``host`` is refused ("" when it is
    the server's own page). ``local``: the server listens on a loopback address only."""
    if not origin:
        return "no Origin (a browser always says which page opens a WebSocket)"
    try:
        seen = urlsplit(origin)
        asked = urlsplit(f"{scheme}://{host}")
        same = (seen.scheme, seen.hostname, seen.port) == (asked.scheme, asked.hostname, asked.port)
    except ValueError:
        same = False
    if not same:
        return f"the page {origin} is not this server's"
    if local and not loopback_name(asked.hostname or ""):
        return f"{host} is no name of this machine's loopback address"
    return ""


class Planner:
    """One browser's planner: its process (a group of its own) and its temporary directory."""

    def __init__(self, service: AppService, directory: str) -> None:
        self.service = service
        self.directory = directory

    @property
    def pid(self) -> int | None:
        process = self.service._process  # textual-serve keeps it there; tests/test_serve.py catches drift
        return process.pid if process is not None and process.returncode is None else None

    def signal(self, sig: int) -> None:
        """``sig`` to the planner's process group (to the planner alone before it has made its group)."""
        pid = self.pid
        if pid is None:
            return
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        except PermissionError:  # the group id belongs to no process of ours: the planner alone
            os.kill(pid, sig)

    async def end(self) -> None:
        """Ask it to quit, then SIGTERM, then SIGKILL its group; remove its directory."""
        with contextlib.suppress(asyncio.TimeoutError, OSError, RuntimeError):
            await asyncio.wait_for(self.service.stop(), QUIT_GRACE)
        process = self.service._process
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if process is None or process.returncode is not None:
                break
            self.signal(sig)
            try:
                await asyncio.wait_for(process.wait(), QUIT_GRACE)
            except TimeoutError:
                continue
        self.remove()

    def kill_now(self) -> None:
        """When ``serve`` itself stops: no waiting."""
        self.signal(signal.SIGKILL)
        self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class GuardedServer(Server):
    """textual-serve's server with the guards of the module's doc, saying where it serves in one line."""

    def __init__(self, served: list[str], *, host: str, port: int, title: str, local: bool,
                 max_planners: int, idle: float) -> None:
        super().__init__(shlex.join(served), host=host, port=port, title=title)
        self.served = served
        self.local = local
        self.max_planners = max_planners
        self.idle = idle
        self.planners: set[Planner] = set()
        self.root = tempfile.mkdtemp(prefix="diskplan-serve-")

    async def on_startup(self, app: Any) -> None:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        print(f"diskplan serve: the planner on demo disks at http://{shown}:{self.port}/ (Ctrl+C stops)",
              flush=True)

    async def on_shutdown(self, app: Any) -> None:
        for planner in list(self.planners):
            planner.kill_now()
        self.remove_root()

    def remove_root(self) -> None:
        """Every planner's directory (each is removed when its planner ends; this is for an unclean end)."""
        shutil.rmtree(self.root, ignore_errors=True)

    async def handle_index(self, request: web.Request) -> Any:
        # the page's WebSocket address: the one the browser used (the bind address, 0.0.0.0, is none)
        self.public_url = f"{request.scheme}://{request.host}"
        return await super().handle_index(request)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        why = foreign(request.headers.get("Origin"), request.scheme, request.host, self.local)
        if why:
            raise web.HTTPForbidden(text=f"diskplan serve: refused: {why}\n")
        if len(self.planners) >= self.max_planners:
            raise web.HTTPServiceUnavailable(text=f"diskplan serve: {self.max_planners} planners are running, the "
                                             "most this server starts (--max-planners); try again later\n")
        width = clamp(request.query.get("width", "80"), COLUMNS, 80)
        height = clamp(request.query.get("height", "24"), ROWS, 24)
        directory = tempfile.mkdtemp(prefix="planner-", dir=self.root)
        websocket = web.WebSocketResponse(heartbeat=15)

        async def close() -> None:
            await websocket.close()

        service = AppService(planner_command(self.served, directory), write_bytes=websocket.send_bytes,
                             write_str=websocket.send_str, close=close,
                             download_manager=self.download_manager, debug=self.debug)
        planner = Planner(service, directory)
        self.planners.add(planner)
        try:
            await websocket.prepare(request)
            await service.start(width, height)
            await self._drive(websocket, service)
        except (asyncio.CancelledError, ConnectionError, OSError):
            pass
        finally:
            self.planners.discard(planner)
            await asyncio.shield(planner.end())
            if not websocket.closed:
                await websocket.close()
        return websocket

    async def _drive(self, websocket: web.WebSocketResponse, service: AppService) -> None:
        """The browser's messages to its planner, until it goes or types nothing for ``idle`` seconds.
        Only keys and resizes count as use (the page pings on its own)."""
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            try:
                message = await websocket.receive(timeout=max(0.1, last + self.idle - loop.time()))
            except TimeoutError:
                return
            if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
            except ValueError:
                continue
            if not isinstance(envelope, list) or not envelope:
                continue
            kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            if kind == "stdin" and isinstance(data, str):
                last = loop.time()
                await service.send_bytes(data.encode("utf-8", "replace"))
            elif kind == "resize" and isinstance(data, dict):
                last = loop.time()
                await service.set_terminal_size(clamp(data.get("width"), COLUMNS, 80),
                                                clamp(data.get("height"), ROWS, 24))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await service.blur()
            elif kind == "focus":
                await service.focus()


def planner_command(served: list[str], directory: str) -> str:
    """The shell command for one planner whose temporary directory is ``directory``: ``exec``, so that the
    process textual-serve starts is the planner itself (its group is the one ended)."""
    return f"exec env TMPDIR={shlex.quote(directory)} {shlex.join(served)}"
