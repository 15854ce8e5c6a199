"""The order of a plan's data steps (model.plan.move.data_steps): shrinks, then moves each into room the steps
before it left, then grows. Checked against a simulation of the disk and, when it finds no order, against
every order of the moves (small cases: brute force)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.model.extent import Extent
from diskplan.model.plan.move import DataStep, SequenceError, data_steps

SPACE = 60  # sectors on the toy disk


def run(layout: dict[int, Extent], steps: list[DataStep]) -> dict[int, Extent]:
    """Apply the steps one at a time; each must start where the partition is and land on room no other holds."""
    place = dict(layout)
    for s in steps:
        assert place[s.number] == s.before
        assert s.kind != "move" or s.length == s.new_length
        assert s.kind == "move" or s.start == s.to
        assert all(not e.overlaps(s.after) for m, e in place.items() if m != s.number), (s, place)
        place[s.number] = s.after
    return place


def moves_possible(layout: dict[int, Extent], wanted: dict[int, Extent]) -> bool:
    """Whether any order of the moves works (shrinks first, grows last, as data_steps has them)."""
    place = {n: Extent(e.start, e.start + min(e.size, wanted[n].size if n in wanted else e.size) - 1)
             for n, e in layout.items()}
    movers = [n for n in wanted if wanted[n].start != place[n].start]
    for order in itertools.permutations(movers):
        now, ok = dict(place), True
        for n in order:
            new = Extent(wanted[n].start, wanted[n].start + now[n].size - 1)
            if any(e.overlaps(new) for m, e in now.items() if m != n):
                ok = False
                break
            now[n] = new
        grown = all(not e.overlaps(wanted[n]) for n in wanted for m, e in now.items() if m != n)
        if ok and grown:
            return True
    return False


@st.composite
def layouts(draw: st.DrawFn) -> tuple[dict[int, Extent], dict[int, Extent]]:
    """Up to four partitions on the toy disk, and where a plan puts some of them (a valid final table)."""
    def extents(k: int) -> list[Extent]:
        cuts = sorted(draw(st.lists(st.integers(0, SPACE - 1), min_size=2 * k, max_size=2 * k, unique=True)))
        return [Extent(cuts[2 * i], cuts[2 * i + 1]) for i in range(k)]

    k = draw(st.integers(1, 4))
    now = dict(enumerate(draw(st.permutations(extents(k))), 1))
    kept = draw(st.lists(st.sampled_from(sorted(now)), unique=True, min_size=1))
    final = dict(zip(kept, draw(st.permutations(extents(len(kept)))), strict=True))
    # The final table: kept ones where the plan puts them, the others (deleted later) left out.
    return now, final


@settings(max_examples=400, deadline=None)
@given(layouts())
def test_the_steps_reach_the_plan_one_at_a_time_or_no_order_can(
        case: tuple[dict[int, Extent], dict[int, Extent]]) -> None:
    layout, final = case
    wanted = {n: e for n, e in final.items() if e != layout[n]}
    try:
        steps = data_steps(layout, wanted)
    except SequenceError:
        assert not moves_possible(layout, wanted)
        return
    place = run(layout, steps)
    assert {n: place[n] for n in wanted} == wanted
    kinds = {n: [s.kind for s in steps if s.number == n] for n in wanted}
    assert all(k == sorted(k, key=["shrink", "move", "grow"].index) for k in kinds.values())
    assert steps == data_steps(layout, wanted)  # the same plan, the same order


def test_a_move_into_the_place_another_leaves_waits_for_it() -> None:
    layout = {1: Extent(10, 19), 2: Extent(20, 29)}
    steps = data_steps(layout, {1: Extent(25, 34), 2: Extent(40, 49)})
    assert [(s.kind, s.number) for s in steps] == [("move", 2), ("move", 1)]
    steps = data_steps(layout, {1: Extent(0, 9), 2: Extent(5 + 5, 19)})  # both left: 1 first
    assert [(s.kind, s.number) for s in steps] == [("move", 1), ("move", 2)]


def test_a_swap_has_no_order() -> None:
    with pytest.raises(SequenceError, match="no order moves partitions 1, 2 one at a time"):
        data_steps({1: Extent(10, 19), 2: Extent(20, 29)}, {1: Extent(20, 29), 2: Extent(10, 19)})


def test_shrink_first_grow_last() -> None:
    layout = {1: Extent(10, 29), 2: Extent(30, 39), 3: Extent(40, 49)}
    steps = data_steps(layout, {1: Extent(0, 9), 2: Extent(10, 39), 3: Extent(50, 54)})
    assert [(s.kind, s.number) for s in steps] == [("shrink", 1), ("shrink", 3), ("move", 1), ("move", 2),
                                                   ("move", 3), ("grow", 2)]
