"""Run a function in a forked child, so a libparted crash (SIGSEGV on some truncated tables) or hang
cannot take the planner down, and nothing libparted prints reaches the user's terminal."""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


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
        try:
            result = pickle.loads(b"".join(chunks))
        except Exception as exc:
            raise IsolatedFailure("the reader ended without an answer") from exc
        if result[0] == "err":
            raise IsolatedFailure(result[2], error_type=result[1])
        value: T = result[1]  # what fn returned, as the child pickled it
        return value


def start_isolated(fn: Callable[..., T], *args: Any) -> Child[T]:
    """Fork a child that runs ``fn(*args)`` with its output going nowhere; collect it with ``Child.result``.
    Fork before starting threads where you can: a child forked while another thread imports a module
    may find that module's import lock held for ever."""
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
            try:
                payload = pickle.dumps(("ok", fn(*args)))
            except BaseException as exc:
                payload = pickle.dumps(("err", type(exc).__name__, str(exc) or type(exc).__name__))
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view) :]
        except BaseException:
            status = 1
        os._exit(status)
    os.close(w)
    return Child(pid, r)


def run_isolated(fn: Callable[..., T], *args: Any, timeout: float = 30.0) -> T:
    return start_isolated(fn, *args).result(timeout)
