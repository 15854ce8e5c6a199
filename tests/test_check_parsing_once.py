"""What `check` does once that it used to do again and again: a Disk's number -> layers index is made on the
first ``stack`` call (a report asks once per partition), and a GPT entry array's type GUID texts are made
once per type, an all-NUL name is not decoded, with the entries exactly as the plain parse gives them."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.backend.raw import rawtable
from diskplan.backend.raw.rawtable import GptEntry, guid_text, parse_gpt_entries
from diskplan.model.disk import Disk
from diskplan.model.geometry import Geometry
from diskplan.model.stack import Layer
from diskplan.model.table import new_table
from diskplan.model.value import replace

GEOM = Geometry(sectors=10**7)


class _CountedTuple(tuple):  # type: ignore[type-arg]
    """A tuple that counts how often it is walked."""

    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


def test_a_disks_layers_index_is_made_once_for_all_its_partitions() -> None:
    layers = {n: (Layer("lvm2-pv", n << 20),) for n in range(1, 129)}
    stacks = _CountedTuple(layers.items())
    disk = Disk(GEOM, new_table("gpt", GEOM), stacks=stacks)
    assert [disk.stack(n) for n in range(1, 130)] == [*layers.values(), ()]
    assert _CountedTuple.walks == 1  # made each call, it was walked 129 times


def test_the_layers_index_stays_out_of_equality_replace_and_survives_pickling() -> None:
    pv = (Layer("lvm2-pv", 1 << 20),)
    disk = Disk(GEOM, new_table("gpt", GEOM), stacks=((1, pv),))
    fresh = Disk(GEOM, new_table("gpt", GEOM), stacks=((1, pv),))
    assert disk.stack(1) == pv and disk.stack(2) == ()
    assert disk == fresh and hash(disk) == hash(fresh)
    other = replace(disk, stacks=((2, pv),))  # a new index for the new stacks, not the old one carried over
    assert other.stack(1) == () and other.stack(2) == pv
    assert pickle.loads(pickle.dumps(disk)).stack(1) == pv


def _plain(raw: bytes, count: int, size: int) -> list[GptEntry]:
    """The parse as it was: every GUID and name decoded on its own."""
    out = []
    for i in range(count):
        e = raw[i * size : (i + 1) * size]
        if len(e) < 128 or e[:16] == b"\0" * 16:
            continue
        out.append(GptEntry(i + 1, guid_text(e[0:16]), guid_text(e[16:32]), int.from_bytes(e[32:40], "little"),
                            int.from_bytes(e[40:48], "little"),
                            e[56:128].decode("utf-16-le", "replace").rstrip("\0"), int.from_bytes(e[48:56], "little")))
    return out


_TYPES = st.sampled_from([bytes(16), bytes(range(16)), bytes(range(1, 17)), b"\xff" * 16])
_NAMES = st.one_of(st.just(bytes(72)), st.binary(min_size=72, max_size=72),
                   st.text(max_size=36).map(lambda t: t.encode("utf-16-le", "surrogatepass")[:72].ljust(72, b"\0")))
_ENTRY = st.tuples(_TYPES, st.binary(min_size=40, max_size=40), _NAMES).map(lambda t: t[0] + t[1] + t[2])


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(_ENTRY, max_size=12), extra=st.sampled_from([0, 128]), cut=st.integers(0, 200))
def test_the_gpt_entries_are_what_the_plain_parse_gives(entries: list[bytes], extra: int, cut: int) -> None:
    size = 128 + extra
    raw = b"".join(e + bytes(extra) for e in entries)
    raw = raw[: max(0, len(raw) - cut)]  # a cut-off last entry is left out, as before
    assert parse_gpt_entries(raw, len(entries), size) == _plain(raw, len(entries), size)


def test_a_type_guid_is_made_into_text_once_per_table(monkeypatch) -> None:
    kinds = [bytes(range(16)), bytes(range(1, 17))]
    raw = b"".join(kinds[i % 2] + i.to_bytes(16, "little") + bytes(96) for i in range(128))
    made: list[bytes] = []

    def counted(b: bytes) -> str:
        made.append(bytes(b))
        return guid_text(b)

    monkeypatch.setattr(rawtable, "guid_text", counted)
    entries = parse_gpt_entries(raw, 128, 128)
    assert [e.type_guid for e in entries[:2]] == [guid_text(k) for k in kinds]
    assert sum(b in kinds for b in made) == 2  # 128 before: one per entry
    assert all(e.name == "" for e in entries)
