"""Hostile bytes: what a careless or hostile disk, image or plan file holds must not reach the terminal, hang
diskplan, exhaust its memory or end in an "internal error"; a misread input is an error, not a guess."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable

import pytest

from helpers.tools import need_tool, run
from helpers.units import MiB

EVIL = "\x1b]0;OWNED\x07\x1b[2J"  # retitles an xterm, then clears the screen
EVIL_SFDISK = r"\x1b]0;OWNED\x07\x1b[2J"  # the same name as sfdisk writes it


def diskplan(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "400"}  # rich wraps long paths at 80 columns off a terminal
    proc = subprocess.run([sys.executable, "-m", "diskplan", *args], capture_output=True, timeout=timeout,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL, env=env)
    assert b"Traceback" not in proc.stderr + proc.stdout
    assert b"internal error" not in proc.stderr + proc.stdout
    return proc


def one_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The whole of stderr, which must be one line."""
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err


def evil_image(sparse_image: Callable[..., pathlib.Path], name: str = "evil.img") -> pathlib.Path:
    img = sparse_image(64 * MiB, name)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img),
        input=f'label: gpt\nstart=2048, size=20480, name="{EVIL_SFDISK}"\n')
    return img


# --- 5. terminal escapes --------------------------------------------------------------------------------


def test_check_shows_an_escape_in_a_partition_name_without_sending_it(sparse_image) -> None:
    img = evil_image(sparse_image)
    proc = diskplan("check", str(img))
    assert proc.returncode == 0
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    assert rb"\x1b]0;OWNED\x07\x1b[2J" in proc.stdout  # shown, visibly
    # JSON escapes it itself and keeps the name exact.
    doc = json.loads(diskplan("check", "--json", str(img)).stdout)
    assert doc["partitions"][0]["name"] == EVIL


def test_a_path_with_escapes_and_markup_is_shown_as_it_is(sparse_image) -> None:
    img = evil_image(sparse_image, "[bold]x\x1b[31m.img")
    proc = diskplan("check", str(img))
    assert b"\x1b" not in proc.stdout
    assert rb"[bold]x\x1b[31m.img" in proc.stdout  # not eaten as rich markup
    proc = diskplan("check", str(img) + "\x9b2J")  # no such file: the error quotes the path, escaped
    assert proc.returncode == 2 and "\x9b" not in proc.stderr.decode() and "\\x9b2J" in one_line(proc)


def test_apply_keeps_a_hostile_name_byte_for_byte_and_shows_it_escaped(sparse_image, tmp_path) -> None:
    img = evil_image(sparse_image)
    plan = json.loads(diskplan("export", str(img)).stdout)
    plan["partitions"].append({"start": 40960, "size": 2048})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    proc = diskplan("apply", str(path), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in proc.stdout + proc.stderr and rb"\x1b]0;OWNED" in proc.stdout
    assert f'name="{EVIL_SFDISK}"' in run("sfdisk", "--dump", str(img))  # written back unchanged


def test_the_planner_shows_escapes_from_the_disk_and_still_draws_the_map(sparse_image) -> None:
    from diskplan.backend.read.reader import read
    from diskplan.ui import textual_private
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.dialogs import PartitionScreen
    from diskplan.ui.target import Target
    from helpers.pilot import wait_for

    img = evil_image(sparse_image, "evil\x1b[2J.img")

    def screen_text(app: PlannerApp) -> str:
        return "\n".join(textual_private.screen_lines(app.screen))

    async def go() -> None:
        app = PlannerApp(start=Target(read(str(img)), img.name, note=f"note {EVIL}", path=str(img)))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            await pilot.pause(0.2)
            for key in ("", "i", "e"):  # the explain panel, the facts with the note, the notifications
                if key:
                    await pilot.press(key)
                    await pilot.pause(0.2)
                text = screen_text(app)
                assert not any(ch in text for ch in "\x1b\x07\x9b"), repr(text)
            assert r"\x1b]0;OWNED\x07\x1b[2J" in text  # the list, the status line, the explanation
            assert r"evil\x1b[2J.img" in text  # the title
            assert " 126,880 " in text  # the map is drawn (its last row's label)
            app.action_edit_partition()  # the dialog that edits the name: shown escaped, kept when not edited
            await wait_for(pilot, lambda: isinstance(app.screen, PartitionScreen))
            await pilot.pause()
            assert not any(ch in screen_text(app) for ch in "\x1b\x07")
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, PartitionScreen))
            assert app.session is not None and app.session.plan.partition(1).name == EVIL  # type: ignore[union-attr]

    asyncio.run(go())


