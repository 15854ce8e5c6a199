"""`diskplan serve`: the planner in web browsers, on demo disks only. A real browser (headless Chromium)
loads the page, sees the map and drives it with keys; the refusals (a device path, a non-demo) and the bind
address are checked on the command line; what the served planner leaves out, with Pilot."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import pathlib
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from textual.widgets import OptionList

from diskplan.cli import serve
from diskplan.ui.app import PlannerApp
from diskplan.ui.dialogs import UnsavedScreen
from diskplan.ui.explain import OPTION
from diskplan.ui.panels import ViewsPanel
from diskplan.ui.target import ModelSource
from helpers.browser import Server, browser_page, listening, why_no_browser
from helpers.pilot import run, started

PNG = b"\x89PNG\r\n\x1a\n"


def diskplan(*args: str, module: str = "diskplan") -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


# --- refusals ---------------------------------------------------------------------------------------------


def test_serve_refuses_a_device_or_a_file() -> None:
    for target in ("/dev/sda", "disk.img"):
        proc = diskplan("serve", target)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == (f"diskplan serve: {serve.NOT_SERVED}: remove {target}\n")


def test_serve_refuses_an_unknown_demo_and_a_bad_port() -> None:
    proc = diskplan("serve", "--demo", "/dev/sda")
    assert proc.returncode == 2 and "no demo called '/dev/sda'" in proc.stderr
    proc = diskplan("serve", "--port", "70000")
    assert proc.returncode == 2 and "not a port" in proc.stderr


def test_the_served_planner_takes_one_demo_name_and_nothing_else() -> None:
    """What textual-serve runs for each browser: a path, an option or a second word is refused before
    anything is opened."""
    for argv in (["/dev/sda"], ["ssd-gpt-34", "/dev/sda"], ["--demo", "ssd-gpt-34"], [], ["ssd"]):
        proc = diskplan(*argv, module="diskplan.cli.serve")
        assert proc.returncode == 2 and "the served planner takes one demo name" in proc.stderr, argv
    assert serve.served_command("ssd").endswith(" -m diskplan.cli.serve ssd-gpt-34")


def test_the_default_address_is_this_machine_only() -> None:
    assert serve.parser().parse_args([]).host == "127.0.0.1"
    for host in ("127.0.0.1", "127.0.1.1", "::1", "localhost"):
        assert serve.local_only(host), host
    for host in ("0.0.0.0", "::", "192.168.1.20", "classroom.example.org"):
        assert not serve.local_only(host), host


def test_listening_beyond_this_machine_is_warned_about() -> None:
    """--host 0.0.0.0 warns before it says where it serves."""
    server = Server("--host", "0.0.0.0")
    try:
        end = time.monotonic() + 30
        while len(server.lines) < 2 and server.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert listening(server.port) == {"0.0.0.0"}
    finally:
        assert server.stop() in (0, -15)
    lines = server.output.splitlines()
    assert lines[0].startswith(f"diskplan serve: warning: listening on 0.0.0.0: anyone who can reach port "
                               f"{server.port} "), lines
    assert lines[1].startswith(f"diskplan serve: the planner on demo disks at http://0.0.0.0:{server.port}/"), lines


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "localhost"])
def test_a_port_in_use_is_one_line_and_no_serving_at(host: str) -> None:
    """The port is tried before "serving at" is said: a port taken is one line on stderr, nothing on stdout."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1" if host == "localhost" else host, 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = diskplan("serve", "--host", host, "--port", str(port))
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr == (f"diskplan serve: cannot listen on {host} port {port}: the port is in use (another "
                           "program listens there; --port chooses another)\n")


def test_an_address_that_is_not_this_machines_is_one_line() -> None:
    proc = diskplan("serve", "--host", "nosuch.invalid", "--port", "8000")
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("diskplan serve: cannot listen on nosuch.invalid port 8000: no such address")


