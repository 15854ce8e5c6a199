"""What `diskplan check --json` does on its way, counted rather than timed (its speed is `make bench`'s): the
processes it starts, and the modules it never needs. Each was a cost measured on a 128-partition check.

- libparted (Debian's) runs ``sh -c "dmidecode -s system-manufacturer"`` as it loads, unless PARTED_GPT_APPLE
  answers: backend.parted answers where the answer is known (its ``__init__``), so a check starts its reading
  child and nothing else (two programs fewer, ~4 ms of the read, twice that on a busy machine).
- socket and signal (the zygote's, a crash report's), platform (one machine name) and the pickle module's Python
  body (the answers travel through its C functions) are not imported. The reading child (backend.parted.pedread)
  imports no model at all: it answers with plain rows, made a Disk in the parent (~10 ms of its ~24). libparted's
  read into the model (backend.parted.libparted, a fleet's whole checks) imports no re (~1.5 ms: model.labels
  and model.ptypes import it where a typed type is parsed), no type registry (model.ptypes, model.labels: a
  write's) and no backend.raw.kernelparts (a write's).
- diskplan's own regular expressions are compiled where they are first used, not as their modules are imported:
  a check uses none of them (three compiled at import cost it ~0.4 ms).
- libparted's reads start before the rest of the command is imported, when the command line is plainly targets
  and ``--json``: the parent's imports run beside them, not before them. Such a command line is not given to
  argparse at all (its import, with re and gettext, was ~7 ms of the parent's ~20 ms before the answer).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.tools import need_tool, run

ANSWER = "PARTED_GPT_APPLE"


def _gpt_image(sparse_image, partitions: int = 4) -> pathlib.Path:
    img: pathlib.Path = sparse_image(256 << 20)
    script = "label: gpt\n" + "".join(f"start={2048 + i * 4096}, size=4096\n" for i in range(partitions))
    run(need_tool("sfdisk"), "-q", str(img), input=script)
    return img


def _without_answer() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(ANSWER, None)  # set in this process when it imported backend.parted: the command must decide
    return env


# --- the processes a check starts ----------------------------------------------------------------------------


def test_a_check_starts_one_reading_child_and_runs_no_program(sparse_image, tmp_path: pathlib.Path) -> None:
    """strace counts the execs and forks of the whole process tree: the command itself, one forked reader."""
    asked = f"import os, diskplan.backend.parted; print(os.environ.get({ANSWER!r}, ''))"
    decided = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, check=True,
                             env=_without_answer())
    if not decided.stdout.strip():
        pytest.skip("only dmidecode can tell whether this machine is a Mac (sys_vendor unreadable)")
    img = _gpt_image(sparse_image)
    log = tmp_path / "strace.log"
    traced = [need_tool("strace"), "-f", "-qq", "-o", str(log), "-e", "trace=execve,fork,vfork,clone,clone3"]
    proc = subprocess.run([*traced, sys.executable, "-m", "diskplan", "check", "--json", str(img)],
                          capture_output=True, text=True, env=_without_answer())
    assert proc.returncode in (0, 1), proc.stderr
    calls = [line.split(None, 1)[1] for line in log.read_text().splitlines() if "resumed>" not in line]
    execs = [c for c in calls if c.startswith("execve(")]
    forks = [c for c in calls if c.startswith(("fork(", "vfork(", "clone(", "clone3("))]
    assert len(execs) == 1 and sys.executable.rsplit("/", 1)[-1] in execs[0], execs  # no sh, no dmidecode
    assert len(forks) == 1, forks  # the reading child, and it starts nothing


def test_libparted_still_asks_dmidecode_when_the_answer_is_not_known(tmp_path: pathlib.Path) -> None:
    """The other side of the same count: with no answer in the environment, libparted's load runs sh and
    dmidecode (so the test above counts something that happens, and the variable is what stops it)."""
    dmidecode = tmp_path / "bin" / "dmidecode"
    dmidecode.parent.mkdir()
    dmidecode.write_text(f"#!/bin/sh\necho asked >> {tmp_path / 'asked'}\necho 'Dell Inc.'\n")
    dmidecode.chmod(0o755)
    env = {**_without_answer(), "PATH": f"{dmidecode.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    subprocess.run([sys.executable, "-c", "import _ped"], check=True, env=env)
    assert (tmp_path / "asked").read_text() == "asked\n"
    (tmp_path / "asked").unlink()
    subprocess.run([sys.executable, "-c", "import _ped"], check=True, env={**env, ANSWER: "0"})
    assert not (tmp_path / "asked").exists()


# --- the reads begun before argparse ----------------------------------------------------------------------------

_FORK_SEEN = """
import os, sys
from diskplan.backend.parted import isolate
fork = isolate._fork
def seen(work):
    late = ("argparse", "re", "select", "diskplan.cli.options", "diskplan.backend.read.reader")
    os.write(2, " ".join(m for m in late if m in sys.modules).encode() + b"|")
    return fork(work)
