"""Run a function in a forked child, so a libparted crash (SIGSEGV on some truncated tables) or hang
cannot take the planner down, and nothing libparted prints reaches the user's terminal.

A process with one thread (every command but the planner) forks the child itself: the cheapest way. A
process with threads (the planner's Textual workers) must not: the child would inherit locks that other
threads held at that instant (an import's, for one) and could wait on them for ever, which is why Python
3.12 deprecates ``os.fork`` there. It asks a *zygote* instead, a process forked while it still had one
thread, which forks each child on its behalf (see ``_Zygote``)."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import time
from collections.abc import Callable, Generator, Sequence

try:  # the C functions the pickle module hands out: importing its Python body costs `check` ~2 ms
    from _pickle import dumps as _dumps
    from _pickle import loads as _loads
except ImportError:  # an interpreter without the accelerator
    from pickle import dumps as _dumps
    from pickle import loads as _loads

# socket and signal are imported where used, by the zygote and on a crash: ~4 ms of `check`'s start-up (signal
# builds its enums as it is imported) that a command reading without threads never needs. select too, where a
# parent waits (``_ready``): `check` forks its reading child before, and the child never waits (~0.7 ms sooner).
SIGKILL = 9  # signal.SIGKILL on Linux

# `check` runs without importing typing (~3.5 ms): the generics exist for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any, Generic, TypeVar

    T = TypeVar("T")
else:

    class Generic:
        """``Generic[T]`` at run time: the class itself, as typing's would be, but without importing typing."""

        def __class_getitem__(cls, item: object) -> type:
            return cls

    T = None


IN_CHILD = False  # this process is a child forked here (it may change what only it sees: backend.parted.siblings)


class IsolatedFailure(Exception):
    """The child died, hung, or raised: ``reason`` is one line for the user."""

    def __init__(
        self, reason: str, *, signal_number: int | None = None, error_type: str = "", timed_out: bool = False
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.signal_number = signal_number
        self.error_type = error_type  # the exception the child raised ("" when it died or hung)
        self.timed_out = timed_out


# A hostile table can make libparted allocate without bound; the child may use this much beyond what
# it inherited, then allocations fail (an error or a crash, both reported) instead of the machine swapping.
CHILD_EXTRA_MEMORY = 2 << 30


def _limit_memory() -> None:
    try:
        import resource

        with open("/proc/self/statm") as f:
            inherited = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = inherited + CHILD_EXTRA_MEMORY
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (OSError, ValueError, ImportError):
        pass  # no /proc or no limits: run unbounded, as before


class _Proc:
    """A child's pid, and how to learn how it ended: ``waitpid`` for our own child, the zygote's report (on
    ``status_fd``) for one the zygote forked."""

    def __init__(self, pid: int, status_fd: int | None = None) -> None:
        self.pid = pid
        self._status_fd = status_fd

    def kill(self) -> None:
        if self.pid <= 0:  # no child (the zygote died before forking one): never kill(-1), which is everyone
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, SIGKILL)

    def wait(self) -> int:
        """Its wait status (as os.waitpid gives it); -1 when the zygote could not say."""
        if self._status_fd is None:
            return os.waitpid(self.pid, 0)[1]
        try:
            raw = _read_exactly(self._status_fd, 8)
        finally:
            os.close(self._status_fd)
        return int.from_bytes(raw, "little", signed=True) if len(raw) == 8 else -1