def test_the_device_picker_shows_a_loop_devices_file_escaped(sparse_image, loop_device) -> None:
    from diskplan.discovery.udev import list_disks
    from diskplan.ui import textual_private
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.screens import DevicePicker
    from helpers.pilot import wait_for

    img = evil_image(sparse_image, "[b]evil\x1b]0;OWNED\x07.img")
    node = loop_device(img)

    async def go() -> None:
        app = PlannerApp(None, None, lister=list_disks, watch_devices=False)
        async with app.run_test(size=(160, 40)) as pilot:
            def shown() -> str:
                return "\n".join(textual_private.screen_lines(app.screen))

            # Other loop devices may come and go meanwhile (a shared machine), and each is read for its row:
            # wait for this one's (10 s was not always enough with a dozen loops under load).
            await wait_for(pilot, lambda: isinstance(app.screen, DevicePicker) and node in shown(), 30,
                           what=f"the device picker's row for {node}")
            text = shown()
            assert node in text and r"[b]evil\x1b]0;OWNED\x07.img" in text  # not markup, not an escape
            assert "\x1b" not in text and "\x07" not in text

    asyncio.run(go())


# --- 6. hangs and unbounded memory ----------------------------------------------------------------------


@pytest.mark.parametrize("plan", ["/dev/zero", "/dev/urandom", "fifo", "directory"])
def test_a_plan_that_is_no_file_is_refused_without_reading_it(plan: str, sparse_image, tmp_path) -> None:
    img = evil_image(sparse_image)
    if plan == "fifo":
        plan = str(tmp_path / "plan.fifo")
        os.mkfifo(plan)  # no writer ever comes: opening it to read would wait for ever
    elif plan == "directory":
        plan = str(tmp_path)
    for command in ("apply", "export"):
        proc = diskplan(command, plan, *([str(img)] if command == "apply" else []), timeout=20)
        assert proc.returncode == 2
        assert any(w in one_line(proc) for w in ("a character device", "a FIFO", "a directory"))


def test_standard_input_is_read_only_so_far(sparse_image) -> None:
    img = evil_image(sparse_image)
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([sys.executable, "-m", "diskplan", "apply", "-", str(img)], stdin=zero,
                              capture_output=True, timeout=20)
    assert proc.returncode == 2 and "too large for a plan" in one_line(proc)


@pytest.mark.parametrize("command", ["check", "export", "apply"])
def test_a_fifo_or_a_character_device_as_target_is_refused(command: str, tmp_path) -> None:
    fifo = tmp_path / "disk.fifo"
    os.mkfifo(fifo)
    plan = tmp_path / "plan.json"
    plan.write_text('{"label": "gpt", "partitions": []}')
    for target, what in ((str(fifo), "is a FIFO (named pipe), not a disk or an image file"),
                         ("/dev/zero", "/dev/zero is a character device, not a disk or an image file")):
        proc = diskplan(command, *([str(plan)] if command == "apply" else []), target, timeout=20)
        assert proc.returncode == 2 and what in one_line(proc)


def test_libparted_opens_nothing_beside_an_image(sparse_image, tmp_path) -> None:
    """libparted opens IMG1..IMG63 for writing beside an image it opens read-write: a FIFO named so hung
    it until the reader's deadline (30 s)."""
    import time

    img = evil_image(sparse_image)
    os.mkfifo(str(img) + "1")
    os.mkfifo(str(img) + "63")
    begin = time.monotonic()
    proc = diskplan("check", str(img), timeout=60)
    assert proc.returncode == 0 and b"10 MiB" in proc.stdout, proc.stderr
    plan = tmp_path / "plan.json"
    plan.write_text(diskplan("export", str(img)).stdout.decode().replace('"partitions": [', '"partitions": [\n'
                    '{"start": 40960, "size": 2048},', 1))
    proc = diskplan("apply", str(plan), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - begin < 15
    assert "start=       40960, size=        2048" in run("sfdisk", "--dump", str(img))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.dpbackup", "evil.img", "evil.img1", "evil.img63",
                                                          "plan.json"]  # nothing left behind


