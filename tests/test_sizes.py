"""Size input: every unit family gives the bytes its definition says, says which family it used, and
refuses what other tools read differently."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskplan.model.extent import Extent
from diskplan.model.geometry import Geometry
from diskplan.model.sizes import (
    SizeError,
    UnitFamily,
    format_size,
    parse_lba,
    parse_option,
    parse_position,
    parse_size,
)
from diskplan.model.units import human_duration

GEOMS = [Geometry(1 << 30, 512), Geometry(1 << 28, 4096, 4096)]
IEC = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
SI = {"kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


@pytest.mark.parametrize(
    ("text", "sectors", "family"),
    [
        ("2048s", 2048, UnitFamily.SECTORS),
        ("512KiB", 1024, UnitFamily.IEC),
        ("100MiB", 204800, UnitFamily.IEC),
        ("1.5GiB", 3 * 1024 * 1024, UnitFamily.IEC),
        ("1TiB", 2**31, UnitFamily.IEC),
        ("100MB", 195313, UnitFamily.SI),  # 195312.5 sectors, rounded up
        ("4kB", 8, UnitFamily.SI),  # 7.8125 sectors, rounded up
        ("4096B", 8, UnitFamily.BYTES),
        ("+100MiB", 204800, UnitFamily.IEC),
        (" 12 mib ", 24576, UnitFamily.IEC),
    ],
)
def test_examples_on_512_byte_sectors(text: str, sectors: int, family: UnitFamily) -> None:
    got = parse_size(text, GEOMS[0])
    assert (got.sectors, got.family) == (sectors, family)
    assert got.nbytes == sectors * 512
    assert got.relative == text.strip().startswith("+")


def test_the_explanation_names_the_family_and_the_other_one() -> None:
    mb = parse_size("100MB", GEOMS[0])
    assert "SI, decimal" in mb.explanation and "100,000,000 B" in mb.explanation
    assert "100 MiB would be 104,857,600 B" in mb.explanation
    assert not mb.exact and "rounded up" in mb.explanation
    mib = parse_size("100MiB", GEOMS[0])
    assert "IEC, binary" in mib.explanation and mib.exact


def test_percent_is_of_the_free_region_and_rounds_down() -> None:
    region = Extent(34, 2097118)  # 2,097,085 sectors
    got = parse_size("50%", GEOMS[0], region=region)
    assert got.family is UnitFamily.PERCENT
    assert got.sectors == 2097085 // 2
    assert parse_size("100%", GEOMS[0], region=region).sectors == region.size


def test_positions() -> None:
    region = Extent(2048, 4095)
    assert parse_lba("2048s", GEOMS[0]).sectors == 2048
    assert parse_lba("1MiB", GEOMS[0]).sectors == 2048
    assert parse_lba("1MiB", GEOMS[1]).sectors == 256
    assert parse_lba("+1KiB", GEOMS[0], region=region).sectors == 2050
    assert parse_lba("50%", GEOMS[0], region=region).sectors == 2048 + 1024
    assert parse_lba("0s", GEOMS[0]).sectors == 0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("100M", ["ambiguous", "100MiB", "100MB"]),
        ("1G", ["ambiguous", "1GiB", "1GB"]),
        ("4k", ["ambiguous", "4KiB", "4kB"]),
        ("2048", ["no unit", "2048s", "2048B"]),
        ("1.5s", ["whole"]),
        ("-1MiB", ["negative"]),
        ("0MiB", ["more than zero"]),
        ("150%", ["more than 100%"]),
        ("3 furlongs", ["unknown unit"]),
        ("1.2.3MiB", ["not a size"]),
        ("", ["not a size"]),
        ("0.1B", ["whole number of bytes"]),
        ("9" * 80 + "MiB", ["too long"]),
    ],
)
def test_refusals_say_why(text: str, words: list[str]) -> None:
    with pytest.raises(SizeError) as err:
        parse_size(text, GEOMS[0], region=Extent(0, 99))
    for w in words:
        assert w in str(err.value)


def test_percent_without_a_region_is_refused() -> None:
    with pytest.raises(SizeError, match="free region"):
        parse_size("50%", GEOMS[0])


@given(st.sampled_from(GEOMS), st.integers(1, 1 << 40), st.sampled_from(["s", *IEC, *SI, "B"]))
def test_format_then_parse_gives_the_same_sectors(geom: Geometry, sectors: int, unit: str) -> None:
    text = format_size(sectors, geom, unit)
    assert parse_size(text, geom).sectors == sectors


@given(st.sampled_from(GEOMS), st.integers(1, 10**6), st.sampled_from(list(IEC)))
def test_iec_and_si_twins_differ_by_their_definitions(geom: Geometry, n: int, unit: str) -> None:
    si_unit = {"KiB": "kB", "MiB": "MB", "GiB": "GB", "TiB": "TB"}[unit]
    iec = parse_size(f"{n}{unit}", geom)
    si = parse_size(f"{n}{si_unit}", geom)
    assert iec.family is UnitFamily.IEC and si.family is UnitFamily.SI
    assert iec.sectors == -(-n * IEC[unit] // geom.logical)
    assert si.sectors == -(-n * SI[si_unit] // geom.logical)
    assert iec.sectors > si.sectors or (unit == "KiB" and iec.sectors >= si.sectors)


@given(st.sampled_from(GEOMS), st.integers(1, 10**9), st.sampled_from(["", " ", "+"]))
def test_sectors_are_exact_and_case_and_spaces_do_not_matter(geom: Geometry, n: int, prefix: str) -> None:
    got = parse_size(f"{prefix}{n} S", geom)
    assert got.sectors == n and got.exact and got.family is UnitFamily.SECTORS


@given(st.sampled_from(GEOMS), st.integers(1, 10**12))
def test_bytes_round_up_to_whole_sectors_never_down(geom: Geometry, n: int) -> None:
    got = parse_size(f"{n}B", geom)
    assert got.sectors * geom.logical >= n > (got.sectors - 1) * geom.logical
    assert got.exact == (n % geom.logical == 0)


@given(st.integers(1, 10**7), st.integers(0, 100))
def test_percent_never_exceeds_the_region(size: int, pct: int) -> None:
    region = Extent(2048, 2048 + size - 1)
    try:
        got = parse_size(f"{pct}%", GEOMS[0], region=region)
    except SizeError:
        assert size * pct < 100  # less than one sector
        return
    assert got.sectors == size * pct // 100 <= region.size


@given(st.text(max_size=12))
def test_anything_typed_parses_or_raises_size_error(text: str) -> None:
    try:
        got = parse_size(text, GEOMS[0], region=Extent(0, 999))
    except SizeError as exc:
        assert str(exc)
    else:
        assert got.sectors > 0 and got.family in UnitFamily


# --- one parser: the dialog, go-to and the command line agree ------------------------------------------------

def _dialog(text: str, geom: Geometry) -> int | None:
    try:
        return parse_size(text, geom).nbytes
    except SizeError:
        return None


def _goto(text: str, geom: Geometry) -> int | None:
    try:
        return parse_position(text, geom).sectors
    except SizeError:
        return None


def _cli(text: str, geom: Geometry) -> int | None:
    try:
        return parse_option(text).nbytes(geom.logical)
    except SizeError:
        return None


def test_the_issue_examples() -> None:
    af = GEOMS[0]
    for refused in ("100M", "1G", "4k"):
        assert _dialog(refused, af) is _goto(refused, af) is _cli(refused, af) is None
    assert _cli("3s", af) == 1536 and _cli("3s", GEOMS[1]) == 3 * 4096  # the disk's own sectors
    assert _cli("4096", af) == 4096  # a bare number on the command line is bytes, as the README shows
    got = parse_position("17.4kB", af)  # the README's example: 34 × 512 B = 17,408 B, shown as 17.4 kB
    assert got.sectors == 34 and not got.exact and "rounded to the nearest sector from 33.98" in got.explanation
    assert parse_position("2048", af).sectors == 2048  # go-to: a bare number is an LBA, as its help says
    size = parse_size("100MB", af)
    assert size.sectors == 195313 and "rounded up" in size.explanation  # a size never gets less than asked


NUMBERS = st.one_of(st.integers(0, 10**7).map(str), st.decimals(0, 10**5, places=3).map(str),
                    st.integers(1000, 10**9).map(lambda n: f"{n:,}"))
UNITS = st.sampled_from(["s", "S", "B", "KiB", "MiB", "GiB", "kB", "MB", "GB", "kib", "M", "G", "k", "m", "%", "x"])


@given(st.sampled_from(GEOMS), NUMBERS, UNITS, st.sampled_from(["", " "]))
def test_dialog_goto_and_command_line_read_a_unit_the_same_way(geom: Geometry, number: str, unit: str,
                                                                 space: str) -> None:
    text = f"{number}{space}{unit}"
    dialog, goto, cli = _dialog(text, geom), _goto(text, geom), _cli(text, geom)
    if unit == "%":  # of a region: the dialog's free space, go-to's disk; never a device property
        assert cli is None
        return
    if cli is None:  # refused on the command line (ambiguous, unknown, a fraction of a byte): everywhere
        assert dialog is None and goto is None
        return
    exact = cli
    lba = (2 * exact + geom.logical) // (2 * geom.logical)  # the nearest sector boundary, ties up
    assert goto == (lba if lba <= geom.last_lba else None)
    if exact > 0:
        assert dialog == -(-exact // geom.logical) * geom.logical  # whole sectors, never less than asked
    else:
        assert dialog is None


@pytest.mark.parametrize(("seconds", "text"), [(0, "0 s"), (0.2, "1 s"), (42.4, "42 s"), (187, "3 min 7 s"),
                                               (3600, "1 h 0 min"), (3900, "1 h 5 min")])
def test_a_duration_has_one_look_everywhere(seconds: float, text: str) -> None:
    """The planner's estimate, the move screen's time left and the command line's estimates share it."""
    assert human_duration(seconds) == text


@given(st.floats(min_value=0.001, max_value=1e6))
def test_a_duration_above_nothing_never_reads_as_done_and_reads_back(seconds: float) -> None:
    words = human_duration(seconds).split()
    value = dict(zip(words[1::2], map(int, words[::2]), strict=True))
    back = value.get("h", 0) * 3600 + value.get("min", 0) * 60 + value.get("s", 0)
    assert back >= 1 and abs(back - seconds) <= (60 if "h" in value else 1)
