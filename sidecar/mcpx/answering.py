"""How to answer a question, in each surface's own words: the CLI command, the MCP tool call."""

from __future__ import annotations

import json
from typing import Any

from mcpx.broker.schema import example_content
from mcpx.text import shell_quote_json


def respond_with(q: dict[str, Any]) -> str:
    """The one command that answers this question, with a placeholder of the right shape."""
    eid = q["id"]
    if q.get("mode") == "url":
        return f"mcpx elicit answer {eid}"
    example = example_content(q.get("requestedSchema"))
    return f"mcpx elicit answer {eid} {shell_quote_json(example)}" if example else f"mcpx elicit answer {eid}"


def mcp_answer_call(q: dict[str, Any], action: str = "accept", wait: bool = True) -> str:
    """The exact mcpx_elicit_answer call an agent makes, with placeholder content of the right shape."""
    args: dict[str, Any] = {"id": q["id"], "action": action}
    if action == "accept" and q.get("mode") != "url":
        args["content"] = example_content(q.get("requestedSchema"))
    if action == "decline":
        args["reason"] = "why you cannot answer"
    if wait:
        args["wait"] = True
    return "mcpx_elicit_answer " + json.dumps(args, ensure_ascii=False)