# --- 7. no "internal error" -----------------------------------------------------------------------------

HOSTILE_PLANS = {
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "a 5,000-digit number": ('{"label": "gpt", "partitions": [{"start": ' + "9" * 5000 + ', "size": 1}]}',
                             "more than 4300 digits"),
    "a number past 2^64": ('{"label": "gpt", "partitions": [{"start": ' + str(1 << 70) + ', "size": 1}]}',
                           "from 0 to 2^64-1"),
    "a lone surrogate": ('{"label": "gpt", "partitions": [{"start": 2048, "size": 1, "name": "a\\ud800b"}]}',
                         "half of a UTF-16 pair"),
    "a role in a list": ('{"label": "gpt", "partitions": [{"start": 2048, "size": 1, "role": ["primary"]}]}',
                         "role must be primary, extended or logical"),
    "a label in a list": ('{"label": ["gpt"], "partitions": []}', "label must be"),
    "a format as an object": ('{"format": {"a": 1}, "label": "gpt", "partitions": []}', "not a diskplan plan"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_PLANS))
def test_hostile_json_plans_are_one_clear_line(case: str, sparse_image, tmp_path) -> None:
    text, words = HOSTILE_PLANS[case]
    plan = tmp_path / "plan.json"
    plan.write_text(text)
    img = evil_image(sparse_image)
    for args in (("apply", str(plan), str(img)), ("export", str(plan))):
        proc = diskplan(*args)
        assert proc.returncode == 2 and words in one_line(proc)


