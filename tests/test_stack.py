"""The storage stack inside a partition, read from headers the real tools wrote, checked against what those
tools report: pvcreate/pvs (LVM2, on loop devices; lvcreate with --driverloaded n since this kernel has no
device-mapper), cryptsetup luksFormat/luksDump (LUKS1/2 on image files), mkfs.ext4/dumpe2fs, mkfs.xfs/xfs_db.
md 1.x superblocks are written here from the format (md_p.h) because there is no md driver, and
``mdadm --examine`` (which reads a file without one) referees them, checksum included."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import need_tool, run
from diskplan.model import stack as S
from diskplan.model.findings import codes as C
from diskplan.model.findings import stackfindings as SF
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from helpers.stacks import LVM_QUIET, lvm, md_image, md_super, pv_head

MiB = 1 << 20


def _read_file(path: Path, base: int = 0) -> S.Reader:
    data = path.read_bytes()
    return lambda off, n: data[base + off:base + off + n]


@pytest.fixture
def vg_cleanup() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for vg in names:
        subprocess.run(["vgremove", "-f", "--driverloaded", "n", vg], capture_output=True,
                       env={"LVM_SUPPRESS_FD_WARNINGS": "1", "PATH": "/usr/sbin:/sbin:/usr/bin:/bin"})


def _check(target: str, *extra: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "diskplan", "check", target, "--json", *extra],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


# --- LVM2 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("alignment", "offset"), [("192k", None), ("1m", "4k"), ("8k", None)])
def test_pv_label_pe_start_as_pvs_reports(sparse_image, loop_device, alignment, offset) -> None:
    dev = loop_device(sparse_image(64 * MiB))
    lvm("pvcreate", "-y", "--dataalignment", alignment, *(["--dataalignmentoffset", offset] if offset else []), dev)
    try:
        want = int(lvm("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", dev).strip())
        with open(dev, "rb") as f:
            label = S.parse_pv_label(f.read(4096))
        assert label is not None and label.pe_start == want and label.sector == 1
    finally:
        lvm("pvremove", "-y", dev)


def test_vg_extent_size_and_stripes_from_the_metadata_text(sparse_image, loop_device, vg_cleanup) -> None:
    a, b = loop_device(sparse_image(300 * MiB, "a.img")), loop_device(sparse_image(300 * MiB, "b.img"))
    lvm("pvcreate", "-y", a, b)
    vg_cleanup.append("teachvg")
    lvm("vgcreate", "-s", "128M", "teachvg", a, b)  # as in the LVM-striping experiment
    lvm("lvcreate", "--driverloaded", "n", "-an", "-Zn", "-i", "2", "-I", "8", "-l", "100%VG", "-n", "lv01", "teachvg")
    ext = int(lvm("vgs", "--noheadings", "--units", "b", "--nosuffix", "-o", "vg_extent_size", "teachvg").strip())
    out = lvm("lvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "stripes,stripe_size", "teachvg/lv01").split()
    with open(a, "rb") as f:
        layers = S.walk(lambda off, n: (f.seek(off), f.read(n))[1], 300 * MiB)
    (pv,) = layers
    facts = dict(pv.facts)
    assert ext == 128 * MiB and facts["extent size"] == f"{ext} B" and facts["volume group"] == "teachvg"
    assert [int(x) for x in out] == [2, 8192] and pv.stripe == 8192 and facts["LV lv01"] == "2 stripes of 8192 B"


def test_check_json_layers_of_a_pv_in_a_partition(sparse_image, loop_device) -> None:
    img = sparse_image(64 * MiB)
    run("parted", "-s", str(img), "mklabel", "gpt", "mkpart", "p", "1MiB", "100%")
    head, pe = pv_head(loop_device, sparse_image, 62 * MiB, "--dataalignment", "1m", "--dataalignmentoffset", "4k")
    with open(img, "r+b") as f:
        f.seek(MiB)
        f.write(head)
    report = _check(str(img), "--ssd")
    p1 = report["partitions"][0]
    (layer,) = p1["layers"]
    assert layer["kind"] == "lvm2-pv" and layer["begins"] == MiB and layer["data_start"] == MiB + pe
    assert pe == MiB + 4096  # --dataalignmentoffset 4k: on 4 KiB pages, 4 KiB past the 1 MiB grain
    codes = {f["code"]: f["severity"] for f in p1["findings"]}
    assert codes == {C.LAYER_NOT_GRAIN: "notice"}, codes


# --- LUKS ---------------------------------------------------------------------------------------------


def _luks(path: Path, *args: str) -> str:
    need_tool("cryptsetup")
    key = path.with_suffix(".key")
    key.write_bytes(b"teach")
    run("cryptsetup", "luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
        "--key-file", str(key), *args, str(path))
    return run("cryptsetup", "luksDump", str(path))


def test_luks1_payload_offset_as_luksdump_says(sparse_image) -> None:
    img = sparse_image(32 * MiB)
    dump = _luks(img, "--type", "luks1", "--align-payload", "4104")
    want = int(re.search(r"Payload offset:\s+(\d+)", dump).group(1)) * 512  # type: ignore[union-attr]
    (layer,) = S.walk(_read_file(img), 32 * MiB)
    assert layer.kind == "luks1" and layer.data_offset == want == 4104 * 512


def test_luks2_payload_offset_as_luksdump_says(sparse_image) -> None:
    img = sparse_image(32 * MiB)
    dump = _luks(img, "--type", "luks2", "--offset", "10248")
    want = int(re.search(r"offset:\s+(\d+) \[bytes\]", dump).group(1))  # type: ignore[union-attr]
    (layer,) = S.walk(_read_file(img), 32 * MiB)
    assert layer.kind == "luks2" and layer.data_offset == want == 10248 * 512
    # 16 MiB + 1 MiB partition start + 5 MiB + 4 KiB: on the page, off the grain; a 1 KiB shift is not.
    geom = Geometry(sectors=1 << 20, rotational=False)
    found = SF.stack_findings(geom, 2048, (layer,), optimal_grain(geom), 1)
    assert [f.code for f in found] == [C.LAYER_NOT_GRAIN]
    text = " ".join(found[0].explanation)
    assert f"{MiB + want:,} mod 1,048,576 = 4,096" in text and "--offset" in text
    odd = SF.stack_findings(geom, 2050, (layer,), optimal_grain(geom), 1)
    assert odd[0].code == C.LAYER_NOT_PAGE and odd[0].severity == "warning"


# --- filesystems ----------------------------------------------------------------------------------------


def test_ext4_stride_and_stripe_width_as_dumpe2fs_says(sparse_image) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("mkfs.ext4"), "-q", "-F", "-b", "4096", "-E", "stride=16,stripe_width=48", str(img))
    dump = run(need_tool("dumpe2fs"), "-h", str(img))
    stride = int(re.search(r"RAID stride:\s+(\d+)", dump).group(1))  # type: ignore[union-attr]
    width = int(re.search(r"RAID stripe width:\s+(\d+)", dump).group(1))  # type: ignore[union-attr]
    (layer,) = S.walk(_read_file(img), 64 * MiB)
    assert (stride, width) == (16, 48) and (layer.stripe, layer.full_stripe) == (16 * 4096, 48 * 4096)


def test_xfs_sunit_swidth_as_xfs_db_says(sparse_image) -> None:
    img = sparse_image(1 << 30)  # sparse; a striped log needs 64 MiB, which smaller images do not get
    run(need_tool("mkfs.xfs"), "-q", "-f", "-d", "su=64k,sw=3", str(img))
    out = run(need_tool("xfs_db"), "-r", "-c", "sb 0", "-c", "p blocksize unit width", str(img))
    vals = dict(re.findall(r"(\w+) = (\d+)", out))
    (layer,) = S.walk(_read_file(img), 1 << 30)
    bs = int(vals["blocksize"])
    assert layer.stripe == int(vals["unit"]) * bs == 64 * 1024
    assert layer.full_stripe == int(vals["width"]) * bs == 3 * 64 * 1024


# --- md 1.x, from the format, refereed by mdadm --examine ------------------------------------------------


def test_md_1_2_superblock_as_mdadm_examines_it(tmp_path: Path) -> None:
    img = tmp_path / "md.img"
    md_image(img, 64 * MiB, md_super(5, 4, 128, 2048, 64 * MiB // 512 - 2048), 4096)
    out = run(need_tool("mdadm"), "--examine", str(img))
    assert re.search(r"Checksum : \w+ - correct", out) and "Version : 1.2" in out
    assert "Data Offset : 2048 sectors" in out and "Chunk Size : 64K" in out and "Raid Level : raid5" in out
    (layer,) = S.walk(_read_file(img), 64 * MiB)
    assert layer.kind == "md" and layer.data_offset == 2048 * 512
    assert (layer.stripe, layer.full_stripe) == (64 * 1024, 3 * 64 * 1024)  # 4 disks, one of parity


def test_md_1_0_superblock_near_the_end(tmp_path: Path) -> None:
    img, size = tmp_path / "md10.img", 64 * MiB
    at = S.md_super_offsets(size)[0]
    md_image(img, size, md_super(1, 2, 0, 0, at // 512, super_offset=at // 512), at)
    out = run(need_tool("mdadm"), "--examine", str(img))
    assert "Version : 1.0" in out and re.search(r"Checksum : \w+ - correct", out)
    assert f"Super Offset : {at // 512} sectors" in out
    (layer,) = S.walk(_read_file(img), size)
    assert layer.kind == "md" and layer.data_offset == 0 and layer.stripe == 0


def test_a_bad_md_checksum_is_left_out(tmp_path: Path) -> None:
    sb = bytearray(md_super(5, 4, 128, 2048, 1000))
    sb[88] ^= 1  # the chunk size, after the checksum was taken
    img = tmp_path / "bad.img"
    md_image(img, 64 * MiB, bytes(sb), 4096)
    assert re.search(r"Checksum : \w+ - expected", run(need_tool("mdadm"), "--examine", str(img)))
    with pytest.raises(S.StackError, match="checksum"):  # backend.read.stack leaves such a partition's stack out
        S.walk(_read_file(img), 64 * MiB)


def test_lvm_inside_md_raid5_off_the_full_stripe(tmp_path: Path, sparse_image, loop_device) -> None:
    """md raid5 of 4 x 64 KiB chunks (a 192 KiB stripe), data at 1 MiB; inside it a PV whose pe_start is 1 MiB:
    1 MiB mod 192 KiB = 64 KiB, so LVM's extents do not start on the array's stripe."""
    head, pe = pv_head(loop_device, sparse_image, 32 * MiB, "--dataalignment", "1m")
    assert pe == MiB
    img = tmp_path / "member.img"
    md_image(img, 64 * MiB, md_super(5, 4, 128, 2048, 64 * MiB // 512 - 2048), 4096)
    with open(img, "r+b") as f:
        f.seek(MiB)
        f.write(head)
    layers = S.walk(_read_file(img), 64 * MiB)
    assert [la.kind for la in layers] == ["md", "lvm2-pv"]
    geom = Geometry(sectors=1 << 20, rotational=False)
    found = SF.stack_findings(geom, 2048, layers, optimal_grain(geom), 1)
    stripe = [f for f in found if f.code == C.LAYER_NOT_STRIPE]
    assert len(stripe) == 1 and "1,048,576 B from the array's data start mod 196,608 = 65,536" in " ".join(
        stripe[0].explanation)
    assert "pvcreate --dataalignment" in stripe[0].explanation[-1]


def test_the_explain_panel_walks_down_the_stack() -> None:
    """md raid5 (data at +1 MiB) holding a PV (pe_start 1 MiB), in a partition at 1 MiB on an SSD."""
    from diskplan.model.extent import Partition
    from diskplan.model.table import new_table
    from diskplan.ui.cells import MapContent
    from diskplan.ui.explain import explain

    sup = S.parse_md_super(md_super(5, 4, 128, 2048, 100_000), 2)
    assert sup is not None
    md = S.md_layer(sup)
    pv = S.Layer("lvm2-pv", MiB, 8192, 0, (("pe_start", f"{MiB} B"),), "pvcreate --dataalignment 192k")
    geom = Geometry(sectors=1 << 21, rotational=False)
    table = new_table("gpt", geom).with_partitions((Partition(1, 2048, (1 << 21) - 2048),))
    grain = optimal_grain(geom)
    found = SF.stack_findings(geom, 2048, (md, pv), grain, 1)
    content = MapContent(geom, table, found, grain)
    item = content.item_at(4096)
    text = [line.text for line in explain(item, geom, grain, table, stack=(md, pv))]
    joined = "\n".join(text)
    assert "Inside it, layer by layer" in joined
    assert "md RAID member at byte 1,048,576: the array's data (data offset) at +1,048,576 B = byte 2,097,152" in joined
    # A striped array: the PV lies in the array's bytes; array byte 1 MiB is in stripe row 5, not member byte 3 MiB.
    assert ("LVM2 physical volume at array byte 0 (counted in the array's bytes, not the member's): extent 0 "
            "(pe_start) at +1,048,576 B = array byte 1,048,576 = stripe row 5 (1,048,576 // 196,608 B full stripe, "
            "65,536 B into it), i.e. byte 2,424,832 of the member holding that chunk (2,097,152 + 5 × 65,536 B "
            "chunk)") in joined
    assert text.index("Inside it, layer by layer") < next(i for i, t in enumerate(text) if C.LAYER_NOT_STRIPE in t)
    assert "Fix: pvcreate --dataalignment 192k; for a PV in use that means moving every extent off it" in joined
    assert "Inside it" not in "\n".join(line.text for line in explain(item, geom, grain, table))


# --- the LVM-striping demo: real PV headers, read by pvs ------------------------------------------------


@pytest.mark.parametrize(("name", "data_start"), [("lvm-whole-disk", MiB), ("lvm-partition", 2 * MiB)])
def test_lvm_demo_images_carry_pv_headers_pvs_reads(tmp_path: Path, name: str, data_start: int) -> None:
    import os

    from diskplan.backend.demo_image import build
    from diskplan.model.teach import demos

    need_tool("pvs")
    s = demos.find(name)
    image = build(s, str(tmp_path))
    start = data_start - s.pv.pe_start  # type: ignore[union-attr]
    # A loop device over just the PV (a partition of a loop device has no node here without udev).
    loop = run("losetup", "--find", "--show", "--read-only", "--offset", str(start), image.image).strip()
    try:
        out = subprocess.run(["pvs", "--noheadings", "--units", "b", "--nosuffix", "-o",
                              "vg_name,pe_start,vg_extent_size", loop], capture_output=True, text=True,
                             env={**os.environ, **LVM_QUIET})
        lvs = subprocess.run(["lvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "stripes,stripe_size",
                              "vgdata01"], capture_output=True, text=True, env={**os.environ, **LVM_QUIET})
    finally:
        run("losetup", "--detach", loop)
    vg, pe, ext = out.stdout.split()
    assert (vg, int(pe), int(ext)) == ("vgdata01", MiB, 128 * MiB), out.stderr
    assert [int(x) for x in lvs.stdout.split()] == [2, 8192]  # lvcreate -i 2 -I 8
    report = _check(image.device, "--ssd")
    layers = report["layers"] if s.label is None else report["partitions"][0]["layers"]
    (layer,) = layers
    assert layer["data_start"] == data_start and layer["stripe"] == 8192
    assert data_start % 8192 == 0 and data_start % MiB == 0  # the same remainder: both aligned
    assert s.planned_disk().stack(s.pv_on)[0].data_offset == MiB  # the model reads its own headers alike
    lesson = " ".join(s.lesson)
    assert "2.9 GB/s" in lesson or "5.9 GB/s" in lesson


# --- any bytes: a StackError or a stack, never another exception -------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _headers() -> list[bytes]:
    """Real-looking starts of each format, to mutate: a PV (from the demo writer), md, LUKS1/2 magic, ext4, XFS."""
    from diskplan.model.formats.lvmformat import StripedVg, pv_header_pieces

    pv = bytearray(16384)
    for off, data in pv_header_pieces(StripedVg("vg", 64 * MiB, 8192, 4 * MiB, 8192), 0):
        pv[off:off + len(data)] = data[:16384 - off]
    md = bytes(4096) + md_super(5, 4, 128, 2048, 1000) + bytes(8192)
    luks2 = bytearray(16384)
    luks2[:8] = b"LUKS\xba\xbe\x00\x02"
    struct.pack_into(">Q", luks2, 8, 16384)
    luks2[4096:4200] = b'{"segments": {"0": {"offset": "16777216", "sector_size": 4096}}}'
    ext4 = bytearray(4096)
    struct.pack_into("<H", ext4, 1024 + 56, 0xEF53)
    return [bytes(pv), md, bytes(luks2), bytes(ext4), b"XFSB" + bytes(4092)]


HEADERS = _headers()


# Where the parsers read: label and pv_header, md superblock fields, LUKS/ext4/XFS fields, and anywhere.
HOT = st.one_of(st.integers(512, 700), st.integers(4096, 4400), st.integers(0, 200), st.integers(1024, 1500),
                st.integers(0, 16383))


@settings(max_examples=300, deadline=None)
@given(which=st.integers(0, len(HEADERS) - 1), flips=st.lists(st.tuples(HOT, st.integers(0, 255)), max_size=12))
def test_any_mutated_header_gives_a_stack_or_a_stack_error(which: int, flips: list[tuple[int, int]]) -> None:
    data = bytearray(HEADERS[which])
    for at, value in flips:
        if at < len(data):
            data[at] = value
    try:
        layers = S.walk(lambda off, n: bytes(data[off:off + n]) if off >= 0 else b"", 64 * MiB)
    except S.StackError:
        return
    assert all(la.data_offset >= 0 for la in layers)


def test_a_label_pointing_past_its_sector_is_a_stack_error() -> None:
    pv = bytearray(HEADERS[0])
    struct.pack_into("<I", pv, 512 + 20, 0xFFFF)  # offset_xl: the pv_header far past what was read
    with pytest.raises(S.StackError, match="does not hold together"):
        S.walk(lambda off, n: bytes(pv[off:off + n]), 64 * MiB)
    luks2 = bytearray(HEADERS[2])
    luks2[4096:4200] = b'{"segments": {"0": {"offset": "16777216", "sector_size": "4k"}}}'.ljust(104, b"\0")
    with pytest.raises(S.StackError):
        S.walk(lambda off, n: bytes(luks2[off:off + n]), 64 * MiB)


def test_the_facts_panel_lists_the_layers_of_the_lvm_demo() -> None:
    from diskplan.model.teach import demos
    from diskplan.ui.explain import facts

    s = demos.find("lvm-partition")
    disk = s.planned_disk()
    rows = [v for k, v in facts(disk, optimal_grain(disk.geometry)) if k == "Inside #1"]
    assert rows == ["LVM2 physical volume at byte 1,048,576, data at +1,048,576 = byte 2,097,152: 2,097,152 mod 4,096 "
                    "= 0, 2,097,152 mod 1,048,576 = 0"]
    whole = demos.find("lvm-whole-disk").planned_disk()
    assert [k for k, _ in facts(whole, optimal_grain(whole.geometry))].count("Inside the disk") == 1


def test_a_pv_on_the_page_but_off_its_lvs_stripe() -> None:
    """pe_start 1 MiB + 4 KiB with 8 KiB stripes: on 4 KiB pages, so only the stripe finding, with its sum."""
    from diskplan.model.formats.lvmformat import StripedVg, pv_header_pieces

    head = bytearray(2 * MiB)
    for off, data in pv_header_pieces(StripedVg("vg", 64 * MiB, MiB + 4096, 4 * MiB, 8192), 0):
        head[off:off + len(data)] = data
    layers = S.walk(lambda off, n: bytes(head[off:off + n]), 64 * MiB)
    geom = Geometry(sectors=1 << 20, rotational=False)
    found = SF.stack_findings(geom, 2048, layers, optimal_grain(geom), 1)
    assert {f.code for f in found} == {C.LAYER_NOT_STRIPE, C.LAYER_NOT_GRAIN}
    stripe = next(f for f in found if f.code == C.LAYER_NOT_STRIPE)
    assert "2,101,248 mod 8,192 = 4,096" in " ".join(stripe.explanation) and "its own striped LV" in stripe.message


def test_the_planner_walks_down_the_stack_of_the_partition_under_the_cursor() -> None:
    """The planner hands the partition's layers to the explanation where it lies on the disk, not elsewhere."""
    from diskplan.ui.app import PlannerApp
    from helpers.pilot import demo, run, screen_text, started, wait_for

    @run
    async def go() -> None:
        app = PlannerApp(start=demo("lvm-partition"))
        async with app.run_test(size=(120, 50)) as pilot:
            await started(app, pilot)
            await pilot.press("]", "e")
            await wait_for(pilot, lambda: "layer by layer" in screen_text(app), 10, what="the stack in the explanation")
            assert "LVM2 physical volume at byte 1,048,576" in screen_text(app)

    go()


