"""The question libparted asks dmidecode as it loads, answered without starting two programs where the answer
is known.

Debian's libparted (its gptsync patch) decides once, when the library is loaded, whether this machine is an
Intel Mac: there a GPT disk may carry a synced MBR instead of a protective one, so its GPT probe skips the
protective-MBR test (and its writes keep the MBR synced). Unless ``PARTED_GPT_APPLE`` answers ("1": a Mac,
anything else: not), it runs ``sh -c "dmidecode -s system-manufacturer 2>/dev/null"`` and looks for
"Apple Computer, Inc." or "Apple Inc." at the start of the line, in any case: two programs started by every
process that loads libparted, about 4 ms of `diskplan check`'s read (twice that on a busy machine).

The answer is known without them where dmidecode's own would be: dmidecode cannot answer when it is not on
the PATH, nor when it can read neither the firmware's tables in sysfs nor /dev/mem (not root, or no DMI at all:
a virtual machine without it); where it can, it prints the manufacturer the kernel exports as
/sys/class/dmi/id/sys_vendor. Anything else (that file unreadable) is left to libparted and dmidecode. A value
the user set is never touched, and the variable is set only while libparted loads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

VARIABLE = "PARTED_GPT_APPLE"
APPLE = ("apple computer, inc.", "apple inc.")  # libparted's strncasecmp prefixes
VENDOR = "/sys/class/dmi/id/sys_vendor"
SOURCES = ("/sys/firmware/dmi/tables/DMI", "/dev/mem")  # what dmidecode reads, in its order


def _on_path(program: str) -> bool:
    """Whether ``sh -c program`` would find it (the PATH this process hands its children; sh's default
    when none is set)."""
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    return any(os.access(os.path.join(d or ".", program), os.X_OK) for d in path.split(os.pathsep))


def known_answer() -> str | None:
    """``PARTED_GPT_APPLE``'s value that says what dmidecode would have said: "1" an Apple, "0" not (or dmidecode
    could not tell, which libparted takes as not), None when only running it can tell."""
    if not _on_path("dmidecode") or not any(os.access(source, os.R_OK) for source in SOURCES):
        return "0"
    try:
        with open(VENDOR, encoding="utf-8", errors="replace") as f:
            vendor = f.readline()
    except OSError:
        return None
    return "1" if vendor.lower().startswith(APPLE) else "0"


@contextmanager
def answered() -> Iterator[None]:
    """Around the first ``import _ped`` of a process: libparted finds its answer in the environment, where it
    is known (``known_answer``), instead of asking dmidecode; the environment is as before afterwards."""
    if VARIABLE in os.environ:
        yield
        return
    answer = known_answer()
    if answer is not None:
        os.environ[VARIABLE] = answer
    try:
        yield
    finally:
        os.environ.pop(VARIABLE, None)
