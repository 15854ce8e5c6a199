"""The planner writes a plan's data moves and resizes in the order ``diskplan apply`` uses for the same plan:
for random edits of existing partitions (moves and resizes with their data, as the keys and the mouse make
them), the planner's steps (``Changes.steps``, what the move dialog runs) equal model.plan.move.data_steps on
the plan as saved and loaded again (Ctrl+S, then what backend.move.planmoves orders), and each lands where no
other partition is at that moment."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.model.formats.planfile import load_plan, save_plan, table_from_spec
from diskplan.model.plan.fsresize import Limits
from diskplan.model.plan.move import data_steps, kept_moves
from diskplan.model.plan.plan import Edge, Plan
from helpers.plans import GIB, existing, plan_on

MiB = 2048  # sectors
EXT4 = Limits("ext4", True, True, MiB * 512)  # shrinks to 1 MiB, grows


@st.composite
def edited(draw: st.DrawFn) -> Plan:
    """Up to four partitions holding data (numbered in any order), then up to eight moves and resizes."""
    k = draw(st.integers(1, 4))
    cuts = sorted(draw(st.lists(st.integers(1, 200), min_size=2 * k, max_size=2 * k, unique=True)))
    numbers = draw(st.permutations(range(1, k + 1)))
    plan = plan_on(GIB, *(existing(n, cuts[2 * i] * MiB, cuts[2 * i + 1] * MiB - 1) for i, n in enumerate(numbers)))
    for _ in range(draw(st.integers(1, 8))):
        n, at = draw(st.integers(1, k)), draw(st.integers(0, 210)) * MiB
        out = (plan.move_to(n, at, data=True) if draw(st.booleans())
               else plan.resize_to(n, draw(st.sampled_from([Edge.START, Edge.END])), at, data=True, limits=EXT4))
        plan = out.plan if out.ok else plan
    return plan


@settings(max_examples=300, deadline=None)
@given(edited())
def test_the_planner_writes_in_the_order_apply_uses(plan: Plan) -> None:
    ops = plan.writes()
    assert not ops.problems  # the planner's moves never jump over a neighbour: an order always exists
    guids = {p.number: str(uuid.UUID(int=p.number)).upper() for p in plan.base.live}
    spec = load_plan(save_plan(plan, guids=guids))
    desired = table_from_spec(spec, plan.geometry, plan.base)
    wanted = kept_moves(plan.base, desired, (k.number for k in spec.keeps))
    assert ops.steps == tuple(data_steps({p.number: p.extent for p in plan.base.live}, wanted))
    assert {s.number for s in ops.steps} == {new.number for _, new in ops.move}
    # The change list shows them in the order of each one's first step, and each operation's own steps
    # are its part of the plan's steps.
    moving = [op for op in plan.changes() if op.moves_data]
    assert [op.number for op in moving] == list(dict.fromkeys(s.number for s in ops.steps))
    assert all(op.steps() == tuple(s for s in ops.steps if s.number == op.number) for op in moving)
    place = {p.number: p.extent for p in plan.base.live}
    for s in ops.steps:  # one at a time, each where no other partition is at that moment
        assert place[s.number] == s.before
        assert not any(e.overlaps(s.after) for n, e in place.items() if n != s.number), (s, place)
        place[s.number] = s.after
    assert place == {p.number: p.extent for p in plan.table.live}
