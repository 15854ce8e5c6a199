"""model.value means what ``@dataclass(frozen=True)`` means: each class here is defined twice, as a value and as a
frozen dataclass, and every behaviour the project relies on is compared between the twins."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from typing import Any, get_type_hints

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskplan.model import value as v


def _twins(make: Any) -> tuple[type, type]:
    """``make(decorator, field)`` built with model.value and with dataclasses (frozen)."""
    ours = make(v.value, v.field, {})
    theirs = make(lambda **kw: dataclasses.dataclass(frozen=True, **kw), dataclasses.field, {"frozen": True})
    return ours, theirs


def _plain(deco: Any, field: Any, kw: dict[str, bool]) -> type:
    @(deco() if kw else deco)
    class Point:
        """x, y and a note that counts in nothing."""
        x: int
        y: int = 0
        tags: tuple[str, ...] = field(default_factory=tuple)
        note: str = field(default="", compare=False, repr=False)

    return Point


def _ordered(deco: Any, field: Any, kw: dict[str, bool]) -> type:
    @deco(order=True)
    class Span:
        """A run with a check in __post_init__."""
        start: int
        end: int

        def __post_init__(self) -> None:
            if self.end < self.start - 1:
                raise ValueError("ends before it starts")

    return Span


def _identity(deco: Any, field: Any, kw: dict[str, bool]) -> type:
    @deco(eq=False)
    class Handle:
        """Compared by identity."""
        name: str

    return Handle


def _inherited(deco: Any, field: Any, kw: dict[str, bool]) -> type:
    class Mixin:
        def twice(self) -> int:
            return 2 * self.a  # type: ignore[attr-defined, no-any-return]

    @(deco() if kw else deco)
    class Base(Mixin):
        """Fields of a base come first."""
        a: int
        b: str = "b"

    @(deco() if kw else deco)
    class Child(Base):
        """And a child's after them."""
        c: int = 3

    return Child


PLAIN, ORDERED, IDENTITY, INHERITED = (_twins(m) for m in (_plain, _ordered, _identity, _inherited))
ints = st.integers(-3, 3)


@given(ints, ints, st.lists(st.sampled_from("ab"), max_size=2), st.text("xy", max_size=2), ints, ints,
       st.text("xy", max_size=2))
def test_equality_hash_repr_and_replace_are_a_dataclass_s(x: int, y: int, tags: list[str], note: str, x2: int,
                                                         y2: int, note2: str) -> None:
    ours, theirs = PLAIN
    a, b = ours(x, y, tuple(tags), note), ours(x2, y2, tuple(tags), note2)
    da, db = theirs(x, y, tuple(tags), note), theirs(x2, y2, tuple(tags), note2)
    assert (a == b) == (da == db)
    assert (a != b) == (da != db)
    assert hash(a) == hash(da)  # the same tuple hashed: sets and dicts order values as they ordered dataclasses
    assert repr(a) == repr(da)
    assert v.replace(a, y=y2, note=note2) == ours(x, y2, tuple(tags), note2)
    assert repr(v.replace(a, x=x2)) == repr(dataclasses.replace(da, x=x2))
    assert a != da  # another class: never equal, as two dataclasses of other classes
    assert ours.__match_args__ == theirs.__match_args__  # type: ignore[attr-defined]


def test_defaults_and_factories_are_a_dataclass_s() -> None:
    ours, theirs = PLAIN
    assert repr(ours(1)) == repr(theirs(1))
    assert vars(ours)["y"] == vars(theirs)["y"] == 0  # a default stays on the class; a factory's field has none
    assert not hasattr(ours, "tags") and not hasattr(theirs, "tags")
    with pytest.raises(TypeError):
        ours()
    with pytest.raises(TypeError):
        v.replace(ours(1), nothing=2)


@given(ints, ints, ints, ints)
def test_order_and_post_init_are_a_dataclass_s(s1: int, e1: int, s2: int, e2: int) -> None:
    ours, theirs = ORDERED
    if e1 < s1 - 1:
        with pytest.raises(ValueError):
            ours(s1, e1)
        return
    if e2 < s2 - 1:
        return
    a, b, da, db = ours(s1, e1), ours(s2, e2), theirs(s1, e1), theirs(s2, e2)
    assert (a < b, a <= b, a > b, a >= b) == (da < db, da <= db, da > db, da >= db)
    assert sorted([b, a]) == [ours(*x) for x in sorted([(s2, e2), (s1, e1)])]
    with pytest.raises(ValueError):
        v.replace(a, end=s1 - 5)  # replace goes through __init__, so through the check


def test_values_refuse_assignment_as_frozen_dataclasses_do() -> None:
    for twins in (PLAIN, ORDERED, INHERITED):
        for cls in twins:
            obj = cls(1, 2)
            with pytest.raises(AttributeError) as caught:
                obj.x = 5
            assert isinstance(caught.value, v.FrozenInstanceError if cls is twins[0] else
                              dataclasses.FrozenInstanceError)
            with pytest.raises(AttributeError):
                del obj.x
            with pytest.raises(AttributeError):
                obj.new = 1


