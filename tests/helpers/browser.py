"""`diskplan serve` in a real browser: Debian's headless Chromium driven by Playwright's Python package (its
own browser download is never used: ``executable_path`` points at the system's).

The page draws the terminal with xterm.js into a canvas, so the screen's text is not in the DOM. What the
page shows is read from xterm.js's own buffer: the page's script keeps its terminal in a local variable,
so the copy of textual.js this browser receives hands it to ``window`` as well (one assignment, added on
the way in; nothing else of the page changes).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Debian's chromium package: /usr/bin/chromium is a wrapper script; Playwright needs the browser itself.
CHROMIUM = ("/usr/lib/chromium/chromium", "/usr/lib/chromium/chrome")
# Where textual.js starts the terminal it made (``t``): the hook goes right before it.
HOOK = "t.fit(),s||t.connect()"

SCREEN_JS = """() => { const t = window.__diskplanTerm.terminal, b = t.buffer.active, rows = [];
  for (let y = 0; y < t.rows; y++) rows.push(b.getLine(y).translateToString(true));
  return rows.join('\\n'); }"""


def chromium() -> str | None:
    return next((p for p in CHROMIUM if os.access(p, os.X_OK)), None)


def why_no_browser() -> str | None:
    """Why the browser test cannot run here (None when it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright's Python package is not installed (pip install playwright)"
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        return "textual-serve is not installed"
    if chromium() is None:
        return "Chromium is not installed (apt-get install chromium)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> set[str]:
    """The IPv4 and IPv6 addresses with a socket listening on ``port`` (/proc/net/tcp, state 0A)."""
    found = set()
    for name, width in (("tcp", 8), ("tcp6", 32)):
        path = pathlib.Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, _, hexport = local.partition(":")
            if state != "0A" or int(hexport, 16) != port or len(addr) != width:
                continue
            raw = bytes.fromhex(addr)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6, raw))
    return found


class Server:
    """`diskplan serve` on a free port: its output gathered, ended (SIGTERM) with ``stop``."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "diskplan", "serve", "--port", str(self.port), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     stdin=subprocess.DEVNULL)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float = 20) -> str:
        """The server's first line (where it serves), once it listens."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.lines and self.port in {int(p) for p in _ports(self.lines[0])} and listening(self.port):
                return self.lines[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"diskplan serve did not start: {self.output!r}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        return code


def _ports(line: str) -> list[str]:
    import re

    return re.findall(r":(\d+)/", line)


class Page:
    """The planner's page in headless Chromium: its screen as text, keys, a screenshot."""

    def __init__(self, page: Any) -> None:
        self.page = page

    def screen(self) -> str:
        return str(self.page.evaluate(SCREEN_JS))

    def wait_for(self, text: str, timeout: float = 30) -> str:
        """The screen, once it shows ``text``."""
        end = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < end:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.05)
        raise AssertionError(f"the page never showed {text!r}; it shows:\n{shown}")

    def press(self, key: str) -> None:
        self.page.keyboard.press(key)

    def screenshot(self, path: pathlib.Path) -> None:
        self.page.screenshot(path=str(path))


@contextmanager
def browser_page(url: str, size: tuple[int, int] = (1280, 800)) -> Iterator[Page]:
    """``url`` loaded in headless Chromium, the terminal connected. Only the server's own address is
    fetched: the page also names a web font on the internet, which a classroom may not reach either."""
    from playwright.sync_api import Route, sync_playwright

    exe = chromium()
    assert exe is not None and shutil.which(exe)
    origin = url.rstrip("/")

    def route(r: Route) -> None:
        if not r.request.url.startswith(origin):
            r.abort()
        elif r.request.url.endswith("/textual.js"):
            response = r.fetch()
            body = response.text()
            assert HOOK in body, "textual.js changed: update HOOK in tests/helpers/browser.py"
            r.fulfill(response=response, body=body.replace(HOOK, "window.__diskplanTerm=t," + HOOK, 1))
        else:
            r.continue_()

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = b.new_page(viewport={"width": size[0], "height": size[1]})
            page.route("**/*", route)
            page.goto(url, wait_until="domcontentloaded")
            page.wait_for_function("window.__diskplanTerm !== undefined", timeout=15000)
            page.focus(".xterm-helper-textarea")  # the keys go to the terminal (a click would move the cursor)
            yield Page(page)
        finally:
            b.close()
