"""Where backups go is checked, not trusted (issue 11, item 4): the default directory is made 0700 whatever
the umask, a symlinked, foreign-owned or world-writable one is refused, backup files are created 0600 and
never through a link, and a backup that cannot be written whole (a full disk) leaves nothing behind.

The ownership and umask checks run as a real non-root user (created with useradd when missing)."""

from __future__ import annotations

import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator

import pytest

from diskplan.backend.write import backup as bk
from helpers.cli import KEEP_1_SWAP_3, diskplan, plan_file
from helpers.images import file_sha, fill
from helpers.tools import need_tool, run
from helpers.units import MiB

N = 64 * MiB // 512
USER = "diskplan-test"


@pytest.fixture
def user() -> tuple[int, int]:
    """(uid, gid) of an unprivileged user."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        run(need_tool("useradd"), "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER)
        pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid


@pytest.fixture
def shared() -> Iterator[pathlib.Path]:
    """A directory both root and the test user can reach (pytest's tmp_path is root's alone)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="diskplan-dir-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_user(ids: tuple[int, int], fn: Callable[[], object], umask: int = 0o022, **env: str) -> str:
    """Run ``fn`` in a child process that is the user ``ids`` (no root left), with ``umask`` and ``env``
    (a value "" unsets); returns "" or the line of the exception it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
            os.umask(umask)
            for key, value in env.items():
                os.environ.pop(key, None) if not value else os.environ.__setitem__(key, value)
            fn()
            os.write(w, b"")
        except BaseException as exc:  # everything goes back to the parent as text
            os.write(w, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    os.waitpid(pid, 0)
    return said


def backup_of(img: pathlib.Path) -> bk.TableBackup:
    return bk.capture(str(img), 512, N, bk.backup_extents(str(img), 512, N))


@pytest.fixture
def img(sparse_image: Callable[..., pathlib.Path]) -> pathlib.Path:
    path = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(path), input="label: gpt\nstart=2048, size=20480\n")
    return path


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_default_directory_is_private_even_with_umask_000(
    user: tuple[int, int], shared: pathlib.Path, img: pathlib.Path
) -> None:
    home = shared / "home"
    home.mkdir()
    os.chown(home, *user)
    b = backup_of(img)
    saved: list[str] = []
    said = as_user(user, lambda: saved.append(bk.save(b, bk.default_path("sdb"))), umask=0,
                   HOME=str(home), XDG_STATE_HOME="")
    assert said == ""
    made = [home / ".local", *(home / ".local/state" / d for d in ("", "diskplan", "diskplan/backups"))]
    assert [oct(mode(d)) for d in made] == [oct(0o700)] * 4
    assert all(d.stat().st_uid == user[0] for d in made)
    (file,) = (home / ".local/state/diskplan/backups").iterdir()
    assert mode(file) == 0o600 and file.name.startswith("sdb-")


def test_a_directory_of_another_user_is_refused(
    user: tuple[int, int], shared: pathlib.Path, img: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = shared / "state"
    state.mkdir()
    state.chmod(0o1777)  # like /tmp: anyone may create a directory here
    said = as_user(user, lambda: os.makedirs(state / "diskplan" / "backups", 0o700))
    assert said == "" and (state / "diskplan" / "backups").stat().st_uid == user[0]
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    with pytest.raises(bk.BackupError, match=f"belongs to {USER}, not to root"):
        bk.save(backup_of(img), bk.default_path("sdb"))
    assert list((state / "diskplan" / "backups").iterdir()) == []
    # the other way round: root's directory is not the user's either
    mine = shared / "mine"
    (mine / "diskplan" / "backups").mkdir(parents=True)
    (mine / "diskplan").chmod(0o755)
    b = backup_of(img)
    said = as_user(user, lambda: bk.save(b, bk.default_path("sdb")), XDG_STATE_HOME=str(mine))
    assert f"belongs to root, not to {USER}" in said


def test_a_symlinked_backup_directory_is_refused(
    img: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (tmp_path / "state" / "diskplan").mkdir(parents=True, mode=0o700)
    (tmp_path / "state" / "diskplan" / "backups").symlink_to(elsewhere)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    before = file_sha(img)
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes")
    assert proc.returncode == 3 and "is a symbolic link" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "nothing was written" in proc.stdout + proc.stderr
    assert list(elsewhere.iterdir()) == [] and file_sha(img) == before


def test_a_world_writable_backup_directory_is_refused(
    img: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backups = tmp_path / "state" / "diskplan" / "backups"
    backups.mkdir(parents=True)
    backups.chmod(0o777)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with pytest.raises(bk.BackupError, match=r"can be written by other users \(mode 0777\).*chmod 700"):
        bk.save(backup_of(img), bk.default_path("sdb"))
    assert list(backups.iterdir()) == []


def test_an_unwritable_home_is_named(user: tuple[int, int], shared: pathlib.Path, img: pathlib.Path) -> None:
    b = backup_of(img)
    said = as_user(user, lambda: bk.save(b, bk.default_path("sdb")), HOME=str(shared), XDG_STATE_HOME="")
    assert f"cannot create the backup directory {shared}/.local: Permission denied" in said


def test_a_backup_never_follows_a_link_at_its_name(img: pathlib.Path, tmp_path: pathlib.Path) -> None:
    link = tmp_path / "b.dpbackup"
    link.symlink_to(tmp_path / "victim")
    with pytest.raises(bk.BackupError, match="already exists"):
        bk.save(backup_of(img), str(link))
    assert not (tmp_path / "victim").exists()


@pytest.fixture
def small_fs(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A 256 KiB tmpfs: too small for a backup of random bytes."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    where = tmp_path / "full"
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip()}")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def test_a_full_disk_leaves_no_partial_backup(
    img: pathlib.Path, small_fs: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    fill(img, 34, 2014, 512)  # random, so the backup does not compress below the 256 KiB
    fill(img, N - 2048, 2015, 512)
    before = file_sha(img)
    with pytest.raises(bk.BackupError, match="No space left on device"):
        bk.save(backup_of(img), str(small_fs / "direct.dpbackup"))
    assert list(small_fs.iterdir()) == []
    proc = diskplan("apply", plan_file(tmp_path, KEEP_1_SWAP_3), str(img), "--yes", "--backup",
                    str(small_fs / "b.dpbackup"))
    assert proc.returncode == 3 and "nothing was written" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert list(small_fs.iterdir()) == [] and file_sha(img) == before