@pytest.mark.parametrize(("physical", "min_io", "optimal_io", "hints", "flagged"), [
    (4096, 4096, 0, (0, 0), False),  # a 4Kn disk or loop device: its minimum I/O is its block, no stripe
    (512, 512, 0, (0, 0), False),
    (512, 512, 33553920, (0, 0), False),  # the USB bridges' bogus optimal I/O
    (512, 65536, 196608, (0, 0), True),  # a RAID: 64 KiB chunks, 3 data disks
    (512, 65536, 196608, (65536, 196608), False),
    (512, 512, 131072, (0, 131072), False),  # optimal I/O alone: mke2fs sets only the stripe width
])
def test_a_filesystem_is_judged_against_a_stripe_only_where_the_device_reports_one(
    physical: int, min_io: int, optimal_io: int, hints: tuple[int, int], flagged: bool
) -> None:
    geom = Geometry(sectors=1 << 21, logical=physical, physical=physical, min_io=min_io, optimal_io=optimal_io)
    layer = S.Layer("ext4", 0, *hints, fix="tune2fs -E stride=N,stripe_width=M DEV")
    start = (1 << 20) // geom.logical
    found = [f.code for f in SF.stack_findings(geom, start, (layer,), optimal_grain(geom), 1)]
    assert (C.FS_HINT_MISMATCH in found) is flagged, found


