"""A configuration from a TOML file or a dict: every table and key checked against the model
(:mod:`topicaudit.engine.configuration.config`), unknown keys refused with the known ones named, and paths
in a file made relative to the file.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import os
from pathlib import Path
from typing import Any

from topicaudit.engine.configuration import toml_reader
from topicaudit.engine.configuration.config import PATH_OPTIONS, AuditConfig, BaseConfig, Config
from topicaudit.engine.configuration.validation import check_path_text
from topicaudit.errors import UserError
from topicaudit.inputs.files import check_regular

SECTIONS = Config.SECTIONS  # the tables of a run's configuration
# Tables older versions wrote into every run's config.toml at these defaults; read back, they are dropped.
_LEGACY_RUN_TABLES = {"model": {"normalize": False, "tolerance": 1e-3, "trust_pickle": False, "params": {}},
                      "reference": {"text_field": "text", "options": {}, "max_words": 0},
                      "ranking": {"by": "recommended", "top": 10, "show_text": False}}

# The longest string setting (PATH_MAX): a 300 MB one, from a dict given to the API, reached files and figures.
MAX_STRING = 4096
_EXPECTED = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _plain(value: Any) -> Any:
    """A number of another type (NumPy's ``np.int64(3)``, ``np.float32``) as the int or float a keyword argument
    would take it as; a bool (Python's or NumPy's) stays what it is, to be refused where a number is wanted."""
    if isinstance(value, bool) or type(value) in (int, float) or not isinstance(value, numbers.Real):
        return value
    if isinstance(value, (int, float)):  # a subclass by its own value, not what its __int__/__float__ says
        return int.__index__(value) if isinstance(value, int) else float.__float__(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    try:
        return float(value)
    except OverflowError:
        return value  # refused below, as it is


def _plain_table(table: dict[Any, Any]) -> dict[Any, Any]:
    """A free table ([target.params]) with its numbers as ``_plain`` gives them: config.toml wrote
    ``np.int64(5)`` as the string "5" and ``np.float64(0.5)`` as its repr, which TOML cannot read back. A string
    is its own text: a str subclass holding "rdp" was used as rdp and recorded as its ``__str__`` (XIX-zl)."""
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(plain(v) for v in value) if type(value) in (list, tuple) else value
        if isinstance(value, str):
            return str.__str__(value)
        return _plain(value)
    return plain(dict(table))


def _check_value(where: str, key: str, value: Any, annotation: str) -> Any:
    kinds = [k for k in (bool, int, float, str) if k.__name__ in annotation]
    value = _plain(value)
    if value is None and "None" in annotation:
        return value
    if isinstance(value, bool) and bool not in kinds:
        kinds_ok = False
    else:
        kinds_ok = any(isinstance(value, k) for k in kinds) or (float in kinds and isinstance(value, int))
    if not kinds_ok:
        wanted = " or ".join(_EXPECTED[k] for k in kinds)
        raise UserError(f"{where}: key {key!r} must be {wanted} (got {value!r:.80})")
    if isinstance(value, str):
        value = str.__str__(value)  # a str subclass as its text (its own __str__ may name another path)
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise UserError(f"{where}: key {key!r} is {len(value)} characters long; a setting is at most {MAX_STRING} "
                        "(a path's limit): give a shorter one")
    if float in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise UserError(f"{where}: key {key!r} must be finite (got {value!r})")
        if int not in kinds:
            value = float(value)
    return value


def _fill(obj: Any, table: dict[str, Any], where: str, section: str | None, variant: type[BaseConfig]) -> None:
    fields = {f.name: f for f in dataclasses.fields(obj)}
    sections = variant.SECTIONS
    for key, value in table.items():
        if key in sections and section is None:
            continue
        if key not in fields or (section is None and key in sections):
            if section is None and key in _OTHER_TABLES[variant]:
                other = _OTHER_TABLES[variant][key]
                raise UserError(f"{where}: [{key}] belongs to `topicaudit {other.COMMAND}`, not to "
                                f"`topicaudit {variant.COMMAND}`; tables of {variant.COMMAND}: "
                                + ", ".join(f"[{name}]" for name in sections))
            known = ", ".join(k for k in fields if k not in sections)
            tables = "; tables: " + ", ".join(f"[{name}]" for name in sections) if section is None else ""
            raise UserError(f"{where}: unknown key {key!r:.80}; known keys: {known}{tables}")  # a 60 KB key, cut
        if (section, key) in variant.FREE_TABLES:
            if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):  # {1: 2}: API only
                raise UserError(f"{where}: {key!r} must be a table (its keys names), e.g. [{section}.{key}]")
            setattr(obj, key, _plain_table(value))
            continue
        if (section, key) in variant.NESTED_TABLES:
            if not isinstance(value, dict):
                raise UserError(f"{where}: {key!r} must be a table, e.g. [{section}.{key}]")
            _fill(getattr(obj, key), value, f"{where.rsplit(' [', 1)[0]} [{section}.{key}]", f"{section}.{key}",
                  variant)
            continue
        if "list" in str(fields[key].type):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UserError(f"{where}: key {key!r} must be a list of strings, e.g. {key} = [\"lira_online\"]")
            setattr(obj, key, [str.__str__(v) for v in value])
            continue
        setattr(obj, key, _check_value(where, key, value, str(fields[key].type)))


def set_checked(obj: Any, key: str, value: Any, section: str | None, variant: type[BaseConfig]) -> None:
    """Set one setting given by name (``topicaudit.audit_model``'s keywords) as a file's key is set: its type and
    length checked. Set unchecked, ``trust_pickle="no"`` (a true value) unpickled Φ, running the file's code,
    where ``[model] trust_pickle = "no"`` in a file is refused (hostile pass XIX-zi)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    _fill(obj, {key: value}, f"[{section}]" if section else "setting", section, variant)


def check_fields(config: BaseConfig, where: str = "configuration") -> Config | AuditConfig:
    """A configuration object built or edited in Python, read once into a new one as a file's keys are read: the
    run uses the copy, and the caller's object is left as it was. Checked in place, ``trust_pickle: bool | str``
    declared by a ModelConfig subclass passed "no", a ``trust_pickle`` property said False to the check and True
    to the loader, and ``audit_model(config, trust_pickle=True)`` left True in the caller's object for its next
    call (hostile pass XIX-zj; XIX-zi: ``config.model.trust_pickle = "no"`` unpickled Φ). Each table is read by
    the schema's fields, a key it does not have is refused as a file's, and a path object stands for its text."""
    variant = AuditConfig if isinstance(config, AuditConfig) else Config
    return config_from_dict(_table_of(config, variant, where, None, variant), where, variant)


def _table_of(obj: Any, schema: type, where: str, section: str | None, variant: type[BaseConfig]) -> dict[str, Any]:
    if not isinstance(obj, schema):
        raise UserError(f"{where} must be a {schema.__name__} (a table of the configuration), not "
                        f"{type(obj).__name__}")
    names = [item.name for item in dataclasses.fields(schema)]
    unknown = sorted(set(getattr(obj, "__dict__", {})) - set(names), key=str)
    if unknown:  # a misspelt attribute (count → cuont) was silently the default, where a file's key is refused
        raise UserError(f"{where}: unknown key {unknown[0]!r:.80}; known keys: {', '.join(names)}")
    table: dict[str, Any] = {}
    for name in names:
        value = getattr(obj, name)  # once: the value checked is the value used
        inner = variant.SECTIONS.get(name) if section is None else variant.NESTED_TABLES.get((section, name))
        if inner is not None:
            part = name if section is None else f"{section}.{name}"
            table[name] = _table_of(value, inner, f"{where.rsplit(' [', 1)[0]} [{part}]", part, variant)
        elif isinstance(value, os.PathLike):
            try:
                table[name] = os.fspath(value)
            except TypeError as error:
                raise UserError(f"{where}: key {name!r} could not be read as a path ({error})") from None
        else:
            table[name] = value
    return table


# Tables only the other variant has, for a message that names the command they belong to.
_OTHER_TABLES = {Config: {name: AuditConfig for name in AuditConfig.SECTIONS if name not in Config.SECTIONS},
                 AuditConfig: {name: Config for name in Config.SECTIONS if name not in AuditConfig.SECTIONS}}


def audits_a_model(data: dict[str, Any]) -> bool:
    """Whether a TOML configuration describes ``topicaudit audit`` (it names a released model, [model] phi)."""
    model = data.get("model")
    return isinstance(model, dict) and "phi" in model


def config_from_dict(data: dict[str, Any], source: str = "configuration",
                     variant: type[BaseConfig] | None = None) -> Config | AuditConfig:
    """The configuration a TOML document describes: ``variant`` (Config or AuditConfig), else the audit variant
    when it names a released model ([model] phi), else the run variant."""
    if variant is None:
        variant = AuditConfig if audits_a_model(data) else Config
    if variant is Config:
        data = {name: table for name, table in data.items() if _LEGACY_RUN_TABLES.get(name) != table}
    config = variant()
    _fill(config, data, source, None, variant)
    for name, table in data.items():
        if name in variant.SECTIONS:
            if not isinstance(table, dict):
                raise UserError(f"{source}: {name!r} must be a table ([{name}])")
            _fill(getattr(config, name), table, f"{source} [{name}]", name, variant)
    return config


def load_config(path: str | Path, variant: type[BaseConfig] | None = None) -> Config | AuditConfig:
    """The configuration a TOML file describes (as :func:`config_from_dict`), every key checked.

    Paths in the file (``[corpus] path``, ``[reference] path``, ``[model]``
    files, ``[corpus.options]`` vocabularies) are relative to the file, not to
    the working directory, so a configuration means the same from anywhere.
    """
    if not isinstance(path, (str, os.PathLike)):  # the API's boundary (bytes was a TypeError deep in pathlib)
        raise UserError(f"load_config takes the path of a TOML file (a str or pathlib.Path; got "
                        f"{type(path).__name__})")
    check_path_text(path, "configuration file")
    path = Path(path)
    check_regular(path, fix="give the path of the TOML file itself")  # a FIFO would block the read below
    try:
        if path.stat().st_size > toml_reader.MAX_BYTES:  # refused before it is read into memory
            raise toml_reader.too_large(str(path))
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"configuration file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read configuration file {path}: {error}") from None
    data = toml_reader.loads(text, str(path))  # size, nesting and dotted keys bounded before parsing
    config = config_from_dict(data, str(path), variant)
    # Paths in a config file are relative to the file, not to the shell.
    for section, key in config.PATHS:
        table = getattr(config, section)
        value = getattr(table, key)
        if value is not None and str(value).strip() and not Path(value).is_absolute():  # "" is refused below
            setattr(table, key, str(path.parent / value))
    for section in ("corpus", "reference"):
        options = getattr(config, section).options if section in config.SECTIONS else {}
        for key in PATH_OPTIONS:
            value = options.get(key)
            if isinstance(value, str) and value and not Path(value).is_absolute():
                options[key] = str(path.parent / value)
    return config
