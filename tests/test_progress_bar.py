"""One ASCII progress bar for the write, move and measure screens (any console font draws it)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from diskplan.ui.commit_screen import progress_bar
from diskplan.ui.glyphs import bar


@given(st.integers(-5, 10**12), st.integers(0, 10**12), st.integers(1, 80))
def test_a_bar_is_as_wide_as_asked_and_fills_in_proportion(done: int, total: int, width: int) -> None:
    drawn = bar(done, total, width)
    assert len(drawn) == width + 2 and drawn.strip("[#.]") == ""
    filled = drawn.count("#")
    assert filled == (width * min(max(done, 0), total) // total if total else 0)
    assert bar(min(max(done, 0), total), total, width) == drawn  # what is off the ends draws as the ends


def test_the_write_screen_counts_its_steps_beside_the_bar() -> None:
    assert progress_bar(1, 4, 8) == "[##......] 1/4"
    assert progress_bar(4, 4, 8) == "[########] 4/4"
