"""diskplan as a package: the command line's tree (help, version, a mistyped command), the files generated from
it (man page, completions), and the wheel installed into a fresh venv as `pip install` would."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from conftest import REPO, need_tool, run
from diskplan import __version__
from diskplan.cli.main import COMMANDS

MiB = 1 << 20


def diskplan(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def test_help_lists_every_command_with_a_summary() -> None:
    proc = diskplan("--help")
    assert proc.returncode == 0
    for name in ("check", "export", "apply", "restore", "repair", "move", "realign", "resume", "stack"):
        assert any(line.split()[:1] == [name] for line in proc.stdout.splitlines()), name
    assert set(COMMANDS) == {"check", "export", "apply", "restore", "repair", "move", "realign", "resume", "resize",
                             "measure", "serve", "lesson", "stack"}
    assert "--demo" in proc.stdout and "--version" in proc.stdout


def test_a_mistyped_command_is_an_invalid_choice_not_a_missing_file() -> None:
    proc = diskplan("chek", "disk.img")
    assert proc.returncode == 2
    assert "invalid choice: 'chek'" in proc.stderr and "'check'" in proc.stderr and "'repair'" in proc.stderr


def test_a_path_is_still_the_planners_target(tmp_path: pathlib.Path) -> None:
    """A word that names a file, or anything that looks like a path, still opens the planner (which needs a
    terminal here, so it says so): only a bare word that names nothing is taken for a command."""
    (tmp_path / "chek").write_bytes(b"\0" * 4096)
    proc = subprocess.run([sys.executable, "-m", "diskplan", "chek"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.returncode == 2 and "invalid choice" not in proc.stderr
    proc = diskplan("/nonexistent/disk.img")
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_version_is_the_packages() -> None:
    proc = diskplan("--version")
    assert proc.returncode == 0 and proc.stdout == f"diskplan {__version__}\n"


def test_every_command_keeps_its_own_help_and_errors() -> None:
    for name in COMMANDS:
        proc = diskplan(name, "--help")
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: diskplan {name} "), name
    proc = diskplan("check")
    assert proc.returncode == 2 and "usage: diskplan check" in proc.stderr and "required: target" in proc.stderr


def test_license_is_the_gpl_v3_pyproject_names() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "GNU GENERAL PUBLIC LICENSE" in text and "Version 3, 29 June 2007" in text
    assert 'license = "GPL-3.0-or-later"' in (REPO / "pyproject.toml").read_text()


def test_man_page_and_completions_are_generated_from_the_current_parser() -> None:
    """share/ is what the wheel installs: it must say what today's parser says."""
    pytest.importorskip("shtab")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_share.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    man = subprocess.run(["man", "-l", str(REPO / "share/man/man1/diskplan.1")], capture_output=True, text=True,
                         env={**os.environ, "MANWIDTH": "100"}) if shutil.which("man") else None
    if man is not None:
        assert man.returncode == 0 and "warning" not in man.stderr
        for name in COMMANDS:
            assert f"diskplan {name} [-h]" in man.stdout


def _complete(script: pathlib.Path, words: str) -> list[str]:
    """What bash offers after typing `words` (the last word unfinished), through the completion function."""
    code = (f"source {script}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); "
            'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; _shtab_diskplan; printf "%s\\n" "${COMPREPLY[@]}"')
    return run("bash", "-c", code).split()


def test_bash_completion_offers_commands_and_their_options() -> None:
    script = REPO / "share/bash-completion/completions/diskplan"
    assert _complete(script, "diskplan re") == ["restore", "repair", "realign", "resume", "resize"]
    assert "--journal" in _complete(script, "diskplan resume --")
    assert _complete(script, "diskplan export -f ''") == ["json", "sfdisk", "parted", "ansible", "ignition", "repart"]


def _deps_only(tmp: pathlib.Path) -> pathlib.Path:
    """This venv's installed packages minus diskplan, seen by another venv as it would see Debian's
    python3-parted with --system-site-packages: pyparted is not compiled again."""
    view = tmp / "deps"
    view.mkdir()
    for entry in pathlib.Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "diskplan" not in entry.name.lower():
            (view / entry.name).symlink_to(entry)
    return view


def test_the_wheel_installs_the_program_its_man_page_and_completions(tmp_path: pathlib.Path,
                                                                     sparse_image: object) -> None:
    pytest.importorskip("hatchling")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(REPO)], check=True, capture_output=True, timeout=120)
    (wheel,) = wheels.glob("diskplan-*.whl")
    assert wheel.name == f"diskplan-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        assert any(n.endswith("licenses/LICENSE") for n in z.namelist())
        assert {"diskplan/schemas/plan-v1.schema.json", "diskplan/schemas/check-v1.schema.json"} <= set(z.namelist())

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    vpy = venv / "bin" / "python"
    site = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(site) / "deps.pth").write_text(f"{_deps_only(tmp_path)}\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed copy, not the source tree
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(vpy), "install", "-q", "--no-index",
                           str(wheel)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr  # its dependencies were found, none fetched or built

    proc = subprocess.run([venv / "bin" / "diskplan", "--version"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout == f"diskplan {__version__}\n"
    where = subprocess.run([vpy, "-c", "import diskplan; print(diskplan.__file__)"], capture_output=True, text=True,
                           env=env, check=True).stdout
    assert where.startswith(str(venv)), where
    assert (venv / "share/man/man1/diskplan.1").read_text().startswith(".TH DISKPLAN 1")
    assert "_shtab_diskplan" in (venv / "share/bash-completion/completions/diskplan").read_text()
    assert "#compdef diskplan" in (venv / "share/zsh/site-functions/_diskplan").read_text()

    img = sparse_image(16 * MiB)  # type: ignore[operator]
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=8192\n")
    proc = subprocess.run([venv / "bin" / "diskplan", "check", str(img)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr  # the installed program reads a disk with its dependencies
