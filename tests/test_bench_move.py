"""The arithmetic of the data-move bench's disk rows (scripts/bench_move.py): the bound that a disk's own
read and write speeds set on a move that reads every byte back. The timings themselves are `make bench`'s."""

import sys

import pytest

from helpers.tools import REPO

sys.path.insert(0, str(REPO / "scripts"))

from bench_move import bounds, disk_rows  # scripts/ is not a package: found through sys.path


def test_bound_without_overlap_is_dd_over_two_reads_and_a_write():
    # reads twice as slow as writes, no overlap: dd = 2 + 1, the move = 2 + 2 + 1
    assert bounds(2.0, 1.0, 3.0) == pytest.approx((3 / 5, 3 / 5))
    # as fast both ways: 2/3, the most a move that reads back can reach against dd
    assert bounds(1.0, 1.0, 2.0) == pytest.approx((2 / 3, 2 / 3))


def test_overlap_raises_the_bound_and_a_slower_overlap_does_not_lower_it():
    # the copy's read and write fully at once: the move is the read-back plus one read
    assert bounds(1.0, 1.0, 1.0) == pytest.approx((2 / 3, 1.0))
    # doing them together slower than in turn: the move would do them in turn
    assert bounds(2.0, 1.0, 4.0) == pytest.approx((3 / 5, 3 / 5))


def test_disk_rows_use_the_medians_and_set_the_move_against_the_least_time():
    rounds = [{"dd": 3.0, "read": 2.0, "write": 1.0, "both": 3.0, "bare": 5.0},
              {"dd": 3.3, "read": 2.2, "write": 1.1, "both": 3.3, "bare": 5.5},
              {"dd": 9.0, "read": 9.0, "write": 9.0, "both": 9.0, "bare": 9.0}]  # a busy round: the median skips it
    rows = {r.what: r for r in disk_rows(rounds, [11.0, 6.6, 6.0])}
    assert rows["bound: verified move, reads and writes in turn"].ratio == pytest.approx(3.3 / 5.5)
    assert rows["floor: bare copy and read-back of 1 GiB"].ratio == pytest.approx(0.6)
    # the least a verified move takes: the read-back plus the copy's read and write at once, 2.2 + 3.3 s
    assert rows["move: whole move against the bound"].ratio == pytest.approx(5.5 / 6.6)
    assert rows["disk: the read and the write at once"].ratio == pytest.approx(1.0)
