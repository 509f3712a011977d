"""A scripted model behind Anthropic's Messages API (`POST /v1/messages`, streamed), for driving real Claude Code.

The same scripts as tests/opencode/fake_model.py's, on its `ScriptedServer`: a list of steps, one per model turn of
a session, each seeing the request and returning a `Call` (a tool call) or a `Say` (text that ends the turn);
sessions are told apart by a `[script:NAME]` marker in their first user message; every request is kept.

Claude Code offers MCP tools behind its `ToolSearch` tool (the model asks for `select:mcp__SRV__TOOL` first and
is offered the tool after). A step that calls a tool the request does not offer is preceded by that search,
which is not one of the script's turns: a script names only the calls it means.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from opencode.fake_model import Call, ModelHandler, Recorded, Say, ScriptedServer, text_in

SEARCH = "ToolSearch"
# how Claude Code tells the model a background task ended: in a text block of a user message of its own
NOTIFICATION = re.compile(r"<task-notification>(.*?)</task-notification>", re.S)
NOTIFICATION_FIELD = re.compile(r"<(task-id|status|summary|result)>\n?(.*?)\n?</\1>", re.S)

__all__ = ["Call", "Request", "Say", "ScriptedClaudeModel"]


@dataclass
class Request(Recorded):
    """One request Claude Code sent: its messages and the tools it offered."""

    @property
    def tools(self) -> list[str]:
        return [t.get("name", "") for t in self.body.get("tools") or []]

    def blocks(self, role: str, kind: str) -> list[dict[str, Any]]:
        return [c for m in self.messages if m.get("role") == role and isinstance(m.get("content"), list)
                for c in m["content"] if isinstance(c, dict) and c.get("type") == kind]

    @property
    def turn(self) -> int:
        """The script's turns taken: assistant messages, less those that only searched for a tool."""
        searches = {b.get("id") for b in self.blocks("assistant", "tool_use") if b.get("name") == SEARCH}
        turns = 0
        for m in self.messages:
            if m.get("role") != "assistant":
                continue
            content = m.get("content")
            uses = [c for c in content if isinstance(c, dict) and c.get("type") == "tool_use"] \
                if isinstance(content, list) else []
            if uses and all(u.get("id") in searches for u in uses):
                continue
            turns += 1
        return turns

    def tool_results(self) -> list[str]:
        """The texts of the tools' results, oldest first; not the searches' (which hold no text)."""
        searches = {b.get("id") for b in self.blocks("assistant", "tool_use") if b.get("name") == SEARCH}
        return [text_in(b.get("content")) for b in self.blocks("user", "tool_result")
                if b.get("tool_use_id") not in searches]

    def task_notifications(self) -> list[dict[str, str]]:
        """The `<task-notification>`s Claude Code gave the model (a background task's end: an MCP task's among them),
        oldest first, each as {"task-id", "status", "summary", "result"} (those it has)."""
        texts = [str(b.get("text", "")) for b in self.blocks("user", "text")]
        return [dict(NOTIFICATION_FIELD.findall(body)) for text in texts for body in NOTIFICATION.findall(text)]


Step = Callable[[Request], Call | Say]


class ScriptedClaudeModel(ScriptedServer[Request]):
    """Claude Code's: Anthropic's /v1/messages, streamed."""

    request_type = Request

    @staticmethod
    def first_user_text(body: dict[str, Any]) -> str:
        return next((text_in(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user"), "")

    def _reply(self, request: Request) -> Call | Say:
        reply = super()._reply(request)
        if isinstance(reply, Call) and reply.tool not in request.tools and SEARCH in request.tools:
            return Call(SEARCH, {"query": f"select:{reply.tool}", "max_results": 1})
        return reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(ModelHandler):
            def do_GET(self) -> None:
                self.send_json(200, {"data": [], "has_more": False})

            def do_POST(self) -> None:
                body = self.read_json()
                if not self.path.startswith("/v1/messages") or self.path.startswith("/v1/messages/count_tokens"):
                    self.send_json(200, {"input_tokens": 1})
                    return
                request = model.request_of(body)
                reply = model.answer(request)
                n = len(model.requests)
                if isinstance(reply, Call):
                    block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": reply.tool,
                                             "input": {}}
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.arguments)}
                    stop = "tool_use"
                else:
                    block = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": reply.text}
                    stop = "end_turn"
                usage = {"input_tokens": 1, "output_tokens": 1}
                message = {"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": body.get("model"),
                           "content": [], "stop_reason": None, "usage": usage}
                if not body.get("stream"):
                    whole = {**block, "input": reply.arguments} if isinstance(reply, Call) else \
                        {"type": "text", "text": reply.text}
                    self.send_json(200, {**message, "content": [whole], "stop_reason": stop})
                else:
                    events = [
                        ("message_start", {"message": message}),
                        ("content_block_start", {"index": 0, "content_block": block}),
                        ("content_block_delta", {"index": 0, "delta": delta}),
                        ("content_block_stop", {"index": 0}),
                        ("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 1}}),
                        ("message_stop", {}),
                    ]
                    self.send_events([f"event: {name}\ndata: {json.dumps({'type': name, **data})}"
                                      for name, data in events])
                model.sent(request)

        return Handler
