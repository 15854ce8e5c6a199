"""The move schedule and the copier's protocol, on an in-memory disk with crashes anywhere.

The copier (backend.move.datamove.copy) runs unchanged against a bytearray "disk" and an in-memory journal
that keeps only what was durable; a crash can come at any write, mid-chunk (any subset of its sectors
written), at a sync, in a slot save, or in a journal append (the record kept or lost). A crash also loses
any of the writes not yet synced, sector by sector (each keeps its value at the last sync or any value
written since), as a disk's volatile cache may. After each crash the state is replayed from the
journal, as ``diskplan resume`` does.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.backend.move.datamove import SourceChanged, copy, verify
from diskplan.model.plan.move import JournalError, Read, Written, resume_point, schedule
from helpers.memdisk import Crash, Mem, MemLog, World, moves


def _run_with_crashes(
    m: tuple[int, int, int, int, int], crashes: list[int], seed: int, batch: int = 1
) -> tuple[bytes, bytes, int]:
    length, start, target, big, clean = m
    rng = random.Random(seed)
    disk = bytearray(rng.randbytes(128))
    want = bytes(disk[start : start + length])
    plan = schedule(start, target, length, 1, max_chunk_bytes=big, min_clean_bytes=clean)
    w = World(disk, None, rng)
    for crash in [*crashes, None]:
        w.crash_at, w.events = crash, 0
        try:
            copy(plan, Mem(w, plan, check=True), MemLog(w, plan), resume_point(w.records), 1, batch_bytes=batch)
        except Crash:
            w.lose_unsynced()
            continue
        break
    else:  # pragma: no cover - the last attempt has no crash
        raise AssertionError("never finished")
    at = resume_point(w.records)
    assert at.next == plan.count
    assert verify(plan, Mem(w, plan, check=False), at.digests, 1) == []
    return bytes(disk[target : target + length]), want, plan.count


@settings(max_examples=400, deadline=None)
@given(m=moves, crashes=st.lists(st.integers(1, 40), max_size=4), seed=st.integers(0, 2**32),
       batch=st.integers(1, 64))
def test_any_crash_then_resume_moves_the_content_exactly(m, crashes, seed, batch) -> None:
    """Any crash points, unsynced writes lost at each, any batch of chunks between syncs."""
    got, want, _ = _run_with_crashes(m, crashes, seed, batch)
    assert got == want


@settings(max_examples=300, deadline=None)
@given(m=moves, batch=st.integers(1, 64))
def test_groups_cover_the_chunks_in_order_and_never_overwrite_their_own_sources(m, batch) -> None:
    length, start, target, big, clean = m
    plan = schedule(start, target, length, 1, max_chunk_bytes=big, min_clean_bytes=clean)
    groups = list(plan.groups(0, batch))
    assert [k for g in groups for k in g] == list(range(plan.count))
    for g in groups:
        assert 1 <= len(g) <= batch
        steps = [plan.step(k) for k in g]
        if len(steps) > 1:  # a chunk that saves old bytes is alone; no write hits a source of its group
            assert all(s.saved is None for s in steps)
            assert not any(a.dest.overlaps(b.source) for a in steps for b in steps)


def test_a_move_farther_than_its_size_syncs_once_per_batch() -> None:
    plan = schedule(2048, 2048 + (1 << 21) + 2048, 1 << 21, 512)  # 1 GiB right, past its own end
    assert [len(g) for g in plan.groups(0, 32)] == [32] * 4
    near = schedule(2048, 2048 + 16384, 1 << 21, 512)  # right by 8 MiB: each chunk's write hits the last source
    assert all(len(g) == 1 for g in near.groups(0, 32))
    mid = schedule(2048, 2048 + 65536, 1 << 21, 512)  # right by 32 MiB: 4 chunks between syncs
    assert {len(g) for g in mid.groups(0, 32)} == {4}


@settings(max_examples=300, deadline=None)
@given(m=moves)
def test_chunks_cover_the_range_once_in_a_safe_order(m) -> None:
    length, start, target, big, clean = m
    plan = schedule(start, target, length, 1, max_chunk_bytes=big, min_clean_bytes=clean)
    steps = list(plan.steps())
    covered = sorted(x for s in steps for x in range(s.src, s.src + s.count))
    assert covered == list(range(start, start + length))
    assert all(s.dst - s.src == target - start for s in steps)
    assert all(s.count <= plan.chunk for s in steps)
    # a chunk's destination never covers a source still to come
    for i, s in enumerate(steps):
        for later in steps[i + 1 :]:
            assert not s.dest.overlaps(later.source)
    # a chunk overlaps its own source only when the shift is below the clean minimum
    if abs(target - start) >= clean:
        assert all(s.saved is None for s in steps)


def test_a_large_shift_uses_large_chunks_without_saving_data() -> None:
    plan = schedule(2048, 2048 + 2048, 1 << 21, 512)
    assert plan.chunk == 2048 and not plan.journals_data  # 1 MiB chunks: the shift is 1 MiB
    far = schedule(2048, 1 << 22, 1 << 21, 512)
    assert far.chunk * 512 == 8 << 20 and not far.journals_data


def test_a_one_sector_shift_keeps_large_chunks_and_saves_the_overlap() -> None:
    plan = schedule(34, 2048, 100_000, 512)  # a realign from 34 to 2048 moves 2014 sectors: small
    assert plan.chunk * 512 == 8 << 20 and plan.journals_data
    step = plan.step(0)  # moving right: the last chunk of the partition first
    assert step.src + step.count == 34 + 100_000
    assert step.saved is not None and step.saved.size == step.count - (2048 - 34)


def test_the_last_chunk_stops_at_the_partitions_end() -> None:
    """util-linux #938: the last step must be cut to what is left."""
    plan = schedule(40, 0, 1000, 1, max_chunk_bytes=300, min_clean_bytes=1)
    assert [s.count for s in plan.steps()] == [40] * 25
    plan = schedule(0, 700, 1000, 1, max_chunk_bytes=300, min_clean_bytes=1)
    assert [(s.src, s.count) for s in plan.steps()] == [(700, 300), (400, 300), (100, 300), (0, 100)]


