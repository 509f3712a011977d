"""A scripted model behind the Gemini API (`POST {base}/v1beta/models/MODEL:streamGenerateContent?alt=sse`, and
`:generateContent`), for driving real Gemini CLI with GOOGLE_GEMINI_BASE_URL pointed here.

The same scripts as tests/opencode/fake_model.py's, on its `ScriptedServer`: one step per model turn of a session (a
`Call` or a `Say`), sessions told apart by a `[script:NAME]` marker in their first user message, every request kept.
Gemini CLI names an MCP server's tools `mcp_SERVER_TOOL`. What it asks on the side (a JSON answer: whether to go on,
which model) is answered with a JSON object that ends the turn with the person.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from opencode.fake_model import MARKER, Call, ModelHandler, Recorded, Say, ScriptedServer

__all__ = ["Call", "Request", "Say", "ScriptedGeminiModel"]

# the answer to a side question of Gemini CLI's own (who speaks next, which model, how hard the task is): the person
# speaks next, on the default model
SIDE = {"next_speaker": "user", "reasoning": "scripted", "model_choice": "flash", "complexity_reasoning": "scripted",
        "complexity_score": 1}


@dataclass
class Request(Recorded):
    """One request Gemini CLI sent: its contents and the functions it offered."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [c for c in self.body.get("contents") or [] if isinstance(c, dict)]

    @property
    def tools(self) -> list[str]:
        return [str(f.get("name")) for t in self.body.get("tools") or [] for f in t.get("functionDeclarations") or []]

    @property
    def instructions(self) -> str:
        system = self.body.get("systemInstruction") or {}
        return "\n".join(str(p.get("text", "")) for p in system.get("parts") or [] if isinstance(p, dict))

    @property
    def turn(self) -> int:
        return sum(1 for c in self.messages if c.get("role") == "model")

    def tool_results(self) -> list[str]:
        return [json.dumps(p["functionResponse"].get("response"), ensure_ascii=False) for c in self.messages
                for p in c.get("parts") or [] if isinstance(p, dict) and "functionResponse" in p]


class ScriptedGeminiModel(ScriptedServer[Request]):
    """Gemini CLI's: the Gemini API's generateContent, streamed or not."""

    request_type = Request

    @staticmethod
    def first_user_text(body: dict[str, Any]) -> str:
        for content in body.get("contents") or []:
            for part in content.get("parts") or [] if isinstance(content, dict) else []:
                if isinstance(part, dict) and MARKER.search(str(part.get("text", ""))):
                    return str(part["text"])
        return ""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(ModelHandler):
            def do_GET(self) -> None:
                self.send_json(200, {"models": []})

            def do_POST(self) -> None:
                body = self.read_json()
                if ":countTokens" in self.path:
                    self.send_json(200, {"totalTokens": 1})
                    return
                if "enerateContent" not in self.path:
                    self.send_json(404, {"error": {"code": 404, "message": f"no {self.path} here"}})
                    return
                config = body.get("generationConfig") or {}
                if any(config.get(k) for k in ("responseJsonSchema", "responseSchema")) \
                        or config.get("responseMimeType") == "application/json":
                    part: dict[str, Any] = {"text": json.dumps(SIDE)}
                    request = None
                else:
                    request = model.request_of(body)
                    reply = model.answer(request)
                    part = {"functionCall": {"name": reply.tool, "args": reply.arguments}} \
                        if isinstance(reply, Call) else {"text": reply.text}
                chunk = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP",
                                         "index": 0}],
                         "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
                         "modelVersion": "gemini-test"}
                if "alt=sse" in self.path:
                    self.send_events([f"data: {json.dumps(chunk)}"])
                else:
                    self.send_json(200, chunk)
                if request is not None:
                    model.sent(request)

        return Handler
