"""libparted and its isolation: the one module that imports pyparted, the forked reading children
and the namespaces that keep an image alone for libparted's eyes."""

import os


def _answer_gptsync() -> None:
    """Debian's libparted (its gptsync.patch, in ``ped_disk_gpt_init``) asks, each time a process loads it,
    ``sh -c "dmidecode -s system-manufacturer"``: on an Intel Mac ("Apple Inc.", "Apple Computer, Inc.") it
    writes a GPT's MBR as a hybrid synced to it. It skips the question when ``PARTED_GPT_APPLE`` gives the
    answer ("1": a Mac). The kernel shows the same SMBIOS field as /sys/class/dmi/id/sys_vendor, so the same
    "not a Mac" is given from there (also where the kernel shows no SMBIOS table and there is no /dev/mem:
    dmidecode finds none either). On a Mac, or when the caller set the variable, libparted asks as before.
    Two processes fewer per process that loads libparted (every reading child is forked after it: one each)."""
    if "PARTED_GPT_APPLE" in os.environ:
        return
    try:
        with open("/sys/class/dmi/id/sys_vendor", "rb") as f:
            vendor = f.read().decode("latin-1").lower()
    except OSError:
        if os.path.exists("/sys/firmware/dmi/tables/smbios_entry_point") or os.path.exists("/dev/mem"):
            return  # dmidecode may find a table the kernel does not show: let it answer
        vendor = ""
    if vendor.startswith(("apple computer, inc.", "apple inc.")):  # libparted's two prefixes, in any case
        # A Mac: dmidecode answers "Apple" only where it can read the SMBIOS table (root: DMI and /dev/mem are
        # root's alone), while sys_vendor reads "Apple" for every user; answering "1" here made libparted write
        # a hybrid MBR where its own question (a user's image file) gives a protective one. Let it ask.
        return
    os.environ["PARTED_GPT_APPLE"] = "0"


_answer_gptsync()
