"""Value classes: what ``@dataclass(frozen=True)`` gives, defined at a fraction of its cost.

A frozen dataclass costs about 0.6 ms to define on this project's machines (the dataclasses module compiles six
generated functions for it, and importing it imports ``inspect``); diskplan defines about a hundred, thirty of
them on ``diskplan check``'s path, where they were a fifth of its run. Here only ``__init__`` is generated (one
compile: construction stays as fast as a dataclass's), and only once the class has been constructed
COMPILE_AFTER times (its first calls bind their arguments without it): a process that never makes one (``check``'s
reading child sends plain rows, backend.parted.pedread) never compiles it, nor does one that makes a class once or
twice (a disk, its table, a GPT copy, a report: ~0.1 ms each, ~2 ms of a 128-partition check). Equality, hashing,
ordering, ``repr`` and the refusal to assign are shared functions that read the fields through one
``operator.attrgetter``.

The meaning is the dataclass one: fields in annotation order (inherited fields first), defaults and
``field(default_factory=...)``, ``compare=False`` and ``repr=False`` fields, ``__post_init__``, ``eq=False`` (identity)
and ``order=True``; the same hash as a dataclass's (the hash of the tuple of compared fields); ``replace`` as
``dataclasses.replace``. Mutable records stay plain dataclasses.
"""

from __future__ import annotations

import sys
from operator import attrgetter

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~3.5 ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_: object) -> object:
        return lambda f: f


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a value (as dataclasses.FrozenInstanceError)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """One field: its default or default factory, and whether it counts in equality and ``repr``."""

    __slots__ = ("compare", "default", "default_factory", "name", "repr", "type")

    def __init__(self, default: Any, default_factory: Any, compare: bool, repr: bool) -> None:
        self.name, self.type = "", ""
        self.default, self.default_factory, self.compare, self.repr = default, default_factory, compare, repr


def field(*, default: Any = MISSING, default_factory: Callable[[], Any] | Any = MISSING, compare: bool = True,
          repr: bool = True) -> Any:
    """A field's default (or the factory that makes one for each value) and what it counts in."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("a field cannot have both a default and a default factory")
    return Field(default, default_factory, compare, repr)


def _is_class_var(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _fields(cls: type) -> list[Field]:
    """The fields of ``cls``: its bases' value fields first, then its own annotations in order (a default left on
    the class, as dataclasses leave it; a factory's field has none there)."""
    by_name: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, "__value_fields__", ()):
            by_name[f.name] = f
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 (own only; no inspect)
        if _is_class_var(annotation):
            continue
        default = cls.__dict__.get(name, MISSING)
        f = default if isinstance(default, Field) else Field(default, MISSING, True, True)
        f.name, f.type = name, annotation
        if f.default is MISSING:
            if name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, f.default)
        by_name[name] = f  # (a redefined field keeps its base's place, as in a dataclass)
    fields = list(by_name.values())
    seen_default = False
    for f in fields:
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default field {f.name!r} follows a field with a default in {cls.__qualname__}")
    return fields