def _read_exactly(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes, fewer only at end of file."""
    got = b""
    while len(got) < size:
        chunk = os.read(fd, size - len(got))
        if not chunk:
            break
        got += chunk
    return got


def _ended_by(status: int) -> IsolatedFailure | None:
    """The failure a child's wait status means (a signal, or no status at all), or None."""
    if status == -1:
        return IsolatedFailure("the reader ended without an answer")
    if os.WIFSIGNALED(status):
        import signal

        sig = os.WTERMSIG(status)
        return IsolatedFailure(f"libparted crashed ({signal.Signals(sig).name})", signal_number=sig)
    return None


class Child(Generic[T]):
    """A forked child at work on one call; ``result`` waits for its answer (once)."""

    def __init__(self, proc: _Proc, fd: int) -> None:
        self._proc = proc
        self.pid = proc.pid
        self._fd = fd

    def answering(self) -> bool:
        """The child has begun its answer (it writes it whole once done), or died: ``result`` won't wait long."""
        return _ready(self._fd, 0)

    def result(self, timeout: float = 30.0) -> T:
        """The call's return value; IsolatedFailure when it raised, crashed or gave no answer in ``timeout``."""
        r, proc = self._fd, self._proc
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    proc.kill()
                    proc.wait()
                    raise IsolatedFailure(f"gave no answer within {timeout:g} s", timed_out=True)
                if not _ready(r, left):
                    continue
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(r)
        failure = _ended_by(proc.wait())
        if failure is not None:
            raise failure
        value: T = _unpickled(b"".join(chunks))  # what fn returned, as the child pickled it
        return value


def _ready(fd: int, timeout: float) -> bool:
    """``fd`` can be read (or is at its end) within ``timeout`` seconds."""
    import select

    ready, _, _ = select.select([fd], [], [], timeout)
    return bool(ready)


def _unpickled(payload: bytes) -> Any:
    """What the child's call returned; IsolatedFailure for what it raised or a cut-off answer."""
    try:
        result = _loads(payload)
    except Exception as exc:
        raise IsolatedFailure("the reader ended without an answer") from exc
    if result[0] == "err":
        raise IsolatedFailure(result[2], error_type=result[1])
    return result[1]


def start_isolated(fn: Callable[..., T], *args: Any) -> Child[T]:
    """Fork a child that runs ``fn(*args)`` with its output going nowhere; collect it with ``Child.result``.
    Fork before starting threads where you can: a child forked while another thread imports a module
    may find that module's import lock held for ever."""
    return Child(*_start(("one", fn, args)))


def _answer(fn: Callable[..., T], *args: Any) -> bytes:
    """``fn(*args)`` pickled as ("ok", value) or ("err", exception type, message)."""
    try:
        return _dumps(("ok", fn(*args)))
    except BaseException as exc:
        return _dumps(("err", type(exc).__name__, str(exc) or type(exc).__name__))


def _write_all(w: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(w, view) :]


# A job for a child: ("one", fn, args), answered once, or ("map", fn, items), answered item by item.
if TYPE_CHECKING:
    Job = tuple[str, Callable[..., Any], Sequence[Any]]


def _work(job: Job, w: int) -> None:
    kind, fn, args = job
    if kind == "one":
        _write_all(w, _answer(fn, *args))
    else:
        _serve(fn, args, w)


def _start(job: Job) -> tuple[_Proc, int]:
    """A child at work on ``job``, and the read end of its answers: forked here while this process has one
    thread, by the zygote once it has more (or when a job cannot travel to the zygote: a test's lambda)."""
    if _threads() > 1:
        zygote = _Zygote.get()
        if zygote is not None:
            started = zygote.start(job)
            if started is not None:
                return started
    pid, r = _fork(lambda w: _work(job, w))
    return _Proc(pid), r


def _threads() -> int:
    threading = sys.modules.get("threading")  # not imported: no thread was started through it
    return threading.active_count() if threading is not None else 1


def _fork(work: Callable[[int], None]) -> tuple[int, int]:
    """(pid, read end of its pipe) of a child running ``work(write end)`` with its output going nowhere."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        os.close(r)
        _be_child(lambda: work(w))
    os.close(w)
    return pid, r


def _be_child(work: Callable[[], None]) -> None:
    """Become the isolated child: no terminal, no faulthandler, bounded memory; run ``work``; exit."""
    global IN_CHILD
    IN_CHILD = True
    status = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        # faulthandler (PYTHONFAULTHANDLER, pytest) writes to a saved copy of stderr, not fd 2: a
        # libparted crash would dump a Python traceback on the user's terminal.
        faulthandler.disable()
        _limit_memory()
        work()
    except BaseException:
        status = 1
    os._exit(status)


class _Zygote:
    """A process forked while this one had a single thread, which forks the children this process asks for
    once it has threads. Each request is a socket message carrying three descriptors: the job's pipe (the
    pickled job, this process's environment and working directory), the answer pipe and a status pipe. The
    zygote forks a watcher per request, the watcher forks the child (so the zygote never waits) and reports
    on the status pipe the child's pid, then its wait status. The zygote ends when this process closes its
    socket (or dies)."""

    _one: _Zygote | None = None
    _failed = False

    def __init__(self) -> None:
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the zygote: never returns
            ours.close()
            _zygote_loop(theirs)
        theirs.close()
        self.pid, self._sock = pid, ours

    @classmethod
    def prepare(cls) -> None:
        """Start the zygote now, while this process has one thread (the planner calls it before Textual
        starts any): later calls from threads then never fork this process."""
        if cls._one is None and not cls._failed and _threads() == 1:
            cls.get()

    @classmethod
    def get(cls) -> _Zygote | None:
        if cls._one is None and not cls._failed:
            try:
                cls._one = _Zygote()
            except OSError:
                cls._failed = True
        return cls._one

    def start(self, job: Job) -> tuple[_Proc, int] | None:
        """Ask for a child at work on ``job``: (its process, the read end of its answers); None when the job
        cannot be pickled or the zygote is gone (then the caller forks)."""
        if getattr(job[1], "__module__", None) == "__main__":  # the zygote's __main__ may not have it yet
            return None
        try:
            payload = _dumps((job, dict(os.environ), os.getcwd()))
        except Exception:  # a lambda or a local function: only a fork can run it
            return None
        job_r, job_w = os.pipe()
        r, w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            import socket

            socket.send_fds(self._sock, [b"job"], [job_r, w, status_w])
        except OSError:
            for fd in (job_r, job_w, r, w, status_r, status_w):
                os.close(fd)
            type(self)._one, type(self)._failed = None, True
            return None
        for fd in (job_r, w, status_w):
            os.close(fd)
        pid_bytes = _read_exactly(status_r, 8)
        if len(pid_bytes) != 8:  # the zygote died on the way: no child, the answer pipe is at its end
            os.close(job_w)
            return _Proc(-1, status_r), r
        try:
            _write_all(job_w, payload)
        except BrokenPipeError:  # the child died before reading its job: its status says how
            pass
        finally:
            os.close(job_w)
        return _Proc(int.from_bytes(pid_bytes, "little"), status_r), r


def _zygote_loop(sock: socket.socket) -> None:
    """The zygote's life: fork a watcher per request until this process's end of the socket closes."""
    import signal
    import socket

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is for the planner, which ends us by closing
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # watchers are reaped by the kernel
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 16, 3)
        except OSError:
            msg, fds = b"", []
        if not msg or len(fds) != 3:
            os._exit(0)
        job_r, w, status_w = fds
        if os.fork() == 0:
            sock.close()
            _watch(job_r, w, status_w)
        for fd in fds:
            os.close(fd)


def _watch(job_r: int, w: int, status_w: int) -> None:
    """The watcher: fork the child, report its pid, wait for it, report its wait status, exit."""
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        os.close(status_w)
        _be_child(lambda: _run_job(job_r, w))
    os.close(job_r)
    os.close(w)
    try:
        _write_all(status_w, pid.to_bytes(8, "little"))
        _, status = os.waitpid(pid, 0)
        _write_all(status_w, status.to_bytes(8, "little", signed=True))
    except OSError:
        pass
    os._exit(0)


def _run_job(job_r: int, w: int) -> None:
    chunks = []
    while chunk := os.read(job_r, 1 << 16):
        chunks.append(chunk)
    os.close(job_r)
    job, environ, cwd = _loads(b"".join(chunks))
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    _work(job, w)


def prepare_for_threads() -> None:
    """Call before starting threads in a process that will isolate calls from them (the planner)."""
    _Zygote.prepare()


def run_isolated(fn: Callable[..., T], *args: Any, timeout: float = 30.0) -> T:
    return start_isolated(fn, *args).result(timeout)


# --- one child for many calls ------------------------------------------------------------------------
# Forking a child per call costs more than libparted's read of a small table (a few ms: the fork, the
# child's first touches of memory it shares, its exit). Many reads share a child instead: it answers each
# call as soon as it is done, and when it crashes or hangs on one, that call fails and a new child takes
# the calls after it. Each call is as isolated from the caller as with ``run_isolated``.

_FRAME = 8  # bytes of the length before each answer


class _Stream(Generic[T]):
    """A forked child calling ``fn`` on each item in turn, each answer written as soon as it is ready."""

    def __init__(self, fn: Callable[[Any], T], items: Sequence[Any]) -> None:
        self._proc, self._fd = _start(("map", fn, items))
        self.pid = self._proc.pid
        self._buf = bytearray()
        self.alive = True

    def next(self, timeout: float) -> T:
        """The next item's answer; IsolatedFailure when the call raised, or when the child crashed or gave
        no answer in ``timeout`` (then the stream is over: ``alive`` is False)."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self._buf) >= _FRAME:
                size = int.from_bytes(self._buf[:_FRAME], "little")
                if len(self._buf) >= _FRAME + size:
                    frame = bytes(self._buf[_FRAME : _FRAME + size])
                    del self._buf[: _FRAME + size]
                    value: T = _unpickled(frame)
                    return value
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise IsolatedFailure(f"gave no answer within {timeout:g} s", timed_out=True)
            if not _ready(self._fd, left):
                continue
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:  # it ended before answering: it crashed
                raise self._ended()
            self._buf += chunk

    def _ended(self) -> IsolatedFailure:
        self.alive = False
        os.close(self._fd)
        return _ended_by(self._proc.wait()) or IsolatedFailure("the reader ended without an answer")

    def close(self) -> None:
        """End the child now (its remaining answers are not wanted)."""
        if self.alive:
            self.alive = False
            os.close(self._fd)
            self._proc.kill()
            self._proc.wait()


def _serve(fn: Callable[[Any], T], items: Sequence[Any], w: int) -> None:
    for item in items:
        payload = _answer(fn, item)
        _write_all(w, len(payload).to_bytes(_FRAME, "little") + payload)


class IsolatedMap(Generic[T]):
    """``fn(item)`` for every item, in forked children (``lanes`` of them working side by side, each on every
    lanes-th item), started at once; iterate for the answers in order: each is what ``fn`` returned or the
    IsolatedFailure of that call. ``timeout`` bounds each call from when its answer is awaited."""

    def __init__(self, fn: Callable[[Any], T], items: Sequence[Any], *, timeout: float = 30.0, lanes: int = 1) -> None:
        self._fn, self._items, self._timeout = fn, list(items), timeout
        self._lanes = max(1, min(lanes, len(self._items)))
        self._streams: list[_Stream[T] | None] = [
            _Stream(fn, self._items[lane :: self._lanes]) for lane in range(self._lanes) if self._items
        ]

    @property
    def items(self) -> list[Any]:
        """The items, in the order their answers come."""
        return list(self._items)

    def __iter__(self) -> Generator[T | IsolatedFailure, None, None]:
        try:
            for i in range(len(self._items)):
                lane = i % self._lanes
                stream = self._streams[lane]
                if stream is None:  # the last one crashed or hung: a new child takes this lane's rest
                    stream = self._streams[lane] = _Stream(self._fn, self._items[i :: self._lanes])
                try:
                    yield stream.next(self._timeout)
                except IsolatedFailure as exc:
                    if not stream.alive:
                        self._streams[lane] = None
                    yield exc
        finally:
            self.close()

    def close(self) -> None:
        for stream in self._streams:
            if stream is not None:
                stream.close()