def test_a_closed_standard_output_ends_quietly(sparse_image) -> None:
    img = evil_image(sparse_image)
    for args in (("export", str(img)), ("check", str(img)), ("export", str(img), "-f", "parted")):
        proc = subprocess.Popen([sys.executable, "-m", "diskplan", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # `| head -0`: the reader is gone before the first line
        err = proc.stderr.read()
        assert proc.wait(timeout=30) == 141 and err == b""  # as a shell reports a program SIGPIPE ended


# --- 8. sfdisk input read as sfdisk reads it, or refused --------------------------------------------------

MISREAD = {
    "a typo in a field": "typ=S",
    "full-width digits": "start=\uff12\uff10\uff14\uff18",
    "an unclosed quote": 'name="abc',
    "an unknown field": "foo=1",
    "bootable with a value": "bootable=1",
}


@pytest.mark.parametrize("case", sorted(MISREAD))
def test_what_sfdisk_refuses_diskplan_refuses(case: str, sparse_image, tmp_path) -> None:
    field = MISREAD[case]
    fields = f"{field}, size=2048" if field.startswith("start") else f"start=2048, size=2048, {field}"
    script = f"label: gpt\n\nd1 : {fields}\n"
    img = sparse_image(64 * MiB)
    referee = subprocess.run([need_tool("sfdisk"), "-q", "--no-reread", str(img)], input=script, text=True,
                             capture_output=True)
    assert referee.returncode != 0 and "unsupported command" in referee.stderr  # sfdisk's verdict
    dump = tmp_path / "plan.dump"
    dump.write_text(script, encoding="utf-8")
    proc = diskplan("apply", str(dump), str(img))
    assert proc.returncode == 2 and "line 3" in one_line(proc)


def test_what_a_dump_says_and_is_not_applied_is_said(sparse_image, tmp_path) -> None:
    img = evil_image(sparse_image)
    dump = tmp_path / "plan.dump"
    dump.write_text(run("sfdisk", "--dump", str(img)).replace("unit: sectors", "unit: sectors\ntable-length: 32"))
    assert "label-id:" in dump.read_text() and "uuid=" in dump.read_text()
    out = diskplan("apply", str(dump), str(img)).stdout.decode()
    assert "note: table-length 32 is not applied" in out
    assert "is not applied" not in out.replace("table-length 32 is not applied", "")  # apply writes the ids (issue 30)
    proc = diskplan("export", str(dump))
    err = proc.stderr.decode()
    assert proc.returncode == 0 and err.count("diskplan export: note: ") == 3, err
    assert "note: label-id " in err and "note: uuid= of partition 1 is not carried into the json output" in err


# --- 9. errors that say what is true ---------------------------------------------------------------------

ONE = '{"label": "gpt", "partitions": [{"start": 2048, "size": 2048}]}'


def test_an_image_that_ends_in_part_of_a_sector_is_refused_before_any_backup(tmp_path) -> None:
    img = tmp_path / "odd.img"
    img.write_bytes(b"")
    os.truncate(img, 64 * MiB + 100)
    plan = tmp_path / "plan.json"
    plan.write_text(ONE)
    proc = diskplan("apply", str(plan), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "holds 67108964 bytes: the last 100 are no whole 512-byte sector" in err
    assert "vanished" not in err and not (tmp_path / "b.dpbackup").exists()


@pytest.mark.parametrize("command", [("move", "-N", "1", "--to", "4096"), ("resize", "-N", "1", "--size", "12MiB")])
def test_a_data_write_to_an_image_that_ends_in_part_of_a_sector_is_refused_before_any_backup(
    tmp_path, command: tuple[str, ...]
) -> None:
    """The write refusals are asked where every write is prepared (backend.write.steps.unwritable): `diskplan move`
    and `resize` did not add them (apply, repair and the planner's screens each did) and moved the partition."""
    img = tmp_path / "odd.img"
    img.write_bytes(b"")
    os.truncate(img, 64 * MiB)
    run(need_tool("sfdisk"), "-q", str(img), input="label: gpt\nstart=2048, size=20480\n")
    os.truncate(img, 64 * MiB + 100)
    before = img.read_bytes()
    proc = diskplan(command[0], str(img), *command[1:], "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "holds 67108964 bytes: the last 100 are no whole 512-byte sector" in err, err
    assert not (tmp_path / "b.dpbackup").exists() and img.read_bytes() == before


def test_a_path_with_a_line_break_is_refused_before_any_backup(sparse_image, tmp_path) -> None:
    img = sparse_image(64 * MiB, "new\nline.img")
    plan = tmp_path / "plan.json"
    plan.write_text(ONE)
    proc = diskplan("apply", str(plan), str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and r"new\nline.img holds a line break" in err and "read back" not in err
    assert not (tmp_path / "b.dpbackup").exists()


def test_a_disk_too_small_for_any_table_says_so(sparse_image, tmp_path) -> None:
    img = sparse_image(512)
    plan = tmp_path / "plan.json"
    plan.write_text(ONE)
    proc = diskplan("apply", str(plan), str(img))
    assert proc.returncode == 1
    assert "1 sector(s) of 512 B: too small for a gpt table, whose own structures take 67 sectors" in one_line(proc)
    assert "-33s" not in proc.stderr.decode()


def test_a_backup_that_cannot_be_saved_names_the_place(sparse_image, tmp_path) -> None:
    img = sparse_image(64 * MiB)
    plan = tmp_path / "plan.json"
    plan.write_text(ONE)
    home = tmp_path / "home"
    home.write_text("a file where the home directory should be")
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"} | {"HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "diskplan", "apply", str(plan), str(img), "--yes"],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 3  # the write began: its backup failed (nothing written)
    assert "no backup, so nothing was written: cannot create the backup directory " in proc.stderr
    assert f"{home}/.local: Not a directory" in proc.stderr


def test_a_gpt_with_a_4_entry_array_can_be_edited(sparse_image, tmp_path) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img),
        input="label: gpt\ntable-length: 4\nstart=2048, size=2048\nstart=8192, size=2048\n")
    plan = json.loads(diskplan("export", str(img)).stdout)
    assert plan["last_lba"] == 131069  # 1 header + 1 sector of entries at the end, not 33
    assert diskplan("apply", "-", str(img), stdin=json.dumps(plan).encode()).returncode == 0  # nothing to do
    plan["partitions"].append({"start": 131069 - 2047, "size": 2048})  # past where 128 entries would begin
    proc = diskplan("apply", "-", str(img), "--yes", "--backup", str(tmp_path / "b.dpbackup"),
                    stdin=json.dumps(plan).encode())
    assert proc.returncode == 0, proc.stderr
    dump = run("sfdisk", "--dump", str(img))
    assert "table-length: 4" in dump and "start=      129022, size=        2048" in dump


def test_a_json_export_escapes_what_json_itself_leaves_raw(sparse_image) -> None:
    img = sparse_image(64 * MiB)
    run(need_tool("sfdisk"), "-q", "--no-reread", str(img),
        input='label: gpt\nstart=2048, size=2048, name="\\xc2\\x9b2J\\xe2\\x80\\xae\\xc3\\xa9"\n')  # CSI, RLO, é
    proc = diskplan("export", str(img))
    assert "\u009b".encode() not in proc.stdout and "\u202e".encode() not in proc.stdout
    assert '"name": "\\u009b2J\\u202eé"' in proc.stdout.decode()
    assert json.loads(proc.stdout)["partitions"][0]["name"] == "\u009b2J\u202eé"  # the same name, read back


def test_the_planner_refuses_to_write_an_image_that_ends_in_part_of_a_sector(sparse_image, tmp_path,
                                                                            monkeypatch) -> None:
    from diskplan.ui.app import PlannerApp
    from diskplan.ui.commit_screen import CommitScreen
    from helpers.pilot import image_target, text_of, wait_for

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    img = evil_image(sparse_image)
    with open(img, "ab") as f:
        f.write(b"\0" * 100)

    async def go() -> None:
        app = PlannerApp(start=image_target(img))
        async with app.run_test(size=(100, 32)) as pilot:
            await wait_for(pilot, lambda: app.session is not None)
            app.sector_map.move_to(20 * MiB)
            await pilot.press("n")
            await pilot.press("ctrl+a", "ctrl+k", *"16MiB", "enter")
            await pilot.pause()
            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, CommitScreen)
            await wait_for(pilot, lambda: screen.proposal is not None)
            assert "the last 100 are no whole 512-byte sector" in text_of(screen)
            await pilot.press(*"yes", "enter")
            await pilot.pause(0.3)
            assert screen.outcome is None  # refused: nothing tried

    asyncio.run(go())
    assert not (tmp_path / "state").exists()  # no backup left behind


def test_a_loop_over_a_file_whose_name_is_not_utf8_is_listed(tmp_path, loop_device) -> None:
    """sysfs gives the backing file's name as it is; one that is not UTF-8 made the disk listing raise, and the
    device picker showed no disk at all."""
    from diskplan.discovery.udev import list_disks

    img = pathlib.Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/odd-\xff.img"))
    with open(img, "wb") as f:
        f.truncate(8 * MiB)
    node = loop_device(img)
    disk = next(d for d in list_disks() if d.node == node)
    assert disk.backing_file.startswith(str(tmp_path)) and "\ufffd" in disk.backing_file


def test_a_loop_over_a_file_whose_name_is_not_utf8_does_not_hide_the_loops_of_an_image(tmp_path, loop_device) -> None:
    """The check for loops over an image reads every loop's backing-file name from sysfs: one that is not UTF-8
    made it raise (udev's listing read it leniently, inuse's strictly)."""
    from diskplan.discovery.inuse import loops_backed_by

    odd = pathlib.Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/odd-\xff.img"))
    plain = tmp_path / "plain.img"
    for img in (odd, plain):
        with open(img, "wb") as f:
            f.truncate(8 * MiB)
    odd_node, plain_node = loop_device(odd), loop_device(plain)
    assert [f"/dev/{n.name}" for n in loops_backed_by(str(plain))] == [plain_node]
    assert [f"/dev/{n.name}" for n in loops_backed_by(str(odd))] == [odd_node]