isolate._fork = seen
sys.argv = ["diskplan", "check", "--json", sys.argv[1]]
from diskplan.cli.main import program
program()
"""


def test_the_reading_child_is_forked_before_argparse_is_imported(sparse_image) -> None:
    """As a user runs it (cli.main.program): what the parent had imported when it forked its one reading child."""
    img = _gpt_image(sparse_image)
    proc = subprocess.run([sys.executable, "-c", _FORK_SEEN, str(img)], capture_output=True, text=True)
    assert proc.returncode in (0, 1) and '"partitions"' in proc.stdout, proc.stderr
    assert proc.stderr == "|"  # one fork, and none of them imported yet


def _children() -> set[str]:
    """This process's children, running or unreaped (another test's may live on: an isolate zygote)."""
    return set(pathlib.Path(f"/proc/self/task/{os.getpid()}/children").read_text().split())


# (argparse refuses it: its positional list ends at --json; so it is not plain, and no read begins)
_REFUSED = ["{img}", "--json", "{blank}"]
_PLAIN = [["{img}"], ["--json", "{img}"], ["{img}", "{blank}", "--json"], ["--json", "{fifo}"],
          ["{missing}"], ["--json", "{img}", "{missing}", "{fifo}", "{img}"]]
_NOT_PLAIN = [["--help"], ["--json", "--bogus", "{img}"], [], ["--json"], ["--json", "{img}", "--ssd"],
              ["{img}", "--physical-block", "8k"], ["--", "{img}"], _REFUSED]


@pytest.mark.parametrize("shape", _PLAIN + _NOT_PLAIN)
def test_the_early_reads_change_nothing_a_user_sees(shape: list[str], sparse_image, tmp_path: pathlib.Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The same command line with and without the reads begun before parsing: the same exit status, output and
    messages. A plain one (targets and --json) is read by the reads begun early, started once, never with a FIFO
    among them; any other is parsed first, as before. No reading child is left behind, even where the parse
    failed after the reads had begun."""
    from diskplan.backend.parted import readahead
    from diskplan.cli import check
    from diskplan.cli.main import main

    paths = {"img": str(_gpt_image(sparse_image)), "blank": str(sparse_image(8 << 20, "blank.img")),
             "fifo": str(tmp_path / "fifo"), "missing": str(tmp_path / "missing.img")}
    os.mkfifo(paths["fifo"])
    argv = ["check", *(word.format(**paths) for word in shape)]
    before = _children()
    begun: list[Any] = []
    starts: list[list[str]] = []
    early, start = check._early_reads, readahead.start

    def spied_early(targets: Any) -> Any:
        begun.append(early(targets))
        return begun[-1]

    def spied_start(paths: list[str], *args: Any, **kwargs: Any) -> Any:
        starts.append(list(paths))
        return start(paths, *args, **kwargs)

    monkeypatch.setattr(check, "_early_reads", spied_early)
    monkeypatch.setattr(readahead, "start", spied_start)
    with_early = main(argv), *capsys.readouterr()
    started_early = list(starts)
    assert _children() == before  # no child of this process is left, running or unreaped
    monkeypatch.setattr(check, "_early_reads", lambda targets: None)
    without = main(argv), *capsys.readouterr()
    assert with_early == without
    assert with_early[0] in (0, 1, 2) and (with_early[1] or with_early[2])
    if shape is _REFUSED:
        assert with_early[0] == 2 and f"unrecognized arguments: {paths['blank']}" in with_early[2]
    if shape in _PLAIN:
        readable = [paths[w[1:-1]] for w in shape if w in ("{img}", "{blank}")]
        assert begun[0] is not None and begun[0].items == readable
        assert started_early == [readable]  # begun once, before parsing, and then used (not started again)
    else:
        assert begun == [None]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a.img", "b c.img", "--json", "--js", "-", "--", "--ssd", "8k", ""]), max_size=6))
