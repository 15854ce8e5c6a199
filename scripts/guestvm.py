"""A throw-away QEMU guest with disks of a chosen geometry, for the tests that need what loop devices cannot
give: 512e and 4Kn disks, SSDs, RAID I/O hints, udevd, md, device-mapper, hotplug, power cuts.

How it boots (fast on a machine without usable hardware virtualisation):
- the host's own Debian kernel, uncompressed once from /boot/vmlinuz-* into a cache directory, so QEMU
  starts the ELF through its PVH entry and skips the slow in-guest decompressor;
- an initramfs made here from busybox-static and the few modules it needs (virtio, 9p, overlay, SCSI disks),
  which mounts the host's ``/`` read-only over 9p, lays a tmpfs overlay on it and switches to it: the
  project's venv and the host's tools (parted, mdadm, lvm2, udevd, tmux, ...) run in the guest as they are;
- a second, writable 9p export (a per-run temporary directory) carries the cases in and their outputs out;
- ``-accel tcg -cpu max`` unless the CPU shows vmx/svm and ``/dev/kvm`` answers (a software hypervisor
  behind /dev/kvm runs stock kernels far too slowly).

Cases are shell (or Python) scripts run one after another in one boot, as root, in the repository's
directory; a boot costs seconds and Python is slow under TCG, so tests batch their cases.

The guest talks to the host through its serial console: a line ``@@guest:NAME`` (written by the
``guest-mark NAME`` command inside a case) calls the host's handler for NAME, which may hot-plug a disk
through QMP or cut the power (kill QEMU); ``guest-mark`` returns once the handler has finished.
"""

from __future__ import annotations

import dataclasses
import json
import lzma
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

