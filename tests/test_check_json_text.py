"""`check --json` writes its documents with its own serializer (checkjson.as_text, faster than json's indented
one): it must give exactly what ``json.dumps(doc, indent=2)`` gives, for anything the documents can hold."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diskplan.cli.checkjson import as_text

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
keys = st.text() | st.integers() | st.booleans() | st.none() | st.floats()  # json spells each as a string
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                         | st.dictionaries(keys, inner, max_size=4), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_as_text_is_json_dumps_indent_2(doc: object) -> None:
    assert as_text(doc) == json.dumps(doc, indent=2)


def test_as_text_refuses_what_json_refuses() -> None:
    for bad in ({"set": {1}}, [object()], {(1, 2): "tuple key"}):
        with pytest.raises(TypeError):
            json.dumps(bad, indent=2)
        with pytest.raises(TypeError):
            as_text(bad)
