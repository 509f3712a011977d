"""The tools mcpx itself offers on its MCP surface: list, read and answer questions, collect results."""

from __future__ import annotations

from typing import Any

SESSION_ARG = "_mcpx_session"

_ID = {"type": "string", "description": "the question's id, elc- and 16 hex digits"}

MCPX_TOOLS: dict[str, dict[str, Any]] = {
    "mcpx_elicit_list": {
        "description": "Questions that MCP servers behind mcpx are waiting on in your session, with who may answer "
                       "each (the agent, or only the person), their fields and deadlines.",
        "inputSchema": {"type": "object", "properties": {
            "state": {"type": "string", "enum": ["pending", "answered", "expired", "abandoned", "all"],
                      "default": "pending"},
            "server": {"type": "string", "description": "only questions from this server"}}},
        "annotations": {"title": "List open questions", "readOnlyHint": True, "openWorldHint": False},
    },
    "mcpx_elicit_get": {
        "description": "One question in full: the server's message, the fields with their types and constraints, "
                       "who may answer it, and the exact call that answers it.",
        "inputSchema": {"type": "object", "properties": {"id": _ID}, "required": ["id"]},
        "annotations": {"title": "Read a question", "readOnlyHint": True, "openWorldHint": False},
    },
    "mcpx_elicit_answer": {
        "description": "Answer a question a server asked mid-call: accept (with content matching its fields), "
                       "decline (no — say why in reason), or cancel (not now). Only answer what you truly know: "
                       "if you do not know, decline and explain; never invent a value. Questions for the person "
                       "(credentials, logins, confirmations) are refused to agents. With wait: true, returns the "
                       "resumed call's real result.",
        "inputSchema": {"type": "object", "required": ["id", "action"], "properties": {
            "id": _ID,
            "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
            "content": {"type": "object", "description": "the field values, for accept"},
            "reason": {"type": "string", "description": "why, for decline or cancel"},
            "wait": {"type": "boolean", "default": False,
                     "description": "wait for the call that asked, and return its result"}}},
        "annotations": {"title": "Answer a question", "readOnlyHint": False, "destructiveHint": False,
                        "openWorldHint": False},
    },
    "mcpx_task_result": {
        "description": "The real result of a call that waited for an answer (its task id came with the question).",
        "inputSchema": {"type": "object", "required": ["task"], "properties": {
            "task": {"type": "string", "description": "tsk- and 16 hex digits"},
            "wait": {"type": "boolean", "default": False, "description": "wait for it if it is still running"}}},
        "annotations": {"title": "Collect a call's result", "readOnlyHint": True, "openWorldHint": False},
    },
}


def listed() -> list[dict[str, Any]]:
    return [{"name": name, **spec} for name, spec in MCPX_TOOLS.items()]


def text_result(text: str, error: bool = False, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result
