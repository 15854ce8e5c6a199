"""One look at a disk: inside ``one_look()``, each disk is opened once for reading and what is judged from its
bytes (both GPT copies, backend.raw.gptcheck) is judged once, then passed to every later reader of the same look.

Why: one ``diskplan move`` used to open its disk about 95 times and judge its GPT a dozen times (the entry
read before hiding, the rewrite that hides it, the read-back, the same again to reveal it, the journal's
identity, the backup...), each time the same bytes.

What stays true for safety: a look only ever spans a time when this process alone writes the disk (a command's
prepare; a write under the lock), and every write diskplan makes through ``sectorio.write_sectors`` or the data
mover ends what was judged (``forget``): a check after a write reads the disk again. The held descriptor reads
the disk as it is (pread, the same page cache as every other descriptor of the file or device); only the
judgements are kept. A look is entered where a check must see the disk as it is now (under the lock, before the
first write): a caller that needs the disk as it is now opens a new look, never reuses an older one.
"""

from __future__ import annotations

import functools
import os
from _thread import _local  # what threading.local is, without importing threading (~1.5 ms of check's start-up)
from collections.abc import Callable, Iterator
from contextlib import contextmanager

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~3.5 ms; tests/test_value.py holds it)
if TYPE_CHECKING:
    from typing import ParamSpec, TypeVar

    T = TypeVar("T")
    P = ParamSpec("P")
HELD = 16  # descriptors a look keeps open at most (a move needs one; `check` may look at a thousand images)


class _Look:
    def __init__(self) -> None:
        self.fds: dict[str, int] = {}
        self.judged: dict[tuple[object, ...], object] = {}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
        self.judged.clear()


class _Current(_local):
    look: _Look | None = None


# Per thread: the planner prepares in worker threads while its main thread may read (or write) another disk.
_current = _Current()


@contextmanager
def one_look() -> Iterator[None]:
    """Inside, each disk is opened once for reading and judged once (until a write: ``forget``). Nested looks
    are the outer one."""
    if _current.look is not None:
        yield
        return
    _current.look = look = _Look()
    try:
        yield
    finally:
        _current.look = None
        look.close()


@contextmanager
def fresh_look() -> Iterator[None]:
    """A look that sees the disk as it is now, whatever was seen before (under the lock, before writing):
    inside an outer look, its judgements are forgotten and its descriptors closed first (the path may name
    another file or device by now)."""
    if _current.look is not None:
        _current.look.close()
    with one_look():
        yield


def in_one_look(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` run inside ``one_look()``: a command's prepare, which reads its disk many ways and writes nothing."""

    @functools.wraps(fn)
    def looking(*args: P.args, **kwargs: P.kwargs) -> T:
        with one_look():
            return fn(*args, **kwargs)

    return looking


def reading_fd(path: str, opener: Callable[[str], int]) -> int | None:
    """The look's descriptor for reading ``path`` (opened by ``opener`` on first use; it must stay open, so
    it is the look's to close); None outside a look (the caller opens and closes its own)."""
    now = _current.look
    if now is None:
        return None
    fd = now.fds.get(path)
    if fd is None:
        if len(now.fds) >= HELD:  # `check` of a fleet in one look: the oldest disk's descriptor goes
            os.close(now.fds.pop(next(iter(now.fds))))
        fd = now.fds[path] = opener(path)
    return fd


def judged(key: tuple[object, ...], judge: Callable[[], T]) -> T:
    """``judge()``, once per ``key`` within a look (every time outside one)."""
    now = _current.look
    if now is None:
        return judge()
    if key not in now.judged:
        now.judged[key] = judge()
    return now.judged[key]  # type: ignore[return-value]


def forget() -> None:
    """After a write: whatever was judged from any disk's bytes is judged again when next asked (every disk,
    not only the one written: an image and a loop device over it are one disk under two names)."""
    if _current.look is not None:
        _current.look.judged.clear()