def _init(cls: type, fields: list[Field]) -> Callable[..., None]:
    """``__init__``, compiled once for ``cls``: each field written straight into the instance's dict (the value
    refuses ``setattr``), factories called for a field not given, then ``__post_init__`` if the class has one."""
    params, body, defaults = [], [], {}
    for i, f in enumerate(fields):
        if f.default_factory is not MISSING:
            params.append(f"{f.name}=_missing")
            defaults[f"_factory{i}"] = f.default_factory
            body.append(f" if {f.name} is _missing: {f.name} = _factory{i}()")
        elif f.default is not MISSING:
            params.append(f"{f.name}=_default{i}")
            defaults[f"_default{i}"] = f.default
        else:
            params.append(f.name)
        body.append(f" _d[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append(" self.__post_init__()")
    names = ", ".join(["_missing", *defaults])
    source = (f"def _make({names}):\n def __init__(self, {', '.join(params)}):\n  _d = self.__dict__\n"
              + "".join(f" {line}\n" for line in body) + " return __init__\n")
    namespace: dict[str, Any] = {}
    module = sys.modules.get(cls.__module__)
    exec(source, vars(module) if module else {}, namespace)  # our own text, made from field names
    init: Callable[..., None] = namespace["_make"](MISSING, *defaults.values())
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return init


# A class's first constructions bind their arguments here, in Python, each slower than through the compiled
# ``__init__`` (~3 µs more), which costs ~0.1 ms to compile: most classes on `check`'s path are made once or
# twice (the disk, its table, each GPT copy, the report), so only a class made more often than this compiles.
COMPILE_AFTER = 8


def _first_init(cls: type, fields: list[Field]) -> Callable[..., None]:
    """``cls``'s ``__init__`` for its first COMPILE_AFTER calls: each well-formed call (every field given once,
    or its default or factory) is bound here; the call after them, or any other call, compiles the real one
    (``_init``), puts it in the class and runs it (so a wrong call raises the compiled one's TypeError). It
    carries the same hints, for the readers of them (Hypothesis's ``builds``)."""
    names = [f.name for f in fields]
    post_init = hasattr(cls, "__post_init__")
    calls = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        given = len(args)
        rest = fields[given:]
        if calls > COMPILE_AFTER or given > len(fields) or not kwargs.keys() <= set(names[given:]) or any(
            f.name not in kwargs and f.default is MISSING and f.default_factory is MISSING for f in rest
        ):
            init = _init(cls, fields)
            type.__setattr__(cls, "__init__", init)
            init(self, *args, **kwargs)
            return
        d = self.__dict__
        for name, arg in zip(names[:given], args, strict=True):
            d[name] = arg
        for f in rest:
            if f.name in kwargs:
                d[f.name] = kwargs[f.name]
            elif f.default_factory is not MISSING:
                d[f.name] = f.default_factory()
            else:
                d[f.name] = f.default
        if post_init:
            self.__post_init__()

    __init__.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return __init__


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of ``names``' values (what a dataclass compares and hashes)."""
    if len(names) == 1:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return attrgetter(*names) if names else (lambda obj: ())


def _refuse_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _make(cls: type, eq: bool, order: bool) -> type:
    fields = _fields(cls)
    names = tuple(f.name for f in fields)
    key = _key(tuple(f.name for f in fields if f.compare))
    shown = tuple(attrgetter(f.name) for f in fields if f.repr)
    shown_names = tuple(f.name for f in fields if f.repr)

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={get(self)!r}" for n, get in zip(shown_names, shown, strict=True))
        return f"{self.__class__.__qualname__}({inner})"

    methods: dict[str, Any] = {"__init__": _first_init(cls, fields), "__repr__": __repr__,
                               "__setattr__": _refuse_setattr, "__delattr__": _refuse_delattr}
    if eq:
        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return key(self) == key(other)
            return NotImplemented

        def __hash__(self: Any) -> int:
            return hash(key(self))

        methods.update(__eq__=__eq__, __hash__=__hash__)
    if order:
        for op in ("__lt__", "__le__", "__gt__", "__ge__"):
            methods[op] = _compare(key, op)
    own_hash = cls.__dict__.get("__hash__", MISSING)
    if own_hash is not MISSING and not (own_hash is None and "__eq__" in cls.__dict__):
        methods.pop("__hash__", None)  # the class's own hash, as a dataclass keeps it
    for name, method in methods.items():
        if name in cls.__dict__ and name not in ("__setattr__", "__delattr__", "__hash__"):
            continue  # the class's own, as a dataclass keeps its own __init__, __repr__ and __eq__
        if method not in (_refuse_setattr, _refuse_delattr):  # (those two are shared by every value class)
            method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)
    cls.__value_fields__ = tuple(fields)  # type: ignore[attr-defined]
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = names  # type: ignore[attr-defined,misc]
    return cls


def _compare(key: Callable[[Any], tuple[Any, ...]], op: str) -> Callable[[Any, Any], Any]:
    test = getattr(tuple, op)

    def compare(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return test(key(self), key(other))
        return NotImplemented

    return compare


@dataclass_transform(frozen_default=True, eq_default=True, order_default=False, field_specifiers=(field,))
def value(cls: Any = None, /, *, eq: bool = True, order: bool = False) -> Any:
    """``@value`` or ``@value(eq=False)`` / ``@value(order=True)``: a frozen value class (see the module)."""
    if cls is None:
        return lambda c: _make(c, eq, order)
    return _make(cls, eq, order)


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the value ``obj`` with ``changes`` (as dataclasses.replace)."""
    cls = obj.__class__
    given = {f.name: getattr(obj, f.name) for f in cls.__value_fields__}  # type: ignore[attr-defined]
    given.update(changes)
    return cls(**given)


def asdict(obj: object) -> dict[str, Any]:
    """The fields of the value ``obj`` and their values, in order (one level: the values are kept as they are,
    where dataclasses.asdict would copy nested ones)."""
    return {f.name: getattr(obj, f.name) for f in obj.__class__.__value_fields__}  # type: ignore[attr-defined]
