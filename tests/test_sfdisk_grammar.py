"""sfdisk's whole input grammar, with sfdisk as the referee: for every form, the table `diskplan apply SCRIPT IMG
--yes` writes is the table `sfdisk IMG < SCRIPT` writes on a blank image of the same size (`sfdisk --dump`
compared without the random ids; first-lba included: a new GPT from a script starts where sfdisk's does, 2048)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import need_tool, run
from diskplan.model.formats.planfile import PlanFileError, load_plan
from diskplan.model.formats.sfdisk_script import Disk, ScriptError, parse, place

MiB = 1 << 20
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"

FORMS = {
    # named fields without the device prefix, keys in any case, Id= for type=
    "named, no prefix": "label: gpt\nstart=2048, size=65536, type=L\n",
    "named, keys in capitals": "label: gpt\nSTART=2048, Size=65536, TYPE=S\n",
    "Id= for type=": f"label: gpt\nstart=2048, size=65536, Id={LINUX}\n",
    "named, start left out": "label: gpt\nsize=10MiB, type=L\nsize=20MiB, type=S\n",
    "named, size left out": "label: gpt\nstart=4096, type=L\n",
    "a prefix with a gap in the numbers": "label: gpt\nd1 : start=2048, size=8192\nd3 : size=4MiB\nsize=1MiB\n",
    # unnamed fields
    "unnamed, sectors": "label: gpt\n2048,204800,L\n",
    "unnamed, start left out": "label: gpt\n,100MiB,L\n,50MiB,S\n,,V\n",
    "unnamed, blanks between": "label: gpt\n2048 204800 L\n",
    "unnamed, semicolons": "label: gpt\n2048;204800;S\n",
    "unnamed, dashes for defaults": "label: gpt\n- 10MiB L\n- - S\n",
    "unnamed, only a type": "label: gpt\n,,U\n",
    # shortcuts, aliases, names
    "gpt shortcuts": "label: gpt\n,10MiB,U\n,10MiB,S\n,10MiB,H\n,10MiB,R\n,10MiB,V\n,,L\n",
    "gpt aliases": "label: gpt\n,10MiB,uefi\n,10MiB,swap\n,10MiB,home\n,10MiB,raid\n,10MiB,lvm\n,,linux\n",
    "gpt type names": 'label: gpt\nsize=10MiB, type="EFI System"\nsize=10MiB, type="linux swap"\ntype="Linux LVM"\n',
    # numbers and sizes
    "sizes with suffixes": "label: gpt\nsize=100M\nsize=65536K\nsize=10MB\nsize=1.5MiB\nsize=3GB\n",
    "start in bytes": "label: gpt\nstart=1MiB, size=8MiB\nstart=20MiB, size=1MiB\n",
    "hex and octal": "label: gpt\nstart=0x800, size=0x10000\nstart=0400000, size=010000\n",
    "+ for the rest": "label: gpt\nstart=2048, size=10MiB\nsize=+\n",
    "signed numbers": "label: gpt\nstart=+2048, size=+65536\nsize=-65536\n",
    "the largest free area first": "label: gpt\nstart=600000, size=10000\nsize=10MiB\n,,S\n",
    "unknown headers, ignored as sfdisk ignores them": "label: gpt\nfoo bar: baz\n/dev/x1 : 2048,100\n2048,100\n",
    # dos
    "no label line (dos)": ",100MiB,L\n,,S\n",
    "dos hex types": "label: dos\n,10MiB,c\n,10MiB,7\n,10MiB,0x83\n,,82\n",
    "dos Id=83 and bootable": "label: dos\nstart=2048, size=65536, Id=83, bootable\n,,S,-\n",
    "dos unnamed bootable": "label: dos\n,10MiB,L\n,,S,*\n",
    "a fifth primary is ignored": "label: dos\n,1MiB\n,1MiB\n,1MiB\n,1MiB\n,1MiB\n",
    "dos shortcuts": "label: dos\n,10MiB,U\n,10MiB,R\n,10MiB,V\n,,L\n",
    "E is 0x05, with logical partitions": ",100MiB,L\n,,E\n,50MiB,L\n,20MiB,S\n,,L\n",
    "Ex and extended": "label: dos\n,,Ex\n,10MiB\n,10MiB,swap\n",
    "dos named, start left out": "label: dos\nsize=10MiB, type=83\nsize=10MiB, type=extended\nsize=4MiB\n",
    "dos explicit logical": "label: dos\n2048,20480,L\n22528,100000,5\n30000,8000,L\n40000,,L\n",
}


def _table(img: pathlib.Path) -> list[str]:
    """`sfdisk --dump` without what differs on purpose: random ids, the device's name."""
    out = []
    for line in run("sfdisk", "--dump", str(img)).splitlines():
        if line.startswith(("label-id:", "device:")):
            continue
        line = re.sub(r",? *uuid=[0-9A-F-]+", "", line)
        out.append(re.sub(r"^\S+?(\d+) :", r"part\1 :", line))
    return out


