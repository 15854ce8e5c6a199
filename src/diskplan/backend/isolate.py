"""Run a function in a forked child, so a libparted crash (SIGSEGV on some truncated tables) or hang
cannot take the planner down, and nothing libparted prints reaches the user's terminal."""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import time
from collections.abc import Callable, Generator, Sequence

# `check` runs without importing typing (~3.5 ms): the generics exist for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Generic, TypeVar

    T = TypeVar("T")
else:

    class Generic:
        """``Generic[T]`` at run time: the class itself, as typing's would be, but without importing typing."""

        def __class_getitem__(cls, item: object) -> type:
            return cls

    T = None


IN_CHILD = False  # this process is a child forked here (it may change what only it sees: backend.siblings)


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


class Child(Generic[T]):
    """A forked child at work on one call; ``result`` waits for its answer (once)."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self._fd = fd

    def answering(self) -> bool:
        """The child has begun its answer (it writes it whole once done), or died: ``result`` won't wait long."""
        ready, _, _ = select.select([self._fd], [], [], 0)
        return bool(ready)

    def result(self, timeout: float = 30.0) -> T:
        """The call's return value; IsolatedFailure when it raised, crashed or gave no answer in ``timeout``."""
        r, pid = self._fd, self.pid
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise IsolatedFailure(f"gave no answer within {timeout:g} s", timed_out=True)
                ready, _, _ = select.select([r], [], [], left)
                if not ready:
                    continue
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(r)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            raise IsolatedFailure(f"libparted crashed ({signal.Signals(sig).name})", signal_number=sig)
        value: T = _unpickled(b"".join(chunks))  # what fn returned, as the child pickled it
        return value


def _unpickled(payload: bytes) -> Any:
    """What the child's call returned; IsolatedFailure for what it raised or a cut-off answer."""
    try:
        result = pickle.loads(payload)
    except Exception as exc:
        raise IsolatedFailure("the reader ended without an answer") from exc
    if result[0] == "err":
        raise IsolatedFailure(result[2], error_type=result[1])
    return result[1]


def start_isolated(fn: Callable[..., T], *args: Any) -> Child[T]:
    """Fork a child that runs ``fn(*args)`` with its output going nowhere; collect it with ``Child.result``.
    Fork before starting threads where you can: a child forked while another thread imports a module
    may find that module's import lock held for ever."""
    return Child(*_fork(lambda w: _write_all(w, _answer(fn, *args))))


def _answer(fn: Callable[..., T], *args: Any) -> bytes:
    """``fn(*args)`` pickled as ("ok", value) or ("err", exception type, message)."""
    try:
        return pickle.dumps(("ok", fn(*args)))
    except BaseException as exc:
        return pickle.dumps(("err", type(exc).__name__, str(exc) or type(exc).__name__))


def _write_all(w: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(w, view) :]


def _fork(work: Callable[[int], None]) -> tuple[int, int]:
    """(pid, read end of its pipe) of a child running ``work(write end)`` with its output going nowhere."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        global IN_CHILD
        IN_CHILD = True
        os.close(r)
        status = 0
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            # faulthandler (PYTHONFAULTHANDLER, pytest) writes to a saved copy of stderr, not fd 2: a
            # libparted crash would dump a Python traceback on the user's terminal.
            faulthandler.disable()
            _limit_memory()
            work(w)
        except BaseException:
            status = 1
        os._exit(status)
    os.close(w)
    return pid, r


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
        self.pid, self._fd = _fork(lambda w: _serve(fn, items, w))
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
            ready, _, _ = select.select([self._fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:  # it ended before answering: it crashed
                raise self._ended()
            self._buf += chunk

    def _ended(self) -> IsolatedFailure:
        self.alive = False
        os.close(self._fd)
        _, status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            return IsolatedFailure(f"libparted crashed ({signal.Signals(sig).name})", signal_number=sig)
        return IsolatedFailure("the reader ended without an answer")

    def close(self) -> None:
        """End the child now (its remaining answers are not wanted)."""
        if self.alive:
            self.alive = False
            os.close(self._fd)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


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
