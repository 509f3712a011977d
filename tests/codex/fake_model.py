"""A scripted model behind OpenAI's Responses API (`POST {base_url}/responses`, streamed), for driving real Codex CLI.

The same scripts as tests/opencode/fake_model.py's, on its `ScriptedServer`: a list of steps, one per model turn of a
session, each seeing the request and returning a `Call` (a tool call) or a `Say` (text that ends the turn); sessions
are told apart by a `[script:NAME]` marker in their first user message; every request is kept.

Codex (0.169.0) offers an MCP server's tools grouped as `{"type": "namespace", "name": "mcp__SERVER", "tools": [...]}`;
a script names them as Codex's logs do, `mcp__SERVER__TOOL`, and the reply carries the namespace and the tool's own
name. A tool's result comes back in the next request as a `function_call_output` (its text starts "Wall time").
Answering `response.created`, one `response.output_item.done` per item and `response.completed` is enough for it
(../shared/host-facts/codex-gemini.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from opencode.fake_model import MARKER, Call, ModelHandler, Recorded, Say, ScriptedServer, text_in

__all__ = ["Call", "Request", "Say", "ScriptedCodexModel"]

SEP = "__"  # between a namespace and a tool's own name, as Codex names MCP tools (mcp__SERVER__TOOL)


@dataclass
class Request(Recorded):
    """One request Codex sent: its input items and the tools it offered."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [i for i in self.body.get("input") or [] if isinstance(i, dict)]

    @property
    def tools(self) -> list[str]:
        names: list[str] = []
        for tool in self.body.get("tools") or []:
            if tool.get("type") == "namespace":
                names += [f"{tool['name']}{SEP}{t.get('name')}" for t in tool.get("tools") or []]
            elif tool.get("name"):
                names.append(str(tool["name"]))
        return names

    @property
    def instructions(self) -> str:
        """What Codex told the model besides the conversation: its instructions and developer messages (where the
        skills it found are listed)."""
        developer = [text_in(i.get("content")) for i in self.messages if i.get("role") in ("developer", "system")]
        return "\n".join([str(self.body.get("instructions") or ""), *developer])

    @property
    def turn(self) -> int:
        return sum(1 for i in self.messages if i.get("type") == "function_call"
                   or (i.get("type") == "message" and i.get("role") == "assistant"))

    def tool_results(self) -> list[str]:
        return [text_in(i.get("output")) for i in self.messages if i.get("type") == "function_call_output"]


class ScriptedCodexModel(ScriptedServer[Request]):
    """Codex's: the Responses API, streamed."""

    request_type = Request
    api_root = "/v1"

    @staticmethod
    def first_user_text(body: dict[str, Any]) -> str:
        texts = [text_in(i.get("content")) for i in body.get("input") or []
                 if isinstance(i, dict) and i.get("role") == "user"]
        return next((t for t in texts if MARKER.search(t)), "")  # Codex puts its own context in user items first

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(ModelHandler):
            def do_GET(self) -> None:  # the model list: none (an unknown model only warns)
                self.send_json(200, {"object": "list", "data": [], "models": []})

            def do_POST(self) -> None:
                body = self.read_json()
                if not self.path.rstrip("/").endswith("/responses"):
                    self.send_json(404, {"error": {"message": f"no {self.path} here"}})
                    return
                request = model.request_of(body)
                reply = model.answer(request)
                n = len(model.requests)
                if isinstance(reply, Call):
                    namespace, _, own = reply.tool.rpartition(SEP)
                    item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n:04d}", "call_id": f"call_{n:04d}",
                                            "name": own if namespace else reply.tool,
                                            "arguments": json.dumps(reply.arguments), "status": "completed"}
                    if namespace:
                        item["namespace"] = namespace
                else:
                    item = {"type": "message", "id": f"msg_{n:04d}", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
                response = {"id": f"resp_{n:04d}", "object": "response", "created_at": int(time.time()),
                            "status": "completed", "model": body.get("model"), "output": []}
                usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
                events = [("response.created", {"response": {**response, "status": "in_progress"}}),
                          ("response.output_item.done", {"output_index": 0, "item": item}),
                          ("response.completed", {"response": {**response, "output": [item], "usage": usage}})]
                self.send_events([f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': seq, **data})}"
                                  for seq, (name, data) in enumerate(events)])
                model.sent(request)

        return Handler
