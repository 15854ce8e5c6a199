"""rawtable.guid_text writes a GPT GUID exactly as ``str(uuid.UUID(bytes_le=...)).upper()`` does (what it
replaced, so that reading a table does not import uuid and platform)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from diskplan.backend.raw.rawtable import guid_text


@given(st.binary(min_size=16, max_size=16))
def test_guid_text_is_uuids_mixed_endian_text(raw: bytes) -> None:
    assert guid_text(raw) == str(uuid.UUID(bytes_le=raw)).upper()


def test_a_known_type_guid() -> None:  # Linux filesystem data, as sfdisk prints it
    raw = uuid.UUID("0FC63DAF-8483-4772-8E79-3D69D8477DE4").bytes_le
    assert guid_text(raw) == "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
