"""The commands ``diskplan stack`` prints, run for real in a guest (md, device-mapper and udevd there), and
what the tools then report equal to what diskplan predicted; ``diskplan check`` then finds the stack
aligned (issue 29). One boot per fixture: the default run builds RAID5 of 4 x 64 KiB with LVM, LUKS2 and
ext4 on 512e disks; DISKPLAN_GUEST=all adds RAID1 with LUKS2 and XFS on the array, RAID5 of 3 (a
power-of-two full stripe) with LVM and XFS, and LVM striped over two PVs on 512e disks with RAID hints."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from helpers import guest

pytestmark = pytest.mark.guest
MiB = 1 << 20

# Run one scenario's printed commands: the plan's names become the guest's (PARTITION1 and MEMBERn the first
# partitions of the scenario's disks, PVn likewise, md0/vg0/lv0/crypt0 numbered per scenario), with the flags
# a script needs (no prompts, a key file, a fast PBKDF, no resync).
BUILD = r'''
import json, os, shlex, subprocess, sys

name, n, disks = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
plan = json.load(open(f"/tmp/{name}.json"))
parts = [os.environ[f"DISK_{d}"] + "1" for d in disks]
names = {"PARTITION1": parts[0], "/dev/md0": f"/dev/md{n}", "vg0": f"vg{n}", "/dev/vg0/lv0": f"/dev/vg{n}/lv0",
         "crypt0": f"crypt{n}", "/dev/mapper/crypt0": f"/dev/mapper/crypt{n}"}
names.update({f"MEMBER{i + 1}": p for i, p in enumerate(parts)})
names.update({f"PV{i + 1}": p for i, p in enumerate(parts)})
with open("/tmp/key", "wb") as f:
    f.write(b"teach")
for cmd in plan["commands"]:
    argv = [names.get(a, a) for a in shlex.split(cmd)]
    if argv[0] == "mdadm":
        argv[3:3] = ["--run", "--assume-clean", "--quiet"]  # after the array's name
    elif argv[0] == "cryptsetup":
        argv[2:2] = ["-q", "--key-file", "/tmp/key"] + (["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"]
                                                         if argv[1] == "luksFormat" else [])
    elif argv[0] in ("pvcreate", "vgcreate", "lvcreate"):
        argv.insert(1, "-y")
    elif argv[0] == "mkfs.ext4":
        argv[1:1] = ["-q", "-F"]
    elif argv[0] == "mkfs.xfs":
        argv[1:1] = ["-q", "-f"]
    done = subprocess.run(argv, capture_output=True, text=True)
    print("ran", shlex.join(argv), done.returncode, flush=True)
    if done.returncode:
        sys.exit(f"{shlex.join(argv)}: {done.stderr.strip()}")
    subprocess.run(["udevadm", "settle", "-t", "30"])
'''

# What the tools say about what was built, one "key=value" per line.
EXAMINE = r'''
n=$1; m=$2; luks=$3; fs=$4
if [ -e /dev/md$n ]; then
  mdadm --examine ${m}1 | sed -n -e 's/^ *Data Offset : \([0-9]*\) sectors.*/md_data_offset=\1/p' \
    -e 's/^ *Chunk Size : \([0-9]*\)K/md_chunk_k=\1/p'
  pvdev=/dev/md$n
else
  pvdev=${m}1
fi
if vgs vg$n >/dev/null 2>&1; then
  echo "pe_start=$(pvs --noheadings --units b --nosuffix -o pe_start $pvdev | tr -d ' ')"
  echo "extent=$(vgs --noheadings --units b --nosuffix -o vg_extent_size vg$n | tr -d ' ')"
  echo "lv_stripes=$(lvs --noheadings --units b --nosuffix -o stripes,stripe_size vg$n/lv0 | xargs | tr ' ' /)"
  top=/dev/vg$n/lv0
else
  top=$pvdev
fi
if [ "$luks" != - ]; then
  echo "luks_offset=$(cryptsetup luksDump $top | sed -n 's/^[[:space:]]*offset: *\([0-9]*\) \[bytes\]/\1/p' | head -1)"
  top=/dev/mapper/crypt$n
fi
if [ "$fs" = ext4 ]; then
  dumpe2fs -h $top 2>/dev/null | sed -n -e 's/^RAID stride: *\([0-9]*\)/stride=\1/p' \
    -e 's/^RAID stripe width: *\([0-9]*\)/stripe_width=\1/p'
elif [ "$fs" = xfs ]; then
  xfs_info $top | sed -n 's/.*sunit=\([0-9]*\) *swidth=\([0-9]*\) blks.*/sunit=\1\nswidth=\2/p' | head -2
fi
[ -e /dev/md$n ] && top="$top /dev/md$n"
echo "targets=$top"
'''


def _scenario(name: str, n: int, disks: list[str], intent: str, luks: str, fs: str) -> list[Any]:
    first = f"$DISK_{disks[0]}"
    parts = " ".join(f"$DISK_{d}" for d in disks)
    return [
        guest.Case(f"{name}-partition", f"for d in {parts}; do printf 'label: gpt\\nstart=2048\\n' | sfdisk -q $d; "
                                        "done; udevadm settle -t 30"),
        guest.Case(f"{name}-plan", f"diskplan stack {first} -N 1 {intent} --json | tee /tmp/{name}.json"),
        guest.Case(f"{name}-build", f"cat > /tmp/build.py <<'EOF'\n{BUILD}\nEOF\n"
                                    f"python3 /tmp/build.py {name} {n} {','.join(disks)}"),
        guest.Case(f"{name}-examine", f"cat > /tmp/examine.sh <<'EOF'\n{EXAMINE}\nEOF\n"
                                      f"sh /tmp/examine.sh {n} {first} {luks} {fs}"),
        guest.Case(f"{name}-check", f"t=$(sh /tmp/examine.sh {n} {first} {luks} {fs} | sed -n 's/^targets=//p'); "
                                    f"diskplan check --json {first} $t || true"),
    ]


def _run(scenarios: list[tuple[str, int, list[str], str, str, str]], disks: list[Any]) -> Any:
    cases = [c for s in scenarios for c in _scenario(*s)]
    return guest.boot_guest(disks, cases, udevd=True)


SAMPLE = [("r5x4", 0, ["a", "b", "c", "d"], "--raid 5 --members 4 --chunk 64KiB --lvm --luks luks2 --fs ext4",
           "luks2", "ext4")]
FULL = [
    ("r1", 1, ["e", "f"], "--raid 1 --members 2 --luks luks2 --fs xfs", "luks2", "xfs"),
    ("r5x3", 2, ["g", "h", "i"], "--raid 5 --members 3 --chunk 64KiB --lvm --fs xfs", "-", "xfs"),
    ("lvs2", 3, ["j", "k"], "--lvm --lv-stripes 2 --lv-stripe-size 64KiB --fs ext4", "-", "ext4"),
]


@pytest.fixture(scope="module")
def sample() -> Any:
    guest.full_only()  # ~2 minutes under TCG (an md resync); tests/test_stackplan.py runs the tools on the host
    return _run(SAMPLE, [guest.e512(s, 96 * MiB) for s in "abcd"])


@pytest.fixture(scope="module")
def full() -> Any:
    guest.full_only()
    # XFS wants 300 MB and a striped log 64 MiB: RAID1 of 2 x 400 MiB, RAID5 of 3 x 600 MiB (sparse images)
    disks = [guest.e512(s, 400 * MiB) for s in "ef"] + [guest.e512(s, 600 * MiB) for s in "ghi"]
    disks += [guest.e512(s, 96 * MiB, min_io=65536, opt_io=131072) for s in "jk"]  # RAID hints on 512e
    return _run(FULL, disks)


def values(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line and " " not in line.split("=")[0])


def _verify(run: Any, name: str) -> None:
    """Every offset the tools report equals the plan's, and check finds no stack finding on what was built."""
    run[f"{name}-partition"].check()
    plan = json.loads(run[f"{name}-plan"].check().out)
    run[f"{name}-build"].check()
    got = values(run[f"{name}-examine"].check().out)
    steps = {s["layer"]: s for s in plan["steps"]}
    print(name, plan["commands"], got)  # shown with -s: what the tools reported
    if "md" in steps:
        md = steps["md"]["values"]
        assert int(got["md_data_offset"]) * 512 == md["data_offset"], got
        if md["chunk"]:
            assert int(got["md_chunk_k"]) * 1024 == md["chunk"], got
    if "lvm2-pv" in steps:
        assert int(got["pe_start"]) == steps["lvm2-pv"]["values"]["pe_start"], got
        assert int(got["extent"]) == steps["vg"]["values"]["extent_size"], got
        lv = steps["lv"]["values"]
        if lv["stripes"] > 1:
            assert got["lv_stripes"] == f"{lv['stripes']}/{lv['stripe_size']}", got
    for luks in ("luks1", "luks2"):
        if luks in steps:
            assert int(got["luks_offset"]) == steps[luks]["values"]["payload"], got
    unit, width = plan["filesystem_stripe"]["unit"], plan["filesystem_stripe"]["width"]
    if "stride" in got:
        assert (int(got["stride"]) * 4096, int(got["stripe_width"]) * 4096) == (unit, width), got
    if "sunit" in got:
        assert (int(got["sunit"]) * 4096, int(got["swidth"]) * 4096) == (unit, width), got
    doc = json.loads(run[f"{name}-check"].check().out)
    stack_codes = {"layer-data-not-page", "layer-data-not-grain", "layer-data-not-stripe", "extent-not-full-stripe",
                   "fs-stripe-hint-mismatch"}
    found = [(d.get("path"), f["code"]) for d in doc["disks"]
             for f in [*d.get("findings", []), *(g for p in d.get("partitions", []) for g in p["findings"])]
             if f["code"] in stack_codes]
    assert found == [], found
    layers = [la["kind"] for d in doc["disks"] for la in [*d.get("layers", []),
                                                          *(x for p in d.get("partitions", []) for x in p["layers"])]]
    assert layers, doc  # check read the stack it judged


def test_raid5_of_4_with_lvm_luks2_and_ext4(sample):
    _verify(sample, "r5x4")
    plan = json.loads(sample["r5x4-plan"].out)
    assert re.search(r"vgcreate -s 4325376B", " ".join(plan["commands"]))  # 22 full stripes of 192 KiB


@pytest.mark.parametrize("name", [s[0] for s in FULL])
def test_the_other_stacks(full, name):
    _verify(full, name)
