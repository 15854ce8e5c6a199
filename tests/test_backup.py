"""backend.write.backup: the sfdisk dump in a backup is what sfdisk itself prints; the raw sectors cover both
GPT copies and every EBR; a backup put back gives the image's old bytes exactly; a damaged backup or a
target of another size is refused; kept partitions are never part of a backup."""

from __future__ import annotations

import itertools
import os
import pathlib
import subprocess
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskplan.backend.raw import sectorio
from diskplan.backend.write import backup as bk
from diskplan.model.extent import Extent
from helpers.images import file_sha, fill
from helpers.tools import need_tool, run
from helpers.units import MiB

GPT = """label: gpt
start=2048, size=20480, name="root", attrs="RequiredPartition LegacyBIOSBootable GUID:60,63"
start=22528, size=20480, type=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F, name="swap space"
"""
DOS = """label: dos
start=2048, size=10240, type=83, bootable
start=12288, size=60000, type=5
start=14336, size=4096, type=83
start=20480, size=4096, type=82
start=30000, size=4096, type=7
"""


def sfdisk(target: str | pathlib.Path, script: str) -> None:
    run(need_tool("sfdisk"), "-q", "--no-reread", str(target), input=script)


def take(path: str | pathlib.Path, sector: int = 512, protect: tuple[Extent, ...] = ()) -> bk.TableBackup:
    sectors = os.stat(path).st_size // sector if os.path.isfile(path) else sectorio.device_size(str(path)) // sector
    extents = bk.backup_extents(str(path), sector, sectors, protect=protect)
    return bk.capture(str(path), sector, sectors, extents)