def test_a_replayed_chunk_whose_source_changed_stops_the_move() -> None:
    """Only a chunk that saves old bytes is recorded read before it is written (a clean chunk is simply
    redone): a small shift, crashed once its read record is durable."""
    for crash in range(1, 20):
        rng = random.Random(1)
        disk = bytearray(rng.randbytes(64))
        plan = schedule(20, 18, 16, 1, max_chunk_bytes=4, min_clean_bytes=16)
        w = World(disk, crash, rng)
        with pytest.raises(Crash):
            copy(plan, Mem(w, plan, check=False), MemLog(w, plan), resume_point([]), 1)
        w.lose_unsynced()
        at = resume_point(w.records)
        if at.pending is not None:
            break
    assert at.pending is not None
    step = plan.step(at.next)
    disk[step.src + step.count - 1] ^= 0xFF  # someone wrote to the disk meanwhile (where no save covers it)
    w.crash_at = None
    with pytest.raises(SourceChanged):
        copy(plan, Mem(w, plan, check=False), MemLog(w, plan), at, 1)


def test_records_out_of_order_are_refused() -> None:
    with pytest.raises(JournalError):
        resume_point([Read(0, "a"), Read(1, "b")])
    with pytest.raises(JournalError):
        resume_point([Written(0)])
    assert resume_point([Read(0, "a"), Written(0), Read(1, "b")]).pending == Read(1, "b")