@pytest.mark.parametrize("form", sorted(FORMS))
def test_diskplan_writes_what_sfdisk_writes(form: str, sparse_image: Callable[..., pathlib.Path],
                                            tmp_path: pathlib.Path) -> None:
    script = FORMS[form]
    theirs, ours = sparse_image(512 * MiB, "sfdisk.img"), sparse_image(512 * MiB, "diskplan.img")
    proc = subprocess.run([need_tool("sfdisk"), "--no-reread", "--no-tell-kernel", str(theirs)], input=script,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # sfdisk takes the form
    path = tmp_path / "script"
    path.write_text(script)
    proc = subprocess.run([sys.executable, "-m", "diskplan", "apply", str(path), str(ours), "--yes", "--backup",
                           str(tmp_path / "b.dpbackup")], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _table(ours) == _table(theirs)


REFUSED = {
    "a typo in a key": "label: gpt\nstart=2048, size=2048, typ=S\n",
    "full-width digits": "label: gpt\nstart=\uff12\uff10\uff14\uff18, size=2048\n",
    "an unclosed quote": 'label: gpt\nstart=2048, size=2048, name="abc\n',
    "an unknown field": "label: gpt\nstart=2048, size=2048, foo=1\n",
    "bootable with a value": "label: gpt\nstart=2048, size=2048, bootable=1\n",
    "not a number": "label: gpt\nstart=abc, size=2048\n",
    "sectors written 2048s": "label: gpt\nstart=2048s, size=2048\n",
    "an unknown gpt type": "label: gpt\n,,Q\n",
    "E on gpt": "label: gpt\n,,E\n",
    "a used sector": "label: gpt\nstart=2048, size=8192\nstart=4096, size=10\n",
    "a logical without an extended": "label: dos\nd5 : start=2048, size=2048\n",
    "a bootable mark that is none": "label: dos\n,,L,x\n",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_sfdisk_refuses_diskplan_refuses_too(case: str, sparse_image: Callable[..., pathlib.Path],
                                                  tmp_path: pathlib.Path) -> None:
    script = REFUSED[case]
    img = sparse_image(64 * MiB)
    proc = subprocess.run([need_tool("sfdisk"), "--no-reread", "--no-tell-kernel", str(img)], input=script,
                          capture_output=True, text=True)
    assert proc.returncode != 0  # sfdisk's verdict
    path = tmp_path / "script"
    path.write_text(script, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "diskplan", "apply", str(path), str(img), "--yes", "--backup",
                           str(tmp_path / "b.dpbackup")], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode in (1, 2) and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stdout + proc.stderr
    assert "line" in proc.stderr or "extended" in proc.stderr  # where, or why
    probe = subprocess.run(["sfdisk", "--dump", str(img)], capture_output=True, text=True)
    assert probe.returncode != 0  # still blank: nothing was written


def test_the_grammar_without_a_disk() -> None:
    """What needs no disk: the reading itself."""
    s = parse(",100MiB,E\n2048 0x800 - *\nd7 : START=1, Size=+, Id=83, bootable\n")
    assert s.label == "dos"
    a, b, c = s.lines
    assert a.size is not None and b.start is not None and b.size is not None and c.start is not None
    assert (a.start, a.size.value, a.size.in_bytes, a.type) == (None, 100 * MiB, True, "0x05")
    assert (b.start.value, b.size.value, b.type, b.bootable) == (2048, 2048, None, True)
    assert (c.number, c.start.value, c.size, c.type, c.bootable) == (7, 1, None, "0x83", True)
    assert parse("label: gpt\n,,\"Linux /usr (x86)\"\n").lines[0].type == "75250D76-8CC6-458E-BD66-BD47CC81A812"
    assert parse("label: dos\n,,e\n").lines[0].type == "0x0e"  # only the capital E is the shortcut
    with pytest.raises(ScriptError, match="line 2"):
        parse("label: gpt\nstart=2048, typ=S\n")
    # a dump (every number, start and size given) is a plan without a disk; a script that leaves them is not
    assert not load_plan("label: gpt\nd1 : start=2048, size=2048\n").needs_disk
    assert load_plan("label: gpt\nstart=2048, size=2048\n").needs_disk
    with pytest.raises(PlanFileError, match="not a plan"):
        load_plan("hello")


# --- any script: placed where sfdisk places it, refused where sfdisk refuses it ---------------------------

AMOUNTS = st.one_of(st.just(""), st.integers(1, 300_000).map(str),
                    st.tuples(st.integers(1, 90), st.sampled_from(["KiB", "MiB", "M", "K", "MB"])).map(
                        lambda t: f"{t[0]}{t[1]}"))
STARTS = st.one_of(st.just(""), st.integers(34, 1_000_000).map(str), st.integers(1, 400).map(lambda n: f"{n}MiB"))


@st.composite
def scripts(draw: st.DrawFn) -> str:
    label = draw(st.sampled_from(["gpt", "dos"]))
    types = ["L", "S", "V", "R", "U"] + (["H"] if label == "gpt" else ["c", "7", "Ex", "E", "5"])
    out = [f"label: {label}"] if label == "gpt" or draw(st.booleans()) else []
    extended = False
    for _ in range(draw(st.integers(1, 6))):
        start, size, kind = draw(STARTS), draw(AMOUNTS), draw(st.sampled_from(types))
        if kind in ("Ex", "E", "5"):
            # a second extended partition: sfdisk writes a table no tool reads back (a logical partition of
            # type 5, or two extended primaries); diskplan refuses it
            kind, extended = ("L", True) if extended else (kind, True)
            if kind != "L":  # an extended partition of a few sectors: sfdisk writes logical ones past its end
                size = draw(st.sampled_from(["", "64MiB", "200MiB"]))
        if draw(st.booleans()):
            out.append(f"{start},{size},{kind}")
        else:
            out.append(", ".join(f for f in (f"start={start}" if start else "", f"size={size}" if size else "",
                                              f"type={kind}") if f))
    return "\n".join(out) + "\n"


def _sfdisk_parts(img: pathlib.Path) -> list[tuple[int, int, int, str]]:
    rows = []
    for line in run("sfdisk", "--dump", str(img)).splitlines():
        m = re.match(r"^\S+?(\d+) : start=\s*(\d+), size=\s*(\d+), type=([0-9A-Fa-f-]+)", line)
        if m:
            rows.append((int(m[1]), int(m[2]), int(m[3]), m[4].upper()))
    return sorted(rows)


# Each example runs sfdisk twice on a fresh image: a sample here, thousands with DISKPLAN_FUZZ_EXAMPLES=N.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=scripts())
def test_any_script_is_placed_where_sfdisk_places_it(script: str, tmp_path: pathlib.Path) -> None:
    img = tmp_path / "disk.img"
    img.unlink(missing_ok=True)
    with open(img, "wb") as f:
        f.truncate(512 * MiB)
    proc = subprocess.run([need_tool("sfdisk"), "--no-reread", "--no-tell-kernel", str(img)], input=script,
                          capture_output=True, text=True)
    if proc.returncode == 0 and (any(s + z > 512 * MiB // 512 for _, s, z, _ in _sfdisk_parts(img))
                                 or "of size 0 B" in proc.stdout):
        proc.returncode = 99  # sfdisk wrote a partition past the disk's end or of no size: a table that lost one
    parsed = parse(script)
    disk = Disk(sectors=512 * MiB // 512, first_usable=34, last_usable=512 * MiB // 512 - 34)
    try:
        ours = sorted((p.number, p.start, p.size, p.type.removeprefix("0x").lstrip("0").upper())
                      for _, p in place(parsed, disk).partitions)
    except ScriptError as exc:
        assert proc.returncode != 0, f"sfdisk took what diskplan refused ({exc}):\n{script}\n{proc.stdout}"
        return
    assert proc.returncode == 0, f"diskplan took what sfdisk refused:\n{script}\n{proc.stdout}{proc.stderr}"
    assert ours == [(n, s, z, t.lstrip("0")) for n, s, z, t in _sfdisk_parts(img)], script


def test_the_planner_loads_a_script_placed_on_its_disk() -> None:
    """Ctrl+O in the planner: a script that leaves positions out is placed on the planner's disk (here 1 GiB
    of 4096-byte sectors: the 1 MiB grain is 256 sectors) and says so."""
    from diskplan.model.formats.planfile import load_into
    from diskplan.model.geometry import Geometry
    from diskplan.model.plan.plan import Plan
    from diskplan.model.table import new_table

    geom = Geometry(2**18, logical=4096, physical=4096)
    outcome = load_into(Plan.open(geom, new_table("gpt", geom)), "label: gpt\n,100MiB,U\n,,L\n")
    assert outcome.ok, outcome.message
    parts = sorted(outcome.plan.table.live, key=lambda p: p.number)
    # the rest ends on the last grain boundary before the backup GPT (last usable LBA 262138): exactly what
    # sfdisk writes on a 1 GiB loop device of 4096-byte sectors (256+25600, 25856+236032)
    assert [(p.number, p.start, p.end) for p in parts] == [(1, 256, 25855), (2, 25856, 261887)]
    assert "placed as sfdisk places them" in outcome.message
