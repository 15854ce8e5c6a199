"""Who is using a disk: mounts, swap, holders (LVM, md, dm-crypt), exclusive openers, locks, and for an
image file the loop devices that read it (at any offset). A loop device is seen through to the file it
reads, and from there to every other loop device of that file. Writing a table under any of them costs
data, so each one is named.

Everything comes from the kernel's own lists: ``/proc/self/mountinfo``, ``/proc/swaps``, ``/proc/locks``,
``/sys/block/<disk>/holders`` and ``/sys/block/<disk>/<part>/holders``, ``/sys/block/loop*/loop`` (and the
loop's LOOP_GET_STATUS64), plus an exclusive open tried on each node; /proc/PID/fd names the processes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct

from diskplan.discovery.sysfs import read, read_int, sysfs_dir
from diskplan.model.mountinfo import unescape
from diskplan.model.value import replace, value


@value
class Use:
    """One reason not to write: ``device`` is mounted / swap / held / busy / read through a loop."""

    device: str  # the node in use, e.g. /dev/loop0p1, or the image file
    how: str  # "mounted", "swap", "held", "locked", "busy", "loop", "mapped", "writer"
    detail: str  # where it is mounted, which device holds it, ...
    blocking: bool = True  # False: worth saying, but writing is still safe
    via: str = ""  # the loop device that reads the image (the target, or the file behind a target loop)
    behind: str = ""  # for a loop device target: the file it reads, and how this use reaches it
    span: tuple[int, int] | None = None  # "mapped": the bytes [start, end) of the target it maps, when known

    def __str__(self) -> str:
        text = {
            "mounted": f"{self.device} is mounted on {self.detail}",
            "swap": f"{self.device} is in use as swap ({self.detail})",
            "held": f"{self.device} is held by {self.detail}",
            "locked": f"{self.device} is locked: {self.detail}",
            "loop": f"{self.device} {self.detail}",
            "mapped": f"{self.device} {self.detail}",
            "writer": f"{self.device} is open for writing in {self.detail}",
        }.get(self.how, f"{self.device} is busy: {self.detail}")
        if self.via:
            return f"{text} ({self.via} reads {self.behind or 'this image'})"
        return f"{text} ({self.behind})" if self.behind else text


@value
class Node:
    """A whole disk or one of its partitions as the kernel lists it."""

    name: str  # sysfs name: loop0, loop0p1, sda1
    devnum: tuple[int, int]
    sysdir: str

    @property
    def path(self) -> str:
        return f"/dev/{self.name}"


def _devnum(text: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (text or "").split(":")
        return int(major), int(minor)
    except ValueError:
        return None


def nodes(sysdir: str) -> list[Node]:
    """The disk at ``sysdir`` and every partition the kernel knows on it."""
    name = os.path.basename(sysdir)
    out = []
    num = _devnum(read(os.path.join(sysdir, "dev")))
    if num:
        out.append(Node(name, num, sysdir))
    try:
        entries = sorted(os.listdir(sysdir))
    except OSError:
        entries = []
    for entry in entries:
        sub = os.path.join(sysdir, entry)
        if entry.startswith(name) and os.path.exists(os.path.join(sub, "partition")):
            num = _devnum(read(os.path.join(sub, "dev")))
            if num:
                out.append(Node(entry, num, sub))
    return out


def _rdev(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.major(st.st_rdev), os.minor(st.st_rdev)) if stat.S_ISBLK(st.st_mode) else None


def mounts(devnums: dict[tuple[int, int], str], proc_root: str = "/proc") -> list[Use]:
    text = read(f"{proc_root}/self/mountinfo") or ""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        post = line.split(" - ", 1)[1].split()
        fstype = post[0] if post else "?"
        source = unescape(post[1]) if len(post) > 1 else ""
        num = _devnum(fields[2])
        # btrfs and others report an anonymous device number: match the mount source's node too.
        hit = devnums.get(num) if num else None
        if hit is None and source.startswith("/"):
            src = _rdev(source)
            hit = devnums.get(src) if src else None
        if hit is not None:
            out.append(Use(hit, "mounted", f"{unescape(fields[4])} ({fstype})"))
    return out


def swaps(devnums: dict[tuple[int, int], str], image: os.stat_result | None, proc_root: str = "/proc") -> list[Use]:
    text = read(f"{proc_root}/swaps") or ""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if not fields:
            continue
        name = unescape(fields[0])
        kind = fields[1] if len(fields) > 1 else "?"
        try:
            st = os.stat(name)
        except OSError:
            continue
        if stat.S_ISBLK(st.st_mode):
            hit = devnums.get((os.major(st.st_rdev), os.minor(st.st_rdev)))
            if hit is not None:
                out.append(Use(hit, "swap", f"{kind} {name}"))
        elif image is not None and (st.st_dev, st.st_ino) == (image.st_dev, image.st_ino):
            out.append(Use(name, "swap", f"{kind} file"))
    return out


def _holder_name(sys_root: str, holder: str) -> str:
    """dm-0 -> "dm-0 (LVM vg-lv)"; md0 -> "md0 (md raid1 array)"."""
    dm = f"{sys_root}/class/block/{holder}/dm"
    name = read(f"{dm}/name")
    uuid = read(f"{dm}/uuid") or ""
    if name is None:
        level = read(f"{sys_root}/class/block/{holder}/md/level")
        return f"{holder} (md {level} array)" if level else holder
    kind = {"LVM": "LVM", "CRYPT": "dm-crypt", "mpath": "multipath", "part": "kpartx"}.get(uuid.split("-")[0], "dm")
    return f"{holder} ({kind} {name})"


def holders(found: list[Node], sys_root: str = "/sys") -> list[Use]:
    out: list[Use] = []
    for node in found:
        try:
            names = sorted(os.listdir(os.path.join(node.sysdir, "holders")))
        except OSError:
            continue
        out.extend(Use(node.path, "held", _holder_name(sys_root, h)) for h in names)
    return out


def _excl(path: str) -> int:
    """0 when ``path`` can be opened exclusively (nothing claims it), else the errno."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_EXCL | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return exc.errno or errno.EIO
    os.close(fd)
    return 0


