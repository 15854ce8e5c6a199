"""Who is using a disk: mounts, swap, holders (LVM, md, dm-crypt), exclusive openers, and for an image
file the loop devices that read it. Writing a table under any of them costs data, so each one is named.

Everything comes from the kernel's own lists: ``/proc/self/mountinfo``, ``/proc/swaps``,
``/sys/block/<disk>/holders`` and ``/sys/block/<disk>/<part>/holders``, ``/sys/block/loop*/loop``.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, replace

from diskplan.discovery.topology import sysfs_dir


@dataclass(frozen=True)
class Use:
    """One reason not to write: ``device`` is mounted / swap / held / busy / read through a loop."""

    device: str  # the node in use, e.g. /dev/loop0p1, or the image file
    how: str  # "mounted", "swap", "held", "busy", "loop"
    detail: str  # where it is mounted, which device holds it, ...
    blocking: bool = True  # False: worth saying, but writing is still safe
    via: str = ""  # for an image file: the loop device that reads it

    def __str__(self) -> str:
        text = {
            "mounted": f"{self.device} is mounted on {self.detail}",
            "swap": f"{self.device} is in use as swap ({self.detail})",
            "held": f"{self.device} is held by {self.detail}",
            "loop": f"{self.device} {self.detail}",
        }.get(self.how, f"{self.device} is busy: {self.detail}")
        return f"{text} ({self.via} reads this image)" if self.via else text


@dataclass(frozen=True)
class Node:
    """A whole disk or one of its partitions as the kernel lists it."""

    name: str  # sysfs name: loop0, loop0p1, sda1
    devnum: tuple[int, int]
    sysdir: str

    @property
    def path(self) -> str:
        return f"/dev/{self.name}"


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _devnum(text: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (text or "").split(":")
        return int(major), int(minor)
    except ValueError:
        return None


disk_sysdir = sysfs_dir  # the sysfs directory of a block device; None for a regular file


def nodes(sysdir: str) -> list[Node]:
    """The disk at ``sysdir`` and every partition the kernel knows on it."""
    name = os.path.basename(sysdir)
    out = []
    num = _devnum(_read(os.path.join(sysdir, "dev")))
    if num:
        out.append(Node(name, num, sysdir))
    try:
        entries = sorted(os.listdir(sysdir))
    except OSError:
        entries = []
    for entry in entries:
        sub = os.path.join(sysdir, entry)
        if entry.startswith(name) and os.path.exists(os.path.join(sub, "partition")):
            num = _devnum(_read(os.path.join(sub, "dev")))
            if num:
                out.append(Node(entry, num, sub))
    return out


def _unescape(field: str) -> str:
    """mountinfo and /proc/swaps write space, tab, newline and backslash as octal escapes."""
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def _rdev(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.major(st.st_rdev), os.minor(st.st_rdev)) if stat.S_ISBLK(st.st_mode) else None


def mounts(devnums: dict[tuple[int, int], str], proc_root: str = "/proc") -> list[Use]:
    text = _read(f"{proc_root}/self/mountinfo") or ""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        post = line.split(" - ", 1)[1].split()
        fstype = post[0] if post else "?"
        source = _unescape(post[1]) if len(post) > 1 else ""
        num = _devnum(fields[2])
        # btrfs and others report an anonymous device number: match the mount source's node too.
        hit = devnums.get(num) if num else None
        if hit is None and source.startswith("/"):
            src = _rdev(source)
            hit = devnums.get(src) if src else None
        if hit is not None:
            out.append(Use(hit, "mounted", f"{_unescape(fields[4])} ({fstype})"))
    return out


def swaps(devnums: dict[tuple[int, int], str], image: os.stat_result | None, proc_root: str = "/proc") -> list[Use]:
    text = _read(f"{proc_root}/swaps") or ""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if not fields:
            continue
        name = _unescape(fields[0])
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
    """dm-0 -> "dm-0 (LVM vg-lv)"; md0 stays md0."""
    dm = f"{sys_root}/class/block/{holder}/dm"
    name = _read(f"{dm}/name")
    uuid = _read(f"{dm}/uuid") or ""
    if name is None:
        return holder
    kind = {"LVM": "LVM", "CRYPT": "dm-crypt", "mpath": "multipath", "part": "kpartx"}.get(uuid.split("-")[0], "dm")
    return f"{holder} ({kind} {name})"


def holders(found: list[Node], sys_root: str = "/sys") -> list[Use]:
    out = []
    for node in found:
        try:
            names = sorted(os.listdir(os.path.join(node.sysdir, "holders")))
        except OSError:
            continue
        out.extend(Use(node.path, "held", _holder_name(sys_root, h)) for h in names)
    return out


def busy(found: list[Node], named: set[str]) -> list[Use]:
    """An exclusive open fails while the kernel (or anything else) claims the device: catches what the
    lists above cannot name, e.g. a filesystem mounted in another mount namespace. A claimed partition
    makes its whole disk refuse too, so the disk is tried only when none of its partitions is in use."""
    out: list[Use] = []
    disks = {n.sysdir for n in found if not os.path.exists(os.path.join(n.sysdir, "partition"))}
    parts = [n for n in found if n.sysdir not in disks]
    for node in [*parts, *(n for n in found if n.sysdir in disks)]:
        in_use = {u.device for u in out} | named
        if node.sysdir in disks and any(p.path in in_use for p in parts if os.path.dirname(p.sysdir) == node.sysdir):
            continue
        if node.path in named or not os.path.exists(node.path):
            continue
        try:
            fd = os.open(node.path, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                out.append(Use(node.path, "busy", "the kernel or another program holds it open exclusively"))
            continue
        os.close(fd)
    return out


def loops_backed_by(image: str, sys_root: str = "/sys") -> list[Node]:
    """Loop devices whose backing file is ``image`` (same inode, so a renamed image still matches)."""
    try:
        st = os.stat(image)
    except OSError:
        return []
    out = []
    try:
        names = sorted(n for n in os.listdir(f"{sys_root}/block") if n.startswith("loop"))
    except OSError:
        return []
    for name in names:
        sysdir = os.path.realpath(f"{sys_root}/block/{name}")
        backing = _read(f"{sysdir}/loop/backing_file")  # the kernel's d_path: follows renames
        if not backing:
            continue
        try:
            bst = os.stat(backing.removesuffix(" (deleted)"))
        except OSError:
            continue
        same = (bst.st_dev, bst.st_ino) == (st.st_dev, st.st_ino)
        if same:
            out.append(Node(name, _devnum(_read(f"{sysdir}/dev")) or (0, 0), sysdir))
    return out


def find_users(path: str, sys_root: str = "/sys", proc_root: str = "/proc") -> list[Use]:
    """Everything that uses ``path`` (a block device or an image file), blocking uses first."""
    image: os.stat_result | None = None
    loops: list[Node] = []
    found: list[Node] = []
    sysdir = disk_sysdir(path, sys_root)
    if sysdir is not None:
        found = nodes(sysdir)
    else:
        try:
            image = os.stat(path)
        except OSError:
            return []
        if stat.S_ISREG(image.st_mode):
            loops = loops_backed_by(path, sys_root)
            for loop in loops:
                found.extend(nodes(loop.sysdir))
    devnums = {n.devnum: n.path for n in found}
    uses = mounts(devnums, proc_root) + swaps(devnums, image, proc_root) + holders(found, sys_root)
    uses += busy(found, {u.device for u in uses})
    for loop in loops:
        def on_loop(u: Use, loop: Node = loop) -> bool:
            return u.device == loop.path or u.device.startswith(loop.path + "p")

        uses = [replace(u, via=loop.path) if on_loop(u) else u for u in uses]
        if not any(on_loop(u) for u in uses):
            note = f"reads this image; the kernel's view of its partitions stays old until `partx -u {loop.path}`"
            uses.append(Use(loop.path, "loop", note, blocking=False))
    return sorted(uses, key=lambda u: not u.blocking)


def kernel_partitions(path: str, sys_root: str = "/sys") -> dict[int, tuple[int, int]] | None:
    """Partition number -> (start, size) in 512-byte units as the kernel uses them now (None: a file)."""
    sysdir = disk_sysdir(path, sys_root)
    if sysdir is None:
        return None
    out = {}
    for node in nodes(sysdir)[1:]:
        number, start, size = (_read(os.path.join(node.sysdir, f)) for f in ("partition", "start", "size"))
        if number and start and size and number.isdigit() and start.isdigit() and size.isdigit():
            out[int(number)] = (int(start), int(size))
    return out


def culprits(path: str) -> list[str]:
    """One line per blocking use of ``path``: what a refusal names."""
    return [str(u) for u in find_users(path) if u.blocking]
