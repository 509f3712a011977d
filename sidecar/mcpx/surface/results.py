"""The CallToolResults mcpx answers a tools/call with when the answer is its own: a finished call, or a wait."""

from __future__ import annotations

from typing import Any

from mcpx.broker.models import TaskDoc
from mcpx.call.record import Call
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.protocol import META_SERVER_INFO
from mcpx.presentation.answering import waiting_text, withheld_meta
from mcpx.shared.names import INPUT_REQUIRED_META


def text_result(text: str, error: bool = False, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def with_notes(result: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`result` with mcpx's notes after its own content (the server's words stay first and unchanged)."""
    if not notes:
        return result
    return {**result, "content": [*result.get("content", []), *({"type": "text", "text": n} for n in notes)]}


def finished_result(doc: TaskDoc) -> dict[str, Any]:
    """The upstream's own result, as it came; a call mcpx could not complete is a tool error that says why.

    `doc` is a finished task's stored document; a live task answers alike (`task_result`).
    """
    return _ended(doc.state, doc.result, doc.error, doc.server, doc.tool)


def task_result(task: Call) -> dict[str, Any]:
    """finished_result of a live finished call, read off the task itself: no document is built on the reply's path."""
    return _ended(task.state, task.result, task.error, task.request.server, task.request.tool)


def completed_result(value: dict[str, Any]) -> dict[str, Any]:
    """A completed call's result as the client gets it: the upstream's own (a copy)."""
    result = dict(value)
    if "_meta" not in result:  # nearly every result: no comprehension run over nothing
        return result
    meta = {k: v for k, v in (result.get("_meta") or {}).items() if k != META_SERVER_INFO}
    if meta:
        result["_meta"] = meta  # passed through untouched, but for the upstream's self-description
    else:
        result.pop("_meta", None)
    return result


def _ended(state: str, value: dict[str, Any] | None, error: str | None, server: str, tool: str) -> dict[str, Any]:
    if state == "completed" and value is not None:
        return completed_result(value)
    upstream_error = (value or {}).get("error")
    if isinstance(upstream_error, dict):
        raise RpcError.from_error(upstream_error)  # the server's own protocol error, passed through
    return text_result(f"mcpx: {server}.{tool} {state}: {error or ''}", error=True)


def waiting_result(task: Call, prefix: str = "") -> dict[str, Any]:
    """A call still waiting on questions this client cannot ask: what they are, and how to answer them."""
    questions = [q.wire() for q in task.open.values()]
    r = task.request
    text = waiting_text(r.server, r.tool, task.id, questions, prefix)
    return {**text_result(text), "_meta": {INPUT_REQUIRED_META: {
        "task": task.id, "trace": task.trace, "elicitations": [q["id"] for q in questions]},
        **withheld_meta(questions, lambda withhold: waiting_text(r.server, r.tool, task.id, questions, prefix,
                                                                 withhold=withhold))}}


_WHOSE = {"human": "the person's", "agent": "the agent's", "agent-then-human": "the agent's, then the person's"}


def waiting_on(task: Call) -> str:
    """Whom a call waits on, in a line: its progress notifications say it while it is honestly busy."""
    r = task.request
    if not task.open:
        return f"waiting on the upstream server {r.server} ({r.tool})"
    waiting = ", ".join(f"{eid} ({_WHOSE.get(q.audience, q.audience)})" for eid, q in task.open.items())
    return (f"{r.server}.{r.tool} waits for an answer to {waiting}: mcpx elicit answer ID, mcpx tui, or the web "
            "inbox")