REPO = pathlib.Path(__file__).resolve().parents[1]
MARK = "@@guest:"
RESULTS = "/run/guest"  # where the writable export is mounted in the guest
BUSYBOX = "/bin/busybox"
# the modules the initramfs loads (with what modules.dep says they need), in this order
INIT_MODULES = ("virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "9pnet_virtio", "9p", "overlay")
TOOLS_WANTED = {  # what the guest needs from the host, and the Debian package that has it
    "qemu-system-x86_64": "qemu-system-x86",
    BUSYBOX: "busybox-static",
}


class GuestUnavailable(Exception):
    """This machine cannot boot a guest: ``str(exc)`` says what is missing (a test skips with it)."""


class GuestFailed(Exception):
    """The guest did not boot or did not come back: ``str(exc)`` has the end of its console."""


# ---------------------------------------------------------------------------------------------- disks


@dataclasses.dataclass
class Disk:
    """One disk of the guest, backed by a raw sparse image on the host (made when missing, kept after the
    run so the host can read its bytes or boot again on it).

    ``bus``: "virtio" (virtio-blk: rotational, takes the I/O hints) or "scsi" (scsi-hd on virtio-scsi:
    ``rotation_rate=1`` makes it an SSD). ``serial`` names the disk inside the guest: the case scripts get
    its node as ``$DISK_<serial>`` (and the file ``$RESULTS/devices`` lists them all)."""

    serial: str
    size: int = 64 << 20
    bus: str = "virtio"
    logical: int = 512
    physical: int = 512
    min_io: int | None = None
    opt_io: int | None = None
    rotation_rate: int | None = None
    image: pathlib.Path | None = None

    def qemu_args(self, index: int, image: pathlib.Path) -> list[str]:
        drive = f"file={image},format=raw,if=none,id=drive-{self.serial},cache=unsafe,discard=unmap"
        return ["-drive", drive, "-device", self.device(index)]

    def device(self, index: int) -> str:
        props = [f"drive=drive-{self.serial}", f"id=dev-{self.serial}", f"serial={self.serial}",
                 f"logical_block_size={self.logical}", f"physical_block_size={self.physical}"]
        if self.bus == "virtio":
            if self.min_io:
                props.append(f"min_io_size={self.min_io}")
            if self.opt_io:
                props.append(f"opt_io_size={self.opt_io}")
            return ",".join(["virtio-blk-pci", *props])
        if self.bus == "scsi":
            if self.rotation_rate is not None:
                props.append(f"rotation_rate={self.rotation_rate}")
            return ",".join(["scsi-hd", "bus=scsi0.0", f"scsi-id={index}", "lun=0", *props])
        raise ValueError(f"unknown bus {self.bus!r} (virtio or scsi)")


def e512(serial: str, size: int = 64 << 20, *, min_io: int | None = None, opt_io: int | None = None) -> Disk:
    """A 512e hard disk: 512-byte sectors, 4096-byte physical blocks (``min_io``/``opt_io``: RAID hints)."""
    return Disk(serial, size, logical=512, physical=4096, min_io=min_io, opt_io=opt_io)


def n4k(serial: str, size: int = 64 << 20) -> Disk:
    """A 4Kn disk: 4096-byte logical and physical sectors."""
    return Disk(serial, size, logical=4096, physical=4096)


def ssd(serial: str, size: int = 64 << 20, physical: int = 512) -> Disk:
    """A SATA-like SSD on virtio-scsi (non-rotational), 512-byte sectors; many report 512/512."""
    return Disk(serial, size, bus="scsi", physical=physical, rotation_rate=1)


# ------------------------------------------------------------------------------- what the host must have


def cache_dir() -> pathlib.Path:
    base = os.environ.get("DISKPLAN_GUEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "diskplan-guest")
    path = pathlib.Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def find_kernel() -> tuple[pathlib.Path, str]:
    """The newest /boot/vmlinuz-* whose modules are installed (with 9p: the ``cloud`` flavour has none)."""
    found: list[tuple[pathlib.Path, str]] = []
    for vmlinuz in sorted(pathlib.Path("/boot").glob("vmlinuz-*")):
        version = vmlinuz.name.removeprefix("vmlinuz-")
        if (pathlib.Path("/lib/modules") / version / "kernel/fs/9p").is_dir():
            found.append((vmlinuz, version))
    if not found:
        raise GuestUnavailable("no kernel with 9p modules in /boot (install linux-image-amd64: "
                               "scripts/bootstrap.sh --test)")
    return found[-1]


def check_host() -> None:
    """Raise GuestUnavailable saying what this machine lacks to boot a guest."""
    if os.geteuid() != 0:
        raise GuestUnavailable("the guest tier runs as root (its 9p export of / and the disks' images)")
    for tool, package in TOOLS_WANTED.items():
        if not (shutil.which(tool) or os.path.exists(tool)):
            raise GuestUnavailable(f"{tool} is missing (Debian package {package}: scripts/bootstrap.sh --test)")
    find_kernel()


def accel() -> list[str]:
    """KVM only where the CPU has hardware virtualisation and /dev/kvm opens; TCG everywhere else."""
    cpuinfo = pathlib.Path("/proc/cpuinfo").read_text()
    if re.search(r"^flags\s*:.*\b(vmx|svm)\b", cpuinfo, re.M) and os.access("/dev/kvm", os.R_OK | os.W_OK):
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", "tcg", "-cpu", "max"]


def uncompressed_kernel(vmlinuz: pathlib.Path, version: str) -> pathlib.Path:
    """The ELF inside ``vmlinuz`` (its xz payload), cached: QEMU boots it through PVH."""
    out = cache_dir() / f"vmlinux-{version}-{int(vmlinuz.stat().st_mtime)}"
    if out.exists():
        return out
    blob = vmlinuz.read_bytes()
    start = blob.find(b"\xfd7zXZ\x00")
    while start >= 0:
        try:
            elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=None).decompress(blob[start:])
        except lzma.LZMAError:
            elf = b""
        if elf.startswith(b"\x7fELF"):
            tmp = out.with_suffix(".tmp")
            tmp.write_bytes(elf)
            tmp.rename(out)
            return out
        start = blob.find(b"\xfd7zXZ\x00", start + 1)
    raise GuestUnavailable(f"{vmlinuz} has no xz-compressed ELF inside (not a Debian kernel?)")


def _module_paths(version: str) -> list[str]:
    """The initramfs modules with their dependencies, dependencies first (paths under /lib/modules/V)."""
    deps: dict[str, list[str]] = {}
    for line in (pathlib.Path("/lib/modules") / version / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    by_name = {re.sub(r"\.ko(\.[gx]z|\.zst)?$", "", os.path.basename(m)).replace("-", "_"): m for m in deps}
    order: list[str] = []

    def add(path: str) -> None:
        if path in order:
            return
        for dep in reversed(deps.get(path, [])):  # modules.dep lists the deepest dependency last
            add(dep)
        order.append(path)

    for name in INIT_MODULES:
        if name not in by_name:
            raise GuestUnavailable(f"kernel {version} has no module {name}")
        add(by_name[name])
    return order


INIT = r"""#!/bin/busybox sh
# diskplan guest initramfs: mount the host's / over 9p (read-only, a tmpfs overlay on top), switch to it
B=/bin/busybox
$B mkdir -p /proc /sys /dev /lower /upper /newroot
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
for m in $($B cat /modules); do $B insmod /mod/$m || echo "guest: insmod $m failed"; done
$B mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=524288,cache=loose hostroot /lower || {
  echo "guest: cannot mount the host's root"; $B poweroff -f; }
$B mount -t tmpfs -o mode=0755 upper /upper
$B mkdir -p /upper/u /upper/w
if ! $B mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w root /newroot; then
  echo "guest: no overlay, the root stays read-only"; $B mount --bind /lower /newroot
fi
$B mount -t tmpfs -o mode=0755 run /newroot/run
$B mount -t tmpfs -o mode=1777 tmp /newroot/tmp
$B mkdir -p /newroot/run/guest
$B mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 results /newroot/run/guest
$B mount --move /dev /newroot/dev
$B mount --move /proc /newroot/proc
$B mount --move /sys /newroot/sys
exec $B switch_root /newroot /bin/sh /run/guest/runner.sh
"""

RUNNER = r"""#!/bin/sh
# runs in the guest as PID 1, after the switch to the host's root: every case, then power off
R=/run/guest
. $R/env
export PATH=$R/bin:$GUEST_CWD/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=linux LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 RESULTS=$R
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs shm /dev/shm
ln -sf /proc/self/fd /dev/fd 2>/dev/null
hostname diskplan-guest
devices() {  # DISK_<serial>=/dev/... for every disk, from the serial each one reports
  : > $R/devices
  for b in /sys/block/vd* /sys/block/sd*; do
    [ -e "$b" ] || continue
    s=""
    [ -r "$b/serial" ] && s=$(cat "$b/serial")
    [ -z "$s" ] && [ -r "$b/device/vpd_pg80" ] && s=$(tail -c +5 "$b/device/vpd_pg80" | tr -d '\000 ')
    [ -n "$s" ] && echo "DISK_$s=/dev/${b##*/}" >> $R/devices
  done
}
devices
set -a; . $R/devices; set +a
modprobe -q loop  # diskplan checks filesystems through loop devices
if [ "$GUEST_UDEVD" = 1 ]; then
  /lib/systemd/systemd-udevd --daemon
  udevadm trigger --action=add >/dev/null 2>&1
  udevadm settle --timeout=60
fi
echo "@@guest:ready"
cd "$GUEST_CWD"
for c in $(ls $R/cases); do
  n=${c%.*}
  t0=$(date +%s.%N)
  case $c in
    *.py) timeout -k 5 "$GUEST_CASE_TIMEOUT" "$GUEST_PYTHON" $R/cases/$c ;;
    *) timeout -k 5 "$GUEST_CASE_TIMEOUT" sh -e $R/cases/$c ;;
  esac </dev/null >$R/out/$n.out 2>$R/out/$n.err
  rc=$?
  t1=$(date +%s.%N)
  echo "$rc $t0 $t1" > $R/out/$n.rc
  echo "@@guest:case-done"
done
sync
echo "@@guest:poweroff"
echo o > /proc/sysrq-trigger
sleep 30
"""

MARK_TOOL = r"""#!/bin/sh
# guest-mark NAME: tell the host NAME (its handler runs) and wait until the handler has finished
echo "@@guest:$1" > /dev/ttyS0
while [ ! -e /run/guest/acks/$1 ]; do sleep 0.05; done
rm -f /run/guest/acks/$1
"""


def _cpio(entries: Sequence[tuple[str, int, bytes]]) -> bytes:
    """A newc cpio archive of (name, mode, data) entries (directories have empty data)."""
    out = bytearray()
    for ino, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], start=1):
        raw = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw), 0)
        out += b"070701" + b"".join(b"%08X" % f for f in fields) + raw
        out += b"\0" * (-len(out) % 4) + data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def initramfs(version: str) -> pathlib.Path:
    """The busybox initramfs for kernel ``version``, cached (remade when this file changes)."""
    stamp = int(pathlib.Path(__file__).stat().st_mtime) ^ int(os.stat(BUSYBOX).st_mtime)
    out = cache_dir() / f"initramfs-{version}-{stamp:x}.cpio"
    if out.exists():
        return out
    mods = _module_paths(version)
    entries: list[tuple[str, int, bytes]] = [
        ("bin", stat.S_IFDIR | 0o755, b""), ("mod", stat.S_IFDIR | 0o755, b""),
        ("bin/busybox", stat.S_IFREG | 0o755, pathlib.Path(BUSYBOX).read_bytes()),
        ("init", stat.S_IFREG | 0o755, INIT.encode()),
        ("modules", stat.S_IFREG | 0o644, "\n".join(os.path.basename(m) for m in mods).encode() + b"\n"),
    ]
    for m in mods:
        entries.append((f"mod/{os.path.basename(m)}", stat.S_IFREG | 0o644,
                        (pathlib.Path("/lib/modules") / version / m).read_bytes()))
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(_cpio(entries))
    tmp.rename(out)
    return out