def _open_fds(wanted: set[tuple[str, int, int]], proc_root: str = "/proc") -> dict[tuple[str, int, int],
                                                                                 list[tuple[str, str]]]:
    """Which (pid, fd) have open one of ``wanted``: ("blk", major, minor) for a block device, ("file", st_dev,
    st_ino) for a file, as `fuser` finds them: every /proc/PID/fd. This process is left out (it holds the
    disk for its own write)."""
    found: dict[tuple[str, int, int], list[tuple[str, str]]] = {}
    if not wanted:
        return found
    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir(proc_root) if p.isdigit() and p != me]
    except OSError:
        return found
    for pid in pids:
        fd_dir = f"{proc_root}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if stat.S_ISBLK(st.st_mode):
                key = ("blk", os.major(st.st_rdev), os.minor(st.st_rdev))
            else:
                key = ("file", st.st_dev, st.st_ino)
            if key in wanted:
                found.setdefault(key, []).append((pid, fd))
    return found


def _comm(pid: str, proc_root: str) -> str:
    return f"{read(f'{proc_root}/{pid}/comm') or '?'} (pid {pid})"


def openers(wanted: set[tuple[str, int, int]], proc_root: str = "/proc") -> dict[tuple[str, int, int], list[str]]:
    """Which processes (``name (pid N)``) have open one of ``wanted`` (``_open_fds``): used only once
    something is found busy or locked, to name it."""
    return {key: [_comm(pid, proc_root) for pid in dict.fromkeys(pid for pid, _ in held)]
            for key, held in _open_fds(wanted, proc_root).items()}


_O_ACCMODE = 0o3  # O_WRONLY 1, O_RDWR 2


def _for_writing(pid: str, fd: str, proc_root: str) -> bool:
    """Whether the open file description behind /proc/PID/fd/FD can write (its fdinfo's octal flags)."""
    for line in (read(f"{proc_root}/{pid}/fdinfo/{fd}") or "").splitlines():
        if line.startswith("flags:"):
            try:
                return int(line.split()[1], 8) & _O_ACCMODE != 0
            except (IndexError, ValueError):
                return True  # unreadable flags: assume the worst
    return False  # the descriptor closed meanwhile


