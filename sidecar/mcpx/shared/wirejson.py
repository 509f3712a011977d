"""JSON from outside, taken within bounds, and JSON going out that always encodes.

In: nesting is capped at MAX_DEPTH. CPython's decoder guards its own recursion (a RecursionError,
raised cleanly, for `[` x 100 000), and everything that recurses over the value afterwards —
pydantic, json.dumps, the store — only ever sees values within the cap, so none of it can blow.
JSON escapes can also spell a lone surrogate ("\\udfff"), which is not Unicode text: UTF-8
cannot carry it, so it is found by path here and refused by whoever knows what the field means.

Out: a lone surrogate that did get in (an upstream's tool result, say) is written as its own JSON
escape, so a reply or a stored record is never lost to a UnicodeEncodeError.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core

# deep structures that people and programs mean are a dozen levels; nothing real comes near 100,
# and 100 is far below where the interpreter's recursion limit starts
MAX_DEPTH = 100


class JsonRefused(ValueError):
    """Not JSON, or JSON nested deeper than MAX_DEPTH; the message names which."""

    def __init__(self, message: str, too_deep: bool = False) -> None:
        super().__init__(message)
        self.too_deep = too_deep


def too_deep_message(what: str) -> str:
    return f"{what} nests arrays and objects more than {MAX_DEPTH} levels deep; mcpx refuses it"


class _NotJsonNumber(ValueError):
    pass


def _no_constant(name: str) -> Any:
    # Python's decoder takes NaN, Infinity and -Infinity by default; RFC 8259 has no such numbers, JavaScript's
    # JSON.parse refuses them, and the store would keep them as null while this process held the float
    raise _NotJsonNumber(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def loads(data: str | bytes | bytearray, what: str = "the message") -> Any:
    """Parse JSON text; JsonRefused when it is not JSON (NaN and Infinity are not) or is nested deeper than
    MAX_DEPTH."""
    if isinstance(data, str):  # a str from within the daemon (the hot paths read bytes)
        return _loads_stdlib(data, what)
    try:
        # pydantic's parser (jiter) first: every MCP message in and out of the daemon and every /v1 body is read
        # here, and it is the quicker of the two (docs/bench.md has by how much). It refuses NaN and Infinity as
        # well; what else it refuses (a BOM, a lone surrogate, nesting past its own limit, bytes that are not
        # UTF-8) is read as before: the same value, or the same named refusal (tests/unit/shared/test_wirejson.py holds
        # the two to the same values). Only keys go in its string cache: a value may be a credential, which must not
        # outlive its message in the process
        value = pydantic_core.from_json(data, allow_inf_nan=False, cache_strings="keys")
    except ValueError:
        return _loads_stdlib(data, what)
    return _within_depth(value, data, what)


def _loads_stdlib(data: str | bytes | bytearray, what: str) -> Any:
    try:
        # bytes as json.loads reads them (UTF-8, a BOM skipped), surrogates kept so that lone_surrogate names them
        value = _DECODER.decode(data if isinstance(data, str) else data.decode("utf-8-sig", "surrogatepass"))
    except RecursionError:
        raise JsonRefused(too_deep_message(what), too_deep=True) from None
    except (json.JSONDecodeError, UnicodeDecodeError, _NotJsonNumber) as exc:
        raise JsonRefused(f"{what} is not JSON: {exc}") from None
    return _within_depth(value, data, what)


def _within_depth(value: Any, data: str | bytes | bytearray, what: str) -> Any:
    # fewer brackets than the cap cannot nest past it: most messages skip the walk (counted here, not in a function
    # of their own: every message in and out is read through this)
    if isinstance(value, dict | list):
        brackets = (data.count("[") + data.count("{") if isinstance(data, str)
                    else data.count(b"[") + data.count(b"{"))
        if brackets > MAX_DEPTH and depth_exceeds(value, MAX_DEPTH):
            raise JsonRefused(too_deep_message(what), too_deep=True)
    return value


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep (`[]` is 1), without recursing."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if level > limit:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, level + 1))
    return False


def shown(text: str) -> str:
    """`text` printable and encodable, a lone surrogate written as its escape (\\udfff)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def lone_surrogate(value: Any, where: str = "") -> str | None:
    """The dotted path (`content.repo`, `requestedSchema.properties.\\udfff`) of the first key or string
    that holds a lone surrogate, or None when all of `value` is Unicode text."""
    # pydantic's encoder refuses a lone surrogate wherever it is, keys included, and is quicker than the walk (every
    # question and answer is looked at here): only what it refuses, for whatever reason, is walked
    try:
        pydantic_core.to_json(value)
        return None
    except pydantic_core.PydanticSerializationError:
        pass
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                return path or "(the value)"
        elif isinstance(node, dict):
            for key, child in node.items():
                key_text = str(key)
                child_path = f"{path}.{shown(key_text)}" if path else shown(key_text)
                if _has_surrogate(key_text):
                    return child_path
                stack.append((child, child_path))
        elif isinstance(node, list | tuple):
            stack.extend((child, f"{path}.{i}" if path else str(i)) for i, child in enumerate(node))
    return None


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


SURROGATE_PROBLEM = "is not valid Unicode text: it holds a lone surrogate (like \\udfff), which UTF-8 cannot carry"


def dumps(value: Any) -> str:
    """Compact JSON text that encodes to UTF-8, whatever strings `value` holds."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def encode(value: Any) -> bytes:
    """`dumps` as UTF-8 bytes: pydantic's encoder, the same JSON with less Python on the way (every MCP message in
    and out of the daemon is encoded here; a float's exponent may be written shorter, 1e-7 for 1e-07); what it
    refuses (a lone surrogate, nesting past its depth) is written by `_escaped`, which never refuses."""
    try:
        return pydantic_core.to_json(value)
    except pydantic_core.PydanticSerializationError:
        return _escaped(value)


def _escaped(value: Any) -> bytes:
    """A lone surrogate only ever sits inside a JSON string, where backslashreplace writes exactly its JSON
    escape: the receiver decodes the same text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "backslashreplace")


def encode_models(value: Any, exclude: set[str] | None = None) -> bytes:
    """Models (and dicts and lists holding them) as the API and the store show them: by alias, without a
    model's nulls. pydantic's own encoder, with no dicts dumped on the way to be encoded after; a lone
    surrogate, which that encoder refuses, is written as its escape (`_escaped`).
    `exclude`: fields of a top-level model left out."""
    try:
        return pydantic_core.to_json(value, by_alias=True, exclude_none=True, exclude=exclude)
    except pydantic_core.PydanticSerializationError:
        return _escaped(pydantic_core.to_jsonable_python(value, by_alias=True, exclude_none=True, exclude=exclude))