# --- issue 24, defects 3 and 4: a striped array's bytes are not its members' bytes -------------------------


def _vg_head(loop_device, sparse_image, vg_cleanup, *pvcreate: str) -> tuple[bytes, int, int]:
    """The first 2 MiB of a PV in a one-PV VG (4 MiB extents, vgcreate's default), made by pvcreate and
    vgcreate on a loop device, with pe_start and the extent size as pvs and vgs report them."""
    pv = loop_device(sparse_image(64 * MiB, "vgpv.img"))
    lvm("pvcreate", "-y", *pvcreate, pv)
    vg_cleanup.append("stripevg")
    lvm("vgcreate", "stripevg", pv)
    pe = int(lvm("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", pv).strip())
    ext = int(lvm("vgs", "--noheadings", "--units", "b", "--nosuffix", "-o", "vg_extent_size", "stripevg").strip())
    with open(pv, "rb") as f:
        return f.read(2 * MiB), pe, ext


def test_a_pv_on_a_raid5_member_is_judged_in_the_array_s_bytes(tmp_path: Path, sparse_image, loop_device,
                                                                  vg_cleanup) -> None:
    """Issue 24 defect 3: a member (partition at 1 MiB) of a 4-disk RAID5 with 64 KiB chunks, data at +1 MiB;
    on the array LVM put pe_start at 1,179,648 (pvcreate --dataalignment 192k, as it does from the array's
    optimal I/O). Adding the offsets gave member byte 3,276,800, off the 1 MiB grain; but array byte
    1,179,648 is stripe row 6, i.e. byte 2,490,368 of every member, and on the array's full stripe."""
    head, pe, ext = _vg_head(loop_device, sparse_image, vg_cleanup, "--dataalignment", "192k")
    assert (pe, ext) == (1_179_648, 4 * MiB)
    img = tmp_path / "member.img"
    size = 64 * MiB
    md_image(img, size, md_super(5, 4, 128, 2048, size // 512 - 2048), 4096)
    with open(img, "r+b") as f:
        f.seek(MiB)
        f.write(head)
    assert "Raid Level : raid5" in run(need_tool("mdadm"), "--examine", str(img))
    layers = S.walk(_read_file(img), size)
    assert [la.kind for la in layers] == ["md", "lvm2-pv"] and layers[1].extent == 4 * MiB
    geom = Geometry(sectors=1 << 21, rotational=False)
    judged = SF.judged(geom, 2048, layers, optimal_grain(geom), 1)
    pv_placed, found = judged[1]
    assert pv_placed.data == 2_490_368 == MiB + MiB + 6 * 65536 and pv_placed.rel == 1_179_648
    codes = [f.code for f in found]
    assert C.LAYER_NOT_GRAIN not in codes and C.LAYER_NOT_STRIPE not in codes, codes
    walk = " ".join(SF.walk_lines(geom, 2048, layers))
    assert "array byte 1,179,648 = stripe row 6" in walk and "byte 2,490,368 of every member" in walk
    assert "3,276,800" not in walk
    as_json = SF.layers_json(geom, 2048, layers)
    assert [(x["data_start"], x["array_data_start"]) for x in as_json] == [(2 * MiB, None), (2_490_368, 1_179_648)]
    (ext_finding,) = [f for f in found if f.code == C.EXTENT_NOT_STRIPE]
    assert "5,373,952 mod 196,608 = 65,536" in " ".join(ext_finding.explanation)  # extent 1, in array bytes


def test_a_pv_on_the_array_itself_aligned_to_its_optimal_io_is_not_flagged(tmp_path: Path, sparse_image,
                                                                            loop_device, vg_cleanup) -> None:
    """Issue 24 defect 4: the array read directly (optimal I/O 196,608, minimum 65,536): pe_start 1,179,648 =
    6 full stripes is LVM's own alignment, not a fault against a 3 MiB lcm grain, and no pvmove/vgreduce/
    pvremove is advised. What is told instead: 4 MiB extents are not a multiple of 192 KiB, so extent 1
    begins 65,536 B into a stripe (only every 3rd extent begins on one)."""
    head, pe, _ = _vg_head(loop_device, sparse_image, vg_cleanup, "--dataalignment", "192k")
    img = tmp_path / "md0.img"
    with open(img, "wb") as f:
        f.truncate(192 * MiB)
        f.write(head)
    report = _check(str(img), "--min-io", "65536", "--optimal-io", "196608", "--ssd")
    (layer,) = report["layers"]
    assert layer["data_start"] == pe == 6 * 196608
    found = {f["code"]: f for f in report["findings"] if f["code"] in SF.STACK_CODES}
    assert set(found) == {C.EXTENT_NOT_STRIPE}, found
    assert "only one extent in 3 does" in found[C.EXTENT_NOT_STRIPE]["message"]
    done = subprocess.run([sys.executable, "-m", "diskplan", "check", str(img), "--min-io", "65536", "--optimal-io",
                           "196608", "--ssd"], capture_output=True, text=True, timeout=60)
    why = " ".join(done.stdout.split())
    assert "pvmove" not in why and "pvremove" not in why and "vgreduce" not in why, why
    assert "5,373,952 mod 196,608 = 65,536" in why and "= 3 begin where a stripe does" in why, why
    assert "vgcreate -s 4325376B" in why  # 22 full stripes, the first multiple at least 4 MiB


def test_the_walk_stops_above_the_first_layer_inside_a_striped_array(tmp_path: Path, sparse_image,
                                                                        loop_device) -> None:
    """A RAID5 member holding a PV: the LUKS header the LV carries at array byte pe_start is in stripe row 5
    of the array, not at member byte data offset + pe_start; what lies there (here a LUKS header planted as
    if the array were linear) is not read as a layer of this stack."""
    head, pe = pv_head(loop_device, sparse_image, 32 * MiB, "--dataalignment", "1m")
    luks = tmp_path / "luks.img"
    _luks(_blank_file(luks, 32 * MiB), "--type", "luks2")
    img = tmp_path / "member.img"
    md_image(img, 64 * MiB, md_super(5, 4, 128, 2048, 64 * MiB // 512 - 2048), 4096)
    with open(img, "r+b") as f:
        f.seek(MiB)
        f.write(head)
        f.seek(MiB + pe)
        f.write(luks.read_bytes()[:1 << 16])
    assert [la.kind for la in S.walk(_read_file(img), 64 * MiB)] == ["md", "lvm2-pv"]
    linear = S.md_layer(S.parse_md_super(md_super(1, 2, 0, 2048, 1000), 2))  # type: ignore[arg-type]
    assert linear.full_stripe == 0  # RAID1: the same walk goes on down, its bytes map one to one


def _blank_file(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path