def test_the_demo_source_opens_no_path() -> None:
    from diskplan.cli.options import TargetError
    from diskplan.cli.planner import parser

    source = serve.DemoSource(parser().parse_args([]))
    try:
        with pytest.raises(TargetError, match="demo disks only"):
            source.open_path("/dev/sda")
        with pytest.raises(TargetError, match="demo disks only"):
            source.ready("path", "/dev/sda")
        with pytest.raises(TargetError, match="demo disks only"):
            source.prefetch("path", "/dev/sda")
    finally:
        source.close()


# --- what the served planner leaves out (Pilot) -------------------------------------------------------------


@run
async def test_the_served_planner_has_no_device_picker_and_no_plan_files() -> None:
    app = PlannerApp(ModelSource(), ("demo", "ssd-gpt-34"), served=True, watch_devices=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(app, pilot)
        screens = len(app.screen_stack)
        for key in ("o", "ctrl+s", "ctrl+o"):  # the device picker, save plan, load plan
            await pilot.press(key)
            await pilot.pause()
            assert len(app.screen_stack) == screens, key
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert not titles & {"Choose a device", "Save plan...", "Load plan..."}
        assert {"Demo disks", "Write the plan...", "Help"} <= titles
        app.action_devices()  # whoever calls them: nothing opens
        app.action_save_plan()
        app.action_load_plan()
        await pilot.pause()
        assert len(app.screen_stack) == screens
        # Changes that would be lost: write or discard, never "save as a file".
        await pilot.press("x")
        await pilot.press("q")  # quitting would lose it: the unsaved-changes question
        await pilot.pause()
        assert isinstance(app.screen, UnsavedScreen)
        assert [o.id for o in app.screen.query_one("#unsaved", OptionList).options] == ["write", "discard", "cancel"]
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, UnsavedScreen)


@run
async def test_the_planner_in_a_terminal_keeps_them() -> None:
    """The same checks fail on the ordinary planner: they see what served leaves out."""
    app = PlannerApp(ModelSource(), ("demo", "ssd-gpt-34"), watch_devices=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(app, pilot)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Choose a device", "Save plan...", "Load plan..."} <= titles
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert type(app.screen).__name__ == "PathScreen"


@pytest.mark.parametrize("name", ["stripe", "dos-63"])
@run
async def test_the_served_explanation_says_its_options_are_the_terminal_planners(name: str) -> None:
    """A browser user cannot give --ssd, --grain or --physical-block: where the explanation and the facts
    teach them, the served planner says they are options of diskplan in a terminal (the teaching is kept)."""
    texts = {}
    for served in (False, True):
        app = PlannerApp(ModelSource(), ("demo", name), served=served, watch_devices=False)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot)
            app.sector_map.move_to(app.target.disk.table.partitions[0].start)  # type: ignore[union-attr]
            await pilot.pause(0.1)
            panel = app.query_one(ViewsPanel)
            texts[served] = panel.text("explain") + "\n" + panel.text("facts")
    terminal, browser = texts[False], texts[True]
    named = set(OPTION.findall(terminal))
    assert named and "in a terminal" not in terminal  # the terminal planner teaches options: nothing changes
    assert set(OPTION.findall(browser)) == named  # the same teaching...
    told = {o for line in browser.splitlines() if "in a terminal" in line for o in OPTION.findall(line)}
    assert told == named, named - told  # ... and every option it names is said to be the terminal planner's
    assert "say so with --ssd." not in browser


# --- in a browser -------------------------------------------------------------------------------------------


