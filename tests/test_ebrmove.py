"""Properties of model.plan.ebrmove (where a moved logical partition's EBR goes) and model.plan.move.old_place_touched
(when a rollback needs no data copy): whatever the chain and the request, a plan never puts data on an EBR,
never takes a sector twice, keeps the chain's order; a rollback writes only the table only when no chunk that
may have been written landed on the old place (otherwise backend.move.reverse copies back first)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from diskplan.model.extent import Extent
from diskplan.model.plan.ebrmove import LogicalMove, plan_logical
from diskplan.model.plan.move import old_place_touched, schedule


@st.composite
def chains(draw: st.DrawFn) -> tuple[list[int], list[Extent], Extent, int]:
    ext_start = draw(st.integers(1, 5000))
    at, ebrs, parts = ext_start, [], []
    for _ in range(draw(st.integers(1, 4))):
        gap = draw(st.integers(1, 3000))
        size = draw(st.integers(1, 20_000))
        ebrs.append(at)
        parts.append(Extent(at + gap, at + gap + size - 1))
        at = parts[-1].end + 1 + draw(st.integers(0, 5000))
    ext = Extent(ext_start, at + draw(st.integers(0, 5000)))
    return ebrs, parts, ext, ext.end + draw(st.integers(0, 20_000))


@given(chains(), st.data())
def test_a_plan_keeps_every_ebr_and_the_chain_order(chain, data) -> None:
    ebrs, parts, ext, limit = chain
    k = data.draw(st.integers(0, len(parts) - 1))
    to = data.draw(st.integers(ext.start, limit))
    length = data.draw(st.integers(1, 30_000))
    m = plan_logical(k, ebrs, parts, ext, limit, to, length)
    if not isinstance(m, LogicalMove):
        return
    new = Extent(to, to + length - 1)
    others = [p for i, p in enumerate(parts) if i != k]
    other_ebrs = [b for i, b in enumerate(ebrs) if i != k]
    assert not any(new.overlaps(p) for p in others) and not any(new.contains(b) for b in other_ebrs)
    assert m.new_ebr < to and (m.new_ebr == m.ebr or not new.contains(m.new_ebr))
    assert (k == 0 and m.new_ebr == ext.start) or (k > 0 and parts[k - 1].end < m.new_ebr)
    assert k + 1 == len(parts) or new.end < ebrs[k + 1]  # still before the next EBR: numbers unchanged
    assert new.end <= m.ext_end <= max(ext.end, limit) and m.ext_end >= ext.end
    if m.park:
        taken = [*parts, new, *(Extent(b, b) for b in [*ebrs, m.new_ebr])]
        assert m.ebr < m.park <= m.ext_end and not any(e.contains(m.park) for e in taken)


@given(st.integers(0, 100_000), st.integers(0, 100_000), st.integers(1, 60_000), st.data())
def test_a_rollback_skips_the_copy_back_only_while_the_old_place_is_untouched(start, to, length, data) -> None:
    plan = schedule(start, to, length, 512)
    done = data.draw(st.integers(0, plan.count))
    batch = data.draw(st.integers(1, 40))
    hit = old_place_touched(plan, done, batch)
    old = Extent(start, start + length - 1)
    maybe = [plan.step(k) for k in range(min(plan.count, done + batch))]
    if hit is None:
        assert not any(s.dest.overlaps(old) for s in maybe)
    else:
        assert hit in maybe and hit.dest.overlaps(old)
    if abs(to - start) >= length:
        assert hit is None  # a move into space further than its size never touches its old place
