"""Who answered, as a type: `Answerer` parses the stored `by` string and gives it back exactly (broker/models.py)."""

from __future__ import annotations

import pytest

from mcpx.broker.models import Answerer, AnswererKind


@pytest.mark.parametrize(("by", "kind", "detail"), [
    ("person:web", "person", "web"), ("person:mcp-client", "person", "mcp-client"), ("agent:mcp", "agent", "mcp"),
    ("script:deploy", "script", "deploy"), ("policy:allow-ci", "policy", "allow-ci"), ("policy:a:b", "policy", "a:b"),
    ("expiry", "expiry", None), ("upstream", "upstream", None),
])
def test_a_by_string_parses_to_its_kind_and_back_to_itself(by: str, kind: AnswererKind, detail: str | None) -> None:
    answerer = Answerer.parse(by)
    assert (answerer.kind, answerer.detail) == (kind, detail)
    assert str(answerer) == by and Answerer.kind_of(by) == kind


@pytest.mark.parametrize("by", ["human", "agent", "person", "", "robot:x", "Person:web"])
def test_a_string_that_names_no_answerer_has_no_kind(by: str) -> None:
    assert Answerer.kind_of(by) is None
    with pytest.raises(ValueError, match="names no answerer"):
        Answerer.parse(by)


def test_an_answerer_is_a_value() -> None:
    assert Answerer.parse("agent:mcp") == Answerer(kind="agent", detail="mcp")
    assert str(Answerer(kind="policy", detail="r1")) == "policy:r1"
    with pytest.raises(ValueError):
        Answerer.parse("agent:mcp").kind = "person"  # type: ignore[misc]