def test_a_plain_command_line_is_read_as_argparse_reads_it(argv: list[str]) -> None:
    """``_plain_args`` (no argparse imported) gives what ``check``'s parser gives, every option at its default,
    or None; and it is None only where the command line is not plainly targets and --json, or argparse refuses
    it (a --json between two targets)."""
    from diskplan.cli import check

    plain = check._plain_args(argv)
    try:
        parsed: Any = check.parser().parse_args(argv)
    except SystemExit:
        parsed = None
    if plain is not None:
        assert parsed is not None and vars(plain) == vars(parsed)
    elif parsed is not None:
        assert any(word.startswith("-") and word != "--json" for word in argv)


def test_reads_begun_for_other_paths_are_ended_and_started_again(sparse_image) -> None:
    """What passes filekind's checks when the command line is parsed is what is read: reads begun for other paths
    (a target that became a FIFO in between; here another list) are ended, and those of the paths now start."""
    from diskplan.backend.parted import readahead
    from diskplan.cli.options import open_targets

    img = str(_gpt_image(sparse_image))
    blank = str(sparse_image(8 << 20, "blank.img"))
    before = _children()
    begun = readahead.start([blank, img], lanes=1, filesystems=False)
    (opened,) = open_targets([img], lanes=1, filesystems=False, begun=begun)
    assert opened.geometry.sectors == (256 << 20) // 512 and opened.table.label == "gpt"  # type: ignore[union-attr]
    assert [p.number for p in opened.table.partitions] == [1, 2, 3, 4]  # type: ignore[union-attr]
    assert begun.items == [blank, img]
    assert _children() == before  # the reads begun were ended and reaped, as were the new ones


# --- the modules it never needs ------------------------------------------------------------------------------


