"""An in-memory disk for the copier's protocol (backend.move.datamove): 1-byte sectors, a journal that keeps
only what was durable, and a crash at any write, sync, slot save or journal append (the schedule and reverse-copy
tests)."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from diskplan.model.plan.move import Read, Written


class Crash(Exception):
    pass


class World:
    """A disk (1-byte sectors), a journal, and a crash plan: crash at the n-th event."""

    def __init__(self, disk: bytearray, crash_at: int | None, rng: random.Random) -> None:
        self.disk = disk
        self.records: list[Read | Written] = []
        self.slot: dict[int, bytes] = {}
        self.events = 0
        self.crash_at = crash_at
        self.rng = rng
        self.copied: set[int] = set()  # source sectors whose chunk is synced and durably recorded written
        self.synced: set[int] = set()  # chunks synced since written
        self.volatile: dict[int, list[int]] = {}  # sector -> its values since the last sync, durable first

    def tick(self) -> bool:
        self.events += 1
        return self.crash_at is not None and self.events == self.crash_at

    def lose_unsynced(self) -> None:
        """The crash: each sector written since the last sync holds any of its values since then."""
        for x, values in self.volatile.items():
            self.disk[x] = self.rng.choice(values)
        self.volatile.clear()


class Mem:
    def __init__(self, w: World, plan, check: bool) -> None:
        self.w, self.plan, self.check = w, plan, check
        self.bufs = [bytearray(max(plan.chunk, 1)) for _ in range(2)]
        self.pending: list[int] = []  # chunks written since the last sync

    def read(self, lba: int, count: int, buffer: int = 0) -> memoryview:
        self.bufs[buffer][:count] = self.w.disk[lba : lba + count]
        return memoryview(self.bufs[buffer])[:count]

    def _allowed(self, x: int) -> None:
        p = self.plan
        if not (p.start <= x < p.start + p.length) or x in self.w.copied:
            return
        # a source sector whose chunk is not synced and recorded written may only be overwritten by its own
        # chunk, with it saved in the journal
        k = next(s for s in p.steps() if s.src <= x < s.src + s.count)
        rec = next((r for r in self.w.records if isinstance(r, Read) and r.index == k.index), None)
        assert rec is not None and rec.saved and k.saved is not None and k.saved.contains(x), (
            f"sector {x} of chunk {k.index} overwritten before it was copied or saved"
        )

    def write(self, lba: int, data: memoryview) -> None:
        if self.check:
            for x in range(lba, lba + len(data)):
                self._allowed(x)
        torn = self.w.tick()
        for i in range(len(data)):
            if not torn or self.w.rng.random() < 0.5:  # torn: any subset of the chunk's sectors reached the disk
                self.w.volatile.setdefault(lba + i, [self.w.disk[lba + i]]).append(data[i])
                self.w.disk[lba + i] = data[i]
        if torn:
            raise Crash
        self.pending.append(next(s.index for s in self.plan.steps() if s.dst == lba))

    def sync(self) -> None:
        if self.w.tick():
            raise Crash
        self.w.volatile.clear()
        self.w.synced.update(self.pending)
        self.pending = []


class MemLog:
    def __init__(self, w: World, plan) -> None:
        self.w, self.plan = w, plan

    def _keep(self, items) -> None:
        for i in items:
            if isinstance(i, str):
                continue
            self.w.records.append(i)
            if isinstance(i, Written) and i.index in self.w.synced:
                s = self.plan.step(i.index)
                self.w.copied.update(range(s.src, s.src + s.count))

    def append(self, *items) -> None:
        if self.w.tick():
            if self.w.rng.random() < 0.5:  # written whole but not acknowledged
                self._keep(items)
            raise Crash
        self._keep(items)

    def save(self, index: int, data) -> None:
        if self.w.tick():
            old = self.w.slot.get(index % 2, b"")
            cut = self.w.rng.randrange(len(data) + 1)
            self.w.slot[index % 2] = bytes(data[:cut]) + old[cut:]
            raise Crash
        self.w.slot[index % 2] = bytes(data)

    def saved(self, index: int, nbytes: int) -> bytes:
        return self.w.slot.get(index % 2, b"")[:nbytes]


moves = st.tuples(
    st.integers(1, 48),  # length
    st.integers(0, 60),  # start
    st.integers(0, 60),  # target
    st.integers(1, 16),  # max chunk
    st.integers(1, 16),  # min clean shift
).filter(lambda m: m[1] != m[2])