# ----------------------------------------------------------------------------------------------- cases


@dataclasses.dataclass
class Case:
    """One script for the guest: shell (run with ``sh -e``) or Python (run with the project's venv)."""

    name: str
    script: str
    python: bool = False


@dataclasses.dataclass
class CaseResult:
    name: str
    rc: int | None  # None: the case never finished (the power was cut, the guest died)
    out: str
    err: str
    seconds: float

    def check(self) -> CaseResult:
        """Self, or AssertionError with the case's output when it did not exit 0."""
        if self.rc != 0:
            raise AssertionError(f"guest case {self.name} exited {self.rc}\n--- stdout\n{self.out}\n"
                                 f"--- stderr\n{self.err}")
        return self


@dataclasses.dataclass
class Run:
    cases: dict[str, CaseResult]
    boot_seconds: float | None  # from QEMU's start to the guest's first case
    seconds: float  # QEMU's whole life
    console: str
    killed: bool  # the power was cut (Machine.kill) before the guest powered off
    devices: dict[str, str]  # serial -> node in the guest

    def __getitem__(self, name: str) -> CaseResult:
        return self.cases[name]


# --------------------------------------------------------------------------------------------- machine


class Machine:
    """One boot of the guest. ``handlers`` maps a marker name (``guest-mark NAME`` in a case) to a function
    of this machine run on the host while the guest waits; ``qmp`` sends QMP commands (hotplug),
    ``kill`` cuts the power."""

    def __init__(self, disks: Sequence[Disk], workdir: pathlib.Path, *, udevd: bool = False,
                 memory: int = 1280, case_timeout: int = 600) -> None:
        self.disks = list(disks)
        self.workdir = workdir
        self.udevd = udevd
        self.memory = memory
        self.case_timeout = case_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed = False
        self._qmp: socket.socket | None = None
        self._qmp_file: object = None

    # -- host-side actions a handler may take
    def qmp(self, command: str, **arguments: object) -> object:
        """Send one QMP command, return its ``return`` (raise GuestFailed on an ``error``)."""
        if self._qmp is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(self.workdir / "qmp.sock"))
            self._qmp = sock
            self._qmp_buf = b""
            self._qmp_read()  # the greeting
            self._qmp_send({"execute": "qmp_capabilities"})
        self._qmp_send({"execute": command, "arguments": arguments})
        return self._qmp_last

    def _qmp_send(self, msg: dict[str, object]) -> None:
        assert self._qmp is not None
        self._qmp.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._qmp_read()
            if "error" in reply:
                raise GuestFailed(f"QMP {msg.get('execute')}: {reply['error']}")
            if "return" in reply:
                self._qmp_last = reply["return"]
                return

    def _qmp_read(self) -> dict[str, object]:
        assert self._qmp is not None
        while b"\n" not in self._qmp_buf:
            chunk = self._qmp.recv(65536)
            if not chunk:
                raise GuestFailed("QMP closed")
            self._qmp_buf += chunk
        line, self._qmp_buf = self._qmp_buf.split(b"\n", 1)
        reply: dict[str, object] = json.loads(line)
        return reply

    def hotplug(self, disk: Disk) -> None:
        """Plug ``disk`` in now (its image is made when missing)."""
        image = self.image_of(disk)
        self.qmp("blockdev-add", **{"node-name": f"drive-{disk.serial}", "driver": "raw",
                                    "file": {"driver": "file", "filename": str(image)}})
        driver, *pairs = disk.device(len(self.disks)).split(",")
        props: dict[str, object] = {}
        for pair in pairs:
            key, value = pair.split("=", 1)
            props[key] = int(value) if value.isdigit() else value  # QMP wants numbers as numbers
        self.qmp("device_add", driver=driver, **props)
        self.disks.append(disk)

    def unplug(self, serial: str) -> None:
        """Pull the disk out (the guest sees it go as a real removal)."""
        self.qmp("device_del", id=f"dev-{serial}")

    def kill(self) -> None:
        """Cut the power: QEMU dies at once; what the guest had not written out is lost."""
        self.killed = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)

    def image_of(self, disk: Disk) -> pathlib.Path:
        if disk.image is None:
            disk.image = self.workdir / f"{disk.serial}.img"
        if not disk.image.exists():
            with open(disk.image, "wb") as f:
                f.truncate(disk.size)
        return disk.image

    # -- the run
    def run(self, cases: Sequence[Case], handlers: dict[str, Callable[[Machine], None]] | None = None,
            *, kill_after: float | None = None, timeout: float = 1800) -> Run:
        """Boot, run ``cases`` in order, power off; ``kill_after``: cut the power that many seconds after
        the guest is ready."""
        vmlinuz, version = find_kernel()
        kernel = uncompressed_kernel(vmlinuz, version)
        initrd = initramfs(version)
        share = self.workdir / "share"
        if share.exists():
            shutil.rmtree(share)
        for sub in ("cases", "out", "acks", "bin"):
            (share / sub).mkdir(parents=True)
        (share / "runner.sh").write_text(RUNNER)
        (share / "bin" / "guest-mark").write_text(MARK_TOOL)
        (share / "bin" / "guest-mark").chmod(0o755)
        names = [c.name for c in cases]
        if len(set(names)) != len(names) or any(not re.fullmatch(r"[\w.-]+", n) for n in names):
            raise ValueError(f"case names must be unique words: {names}")
        for i, c in enumerate(cases):
            (share / "cases" / f"{i:03d}-{c.name}.{'py' if c.python else 'sh'}").write_text(c.script)
        env = {"GUEST_UDEVD": "1" if self.udevd else "0", "GUEST_CWD": str(REPO),
               "GUEST_PYTHON": str(REPO / ".venv/bin/python"), "GUEST_CASE_TIMEOUT": str(self.case_timeout)}
        (share / "env").write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()))

        cmd = ["qemu-system-x86_64", *accel(), "-machine", "pc", "-m", str(self.memory), "-smp", "1",
               "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
               "-kernel", str(kernel), "-initrd", str(initrd),
               "-append", "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init",
               "-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
               "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
               "-fsdev", f"local,id=results,path={share},security_model=none,multidevs=remap",
               "-device", "virtio-9p-pci,fsdev=results,mount_tag=results",
               "-qmp", f"unix:{self.workdir / 'qmp.sock'},server=on,wait=off",
               "-device", "virtio-scsi-pci,id=scsi0"]
        for i, d in enumerate(self.disks):
            cmd += d.qemu_args(i, self.image_of(d))
        console: list[str] = []
        ready: list[float] = []
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        timer: threading.Timer | None = None
        try:
            assert self.proc.stdout is not None
            deadline = threading.Timer(timeout, self.kill)
            deadline.start()
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace").rstrip("\r\n")
                console.append(line)
                at = line.find(MARK)
                if at < 0:
                    continue
                name = line[at + len(MARK):].strip()
                if name == "ready":
                    ready.append(time.monotonic() - t0)
                    if kill_after is not None:
                        timer = threading.Timer(kill_after, self.kill)
                        timer.start()
                elif handlers and name in handlers:
                    handlers[name](self)
                    if not self.killed:
                        (share / "acks" / name).touch()
                elif name not in ("case-done", "poweroff"):
                    (share / "acks" / name).touch()  # nobody listens: let the guest go on
            self.proc.wait()
            deadline.cancel()
        finally:
            if timer is not None:
                timer.cancel()
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self._qmp is not None:
                self._qmp.close()
                self._qmp = None
        seconds = time.monotonic() - t0
        if not ready and not self.killed:
            raise GuestFailed("the guest never came up; its console ends:\n" + "\n".join(console[-40:]))
        return Run(_results(share, names), ready[0] if ready else None, seconds, "\n".join(console),
                   self.killed, _devices(share))