def writers(devnums: dict[tuple[int, int], str], named: set[str], allowed: bool = False,
            proc_root: str = "/proc") -> list[Use]:
    """Processes holding one of ``devnums``'s nodes open for writing (a VM on a raw partition, a database,
    a `dd` in progress): no lock, no mount, no exclusive claim, yet a write beside them costs data. Each
    is named as `fuser` does. ``named`` nodes already refuse for another reason; ``allowed`` (the user's
    --allow-open-writers) keeps them as notes."""
    wanted = {("blk", *num) for num, path in devnums.items() if path not in named}
    out = []
    for key, held in sorted(_open_fds(wanted, proc_root).items()):
        pids = dict.fromkeys(pid for pid, fd in held if _for_writing(pid, fd, proc_root))
        if pids:
            names = [_comm(pid, proc_root) for pid in pids]
            out.append(Use(devnums[(key[1], key[2])], "writer",
                           ", ".join(names[:3]) + (" …" if len(names) > 3 else ""), blocking=not allowed))
    return out


def _open_in(names: list[str]) -> str:
    return f"; open in {', '.join(names[:3])}" + (" …" if len(names) > 3 else "") if names else ""


def busy(found: list[Node], named: set[str], proc_root: str = "/proc") -> list[Use]:
    """An exclusive open fails while the kernel (or anything else) claims the device: catches what the
    lists above cannot name, e.g. a filesystem mounted in another mount namespace. A claim on a partition
    makes its whole disk refuse too, and a claim on the whole disk makes every partition refuse: so the
    disk is tried first (if it opens, nothing on it is claimed), then its partitions; the disk itself is
    named only when no partition opens either, and then only when nothing else explains it."""
    out: list[Use] = []
    disks = [n for n in found if not os.path.exists(os.path.join(n.sysdir, "partition"))]
    for disk in disks:
        parts = [n for n in found if os.path.dirname(n.sysdir) == disk.sysdir]
        if disk.path in named or not os.path.exists(disk.path):
            continue  # a mounted whole disk makes every partition refuse: already said
        whole = _excl(disk.path)
        if whole == 0:
            continue
        unnamed = [p for p in parts if p.path not in named and os.path.exists(p.path)]
        result = {p.path: _excl(p.path) for p in unnamed}
        claimed = [p for p in unnamed if result[p.path] == errno.EBUSY]
        if whole != errno.EBUSY:  # the disk could not be tried: say what its partitions say
            out += [Use(p.path, "busy", "the kernel or another program holds it open exclusively") for p in claimed]
            continue
        # Some partition opened, or one is in use for a named reason: the disk has no claim of its own.
        if len(claimed) < len(unnamed) or len(unnamed) < len(parts):
            suspects = claimed
        else:  # every partition refuses: the disk is claimed, or each partition is; ask who has what open
            keys = {p.path: ("blk", *p.devnum) for p in [disk, *claimed]}
            opened = openers(set(keys.values()), proc_root)
            if not parts or keys[disk.path] in opened or not any(keys[p.path] in opened for p in claimed):
                sure = not parts or keys[disk.path] in opened
                what = "it" if sure else "it (or each of its partitions)"
                out.append(Use(disk.path, "busy", f"the kernel or another program holds {what} open exclusively"
                               + _open_in(opened.get(keys[disk.path], []))))
                continue
            suspects = claimed  # some are open in a process, the disk is not: the partitions are claimed
        opened = openers({("blk", *p.devnum) for p in suspects}, proc_root) if suspects else {}
        out += [Use(p.path, "busy", "the kernel or another program holds it open exclusively"
                    + _open_in(opened.get(("blk", *p.devnum), []))) for p in suspects]
    return out


LOOP_GET_STATUS64 = 0x4C05
# The first fields of struct loop_info64: lo_device, lo_inode (the backing file's filesystem and inode),
# lo_rdevice (the backing file's own device number: a block device when the loop reads one), lo_offset,
# lo_sizelimit.
_LOOP_INFO64 = struct.Struct("QQQQQ")
_LOOP_INFO64_SIZE = 232