def test_a_browser_sees_the_map_and_drives_it_with_keys(tmp_path: pathlib.Path) -> None:
    """Headless Chromium loads the page served on 127.0.0.1, sees the demo's map, zooms to one sector per
    cell (1) and moves the cursor (right): the title and the status line follow. The screenshot is kept
    (scripts/screenshots.py: screenshots/serve.png). Everything the session wrote was in its temporary
    directory, gone when it ends."""
    reason = why_no_browser()
    if reason:
        pytest.skip(reason)
    shot = pathlib.Path(os.environ.get("DISKPLAN_BROWSER_SHOT", tmp_path / "serve.png"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    started_at = time.monotonic()
    server = Server(env={**os.environ, "TMPDIR": str(tmp)})
    try:
        first = server.wait_ready()
        assert first == f"diskplan serve: the planner on demo disks at {server.url} (Ctrl+C stops)\n"
        assert listening(server.port) == {"127.0.0.1"}  # this machine only, by default
        with browser_page(server.url) as page:
            page.wait_for("demo ssd-gpt-34")
            shown = page.wait_for(" sectors (")  # the title's zoom, once the map is laid out: many sectors a cell
            assert "demo ssd-gpt-34" in shown.splitlines()[0] and "1 cell = " in shown.splitlines()[0]
            assert "LBA 34 │ 17,408 B" in shown and "UnAlign" in shown
            (root,) = tmp.iterdir()  # serve's directory: one for each browser's planner
            (planner,) = root.iterdir()
            (session,) = planner.iterdir()  # this browser's planner: its demo image and state, nowhere else
            assert root.name.startswith("diskplan-serve-") and session.name.startswith("diskplan-demo-")
            page.press("1")
            shown = page.wait_for("1 cell = 1 sector (512 B)")
            page.press("ArrowRight")
            shown = page.wait_for("LBA 35 │ 17,920 B")
            page.press("o")  # no device picker: the planner stays as it was
            time.sleep(0.5)
            assert page.screen().splitlines()[0] == shown.splitlines()[0]
            page.screenshot(shot)
        data = shot.read_bytes()
        assert data.startswith(PNG) and int.from_bytes(data[16:20], "big") == 1280
        assert int.from_bytes(data[20:24], "big") == 800 and len(data) > 20_000
        # the browser left: its planner ends and its directory is removed
        assert _until(lambda: not any(root.iterdir()), 20)
    finally:
        code = server.stop()
    assert code == 0, server.output
    assert not any(tmp.iterdir())  # and serve's own with serve
    assert "Traceback" not in server.output
    assert time.monotonic() - started_at < 60



def test_the_served_planner_keeps_backups_and_journals_in_its_temporary_directory(monkeypatch) -> None:
    """A write in the browser backs the demo's table up, a move journals: both under the session's own
    directory (backup.default_dir follows XDG_STATE_HOME), removed with its demo images."""
    from diskplan.backend.move.engine import journal_dir
    from diskplan.backend.write.backup import default_dir

    seen: dict[str, object] = {}

    def fake_run(source, start, **kw):  # the planner itself is driven in the browser test
        seen.update(workspace=source.workspace.directory, backups=default_dir(), journals=journal_dir("/x"),
                    start=start, **kw)
        source.close()
        return 0

    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setattr(serve, "run_planner", fake_run)
    assert serve.served(["dos-63"]) == 0
    ws = str(seen["workspace"])
    assert str(seen["backups"]).startswith(ws + "/state/") and str(seen["journals"]).startswith(ws + "/state/")
    assert os.environ["DISKPLAN_MOVES_DIR"] == str(seen["journals"])
    assert seen["start"] == ("demo", "dos-63") and seen["served"] is True and seen["console"] is False
    assert not os.path.exists(ws)


@run
async def test_the_served_help_leaves_out_the_device_picker_and_plan_files() -> None:
    """Help lists only keys that work: served, `o` and Ctrl+S/Ctrl+O do nothing, so it does not offer them; nor
    commands (`diskplan resume`) or options a browser cannot run."""
    from textual.widgets import Static

    from diskplan.ui.screens import HelpScreen

    for served in (True, False):
        app = PlannerApp(ModelSource(), ("demo", "ssd-gpt-34"), served=served, watch_devices=False)
        async with app.run_test(size=(100, 30)) as pilot:
            await started(app, pilot)
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            text = "\n".join(str(w.render()) for w in app.screen.query(Static))
            assert ("\nd  o\n" in text) != served and ("\nd\n" in text) == served
            assert "pick a device" not in text if served else "pick a device" in text
            assert "^s ^o" not in text if served else "save the plan as JSON" in text
            assert "open a demo disk" in text and "write the plan" in text
            # a browser runs no command and passes no option: M finishes a move, x in the picker an exercise
            assert ("diskplan resume" in text) != served and ("--exercise" in text) != served, text
            assert "resumable: M" in text and "x in the demo picker" in text


# --- a hostile client ---------------------------------------------------------------------------------------


def _planners(tmp: pathlib.Path) -> dict[int, dict[str, str]]:
    """The served planners whose temporary directories lie under ``tmp`` (pid -> environment). A planner's
    own forks (backend.isolate's zygote and the children it forks) share its command line and environment:
    they are counted with it, not as planners of their own, unless their planner is gone (then they are
    left behind, and counted)."""
    found, parent = {}, {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        env = dict(e.decode(errors="replace").split("=", 1) for e in environ if b"=" in e)
        if b"diskplan.cli.serve" in cmdline and env.get("TMPDIR", "").startswith(str(tmp)):
            found[int(entry.name)], parent[int(entry.name)] = env, ppid
    return {pid: env for pid, env in found.items() if parent[pid] not in found}


def _rss(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _until(what: Callable[[], bool], seconds: float = 30) -> bool:
    end = time.monotonic() + seconds
    while not what() and time.monotonic() < end:
        time.sleep(0.1)
    return what()


def _vanishing_client(port: int) -> socket.socket:
    """A WebSocket opened by hand, the server's own page as its origin: ``close`` it to vanish abruptly."""
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /ws?width=80&height=24 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                 f"Origin: http://127.0.0.1:{port}\r\n\r\n".encode())
    assert b" 101 " in sock.recv(4096).split(b"\r\n")[0]
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = a reset, no goodbye
    return sock


def test_a_hostile_client_gets_no_planner_and_leaves_none_behind(tmp_path: pathlib.Path) -> None:
    """A foreign page's WebSocket, a huge terminal, more browsers than allowed, an idle one, one that vanishes
    with a reset: refused, clamped, refused, ended, ended. Afterwards no planner runs and nothing of theirs
    is left in the temporary directory (issue 25: one planner grew to 543 MB, any page could connect, a
    vanished client's planner spun on after `serve` had ended)."""
    aiohttp = pytest.importorskip("aiohttp")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server = Server("--max-planners", "2", "--idle-timeout", "6", env={**os.environ, "TMPDIR": str(tmp)})
    try:
        server.wait_ready()
        own = f"http://127.0.0.1:{server.port}"
        ws_url = f"{own}/ws"

        async def drive() -> dict[str, object]:
            seen: dict[str, object] = {}
            async with aiohttp.ClientSession() as session:
                for origin in ("http://evil.example", f"http://localhost.evil.example:{server.port}", None):
                    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                        await session.ws_connect(ws_url, headers={"Origin": origin} if origin else {})
                    assert refused.value.status == 403, origin
                assert _planners(tmp) == {}
                huge = await session.ws_connect(f"{ws_url}?width=100000&height=100000", headers={"Origin": own})
                first = await huge.receive(timeout=30)
                assert first.type == aiohttp.WSMsgType.BINARY
                (pid, env), = _planners(tmp).items()
                seen["size"] = env["COLUMNS"], env["ROWS"]
                await huge.send_json(["resize", {"width": 10**9, "height": 10**9}])
                await huge.send_json(["stdin", "1"])  # zoom in: the map redrawn at the (clamped) size
                end = time.monotonic() + 4
                while time.monotonic() < end:  # what it draws, for a while
                    with contextlib.suppress(TimeoutError):
                        await huge.receive(timeout=0.5)
                seen["rss"] = _rss(pid)
                second = await session.ws_connect(ws_url, headers={"Origin": own})
                with pytest.raises(aiohttp.WSServerHandshakeError) as full:  # the third browser: over the cap
                    await session.ws_connect(ws_url, headers={"Origin": own})
                seen["full"] = full.value.status
                await huge.close()
                assert _until(lambda: len(_planners(tmp)) == 1)
                # The second browser types nothing: ended after --idle-timeout.
                closed = await second.receive(timeout=30)
                while closed.type == aiohttp.WSMsgType.BINARY:  # what it draws, then the end
                    closed = await second.receive(timeout=30)
                seen["idle"] = closed.type
            return seen

        seen = asyncio.run(drive())
        assert seen["size"] == ("300", "120") and seen["full"] == 503, seen
        assert seen["idle"] in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), seen
        assert 0 < int(str(seen["rss"])) < 400 * 2**20, seen
        assert _until(lambda: _planners(tmp) == {})
        sock = _vanishing_client(server.port)
        assert _until(lambda: len(_planners(tmp)) == 1)
        sock.close()
        assert _until(lambda: _planners(tmp) == {}), _planners(tmp)
        (root,) = tmp.iterdir()  # serve's own directory, emptied as each planner ended
        assert root.name.startswith("diskplan-serve-") and not any(root.iterdir())
        # One more vanishes while `serve` itself is stopped: its planner goes with it.
        sock = _vanishing_client(server.port)
        assert _until(lambda: len(_planners(tmp)) == 1)
    finally:
        code = server.stop()
    sock.close()
    assert code == 0, server.output
    assert _until(lambda: _planners(tmp) == {}, 10), _planners(tmp)
    assert not any(tmp.iterdir())
    assert "Traceback" not in server.output


def test_without_the_serve_extra_serve_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """textual-serve and aiohttp are the optional extra diskplan[serve]: rescue media need not carry them."""
    import tomllib

    project = tomllib.loads((pathlib.Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("textual-serve") for d in project["dependencies"])
    assert project["optional-dependencies"]["serve"] == ["textual-serve>=1.1"]
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)
    monkeypatch.delitem(sys.modules, "diskplan.cli.servedweb", raising=False)
    assert serve.main(["--port", "8000"]) == 2
    assert capsys.readouterr().err == "diskplan serve: needs the serve extra (textual-serve): pip install " \
                                      "'diskplan[serve]'\n"


def test_the_origin_rules() -> None:
    from diskplan.cli.servedweb import clamp, foreign

    assert foreign("http://127.0.0.1:8000", "http", "127.0.0.1:8000", local=True) == ""
    assert foreign("http://localhost:8000", "http", "localhost:8000", local=True) == ""
    assert foreign("http://[::1]:8000", "http", "[::1]:8000", local=True) == ""
    assert foreign("http://class.example:8000", "http", "class.example:8000", local=False) == ""
    # a page elsewhere, another port, another scheme, no origin, a DNS name rebound to 127.0.0.1
    assert "not this server's" in foreign("http://evil.example", "http", "127.0.0.1:8000", local=True)
    assert "not this server's" in foreign("http://127.0.0.1:9000", "http", "127.0.0.1:8000", local=True)
    assert "not this server's" in foreign("https://127.0.0.1:8000", "http", "127.0.0.1:8000", local=True)
    assert "no Origin" in foreign(None, "http", "127.0.0.1:8000", local=True)
    assert "loopback" in foreign("http://evil.example:8000", "http", "evil.example:8000", local=True)
    assert [clamp(v, (20, 300), 80) for v in ("100000", "-5", "x", 120, "1e9")] == [300, 20, 80, 120, 80]


def test_a_planner_dies_with_serve_even_when_serve_is_killed(tmp_path: pathlib.Path) -> None:
    """SIGKILL runs none of serve's clean-up: its planners still end (each asked the kernel for SIGKILL when
    its parent dies)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server = Server(env={**os.environ, "TMPDIR": str(tmp)})
    sock = None
    try:
        server.wait_ready()
        sock = _vanishing_client(server.port)
        assert _until(lambda: len(_planners(tmp)) == 1)
        server.proc.kill()
        assert _until(lambda: _planners(tmp) == {}, 10), _planners(tmp)
    finally:
        server.stop()
        if sock is not None:
            sock.close()