def _results(share: pathlib.Path, names: list[str]) -> dict[str, CaseResult]:
    results: dict[str, CaseResult] = {}
    for i, name in enumerate(names):
        base = share / "out" / f"{i:03d}-{name}"
        out = base.with_suffix(".out").read_text(errors="replace") if base.with_suffix(".out").exists() else ""
        err = base.with_suffix(".err").read_text(errors="replace") if base.with_suffix(".err").exists() else ""
        rc: int | None = None
        seconds = 0.0
        if base.with_suffix(".rc").exists():
            code, start, end = base.with_suffix(".rc").read_text().split()
            rc, seconds = int(code), float(end) - float(start)
        results[name] = CaseResult(name, rc, out, err, seconds)
    return results


def _devices(share: pathlib.Path) -> dict[str, str]:
    path = share / "devices"
    if not path.exists():
        return {}
    return {k.removeprefix("DISK_"): v for k, _, v in
            (line.partition("=") for line in path.read_text().splitlines())}


def boot(disks: Sequence[Disk], cases: Sequence[Case], *, workdir: pathlib.Path | None = None,
         udevd: bool = False, handlers: dict[str, Callable[[Machine], None]] | None = None,
         kill_after: float | None = None, memory: int = 1280) -> Run:
    """Check the host, boot a guest with ``disks``, run ``cases``, return what they printed. ``workdir``
    keeps the disks' images (a temporary directory, removed afterwards, when not given)."""
    check_host()
    if workdir is not None:
        return Machine(disks, workdir, udevd=udevd, memory=memory).run(cases, handlers, kill_after=kill_after)
    with tempfile.TemporaryDirectory(prefix="diskplan-guest-") as tmp:
        return Machine(disks, pathlib.Path(tmp), udevd=udevd, memory=memory).run(
            cases, handlers, kill_after=kill_after)
