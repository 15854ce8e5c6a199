"""The reverse copy of a rollback (backend.move.reverse), on the in-memory disk of test_move_schedule: a move
crashed anywhere (any unsynced writes lost, a torn chunk, a torn slot save, a journal append kept or lost), then
rolled back with crashes anywhere in the rollback too, each crash losing what was not synced: the old place
always ends holding exactly the partition's bytes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.backend.move.datamove import copy
from diskplan.backend.move.reverse import order, undo_copy
from diskplan.model.plan.move import Read, Written, resume_point, schedule
from helpers.memdisk import Crash, Mem, MemLog, World, moves


class Back(Mem):
    """The disk as the reverse copy writes it: every write may tear, unsynced sectors may be lost."""

    def write(self, lba: int, data: memoryview) -> None:
        torn = self.w.tick()
        for i in range(len(data)):
            if not torn or self.w.rng.random() < 0.5:
                self.w.volatile.setdefault(lba + i, [self.w.disk[lba + i]]).append(data[i])
                self.w.disk[lba + i] = data[i]
        if torn:
            raise Crash

    def sync(self) -> None:
        if self.w.tick():
            raise Crash
        self.w.volatile.clear()


def _moved_then_rolled_back(m, forward: int | None, crashes: list[int], seed: int, batch: int) -> tuple[bytes, bytes]:
    length, start, target, big, clean = m
    rng = random.Random(seed)
    disk = bytearray(rng.randbytes(128))
    want = bytes(disk[start : start + length])
    plan = schedule(start, target, length, 1, max_chunk_bytes=big, min_clean_bytes=clean)
    w = World(disk, forward, rng)
    try:
        copy(plan, Mem(w, plan, check=True), MemLog(w, plan), resume_point(w.records), 1, batch_bytes=batch)
    except Crash:
        w.lose_unsynced()
    at = resume_point(w.records)  # the journal as the crash left it; the rollback adds no record to it
    for crash in [*crashes, None]:
        w.crash_at, w.events = crash, 0
        try:
            lost = undo_copy(plan, Back(w, plan, check=False), MemLog(w, plan), at, 1)
        except Crash:
            w.lose_unsynced()
            continue
        assert lost == []
        break
    return bytes(disk[start : start + length]), want


@settings(max_examples=500, deadline=None)
@given(m=moves, forward=st.one_of(st.none(), st.integers(1, 60)), crashes=st.lists(st.integers(1, 30), max_size=4),
       seed=st.integers(0, 2**32), batch=st.integers(1, 64))
def test_a_rollback_crashed_anywhere_puts_the_bytes_back(m, forward, crashes, seed, batch) -> None:
    """Any move stopped anywhere (or finished but not verified), any crashes during its rollback."""
    got, want = _moved_then_rolled_back(m, forward, crashes, seed, batch)
    assert got == want


def test_an_overlapping_move_left_is_put_back_last_chunk_first() -> None:
    """The order: the chunk in flight, then the written chunks from the last one down."""
    at = resume_point([Read(0, "a"), Written(0), Read(1, "b"), Written(1), Read(2, "c", "d")])
    assert order(at) == [2, 1, 0]


def test_a_chunk_found_nowhere_is_named_and_nothing_more_written() -> None:
    """Its source and its new place were both written by something else: lost, named, the rest left alone."""
    rng = random.Random(1)
    disk = bytearray(rng.randbytes(128))
    plan = schedule(40, 10, 30, 1, max_chunk_bytes=10, min_clean_bytes=1)
    w = World(disk, None, rng)
    copy(plan, Mem(w, plan, check=True), MemLog(w, plan), resume_point([]), 1)
    at = resume_point(w.records)
    disk[10:70] = bytes(60)  # another program wrote zeros over both places
    before = bytes(disk)
    lost = undo_copy(plan, Back(w, plan, check=False), MemLog(w, plan), at, 1)
    assert len(lost) == 1 and "chunk 2 (sectors 60..69, moved to 30..39)" in lost[0], lost
    assert bytes(disk) == before
