"""Fault injection for the tests of data moves: a named point in the write path where a test may kill this
process (a crash at exactly that moment). Nothing happens unless the environment asks for it."""

from __future__ import annotations

import os

_counts: dict[str, int] = {}


def fault(point: str) -> None:
    """Tests: DISKPLAN_MOVE_KILL=POINT:N[:SIGNAL] sends this process SIGNAL (default KILL; INT is a Ctrl+C)
    the N-th time it reaches POINT (record: a journal record written but not fsynced; hidden: the entry hidden,
    the kernel not yet told; parked: a logical entry hidden, its EBR not yet moved; ebr: the new EBR written, the
    link to it not; read: recorded, before the data write; torn: half a chunk written; write: a chunk
    written, not synced; synced; verified; table). Nothing otherwise."""
    spec = os.environ.get("DISKPLAN_MOVE_KILL")
    if not spec:
        return
    want, _, rest = spec.partition(":")
    nth, _, sig = rest.partition(":")
    if want != point:
        return
    _counts[point] = _counts.get(point, 0) + 1
    if _counts[point] == int(nth or 1):
        import signal

        os.kill(os.getpid(), signal.Signals["SIG" + (sig or "KILL")])