def test_an_io_error_stops_in_a_state_resume_finishes() -> None:
    """util-linux #984: an I/O error must not abandon a half-moved partition."""
    from diskplan.backend.move.datamove import MoveIOError

    rng = random.Random(3)
    disk = bytearray(rng.randbytes(96))
    want = bytes(disk[10:60])
    plan = schedule(10, 14, 50, 1, max_chunk_bytes=8, min_clean_bytes=16)  # small shift: journalled
    w = World(disk, None, rng)

    class Failing(Mem):
        def write(self, lba: int, data: memoryview) -> None:
            if lba == plan.step(3).dst:
                raise MoveIOError(f"writing sector {lba} failed: Input/output error", lba)
            super().write(lba, data)

    with pytest.raises(MoveIOError) as err:
        copy(plan, Failing(w, plan, check=True), MemLog(w, plan), resume_point([]), 1)
    assert err.value.sector == plan.step(3).dst
    at = resume_point(w.records)
    assert at.next == 3 and at.pending is not None and at.pending.index == 3
    copy(plan, Mem(w, plan, check=True), MemLog(w, plan), at, 1)
    assert bytes(disk[14:64]) == want


def test_a_stop_request_ends_on_a_chunk_boundary() -> None:
    from diskplan.backend.move.datamove import Stopped

    rng = random.Random(4)
    disk = bytearray(rng.randbytes(96))
    want = bytes(disk[40:80])
    plan = schedule(40, 0, 40, 1, max_chunk_bytes=8, min_clean_bytes=1)
    w = World(disk, None, rng)
    asked = iter([False, False, True])
    with pytest.raises(Stopped) as stopped:
        copy(plan, Mem(w, plan, check=True), MemLog(w, plan), resume_point([]), 1, stop=lambda: next(asked))
    assert stopped.value.done == 2
    at = resume_point(w.records)
    assert at.next == 2 and at.pending is None  # both chunks recorded as written: nothing in flight
    copy(plan, Mem(w, plan, check=True), MemLog(w, plan), at, 1)
    assert bytes(disk[0:40]) == want


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(34, 5000), size=st.integers(1, 3000), period=st.sampled_from([1, 8, 64, 2048]),
    gap_before=st.integers(0, 3000), gap_after=st.integers(0, 3000),
)
def test_realign_goes_to_the_nearest_boundary_that_fits(start, size, period, gap_before, gap_after) -> None:
    from diskplan.model.extent import Extent
    from diskplan.model.grain import Grain
    from diskplan.model.plan.move import realign_start

    g = Grain(period)
    part = Extent(start, start + size - 1)
    before = Extent(0, max(0, start - gap_before - 1)) if start - gap_before - 1 >= 0 else None
    after = Extent(part.end + gap_after + 1, part.end + gap_after + 10)
    others = [e for e in (before, after) if e is not None]
    usable = Extent(0, 20_000)
    got = realign_start(part, g, usable, others)
    fits = [s for s in range(0, 20_000) if g.is_aligned(s) and all(not Extent(s, s + size - 1).overlaps(o)
            for o in others) and s + size - 1 <= usable.end and
            (before is None or s > before.end) and s + size - 1 < after.start]
    if not fits:
        assert got is None
    else:
        assert got is not None and g.is_aligned(got) and got in fits
        assert abs(got - start) == min(abs(s - start) for s in fits)


def test_the_read_back_names_a_destination_that_differs() -> None:
    rng = random.Random(5)
    disk = bytearray(rng.randbytes(96))
    plan = schedule(10, 50, 30, 1, max_chunk_bytes=8, min_clean_bytes=1)
    w = World(disk, None, rng)
    copy(plan, Mem(w, plan, check=True), MemLog(w, plan), resume_point([]), 1)
    digests = resume_point(w.records).digests
    assert verify(plan, Mem(w, plan, check=False), digests, 1) == []
    step = plan.step(1)
    disk[step.dst + 2] ^= 1  # one bit rots at the new place
    bad = verify(plan, Mem(w, plan, check=False), digests, 1)
    assert bad == [f"sectors {step.dst}..{step.dst + step.count - 1} differ from the source read before the move"]
