"""The ``json`` corpus format: an object whose field holds the documents, as strings or as token lists."""
from __future__ import annotations

import json
from pathlib import Path

from topicaudit.errors import UserError
from topicaudit.inputs.files import DuplicateKey, read_user_file, unique_keys
from topicaudit.inputs.formats.decoding import decode

_JSON_EXAMPLE = '{"text": ["first document", "second document", ...]}'


def read_json(path: Path, text_field: str = "text") -> tuple[list[str], str]:
    if not isinstance(text_field, str) or not text_field:
        raise UserError(f"text_field must be a non-empty string, got {text_field!r}")
    raw = read_user_file(path, "JSON corpus file")
    text = decode(raw, path, "utf-8-sig", "save the file as UTF-8 (JSON text must be UTF-8)")
    try:
        obj = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as e:
        raise UserError(f"{path}: {e}") from None
    except json.JSONDecodeError as e:
        raise UserError(
            f"{path}, line {e.lineno}, column {e.colno}: invalid JSON ({e.msg}); "
            f"fix the file; a JSON corpus looks like {_JSON_EXAMPLE}"
        ) from None
    except RecursionError:
        raise UserError(f"{path}: JSON nested too deeply; a JSON corpus looks like {_JSON_EXAMPLE}") from None
    except ValueError as e:  # an integer of over 4,300 digits (Python's int_max_str_digits): it was exit 3
        raise UserError(f"{path}: not readable JSON ({e}); a JSON corpus looks like {_JSON_EXAMPLE}") from None
    if not isinstance(obj, dict):
        raise UserError(
            f"{path}: the top level is a JSON {_json_type(obj)}, but an object with a "
            f"{text_field!r} field is expected, like {_JSON_EXAMPLE}"
        )
    if text_field not in obj:
        keys = ", ".join(repr(k) for k in list(obj)[:10]) or "none"
        raise UserError(
            f"{path}: no field {text_field!r} in the JSON object (its fields: {keys}); "
            f"put the documents in {text_field!r} or name the field with text_field="
        )
    docs = obj[text_field]
    if not isinstance(docs, list):
        raise UserError(
            f"{path}: field {text_field!r} is a JSON {_json_type(docs)}, but must be a list "
            f"of strings, one per document, like {_JSON_EXAMPLE}"
        )
    tokenised = bool(docs) and isinstance(docs[0], list)
    for i, d in enumerate(docs):
        if tokenised and not (isinstance(d, list) and all(isinstance(t, str) and t for t in d)):
            raise UserError(
                f"{path}: field {text_field!r}, entry {i} (0-based) is not a list of non-empty strings, but entry 0 "
                "is a token list; give every document as a token list, or every document as a string"
            )
        if not tokenised and not isinstance(d, str):
            raise UserError(
                f"{path}: field {text_field!r}, entry {i} (0-based) is a JSON {_json_type(d)}, "
                "not a string; every document must be a string (or every document a list of tokens)"
            )
    return docs, f"json {path} (field {text_field!r})"


def _json_type(obj) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(obj), type(obj).__name__)
