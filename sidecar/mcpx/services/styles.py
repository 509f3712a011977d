"""A parameter's value as OpenAPI 3 serializes it (the Parameter Object's `style` and `explode`), percent-encoded.

mcpx writes this itself (docs/choices.md: no well-kept library serializes OpenAPI parameters for a client; the
ones that do are private parts of test tools). It follows the specification's table of style examples:

- query: `form` (the default; explode by default: an array as the key repeated, an object as its properties;
  without explode, one key with the items comma-joined), `spaceDelimited` and `pipeDelimited` (arrays and objects,
  the items joined by `%20` or `%7C`; exploded, as form), `deepObject` (an object as `key[prop]=value`);
- path: `simple` (the default: `a,b`; an object `k,v` or, exploded, `k=v`), `label` (`.a.b`) and `matrix`
  (`;key=a;key=b`);
- header: `simple`, unencoded; cookie: `form`.

Everything but the delimiters a style writes is percent-encoded (RFC 3986's unreserved characters stay), so a
comma inside a value is `%2C` and never a delimiter. A value nested deeper than a style describes (an object in an
array, an object's object) is its compact JSON text. `ok` says which styles a location takes: a parameter with any
other is not a tool (document.py says why).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from mcpx.shared.errors import McpxError

STYLES = {"path": ("simple", "label", "matrix"), "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
          "header": ("simple",), "cookie": ("form",)}
DEFAULT = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}
_JOIN = {"form": ",", "spaceDelimited": "%20", "pipeDelimited": "%7C"}


class StyleRefused(McpxError):
    """A value a style cannot say (an array as deepObject); the message says which."""


def ok(location: str, style: str) -> bool:
    return style in STYLES.get(location, ())


def explodes(style: str, explode: bool | None) -> bool:
    """OpenAPI's default: `form` explodes, every other style does not."""
    return explode if explode is not None else style == "form"


def text(value: Any) -> str:
    """One value as text: true/false, a number as written, a nested array or object as its compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _enc(value: Any) -> str:
    return quote(text(value), safe="")


def _pairs(value: dict[str, Any]) -> list[tuple[str, str]]:
    return [(_enc(k), _enc(v)) for k, v in value.items()]


def query(name: str, value: Any, style: str, explode: bool | None) -> list[str]:
    """The `key=value` pieces of the query string one parameter makes (joined by `&`)."""
    key, exploded = _enc(name), explodes(style, explode)
    if style == "deepObject":
        if not isinstance(value, dict):
            raise StyleRefused(f"{name!r} is a deepObject parameter, so its value must be an object, not "
                               f"{type(value).__name__}")
        return [f"{key}%5B{k}%5D={v}" for k, v in _pairs(value)]
    if isinstance(value, list):
        if not value:
            return [f"{key}="]
        if exploded:
            return [f"{key}={_enc(v)}" for v in value]
        return [f"{key}={_JOIN[style].join(_enc(v) for v in value)}"]
    if isinstance(value, dict):
        if exploded and style == "form":
            return [f"{k}={v}" for k, v in _pairs(value)]
        return [f"{key}={_JOIN[style].join(f'{k}{_JOIN[style]}{v}' for k, v in _pairs(value))}"]
    return [f"{key}={_enc(value)}"]


def path(name: str, value: Any, style: str, explode: bool | None) -> str:
    """What replaces `{name}` in the path."""
    exploded = explodes(style, explode)
    if isinstance(value, list):
        items = [_enc(v) for v in value]
    elif isinstance(value, dict):
        items = [f"{k}={v}" if exploded else f"{k},{v}" for k, v in _pairs(value)]
    else:
        items = [_enc(value)]
    if style == "label":
        return "." + ("." if exploded else ",").join(items)
    if style == "matrix":
        key = _enc(name)
        if isinstance(value, list) and exploded:
            return "".join(f";{key}={v}" for v in items)
        if isinstance(value, dict) and exploded:
            return "".join(f";{v}" for v in items)
        return f";{key}=" + ",".join(items)
    return ",".join(items)


def header(value: Any, explode: bool | None) -> str:
    """A header's value, `simple` style (not percent-encoded: a header carries text as it is)."""
    if isinstance(value, list):
        return ",".join(text(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={text(v)}" if explode else f"{k},{text(v)}" for k, v in value.items())
    return text(value)
