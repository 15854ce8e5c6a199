"""Work measured without a stopwatch: counting function calls is deterministic on a busy machine, and a
rescan or a sort that grows with the disk or the partition count shows up as many more calls.
(Timings themselves are printed by `make bench`, never asserted.)"""

from __future__ import annotations

import sys
from collections.abc import Callable


def calls(fn: Callable[[], object]) -> int:
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count
