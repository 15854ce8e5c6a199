"""The planner's words: status line, explanations, facts and the go-to parser, checked as text."""

from __future__ import annotations

import pytest

from diskplan.model.extent import Extent, Partition
from diskplan.model.findings.placement import analyze
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.table import new_table, no_table
from diskplan.model.teach import demos
from diskplan.ui.cells import MapContent
from diskplan.ui.explain import blocks_touched, explain, facts, physical_block_extent, status
from diskplan.ui.screens import parse_position

AF = Geometry(sectors=3907029168, physical=4096, rotational=True)  # a 512e HDD
KN = Geometry(sectors=244190646, logical=4096, physical=4096)


def test_the_first_filesystem_block_and_the_physical_blocks_it_touches() -> None:
    ext, first, last = blocks_touched(AF, 34)
    assert (ext, first, last) == (Extent(34, 41), 4, 5)  # 17,408 B .. 21,503 B: blocks 4 and 5
    assert physical_block_extent(AF, 4) == Extent(32, 39) and physical_block_extent(AF, 5) == Extent(40, 47)
    assert blocks_touched(AF, 2048)[1:] == (256, 256)
    assert blocks_touched(KN, 34) == (Extent(34, 34), 34, 34)  # every 4Kn LBA is a whole physical block
    # An alignment offset of 3584 B (a "WinXP jumper" drive) makes LBA 63 the aligned one.
    jumper = Geometry(sectors=10**6, physical=4096, alignment_offset=3584)
    assert blocks_touched(jumper, 63)[1] == blocks_touched(jumper, 63)[2]
    assert physical_block_extent(jumper, blocks_touched(jumper, 63)[1]).start == 63


def _content(geom: Geometry, parts: tuple[Partition, ...]) -> MapContent:
    table = new_table("gpt", geom).with_partitions(parts)
    grain = optimal_grain(geom)
    return MapContent(geom, table, analyze(geom, table, grain), grain)


def test_status_line_fields() -> None:
    c = _content(AF, (Partition(1, 34, 2047, name="boot"),))
    text = status(AF, 34, c.item_at(34))
    for part in ("LBA 34 ", "17,408 B", "0.017 MiB", "phys block 4 +1024 B", "#1 boot (warning)"):
        assert part in text
    assert "GPT entries" in status(AF, 5, c.item_at(5))
    assert "phys block 256 " in status(AF, 2048, c.item_at(2048)) and "free space" in status(AF, 2048, c.item_at(2048))
    assert "past the end" in status(AF, AF.sectors, None)


def test_explanations_say_what_it_costs() -> None:
    c = _content(AF, (Partition(1, 34, 2047), Partition(2, 2048, 10_000_000 - 1)))
    grain = c.grain
    bad = " ".join(line.text for line in explain(c.item_at(100), AF, grain))
    assert "touches 2 physical blocks" in bad and "4 (LBA 32-39) and 5 (LBA 40-47)" in bad
    assert "start-not-physical" in bad and "bonnie++" in bad
    good = " ".join(line.text for line in explain(c.item_at(5000), AF, grain))
    assert "inside physical block 256" in good and "No findings" in good
    meta = " ".join(line.text for line in explain(c.item_at(10), AF, grain))
    assert "parted's first usable sector is 34" in meta
    free = " ".join(line.text for line in explain(c.item_at(10_000_001), AF, grain))
    assert "Free space" in free and "LBA 10,000,384" in free  # the next 1 MiB boundary
    blank_geom = Geometry(sectors=2048 * 100)
    blank = MapContent(blank_geom, no_table(blank_geom), [], optimal_grain(blank_geom))
    text = " ".join(line.text for line in explain(blank.item_at(0), blank_geom, blank.grain, blank.table))
    assert "No partition table" in text and "LBA 2,048" in text
    fs = " ".join(line.text for line in explain(blank.item_at(0), blank_geom, blank.grain, blank.table, "ext4"))
    assert "ext4" in fs and "destroy" in fs


def test_facts_of_a_striped_volume() -> None:
    disk = demos.find("stripe").planned_disk()
    rows = dict(facts(disk, optimal_grain(disk.geometry)))
    assert rows["Optimal I/O"] == "196,608 B" and rows["Minimum I/O"] == "65536 B"
    assert rows["diskplan grain"] == "6,144s = 3 MiB"
    assert rows["fdisk would use"] == "2,048s = 1 MiB"  # libfdisk: max(192 KiB, 1 MiB)
    assert rows["parted optimal"] == "384s = 192 KiB"  # libparted: 1 MiB is not a multiple of 192 KiB
    assert rows["Rotational"].startswith("yes")


def test_go_to_parses_what_people_type() -> None:
    table = new_table("gpt", AF).with_partitions((Partition(1, 34, 2047), Partition(2, 2048, 4095)))
    cases = {"2048": 2048, "2,048s": 2048, "1MiB": 2048, "1 MiB": 2048, "17408B": 34, "17.4kB": 34, "#2": 2048,
             "p1": 34, "end": AF.last_lba, "0%": 0, "100%": AF.last_lba, "50%": AF.sectors // 2}
    for text, lba in cases.items():
        assert parse_position(text, AF, table) == lba, text
    for text, message in (("", "type an LBA"), ("#9", "no partition 9"), ("101%", "more than 100%"),
                          ("100M", "ambiguous"), ("99999999999", "disk ends"), ("lots", "not a size")):
        with pytest.raises(ValueError, match=message):
            parse_position(text, AF, table)


def test_a_flash_page_is_named_as_an_assumption_in_plain_words() -> None:
    """An SSD that reports 512/512: its 4 KiB pages are assumed, and the sentence still reads as English."""
    ssd = Geometry(sectors=10_000_000, rotational=False)
    c = _content(ssd, (Partition(1, 34, 2047), Partition(2, 2048, 10_000_000 - 1)))
    bad = " ".join(line.text for line in explain(c.item_at(100), ssd, c.grain))
    assert "touches 2 flash pages of 4096 B (assumed), 4 (LBA 32-39) and 5 (LBA 40-47)" in bad
    good = " ".join(line.text for line in explain(c.item_at(5000), ssd, c.grain))
    assert "inside flash page 256 (LBA 2,048-2,055) (assumed). One write" in good