def test_check_imports_neither_socket_nor_signal_nor_platform_nor_pickle(sparse_image) -> None:
    """The parent (seen by -X importtime) and the reading child (its imports: those of libparted's module)."""
    img = _gpt_image(sparse_image)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "diskplan", "check", "--json", str(img)],
                          capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "diskplan.backend.parted.isolate" in imported  # the list is the real one
    assert not {"socket", "signal", "platform", "selectors", "pickle"} & imported
    assert not {"argparse", "gettext", "re"} & imported  # plain: no argparse (_plain_args); no LVM: no re
    child = subprocess.run([sys.executable, "-c", "import sys, diskplan.backend.parted.libparted; "
                            "print(' '.join(sorted({'socket', 'signal', 'platform', 're', 'diskplan.model.ptypes', "
                            "'diskplan.model.labels', 'diskplan.backend.raw.kernelparts'} & set(sys.modules))))"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == ""


def test_the_reading_child_imports_no_model(sparse_image) -> None:
    """What check's reading child runs (readahead's ``_read_tables``: pedread.read_rows) imports none of the model
    nor the raw GPT parsers, and answers with builtins only, which the parent's unpickling imports nothing for."""
    img = _gpt_image(sparse_image)
    code = ("import sys; from diskplan.backend.parted import isolate, readahead; "
            "isolate.IN_CHILD = True; rows = readahead._read_tables(sys.argv[1]); "
            "print(len(rows['partitions'])); print(' '.join(sorted(m for m in sys.modules if m.startswith("
            "('diskplan.model.', 'diskplan.backend.raw.', 'enum'))))); import pickle, pickletools; "
            "print(' '.join(op.name for op, _, _ in pickletools.genops(pickle.dumps(rows)) if 'GLOBAL' in op.name))")
    child = subprocess.run([sys.executable, "-c", code, str(img)], capture_output=True, text=True, check=True)
    count, modules, globals_ = [*child.stdout.splitlines(), "", ""][:3]
    assert count == "4"
    assert modules == "diskplan.model.mountinfo"  # (siblings': which mounts to let go of)
    assert globals_ == ""  # no class to import to unpickle the answer


_OWN_COMPILES = """
import re, sys
compiled = []
plain = re._compile
def _compile(pattern, flags):
    if (type(pattern), pattern, flags) not in re._cache:
        caller = sys._getframe(2).f_code.co_filename  # past re.compile / re.match, whoever asked
        if "/diskplan/" in caller:
            compiled.append(f"{caller.rsplit('/diskplan/', 1)[1]}: {pattern}")
    return plain(pattern, flags)
re._compile = _compile
from diskplan.cli.main import main
try:
    main(["check", "--json", sys.argv[1]])
finally:
    print(*compiled, sep="\\n", file=sys.stderr)
"""


def test_check_compiles_no_regular_expression_of_its_own(sparse_image) -> None:
    """Every pattern the check's parent compiles, and who asked: argparse's and gettext's are the price of
    argparse; diskplan's (a GUID, a systemd alias, a mistyped command) are for plans and typed input."""
    img = _gpt_image(sparse_image)
    proc = subprocess.run([sys.executable, "-c", _OWN_COMPILES, str(img)], capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr
    assert '"partitions"' in proc.stdout  # the check ran
    assert proc.stderr.strip() == ""


def test_the_compile_count_sees_diskplans_patterns(sparse_image) -> None:
    """The other side: where diskplan does compile one (a type name typed by the user), the count shows it."""
    code = _OWN_COMPILES.replace('main(["check", "--json", sys.argv[1]])',
                                 'from diskplan.model import labels; labels.type_code("gpt", "0" * 32)')
    proc = subprocess.run([sys.executable, "-c", code, "x"], capture_output=True, text=True)
    assert "model/labels.py: ^[0-9A-Fa-f]{8}" in proc.stderr, proc.stderr


# --- syncs in the reading child --------------------------------------------------------------------------------


def _synced_in_a_reading_child() -> str:
    from diskplan.backend.parted import readonly

    if not readonly.forbid_writes():
        return "no filter"
    r, _ = os.pipe()
    os.fsync(r)  # the kernel refuses a pipe (EINVAL): only the filter's answer comes back as done
    os.fdatasync(r)
    return "synced"


def test_the_reading_child_syncs_nothing() -> None:
    """libparted fsyncs the device as it closes it (twice a read: a drive's cache flush on a disk); the read-only
    child answers every sync at once. A pipe shows it: syncing one fails, except where the filter answers."""
    from diskplan.backend.parted import isolate

    if os.uname().machine != "x86_64":
        pytest.skip("the read-only filter is x86-64's")
    r, _ = os.pipe()
    with pytest.raises(OSError):
        os.fsync(r)
    assert isolate.run_isolated(_synced_in_a_reading_child) == "synced"


# --- the GPT parsed once -----------------------------------------------------------------------------------------


def test_the_backup_gpt_takes_the_primarys_entries_only_when_its_array_is_the_same(sparse_image) -> None:
    """A healthy disk's backup array is the primary's, byte for byte: its entries are the primary's, not parsed
    again (128 entries: ~0.5 ms). With the primary's array damaged, the backup's are its own parse."""
    from diskplan.backend.raw.gptcheck import check_gpt
    from diskplan.backend.raw.rawtable import parse_gpt_entries

    img = _gpt_image(sparse_image)
    sectors = img.stat().st_size // 512
    healthy = check_gpt(str(img), 512, sectors)
    assert healthy is not None and healthy.primary.ok and healthy.backup.ok
    assert healthy.backup.entries is healthy.primary.entries and len(healthy.backup.entries) == 4
    assert list(healthy.backup.entries) == parse_gpt_entries(healthy.backup.raw_entries, 128, 128)
    with open(img, "r+b") as f:  # one byte of the first entry's name in the primary array (LBA 2)
        f.seek(2 * 512 + 56)
        f.write(b"X")
    damaged = check_gpt(str(img), 512, sectors)
    assert damaged is not None and not damaged.primary.ok and damaged.backup.ok
    assert damaged.backup.entries == healthy.primary.entries and len(damaged.backup.entries) == 4


@pytest.mark.parametrize(("vendor", "answer"), [("Apple Inc.", ""), ("Dell Inc.", "0")])
def test_a_mac_is_left_to_libparted_own_question(tmp_path: pathlib.Path, vendor: str, answer: str) -> None:
    """sys_vendor says "Apple" to every user, dmidecode only to root (the SMBIOS table and /dev/mem are
    root's): answering "1" from sysfs made libparted write a hybrid MBR where its own question gives a
    protective one. A Mac is left to libparted; elsewhere "0" stands (the answer dmidecode gives there too).
    The machine's DMI is faked in a mount namespace of the child alone."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare: a private mount namespace with a tmpfs over /sys/class")
    script = (f"mount -t tmpfs none /sys/class && mkdir -p /sys/class/dmi/id && printf '%s\\n' '{vendor}' > "
              f"/sys/class/dmi/id/sys_vendor && exec {sys.executable} -c "
              f"\"import os, diskplan.backend.parted; print(os.environ.get('{ANSWER}', ''))\"")
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                          text=True, env=_without_answer(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == answer


# --- the end of the process ---------------------------------------------------------------------------------------

_ENDING = """
import atexit, os, sys
atexit.register(lambda: os.write(2, b"finalized"))
sys.argv = ["diskplan", *sys.argv[1:]]
from diskplan.cli.main import program
program()
"""


def test_a_check_ends_without_the_interpreters_finalization_and_says_all(sparse_image, tmp_path: pathlib.Path) -> None:
    """`check` ends with os._exit once its output is flushed (cli.main.ENDS_AT_ONCE): all of its JSON and its
    messages still come out, to a pipe and to a file, with its exit status; other commands end as before."""
    import json

    img = _gpt_image(sparse_image)
    missing = tmp_path / "missing.img"
    proc = subprocess.run([sys.executable, "-c", _ENDING, "check", "--json", str(img), str(missing)],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr  # the worst of the two: one target could not be read
    assert "finalized" not in proc.stderr
    assert proc.stderr.startswith("diskplan check: ") and str(missing) in proc.stderr
    assert len(json.loads(proc.stdout)["disks"][0]["partitions"]) == 4
    out = tmp_path / "out.json"
    with out.open("w") as f:  # a file is block-buffered: what was printed is flushed before the end
        proc = subprocess.run([sys.executable, "-c", _ENDING, "check", "--json", str(img)], stdout=f,
                              stderr=subprocess.PIPE, text=True)
    assert proc.returncode in (0, 1) and proc.stderr == ""
    assert json.loads(out.read_text())["table"] == "gpt"
    other = subprocess.run([sys.executable, "-c", _ENDING, "export", "--help"], capture_output=True, text=True)
    assert other.returncode == 0 and other.stderr == "finalized"  # the usual end: atexit's work is done


def test_a_check_whose_reader_went_away_still_ends_quietly(sparse_image) -> None:
    """The reader of the output closed it early (`| head -c 1`): the status a shell gives a program SIGPIPE
    ended, and no traceback, as before `check` ended at once. (100 partitions: ~95 KB of JSON, more than a
    pipe holds, so the write meets the closed pipe.)"""
    img = _gpt_image(sparse_image, partitions=100)
    proc = subprocess.Popen([sys.executable, "-c", _ENDING, "check", "--json", str(img)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(1) == b"{"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait() == 141 and b"Traceback" not in err, err
