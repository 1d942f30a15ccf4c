"""Writing TOML (the standard library only reads it): a run directory's config.toml, read back by ``tomllib``."""
from __future__ import annotations

import math
from typing import Any

_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: any Unicode as itself (an emoji stays one character), quotes,
    backslashes and control characters escaped. A lone surrogate (a non-UTF-8 file name as Python decodes
    it) has no TOML spelling and is written as U+FFFD."""
    out = []
    for char in str(text):
        code = ord(char)
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\uFFFD")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A bare key when TOML allows one, else a quoted key."""
    key = str(key)
    return key if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key) else toml_string(key)


def to_toml(data: dict[str, Any]) -> str:
    """Serialise the resolved configuration (flat values and nested tables only); ``tomllib`` reads it back."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v) if not (isinstance(v, float) and math.isinf(v)) else ("inf" if v > 0 else "-inf")
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return toml_string(v)

    def table(prefix: str, d: dict[str, Any]) -> list[str]:
        lines = [f"{toml_key(k)} = {value(v)}" for k, v in d.items() if v is not None and not isinstance(v, dict)]
        out = ([f"[{prefix}]"] if prefix else []) + lines
        for k, v in d.items():
            if isinstance(v, dict):
                out += [""] + table(f"{prefix}.{toml_key(k)}" if prefix else toml_key(k), v)
        return out

    return "\n".join(table("", data)) + "\n"