def _huge_decode(dev: int) -> tuple[int, int]:
    """The kernel's encoding of a dev_t in loop_info64 (new_encode_dev) as (major, minor)."""
    return (dev & 0xFFF00) >> 8, (dev & 0xFF) | ((dev >> 12) & 0xFFF00)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _file_key(st: os.stat_result) -> tuple[int, int, int]:
    """What /proc/locks and LOOP_GET_STATUS64 name a file by: its filesystem's (major, minor), its inode."""
    return os.major(st.st_dev), os.minor(st.st_dev), st.st_ino


@value
class LoopStatus:
    """What a bound loop device reads: its backing file (``_file_key``) and path as the kernel prints it,
    the block device it reads when that file is a device node (else None), and from where (bytes)."""

    key: tuple[int, int, int]
    name: str
    rdev: tuple[int, int] | None
    offset: int
    sizelimit: int


def loop_status(sysdir: str) -> LoopStatus | None:
    """``sysdir``'s loop status; None when it is not a bound loop device. The loop's own answer
    (LOOP_GET_STATUS64) comes before stat()ing the path: the path may lie in another mount namespace, or
    name a newer file; sysfs is the fallback (no permission to open the loop)."""
    shown = read(f"{sysdir}/loop/backing_file")
    if not shown:
        return None
    name = shown.removesuffix(" (deleted)")
    try:
        fd = os.open(f"/dev/{os.path.basename(sysdir)}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            raw = fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(_LOOP_INFO64_SIZE))
        finally:
            os.close(fd)
        device, inode, rdevice, offset, sizelimit = _LOOP_INFO64.unpack_from(raw)
        return LoopStatus((*_huge_decode(device), inode), name, _huge_decode(rdevice) if rdevice else None,
                          offset, sizelimit)
    except OSError:
        st = _stat(name)
        if st is None:
            return None
        rdev = (os.major(st.st_rdev), os.minor(st.st_rdev)) if stat.S_ISBLK(st.st_mode) else None
        return LoopStatus(_file_key(st), name, rdev, read_int(f"{sysdir}/loop/offset"),
                          read_int(f"{sysdir}/loop/sizelimit"))


def backing_file(sysdir: str) -> tuple[tuple[int, int, int], str] | None:
    """The file a loop device reads (``_file_key``) and its path as the kernel prints it; None when
    ``sysdir`` is not a bound loop device."""
    status = loop_status(sysdir)
    return (status.key, status.name) if status is not None else None


def _loops(sys_root: str) -> list[tuple[str, str]]:
    """Every loop device the kernel lists: (name, sysfs directory)."""
    try:
        names = sorted(n for n in os.listdir(f"{sys_root}/block") if n.startswith("loop"))
    except OSError:
        return []
    return [(name, os.path.realpath(f"{sys_root}/block/{name}")) for name in names]


def loops_reading(key: tuple[int, int, int], sys_root: str = "/sys") -> list[Node]:
    """Loop devices (at any offset) whose backing file is the file ``key`` (``_file_key``)."""
    out = []
    for name, sysdir in _loops(sys_root):
        backing = backing_file(sysdir)
        if backing is not None and backing[0] == key:
            out.append(Node(name, _devnum(read(f"{sysdir}/dev")) or (0, 0), sysdir))
    return out


def loops_backed_by(image: str, sys_root: str = "/sys") -> list[Node]:
    """Loop devices whose backing file is ``image`` (same inode, so a renamed image still matches)."""
    st = _stat(image)
    return loops_reading(_file_key(st), sys_root) if st is not None else []


def _bases(found: list[Node], loops: dict[str, LoopStatus], origin: int) -> dict[tuple[int, int], int]:
    """Where each of ``found``'s nodes begins in the target's bytes: 0 for the disk, a partition's start, a
    loop reading the target's image file from its offset (``origin``: the target loop's own), and its
    partitions from there."""
    def base(sysdir: str) -> int:
        status = loops.get(sysdir)
        return status.offset - origin if status is not None and status.rdev is None else 0

    out: dict[tuple[int, int], int] = {}
    for node in found:
        if os.path.exists(os.path.join(node.sysdir, "partition")):
            out[node.devnum] = base(os.path.dirname(node.sysdir)) + read_int(f"{node.sysdir}/start") * 512
        else:
            out[node.devnum] = base(node.sysdir)
    return out


def mappings(found: list[Node], target: str, origin: int = 0, sys_root: str = "/sys") -> tuple[list[Node], list[Use]]:
    """Loop devices that read one of ``found``'s nodes (the disk or a partition node, at any offset: the
    rescue's `losetup -o OFFSET /dev/sdX` over a filesystem found in unpartitioned space), and loops over
    those in turn. Each is a user of exactly the bytes it maps, named with them; its own nodes are returned
    so that what uses them (a mount, a holder) is named too. Loops reading the target's image file are
    ``loops_reading``'s: they read it, not its device. ``origin``: where a target loop device starts in
    the image file it reads."""
    statuses = {sysdir: st for _, sysdir in _loops(sys_root) if (st := loop_status(sysdir)) is not None}
    bases = _bases(found, statuses, origin)
    by_num = {n.devnum: n for n in found}
    seen = {n.sysdir for n in found}
    added: list[Node] = []
    uses: list[Use] = []
    grew = True
    while grew:  # a loop over a loop over the disk: until no loop reads a node found so far
        grew = False
        for sysdir, status in statuses.items():
            over = by_num.get(status.rdev) if status.rdev is not None else None
            if over is None or sysdir in seen:
                continue
            seen.add(sysdir)
            grew = True
            size = read_int(f"{sysdir}/size") * 512
            start = bases[over.devnum] + status.offset
            own = nodes(sysdir)
            if not own:
                continue
            for node in own:
                by_num[node.devnum] = node
                bases[node.devnum] = start + (read_int(f"{node.sysdir}/start") * 512 if node is not own[0] else 0)
            added += own
            how = f"from its byte {status.offset}" if status.offset else "from its start"
            uses.append(Use(own[0].path, "mapped", f"maps bytes {start} to {start + size - 1} of {target} (a loop "
                            f"device reading {over.path} {how}, {size} bytes)", span=(start, start + size)))
    return added, uses


LOCK_KINDS = {"FLOCK": "a BSD flock", "POSIX": "a POSIX lock", "LEASE": "a lease", "DELEG": "an NFS delegation",
              "OFDLCK": "an open file description lock (as QEMU takes)"}


UDEV = {"systemd-udevd", "(udev-worker)", "udevd"}  # process names of udev and its workers


def _holder(path: str, pid: str, proc_root: str) -> str:
    """Who holds a lock: its pid, or (an OFD lock names none) the processes that have the file open."""
    if pid.isdigit():
        return f"{read(f'{proc_root}/{pid}/comm') or '?'} (pid {pid})"
    st = _stat(path)
    if st is None:
        return "a process diskplan cannot see"
    key = ("blk", os.major(st.st_rdev), os.minor(st.st_rdev)) if stat.S_ISBLK(st.st_mode) else (
        "file", st.st_dev, st.st_ino)
    names = openers({key}, proc_root).get(key, [])
    return ", ".join(names[:3]) or "a process diskplan cannot see"


def locks(files: dict[tuple[int, int, int], str], proc_root: str = "/proc") -> list[Use]:
    """Locks on ``files`` (``_file_key`` of each image file or device node -> its name) from /proc/locks:
    a BSD flock (a partitioner, mkfs --lock, another diskplan), a POSIX or OFD lock (QEMU's on its disk
    image). This process's own BSD lock (backend.write.lock, held while it writes) is no use; nor is a waiter
    (``->``), which holds nothing yet."""
    me = str(os.getpid())
    held: dict[tuple[str, str, str], str] = {}
    for line in (read(f"{proc_root}/locks") or "").splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":
            continue
        kind, mode, pid, where = fields[1], fields[3], fields[4], fields[5].split(":")
        if len(where) != 3 or (kind == "FLOCK" and pid == me):
            continue
        try:
            hit = files.get((int(where[0], 16), int(where[1], 16), int(where[2])))
        except ValueError:
            continue
        if hit is not None:
            held.setdefault((hit, kind, pid), mode.lower())  # QEMU locks many byte ranges: one line
    out = []
    for (path, kind, pid), mode in held.items():
        who = _holder(path, pid, proc_root)
        # udev holds a shared lock on a whole disk for the moment it probes it (after every write): the
        # write lock waits for it (backend.write.lock), so it is said but refuses nothing.
        probing = kind == "FLOCK" and mode == "read" and who.split(" (pid")[0] in UDEV
        what = f"{LOCK_KINDS.get(kind, 'a ' + kind)} ({mode}) held by {who}"
        out.append(Use(path, "locked", what + (" while it probes the disk; the write waits for it" if probing else ""),
                       blocking=not probing))
    return out


def find_users(path: str, sys_root: str = "/sys", proc_root: str = "/proc", writers_allowed: bool = False) -> list[Use]:
    """Everything that uses ``path`` (a block device or an image file), blocking uses first.

    An image file is used through every loop device that reads it (at any offset). A loop device is seen
    through to its file: every other loop device reading that file, and the file itself (a lock, swap).
    A loop device reading the disk or a partition node maps bytes of it (``mappings``). A process holding a
    node open for writing refuses too, unless ``writers_allowed`` (``writers``)."""
    image: os.stat_result | None = None  # the image file written, or the one the target loop device reads
    image_path = ""
    key: tuple[int, int, int] | None = None
    own: list[Node] = []
    origin = 0
    sysdir = sysfs_dir(path, sys_root)
    if sysdir is not None:
        own = nodes(sysdir)
        status = loop_status(sysdir)
        if status is not None:
            key, image_path, origin = status.key, status.name, status.offset
            image = _stat(image_path)
            if image is not None and _file_key(image) != key:
                image = None  # the path names another file now (or one in another mount namespace)
    else:
        image = _stat(path)
        if image is None:
            return []
        if not stat.S_ISREG(image.st_mode):
            image = None
        else:
            key, image_path = _file_key(image), path
    loops = [n for n in loops_reading(key, sys_root) if n.sysdir != sysdir] if key else []
    found = [*own, *(n for loop in loops for n in nodes(loop.sysdir))]
    mapped, uses = mappings(found, path, origin, sys_root)
    found += mapped
    devnums = {n.devnum: n.path for n in found}
    files = {_file_key(st): n.path for n in found if (st := _stat(n.path)) is not None}
    if image is not None:
        files[_file_key(image)] = image_path
    uses += mounts(devnums, proc_root) + swaps(devnums, image, proc_root) + holders(found, sys_root)
    uses += locks(files, proc_root)
    named = {u.device for u in uses if u.how != "mapped"}
    uses += busy(found, named, proc_root)
    uses += writers(devnums, named | {u.device for u in uses if u.how == "busy"}, writers_allowed, proc_root)
    # A loop device target: say how each use reaches it (through the file it reads).
    behind = f"{image_path}, the file {path} reads" if sysdir is not None and image_path else ""
    if behind:
        uses = [replace(u, behind=f"the file {path} reads") if u.device == image_path else u for u in uses]
    for loop in loops:
        def on_loop(u: Use, loop: Node = loop) -> bool:
            return u.device == loop.path or u.device.startswith(loop.path + "p")

        uses = [replace(u, via=loop.path, behind=behind) if on_loop(u) else u for u in uses]
        if not any(on_loop(u) for u in uses):
            what = f"reads {behind} too" if behind else "reads this image"
            note = f"{what}; the kernel's view of its partitions stays old until `partx -u {loop.path}`"
            uses.append(Use(loop.path, "loop", note, blocking=False))
    return sorted(uses, key=lambda u: not u.blocking)


def culprits(path: str) -> list[str]:
    """One line per blocking use of ``path``: what a refusal names."""
    return [str(u) for u in find_users(path) if u.blocking]
