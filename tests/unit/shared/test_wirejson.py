"""wirejson.loads reads what the standard library's decoder reads, to the same values, and refuses the rest by name.

It tries pydantic's parser first and falls back to the stdlib decoder for what that parser refuses; these
hold the two paths to one behaviour, on generated JSON and on the inputs that take the fallback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpx.shared import wirejson

# every character, lone surrogates included (they reach the daemon as \\udXXX escapes)
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers() | st.integers(min_value=-2**200, max_value=2**200) \
    | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=20)


def stdlib(data: bytes) -> Any:
    return json.loads(data.decode("utf-8-sig", "surrogatepass"))


@settings(max_examples=400, deadline=None)
@given(value=JSON, ascii_only=st.booleans(), spaced=st.booleans())
def test_loads_reads_what_the_stdlib_reads(value: Any, ascii_only: bool, spaced: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=1 if spaced else None)
    data = text.encode("utf-8", "surrogatepass")
    # repr tells -0.0 from 0.0 and 1 from 1.0 and True; key order is the document's in both
    assert repr(wirejson.loads(data)) == repr(stdlib(data))
    assert repr(wirejson.loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("data", [
    b'\xef\xbb\xbf{"a": 1}',               # a BOM, which json.loads skips
    b'{"a": "\\udfff", "b": "\\ud83d"}',   # lone surrogates, kept for lone_surrogate to name
    b'{"a": 1, "a": 2}',                   # the last of a repeated key
    b"1e400",                              # a literal too large for a float: inf, as json.loads reads it
    b"[" * 150 + b"]" * 150,               # past the fast parser's own nesting limit, within none of ours
])
def test_what_the_fast_parser_refuses_is_read_as_the_stdlib_reads_it(data: bytes) -> None:
    if data.startswith(b"[[["):
        with pytest.raises(wirejson.JsonRefused, match="more than 100 levels deep"):
            wirejson.loads(data)
        return
    assert repr(wirejson.loads(data)) == repr(stdlib(data))


@pytest.mark.parametrize(("data", "named"), [
    (b"NaN", "NaN is not a JSON number"),
    (b'{"x": -Infinity}', "-Infinity is not a JSON number"),
    (b'{"a": "\xff"}', "is not JSON"),
    (b'{"a": 1} x', "is not JSON"),
    (b"", "is not JSON"),
    (b"[" * 101 + b"]" * 101, "more than 100 levels deep"),
])
def test_what_is_not_json_is_refused_by_name(data: bytes, named: str) -> None:
    with pytest.raises(wirejson.JsonRefused, match=named):
        wirejson.loads(data, "the body")
