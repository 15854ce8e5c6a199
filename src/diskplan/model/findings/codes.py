"""Every finding code in one registry: the code, its severity and its line in docs/check.md.

Codes are part of ``diskplan check --json`` and must stay stable. Severities: ``error`` the table is
invalid or unsafe; ``warning`` costs real I/O (read-modify-write) or hides part of the table;
``notice`` worth knowing, costs nothing measurable on this disk as configured. docs/check.md's table of
codes is this registry, row for row (tests/test_codes.py compares them).
"""

from __future__ import annotations

from diskplan.model.value import value

ERROR, WARNING, NOTICE = "error", "warning", "notice"
SEVERITY_RANK = {ERROR: 0, WARNING: 1, NOTICE: 2}


@value
class Code:
    """A finding's stable code, its severity and when a disk gets it."""
    code: str  # stable: what ``diskplan check --json`` prints
    severity: str  # ERROR, WARNING or NOTICE
    when: str  # the README's line: when a disk gets this finding


CODES: dict[str, Code] = {}


def _code(code: str, severity: str, when: str) -> str:
    assert code not in CODES and severity in SEVERITY_RANK, code
    CODES[code] = Code(code, severity, when)
    return code


# --- where one partition lies (model.findings.placement) ------------------------------------------------------

START_NOT_PHYSICAL = _code("start-not-physical", WARNING,
                           "the start is not on a physical block (only when physical > logical)")
START_NOT_PAGE = _code("start-not-flash-page", WARNING, "on flash (not rotational, or `--ssd`) the start is not on a "
                       "4 KiB page (or the larger physical block), although the device reports smaller sectors")
START_NOT_GRAIN = _code("start-not-grain", NOTICE, "on a physical block (and page) but not on the grain")
END_NOT_PHYSICAL = _code("end-not-physical", NOTICE, "end + 1 is not on a physical block")
SHARED_BLOCK = _code("shared-physical-block", WARNING, "two partitions share one physical block")
OVERLAP = _code("overlap", ERROR, "two partitions claim the same sectors")
OUTSIDE_USABLE = _code("outside-usable-area", ERROR, "the partition lies in the table's own metadata")
PAST_END = _code("past-end-of-disk", ERROR, "the partition ends after the last sector")
MBR_LIMIT = _code("past-mbr-2tib-limit", ERROR, "an msdos partition reaches past 2^32 sectors")
DOS_ERA = _code("dos-era-layout", NOTICE, "start at sector 63 or on a cylinder boundary")

# --- the layers inside a partition (model.findings.stackfindings) ----------------------------------------------

LAYER_NOT_PAGE = _code("layer-data-not-page", WARNING, "a layer's data (LVM extent 0, md array data, LUKS payload) "
                       "begins off the page / physical block, in absolute bytes")
LAYER_NOT_GRAIN = _code("layer-data-not-grain", NOTICE, "on the page but off the grain")
LAYER_NOT_STRIPE = _code("layer-data-not-stripe", WARNING, "a layer's data is not on the stripe of the md array "
                         "below it, or an LVM PV's extents not on its striped LV's stripe size")
EXTENT_NOT_STRIPE = _code("extent-not-full-stripe", NOTICE, "an LVM extent size that is not a multiple of the full "
                          "stripe below its PV: only some extents start on a stripe")
FS_HINT_MISMATCH = _code("fs-stripe-hint-mismatch", NOTICE, "ext4 stride/stripe-width or XFS sunit/swidth differ "
                         "from the md array below (or the device's minimum/optimal I/O)")

# --- the table as a whole (model.findings.report) ------------------------------------------------------------

NO_TABLE = _code("no-partition-table", NOTICE, "no partition table was found")
WHOLE_DISK_FS = _code("whole-disk-filesystem", NOTICE,
                      "a filesystem fills the whole disk: there is no partition table")
READ_ONLY_LABEL = _code("read-only-label", NOTICE, "diskplan shows this table but will not write it (the "
                        "message says why)")
LIBPARTED_SAID = _code("libparted-message", NOTICE, "libparted said something while reading the table")

# --- how the table was read (model.findings.tablefindings, built by backend.read.reader) ---------------------------

UNREADABLE = _code("unreadable-table", ERROR, "\"this table could not be read safely: <reason>\": libparted "
                   "crashed, hung or refused, or a label it cannot read (IBM DASD); what diskplan's own parser "
                   "recovered is shown read-only")
GPT_PRIMARY_DAMAGED = _code("gpt-primary-damaged", ERROR, "the primary GPT fails a check (signature, header or "
                            "entry-array CRC, its own LBA, entries inside the disk); the backup is shown and "
                            "`repair` says how to rebuild the primary (`diskplan repair` writes it)")
GPT_BACKUP_DAMAGED = _code("gpt-backup-damaged", WARNING, "the backup GPT fails a check; the primary is shown "
                           "and `repair` says how to rebuild the backup (`diskplan repair` writes it)")
GPT_BOTH_DAMAGED = _code("gpt-both-damaged", ERROR, "no good GPT copy")
GPT_BACKUP_NOT_AT_END = _code("gpt-backup-not-at-end", NOTICE, "the backup GPT is not at the last LBA (a grown "
                              "disk): `diskplan repair` moves it to the end, as `sgdisk -e` does")
GPT_COPIES_DIFFER = _code("gpt-copies-differ", WARNING, "two valid GPT copies that disagree: the primary is "
                          "shown")
GPT_NO_PROTECTIVE_MBR = _code("gpt-without-protective-mbr", WARNING, "a valid GPT without a protective MBR "
                              "(libparted and some firmware do not see it): `diskplan repair` writes one")
TABLE_LARGER_THAN_DISK = _code("table-larger-than-disk", ERROR, "the table describes a bigger disk (truncated "
                               "image): read-only")
HYBRID_MBR = _code("hybrid-mbr", WARNING, "the MBR lists partitions beside the GPT: both views shown, read-only "
                   "(libparted would replace the MBR)")
EXTENDED_WITHOUT_EBR = _code("extended-without-ebr", WARNING, "an extended partition with no EBR")
EBR_CHAIN_DAMAGED = _code("ebr-chain-damaged", WARNING, "a looping or broken chain of logical partitions")
SIZE_NOT_SECTOR_MULTIPLE = _code("size-not-sector-multiple", NOTICE, "an image whose size is no whole number "
                                 "of sectors")
TINY_DISK = _code("tiny-disk", NOTICE, "smaller than 1 MiB")
SECTOR_SIZE_MISMATCH = _code("sector-size-mismatch", WARNING, "\"this looks like a 4096-byte-sector disk: attach "
                             "it with losetup --sector-size 4096\" (or the reverse)")
HYBRID_ISO = _code("hybrid-iso-image", NOTICE, "an ISO 9660 image that also has a table")

# Findings that say the table needs a repair: when the disk offers none, that is a refusal, not "nothing to do".
NEEDS_REPAIR = (GPT_PRIMARY_DAMAGED, GPT_BACKUP_DAMAGED, GPT_BOTH_DAMAGED, GPT_COPIES_DIFFER, GPT_NO_PROTECTIVE_MBR,
                TABLE_LARGER_THAN_DISK, GPT_BACKUP_NOT_AT_END)


def severity(code: str) -> str:
    return CODES[code].severity
