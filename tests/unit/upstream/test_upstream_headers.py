"""A tool's x-mcp-header arguments (upstream/headers.py): which are mirrored into headers, which tools are left out."""

from __future__ import annotations

from typing import Any

from mcpx.upstream.headers import param_headers, x_mcp_header_problem


def tool(props: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {"name": "t", "inputSchema": {"type": "object", "properties": props, **schema}}


def test_annotated_top_level_arguments_are_mirrored() -> None:
    t = tool({"region": {"type": "string", "x-mcp-header": "Region"}, "n": {"type": "integer"}})
    assert param_headers(t) == {"region": "Region"}
    assert x_mcp_header_problem(t) is None
    assert param_headers({"name": "bare"}) == {}


def test_invalid_annotations_are_named() -> None:
    assert "not a header name token" in (x_mcp_header_problem(tool({"a": {"type": "string",
                                                                           "x-mcp-header": "a b"}})) or "")
    assert "only for string, integer or boolean" in (x_mcp_header_problem(tool({"a": {"type": "object",
                                                                                      "x-mcp-header": "A"}})) or "")
    twice = tool({"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}})
    assert "used twice" in (x_mcp_header_problem(twice) or "")
    nested = tool({"a": {"type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "B"}}}})
    assert "other than a top-level argument" in (x_mcp_header_problem(nested) or "")
    assert "other than a top-level argument" in (x_mcp_header_problem(tool({}, **{"x-mcp-header": "S"})) or "")