def zero(path: str | pathlib.Path, extents: tuple[Extent, ...], sector: int = 512) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        for e in extents:
            os.pwrite(fd, bytes(e.size * sector), e.start * sector)
        os.fsync(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("script", [GPT, DOS], ids=["gpt", "msdos-logicals"])
def test_dump_is_what_sfdisk_prints(sparse_image: Callable[..., pathlib.Path], script: str) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, script)
    label, dump = bk.sfdisk_dump(str(img), 512, 64 * MiB // 512)
    assert label == ("gpt" if script is GPT else "dos")
    assert dump == run(need_tool("sfdisk"), "--dump", str(img))


def test_gpt_round_trip_is_byte_identical_at_both_ends(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    n = 64 * MiB // 512
    sfdisk(img, GPT)
    fill(img, 34, 2014, 512)  # a boot loader in the gap before partition 1
    old = file_sha(img)
    b = take(img)
    covered = b.extents
    for lba in (0, 1, 2, 33, n - 33, n - 2, n - 1):  # pMBR, both headers, both entry arrays
        assert any(e.contains(lba) for e in covered), lba
    path = bk.save(b, str(tmp_path / "gpt.dpbackup"))
    sfdisk(img, "label: gpt\nstart=4096, size=8192\n")  # another table, both copies
    zero(img, (Extent(0, 40), Extent(n - 40, n - 1)))
    assert file_sha(img) != old
    again = bk.load(path)
    assert again == b
    assert bk.changed_extents(again, str(img))
    bk.put_back(again, str(img))
    assert file_sha(img) == old
    assert bk.changed_extents(again, str(img)) == []


def test_msdos_round_trip_restores_mbr_and_every_ebr(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, DOS)
    old = file_sha(img)
    b = take(img)
    data = img.read_bytes()
    ebrs = [lba for lba in range(12288, 72288) if data[lba * 512 + 510 : lba * 512 + 512] == b"\x55\xaa"]
    assert len(ebrs) == 3  # found by signature, wherever sfdisk put them
    assert all(any(e.contains(lba) for e in b.extents) for lba in ebrs), "every EBR of the chain is saved"
    path = bk.save(b, str(tmp_path / "dos.dpbackup"))
    zero(img, (Extent(0, 0), *(Extent(lba, lba) for lba in ebrs)))
    gone = subprocess.run([need_tool("sfdisk"), "--dump", str(img)], capture_output=True, text=True)
    assert "start=" not in gone.stdout  # sfdisk sees no table any more
    bk.put_back(bk.load(path), str(img))
    assert file_sha(img) == old


def test_4096_byte_sector_loop_round_trip(
    sparse_image: Callable[..., pathlib.Path], loop_device: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    dev = loop_device(img, sector_size=4096)
    sfdisk(dev, "label: gpt\nstart=256, size=2560\nstart=2816, size=2560\n")
    old = file_sha(img)
    b = take(dev, 4096)
    assert b.sector_size == 4096 and any(e.contains(16383) for e in b.extents)
    path = bk.save(b, str(tmp_path / "4k.dpbackup"))
    zero(dev, (Extent(0, 5), Extent(16378, 16383)), 4096)
    bk.put_back(bk.load(path), dev)
    assert file_sha(img) == old


def test_kept_partitions_are_never_in_a_backup(sparse_image: Callable[..., pathlib.Path]) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, "label: gpt\nfirst-lba: 34\nstart=34, size=20000\n")
    kept = Extent(34, 20033)
    b = take(img, protect=(kept,))
    assert not any(e.overlaps(kept) for e in b.extents)
    assert any(e.contains(33) for e in b.extents)  # the entry array right before it is


def test_damaged_or_truncated_backup_is_refused(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT)
    path = pathlib.Path(bk.save(take(img), str(tmp_path / "b.dpbackup")))
    text = path.read_text()
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("[sectors")) + 1
    flipped = lines[i][:10] + ("A" if lines[i][10] != "A" else "B") + lines[i][11:]
    (tmp_path / "flipped").write_text("\n".join([*lines[:i], flipped, *lines[i + 1 :]]) + "\n")
    with pytest.raises(bk.BackupError, match=r"damaged|checksum"):
        bk.load(str(tmp_path / "flipped"))
    (tmp_path / "short").write_text(text[: len(text) // 2])
    with pytest.raises(bk.BackupError, match=r"truncated|damaged"):
        bk.load(str(tmp_path / "short"))
    (tmp_path / "other").write_text("label: gpt\n")
    with pytest.raises(bk.BackupError, match="not a diskplan backup"):
        bk.load(str(tmp_path / "other"))
    with pytest.raises(bk.BackupError, match="already exists"):
        bk.save(take(img), str(path))


def test_an_image_name_with_a_newline_reads_back(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB, "two\nlines\\.img")
    sfdisk(img, GPT)
    b = take(img)
    path = bk.save(b, str(tmp_path / "b.dpbackup"))
    assert bk.load(path) == b and bk.load(path).target == str(img)
    assert "target: " + str(img).replace("\\", "\\\\").replace("\n", "\\n") in pathlib.Path(path).read_text()


def test_restore_refuses_a_disk_of_another_size(
    sparse_image: Callable[..., pathlib.Path], tmp_path: pathlib.Path
) -> None:
    img = sparse_image(64 * MiB)
    sfdisk(img, GPT)
    b = take(img)
    other = sparse_image(32 * MiB, "other.img")
    with pytest.raises(bk.BackupError, match="refusing to write it elsewhere"):
        bk.put_back(b, str(other))
    assert file_sha(other) == file_sha(sparse_image(32 * MiB, "empty.img"))


def test_default_path_is_off_the_disk_and_named_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/var/tmp/state")
    path = bk.default_path("/dev/sdb")
    assert path.startswith("/var/tmp/state/diskplan/backups/sdb-") and path.endswith(".dpbackup")


extents = st.lists(st.builds(lambda a, n: Extent(a, a + n), st.integers(0, 200), st.integers(0, 30)), max_size=8)


@given(extents, extents)
def test_subtract_keeps_exactly_the_sectors_outside_the_holes(have: list[Extent], holes: list[Extent]) -> None:
    got = bk.subtract(have, holes)
    want = {lba for e in have for lba in range(e.start, e.end + 1)} - {
        lba for h in holes for lba in range(h.start, h.end + 1)
    }
    assert {lba for e in got for lba in range(e.start, e.end + 1)} == want
    assert all(a.end + 1 < b.start for a, b in itertools.pairwise(got))  # merged and sorted