def test_eq_false_compares_identity_and_hashes_by_it() -> None:
    ours, theirs = IDENTITY
    a, b = ours("n"), ours("n")
    assert a != b and a == a
    assert hash(a) != hash(b) or a is b
    assert len({a, b}) == 2 == len({theirs("n"), theirs("n")})


def test_inherited_fields_come_first() -> None:
    ours, theirs = INHERITED
    assert repr(ours(1)) == repr(theirs(1)) == "_inherited.<locals>.Child(a=1, b='b', c=3)"
    assert ours(1, "x", 4) == ours(1, "x", 4) != ours(1, "x", 5)
    assert ours(4).twice() == 8
    assert v.replace(ours(1), c=9) == ours(1, "b", 9)
    # what Hypothesis's builds() and other readers of __init__'s hints see, inherited fields included
    hints = {"a": int, "b": str, "c": int, "return": type(None)}
    assert get_type_hints(vars(ours)["__init__"]) == get_type_hints(vars(theirs)["__init__"]) == hints


def test_values_cross_the_reading_child_s_pipe() -> None:
    """The reading child pickles what it read: a value comes back equal and still frozen."""
    from diskplan.model.extent import Extent, Partition

    p = Partition(number=1, start=2048, end=4095, type="Linux filesystem")
    back = pickle.loads(pickle.dumps((p, Extent(1, 2))))
    assert back == (p, Extent(1, 2)) and hash(back[0]) == hash(p)
    with pytest.raises(AttributeError):
        back[0].start = 0


def test_a_non_default_field_after_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default field 'b'"):
        @v.value
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_check_defines_its_values_without_importing_dataclasses() -> None:
    """What the value classes are for: `diskplan check` (the parent process; its reading child is forked) imports
    neither dataclasses nor the inspect module dataclasses imports."""
    code = ("import sys, diskplan.cli.main, diskplan.cli.check, diskplan.backend.read.reader, "
            "diskplan.model.findings.report, diskplan.cli.checkjson, diskplan.backend.raw.gptcheck; "
            "print(sorted({'dataclasses', 'inspect', 'typing'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_frozen_records_are_value_classes() -> None:
    """One kind of frozen record in the project (a frozen dataclass on `check`'s path would bring dataclasses back
    into its process); mutable records stay dataclasses."""
    import pathlib

    src = pathlib.Path(v.__file__).parents[1]
    frozen = [str(p.relative_to(src)) for p in src.rglob("*.py")
              if p.name != "value.py" and "dataclass(frozen" in p.read_text(encoding="utf-8")]
    assert frozen == []


_CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((1,), {}), ((1, 2), {}), ((1,), {"tags": ("a",)}), ((), {"x": 3, "note": "n"}), ((1, 2, ("b",), "m"), {}),
    ((), {"y": 5, "x": 4}),
]
_WRONG: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}), ((1, 2, (), "", 5), {}), ((1,), {"x": 2}), ((1,), {"colour": "red"}), ((), {"y": 1}),
]


def _compiled(cls: type) -> bool:
    flags: int = cls.__init__.__code__.co_flags  # type: ignore[misc]
    return flags & 0x04 == 0  # no *args: the generated one


def test_a_class_made_only_a_few_times_is_not_compiled_and_makes_the_same_values() -> None:
    """The first COMPILE_AFTER well-formed calls bind their arguments without compiling ``__init__`` (each
    compile ~0.1 ms); the next compiles it. The values made either way are the same, field for field and in
    the same order, and each is its dataclass twin's."""
    bound_cls, compiled_cls = _plain(v.value, v.field, {}), _plain(v.value, v.field, {})
    for _ in range(v.COMPILE_AFTER + 1):
        compiled_cls(0)
    assert _compiled(compiled_cls) and not _compiled(bound_cls)
    theirs = PLAIN[1]
    for args, kwargs in _CALLS:
        bound, compiled = bound_cls(*args, **kwargs), compiled_cls(*args, **kwargs)
        assert list(vars(bound).items()) == list(vars(compiled).items())
        assert repr(bound) == repr(theirs(*args, **kwargs))
    for _ in range(v.COMPILE_AFTER - len(_CALLS)):
        bound_cls(7)
    assert not _compiled(bound_cls)
    bound_cls(8)
    assert _compiled(bound_cls)  # the call after COMPILE_AFTER


@pytest.mark.parametrize(("args", "kwargs"), _WRONG)
def test_a_wrong_first_call_raises_what_the_compiled_init_raises(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    fresh, compiled_cls = _plain(v.value, v.field, {}), _plain(v.value, v.field, {})
    for _ in range(v.COMPILE_AFTER + 1):
        compiled_cls(0)
    with pytest.raises(TypeError) as first:
        fresh(*args, **kwargs)
    with pytest.raises(TypeError) as later:
        compiled_cls(*args, **kwargs)
    assert str(first.value) == str(later.value)


def test_post_init_runs_on_a_call_bound_without_compiling() -> None:
    span = _ordered(v.value, v.field, {})
    with pytest.raises(ValueError):
        span(5, 1)
    assert span(1, 5).end == 5 and not _compiled(span)
