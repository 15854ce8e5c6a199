"""What `diskplan apply` and `restore` print: whole aligned lines, colour only on a terminal, and text
from a disk or a plan unable to drive the terminal; and the commands start without rich."""

from __future__ import annotations

import io
import subprocess
import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from diskplan.cli.textout import Out
from diskplan.model.safetext import columns, width
from diskplan.model.safetext import safe as clean


def test_control_characters_from_a_plan_cannot_reach_the_terminal() -> None:
    name = "evil\x1b]0;pwned\x07\x1b[2J\r\x9b31m"
    shown = clean(name)
    assert shown.isprintable()
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown and "\x9b" not in shown
    assert shown.startswith("evil\\x1b]0;pwned\\x07")
    buf = io.StringIO()
    Out(buf, colour=True).print(("name: ", "bold"), name)
    line = buf.getvalue()
    assert line.count("\x1b") == 2  # our own bold on and off, nothing of the name's
    assert line.endswith("\n") and line.count("\n") == 1


@given(st.text(max_size=40))
def test_cleaned_text_holds_nothing_a_terminal_acts_on(text: str) -> None:
    shown = clean(text)
    assert not any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in shown)
    if text.isprintable():
        assert shown == text  # names in any script stay as they are


def test_no_colour_off_a_terminal() -> None:
    buf = io.StringIO()
    Out(buf).print("written", style="green")
    assert buf.getvalue() == "written\n"  # StringIO is not a terminal


def test_columns_line_up_with_wide_characters_and_numbers_to_the_right() -> None:
    rows = [("1", "2048", "名前", "kept"), ("12", "1050624", "root", "new")]
    head, *body = columns(("#", "start", "name", ""), rows, right=2)
    assert head.split() == ["#", "start", "name"]
    assert body[0].startswith(" 1     2048") and body[1].startswith("12  1050624")  # numbers to the right
    # the last column starts at the same terminal cell on both lines, though 名前 is 2 characters in 4 cells
    assert width(body[0][: body[0].index("kept")]) == width(body[1][: body[1].index("new")])
    assert width("名前") == 4 and width("e\u0301") == 1


def test_apply_and_restore_start_without_rich() -> None:
    code = "import sys, diskplan.cli.apply, diskplan.cli.restore; print('rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
