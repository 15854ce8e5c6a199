"""The msdos disk signature (the MBR's 4 bytes at offset 440, the "Disk identifier" fdisk shows and the first
half of every MBR PARTUUID, 0x1234abcd-01) an sfdisk script names with ``label-id:``. libparted keeps the
one on the disk or makes up a random one for a new label; this writes the script's into sector 0 right
after libparted's commit, inside the same safe write (backend.write.tablewrite: same lock, same backup, then read
back), as backend.raw.gptpatch does for a GPT's ids."""

from __future__ import annotations

from diskplan.backend.raw import sectorio
from diskplan.backend.raw.rawtable import MBR_SIGNATURE_AT, mbr_signature


class SignatureError(Exception):
    """The signature cannot be written safely: one line."""


def signature(sector0: bytes) -> str:
    """The disk signature of an MBR sector, as "0x1234abcd"."""
    return f"0x{mbr_signature(sector0):08x}"


def current(path: str, sector_size: int) -> str:
    """The signature on the disk now ("" when sector 0 holds no MBR)."""
    sector = sectorio.read_sectors(path, 0, 1, sector_size)
    return signature(sector) if sector[510:512] == b"\x55\xaa" else ""


def write_signature(path: str, sector_size: int, wanted: str) -> tuple[str, ...]:
    """Put ``wanted`` ("0x1234abcd") into the MBR libparted just wrote and read it back; what changed (nothing
    when it was already there)."""
    sector = sectorio.read_sectors(path, 0, 1, sector_size)
    if sector[510:512] != b"\x55\xaa":
        raise SignatureError("sector 0 holds no MBR after libparted's commit: the disk id is not written")
    before = signature(sector)
    if before == wanted:
        return ()
    raw = bytearray(sector)
    raw[MBR_SIGNATURE_AT : MBR_SIGNATURE_AT + 4] = int(wanted, 16).to_bytes(4, "little")
    sectorio.write_sectors(path, [(0, bytes(raw))], sector_size)
    if signature(sectorio.read_sectors(path, 0, 1, sector_size)) != wanted:
        raise SignatureError(f"the disk id {wanted} does not read back from sector 0")
    return (f"disk identifier {before} -> {wanted} (the script's label-id)",)
