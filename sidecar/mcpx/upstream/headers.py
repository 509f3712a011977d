"""A tool's `x-mcp-header` arguments (SEP-2243): which are mirrored into `Mcp-Param-*` headers, and which tools
declare them wrongly and are left out.

Read by `connection.py` when it lists an HTTP server's tools; the HTTP channel (`mcp/http_client.py`) writes the
headers from what `param_headers` found.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def param_headers(tool: dict[str, Any]) -> dict[str, str]:
    """{argument: header name} for a tool's x-mcp-header annotated top-level arguments."""
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    return {arg: str(p["x-mcp-header"]) for arg, p in props.items() if isinstance(p, dict) and "x-mcp-header" in p}


def x_mcp_header_problem(tool: dict[str, Any]) -> str | None:
    """Why a tool's x-mcp-header annotations are invalid (SEP-2243), or None; such a tool must be left out."""
    seen: set[str] = set()
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    for arg, prop in props.items():
        if not isinstance(prop, dict) or "x-mcp-header" not in prop:
            continue
        header = prop["x-mcp-header"]
        if not isinstance(header, str) or not header or not _TOKEN.match(header):
            return f"{arg}: x-mcp-header {header!r} is not a header name token"
        if prop.get("type") not in ("string", "integer", "boolean"):
            return f"{arg}: x-mcp-header is only for string, integer or boolean arguments, not {prop.get('type')!r}"
        if header.lower() in seen:
            return f"{arg}: x-mcp-header {header!r} is used twice"
        seen.add(header.lower())
    schema = tool.get("inputSchema") or {}

    def nested(node: Any, depth: int) -> bool:
        if isinstance(node, dict):
            if depth > 1 and "x-mcp-header" in node:
                return True
            return any(nested(v, depth + 1) for k, v in node.items() if k != "x-mcp-header")
        if isinstance(node, list):
            return any(nested(v, depth) for v in node)
        return False

    if any(nested(p, 0) for p in props.values() if isinstance(p, dict)) or "x-mcp-header" in schema:
        return "x-mcp-header appears somewhere other than a top-level argument"
    return None
