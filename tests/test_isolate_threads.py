"""The planner isolates libparted from Textual's worker threads: a child forked from a process with threads
inherits locks other threads held at that instant (an import's module lock, for one) and can wait on them for
ever. backend.parted.isolate then asks its zygote, forked while the process had one thread, to fork the child."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import os, pathlib, signal, sys, threading, time
    mods = pathlib.Path(sys.argv[1])
    (mods / "slowmod.py").write_text("import time\\ntime.sleep(3)\\nVALUE = 7\\n")
    (mods / "childwork.py").write_text(
        "import os, signal\\n"
        "def uses_slowmod():\\n    import slowmod\\n    return slowmod.VALUE\\n"
        "def env():\\n    return os.environ.get('LATE'), os.getcwd()\\n"
        "def crash():\\n    os.kill(os.getpid(), signal.SIGSEGV)\\n"
        "def twice(x):\\n    return 2 * x\\n")
    sys.path.insert(0, str(mods))
    from diskplan.backend.parted import isolate
    import childwork
    if sys.argv[2] == "zygote":
        isolate.prepare_for_threads()
    # another thread is importing slowmod, and holds its module lock for 3 s
    threading.Thread(target=lambda: __import__("slowmod"), daemon=True).start()
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # threads all along
    time.sleep(0.5)
    if sys.argv[2] == "zygote":
        real_fork = os.fork
        def no_fork():
            raise AssertionError("this process has threads: it must not fork")
        os.fork = no_fork
    try:
        print("import:", isolate.run_isolated(childwork.uses_slowmod, timeout=8))
    except isolate.IsolatedFailure as exc:
        print("import:", exc.reason)
    if sys.argv[2] != "zygote":
        sys.exit(0)
    os.environ["LATE"] = "set after the zygote"
    os.chdir(mods)
    print("env:", isolate.run_isolated(childwork.env) == ("set after the zygote", str(mods)))
    try:
        isolate.run_isolated(childwork.crash)
    except isolate.IsolatedFailure as exc:
        print("crash:", exc.reason)
    start = time.monotonic()
    try:
        isolate.run_isolated(time.sleep, 30, timeout=1)
    except isolate.IsolatedFailure as exc:
        print("hang:", exc.timed_out, time.monotonic() - start < 5)
    print("map:", list(isolate.IsolatedMap(childwork.twice, range(6), lanes=2)))
    os.fork = real_fork
    print("lambda:", isolate.run_isolated(lambda: 42))  # cannot travel to the zygote: forked here
    zygote = isolate._Zygote._one.pid
    def ppid(stat):
        try:
            return int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:  # gone meanwhile
            return -1
    kids = [int(p.parent.name) for p in pathlib.Path("/proc").glob("[0-9]*/stat") if ppid(p) == os.getpid()]
    print("children:", kids == [zygote])
''')


def _run(tmp_path, mode: str) -> str:
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), mode], capture_output=True, text=True,
                          timeout=60, check=True).stdout


def test_a_child_forked_from_a_thread_waits_for_ever_on_a_lock_another_thread_held(tmp_path) -> None:
    """Why the zygote exists: forked directly, the child imports a module another thread was importing,
    finds its lock taken by a thread that does not exist in the child, and never answers."""
    assert _run(tmp_path, "fork").strip() == "import: gave no answer within 8 s"


def test_with_threads_every_child_comes_from_the_zygote(tmp_path) -> None:
    out = _run(tmp_path, "zygote").splitlines()
    assert out == [
        "import: 7",  # the zygote's child imports slowmod afresh: no lock held by a lost thread
        "env: True",  # the environment and working directory of the moment, not of the zygote's start
        "crash: libparted crashed (SIGSEGV)",
        "hang: True True",
        "map: [0, 2, 4, 6, 8, 10]",
        "lambda: 42",
        "children: True",  # every watcher and child reaped; only the zygote is left
    ]


def test_the_planner_reads_a_disk_from_its_worker_through_the_zygote(sparse_image, monkeypatch) -> None:
    """In the planner, the reads made in Textual's worker threads come from the zygote, not a fork of the
    threaded planner (os.fork is refused while the worker reads)."""
    import asyncio
    import os
    import threading

    from diskplan.backend.parted import isolate
    from diskplan.ui.app import PlannerApp
    from helpers.pilot import demo, wait_for
    from helpers.tools import run

    img = sparse_image(64 * 1024**2)
    run("sfdisk", "-q", str(img), input="label: gpt\nstart=2048, size=4096\nstart=8192, size=8192\n")
    started: list[int] = []
    real_start, real_fork = isolate._Zygote.start, os.fork

    def counted(self, job):
        got = real_start(self, job)
        started.append(got[0].pid if got else -1)
        return got

    def fork_only_when_alone() -> int:
        assert threading.active_count() == 1, "a process with threads forked"
        return real_fork()

    monkeypatch.setattr(isolate._Zygote, "start", counted)

    async def go() -> list[int]:
        app = PlannerApp(start=demo("modern"))
        async with app.run_test(size=(80, 25)) as pilot:
            await wait_for(pilot, lambda: app.target is not None and app.session is not None, 20)
            monkeypatch.setattr(os, "fork", fork_only_when_alone)
            app.reread(str(img))
            await wait_for(pilot, lambda: app.target is not None and len(app.target.disk.table.partitions) == 2, 20)
            monkeypatch.setattr(os, "fork", real_fork)
            assert app.target is not None
            return [p.start for p in app.target.disk.table.partitions]

    assert asyncio.run(go()) == [2048, 8192]
    assert started and all(pid > 0 for pid in started)
