"""The one writer of diskplan's indented JSON documents (``check --json``, ``stack --json``, plan files, Ignition,
the planner's settings): ``json.dumps(doc, indent=2)``, character for character, with ``ensure_ascii`` and
``sort_keys`` as json has them. Compact JSON (a fingerprint, a journal line) stays json's own, whose C encoder
is fast without an indent.

Why not json's: with an indent, json leaves its C encoder for a Python one made of generators. On the
128-partition `check --json` document (120 KB) that one took 7.8 ms where this takes 1.6 (Nov 27, same
process, same load), and importing the json package (its decoder's regexes) costs a command ~3 ms more: about
a tenth of a check whose target is to be no slower than ``parted print``. Strings are still quoted by json's C
accelerator; tests/test_check_json_text.py holds this to json.dumps on generated documents."""

from __future__ import annotations

try:  # the C functions json.encoder wraps (importing the json package is what this module spares)
    from _json import encode_basestring as _quoted_utf8
    from _json import encode_basestring_ascii as _quoted_ascii
except ImportError:  # an interpreter without the _json accelerator
    from json.encoder import encode_basestring as _quoted_utf8
    from json.encoder import encode_basestring_ascii as _quoted_ascii


def as_text(doc: object, *, ascii: bool = True, sort_keys: bool = False) -> str:
    """``json.dumps(doc, indent=2, ensure_ascii=ascii, sort_keys=sort_keys)``. Only what json itself takes
    without a ``default`` (anything else is a TypeError, as there)."""
    out: list[str] = []
    put = out.append
    quoted = _quoted_ascii if ascii else _quoted_utf8

    def write(o: object, indent: str) -> None:
        if isinstance(o, str):
            put(quoted(o))
        elif o is None:
            put("null")
        elif o is True:
            put("true")
        elif o is False:
            put("false")
        elif isinstance(o, int):
            put(int.__repr__(o))
        elif isinstance(o, float):
            put(_float(o))
        elif isinstance(o, dict):
            if not o:
                put("{}")
                return
            inner, sep = indent + "  ", "{"
            for key, value in sorted(o.items()) if sort_keys else o.items():
                put(sep + inner)
                put(quoted(key if isinstance(key, str) else _key(key)))
                put(": ")
                write(value, inner)
                sep = ","
            put(indent + "}")
        elif isinstance(o, list | tuple):
            if not o:
                put("[]")
                return
            inner, sep = indent + "  ", "["
            for value in o:
                put(sep + inner)
                write(value, inner)
                sep = ","
            put(indent + "]")
        else:
            raise TypeError(f"{type(o).__name__} is not JSON")

    write(doc, "\n")
    return "".join(out)


def _key(key: object) -> str:
    """json's spelling of a dict key that is not a string."""
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _float(x: float) -> str:
    """json's spelling of a float."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return float.__repr__(x)
