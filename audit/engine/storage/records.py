"""Typed JSON records: a JSON object as a frozen dataclass that reads and writes it exactly.

The machinery behind :mod:`topicaudit.engine.storage.results`: how a field's value
is read and written (``Codec``), the record base class (``Record``: key
order, required and optional keys, unknown keys kept), the read-only mapping
view of a record (``JsonView``), and the schema check every file passes.

A record is built in memory from typed values (``RunResults(target=TargetInfo(...), ...)``) as well as read
from its file; either way it holds its values as the file holds them (:func:`plain`, at construction), so a
record built in memory equals the record its file reads back.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from topicaudit.bounds.epsilon import EpsilonBound
from topicaudit.errors import UserError


def check_schema(data: Any, schema: str, where: str) -> None:
    """``data`` is a JSON object of ``schema`` ("family/version"), or a UserError saying what it is and the fix."""
    family, _, version = schema.rpartition("/")
    found = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(data, dict):
        raise UserError(f"{where} does not hold a JSON object; rerun the command that writes it")
    if isinstance(found, str) and found.startswith(family + "/") and found[len(family) + 1:].isdigit():
        if int(found[len(family) + 1:]) > int(version):
            raise UserError(f"{where} has schema {found}, newer than this topicaudit reads ({schema}); "
                            "upgrade topicaudit (pip install -U topicaudit) to read it")
        if found == schema:
            return
    raise UserError(f"{where} has schema {found!r}, which this topicaudit does not read (it reads {schema}); "
                    "it was not written by `topicaudit` for this purpose — rerun the audit to rewrite it")


def plain(value: Any) -> Any:
    """``value`` as its JSON reads back: NumPy scalars and arrays as Python numbers and lists, tuples as lists,
    mapping keys as strings (JSON's own spelling of a number, ``true``, ``false`` or ``null`` key). ±∞ and NaN
    stay floats (``json`` writes them as ``Infinity`` and ``NaN`` and reads them back so). Anything else that is
    not a JSON value is a TypeError, as ``json.dumps`` would raise when the file is written."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, dict):
        return {_key(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):  # a str subclass (a StrEnum member): its text
        return str(value)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _key(key: Any) -> str:
    if isinstance(key, str):
        return str(key)
    if key is None or isinstance(key, (bool, np.bool_)):
        return {None: "null", True: "true", False: "false"}[None if key is None else bool(key)]
    if isinstance(key, (int, np.integer)):
        return str(int(key))
    if isinstance(key, (float, np.floating)):
        return json.dumps(float(key))  # 1.0 → "1.0", ∞ → "Infinity", as json writes a float key
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


# -- how a field becomes JSON and back --------------------------------------------------------------------
def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Codec:
    """How a field's value is read from JSON (``decode(value, where)``) and written (``encode``); ``plain``
    gives a value built in memory as ``decode`` reads it back from the file (a nested record is already so)."""

    decode: Callable[[Any, str], Any]
    encode: Callable[[Any], Any]
    plain: Callable[[Any], Any] = _same


def record(cls: type[Record]) -> Codec:
    return Codec(cls.from_json, lambda value: value.to_json())


def records(cls: type[Record]) -> Codec:
    """A JSON object of records, by name."""
    def decode(value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise UserError(f"{where} must be a JSON object; rerun the audit to rewrite it")
        return {name: cls.from_json(item, f"{where}.{name}") for name, item in value.items()}
    return Codec(decode, lambda value: {name: item.to_json() for name, item in value.items()})


def _bound(value: Any, where: str) -> EpsilonBound:
    if not isinstance(value, dict) or not {"epsilon", "method", "confidence", "delta"} <= set(value):
        raise UserError(f"{where} is not an ε bound (epsilon, method, confidence, delta); rerun the audit")
    epsilon = value["epsilon"]
    # ±∞ is written as a string (strict JSON has no ∞); EpsilonBound.to_json writes it so again.
    if isinstance(epsilon, str):
        try:
            epsilon = float(epsilon)
        except ValueError:  # any other string was an internal error (exit 3)
            raise UserError(f"{where}.epsilon must be a number or \"inf\" (got {epsilon[:40]!r}); the file was "
                            "edited or damaged — rerun the audit") from None
    return EpsilonBound(epsilon, value["method"],
                        value["confidence"], value["delta"], value.get("details", {}))


BOUNDS = Codec(lambda value, where: {name: _bound(item, f"{where}.{name}") for name, item in
                                     _object(value, where).items()},
               lambda value: {name: bound.to_json() for name, bound in value.items()},
               # a bound as its file holds it: its method a plain string, ∞ in its details the string "inf"
               lambda value: {str(name): _bound(bound.to_json(), str(name)) for name, bound in value.items()})


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(f"{where} must be a JSON object; rerun the audit to rewrite it")
    return value


@dataclass(frozen=True, kw_only=True)
class Record:
    """A JSON object as a frozen record: one field per key, declared in the order the writer writes them.

    ``KEYS`` maps a field to its key where the key is no identifier
    (``tpr_at_fpr_0.001``); ``CODECS`` says how nested records are read and
    written; ``REQUIRED`` fields must be in the file; ``OPTIONAL`` fields are
    written only when set (a step that did not run leaves its key out).
    """

    KEYS: ClassVar[dict[str, str]] = {}
    CODECS: ClassVar[dict[str, Codec]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    # Keys the file did not have (they stay out of to_json), and keys this version does not know.
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # Every value as the file reads it back (plain): a record built in memory equals its file's.
        for f in self._data_fields():
            value = getattr(self, f.name)
            if value is not None:
                codec = self.CODECS.get(f.name)
                object.__setattr__(self, f.name, plain(value) if codec is None else codec.plain(value))
        object.__setattr__(self, "extra", plain(self.extra))

    @classmethod
    def _data_fields(cls):
        """The fields that are JSON keys (not ``absent``, ``extra``, nor a field marked ``metadata={"json": False}``,
        such as where the file was read from)."""
        return [f for f in fields(cls) if f.name not in ("absent", "extra") and f.metadata.get("json", True)]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self._data_fields():
            value = getattr(self, f.name)
            if f.name in self.absent or (value is None and f.name in self.OPTIONAL):
                continue
            codec = self.CODECS.get(f.name)
            out[self.KEYS.get(f.name, f.name)] = value if codec is None or value is None else codec.encode(value)
        out.update(self.extra)
        return out

    @classmethod
    def from_keys(cls, values: Mapping[str, Any]):
        """A record built in memory from a mapping by its JSON keys (``tpr_at_fpr_0.001``), as another module
        hands it over (``attacks.metrics.summarize``, ``Guarantee.to_json``). Every key must be a field's (a
        key this version does not know is a TypeError here, where ``from_json`` keeps it); a field whose key is
        missing stays out of the file, as a key ``from_json`` did not find."""
        by_key = {cls.KEYS.get(f.name, f.name): f.name for f in cls._data_fields()}
        unknown = [key for key in values if key not in by_key]
        if unknown:
            raise TypeError(f"{cls.__name__} has no field for key(s) {', '.join(map(repr, unknown))}")
        missing = {name for key, name in by_key.items() if key not in values}
        absent = frozenset(missing - set(cls.OPTIONAL))
        return cls(**{by_key[key]: value for key, value in values.items()}, absent=absent)

    @classmethod
    def from_json(cls, data: Any, where: str):
        data = _object(data, where)
        values: dict[str, Any] = {}
        absent, known = set(), set()
        for f in cls._data_fields():
            key = cls.KEYS.get(f.name, f.name)
            known.add(key)
            if key in data:
                codec = cls.CODECS.get(f.name)
                value = data[key]
                if codec is None:
                    _check_type(value, f.type, f"{where}.{key}")
                elif value is None and isinstance(f.type, str) and "None" not in map(str.strip, _top_level(f.type)):
                    # (attacks = null was an AttributeError in report: exit 3)
                    raise UserError(f"{where}.{key} must not be null; the file was edited or damaged — rerun the "
                                    "audit into a new directory")
                values[f.name] = value if codec is None or value is None else codec.decode(value, f"{where}.{key}")
                continue
            if f.name in cls.REQUIRED:
                raise UserError(f"{where} lacks {key!r}; it was not written by this version of topicaudit — "
                                "rerun the audit")
            if f.name not in cls.OPTIONAL:
                absent.add(f.name)
            values[f.name] = (f.default if f.default is not MISSING else
                              f.default_factory() if f.default_factory is not MISSING else None)
        return cls(**values, absent=frozenset(absent), extra={k: v for k, v in data.items() if k not in known})


# A field's JSON type, from its annotation: a value of another type (a string where the report formats a number,
# a number where it reads an object: ``timings_s = -1``, ``utility.heldout_perplexity = "inf"``) was an
# internal error (exit 3) far from where it was read. Annotations naming a record or anything else are not checked.
_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "None": lambda v: v is None,
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "dict": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
}


def _check_type(value: Any, annotation: Any, where: str) -> None:
    if not isinstance(annotation, str):
        return
    parts = [part.strip() for part in _top_level(annotation)]
    kinds = [part.split("[", 1)[0] for part in parts]
    if not all(kind in _JSON_TYPES for kind in kinds):
        return  # a record, Any, a literal…: its own codec or reader says what it must be
    for part, kind in zip(parts, kinds):
        if _JSON_TYPES[kind](value):  # and its items, for dict[str, X] and list[X] (timings_s.total = "x": exit 3)
            inner = part[len(kind) + 1:-1] if part.endswith("]") else ""
            if kind == "dict" and inner.startswith("str,"):
                for name, item in value.items():
                    _check_type(item, inner[4:].strip(), f"{where}.{name}")
            elif kind == "list" and inner:
                for index, item in enumerate(value):
                    _check_type(item, inner, f"{where}[{index}]")
            return
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise UserError(f"{where} must be {' or '.join(_WORDS[k] for k in kinds)} (got {shown}); the file was "
                    "edited or damaged — rerun the audit into a new directory")


_WORDS = {"None": "null", "float": "a number", "int": "an integer", "str": "a string", "bool": "true or false",
          "dict": "an object", "list": "a list"}


def _top_level(annotation: str) -> list[str]:
    """``dict[str, float | None] | None`` → ["dict[str, float | None]", "None"]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(annotation):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            parts.append(annotation[start:i])
            start = i + 1
    parts.append(annotation[start:])
    return parts


class _Writes(Protocol):
    """What JsonView needs of the record it is mixed into."""

    def to_json(self) -> dict[str, Any]: ...


class JsonView(Mapping):
    """A record read as the JSON mapping it writes (``results["target"]["k"]``), read-only; mixed into a
    ``Record`` (its ``to_json``)."""

    def __getitem__(self: _Writes, key: str) -> Any:
        return self.to_json()[key]

    def __iter__(self: _Writes) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self: _Writes) -> int:
        return len(self.to_json())
