"""A scripted model behind an OpenAI-compatible /v1/chat/completions, for driving real opencode.

A script is a list of steps, one per model turn of a session: turn N is the request whose messages
hold N assistant messages, so a retried request gets the same step. Each step sees the request and
returns a `Call` (a tool call) or a `Say` (text that ends the turn). Sessions are told apart by a
marker in their first user message (`[script:NAME]`). Every request is kept, so a test can read
exactly what the model was shown.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeVar

MARKER = re.compile(r"\[script:([A-Za-z0-9_-]+)\]")
QUESTION_ID = re.compile(r"elc-[0-9a-f]{16}")
TASK_ID = re.compile(r"tsk-[0-9a-f]{16}")


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any]


@dataclass
class Say:
    text: str


class ToolResults:
    """What a step reads of a request's tool results, whichever host's API carried them (`tool_results`)."""

    def tool_results(self) -> list[str]:
        raise NotImplementedError

    def last_tool_result(self) -> str:
        results = self.tool_results()
        return results[-1] if results else ""

    def question_ids(self) -> list[str]:
        """The question ids in the last tool result, in order, without repeats."""
        return list(dict.fromkeys(QUESTION_ID.findall(self.last_tool_result())))

    def task_id(self) -> str | None:
        m = TASK_ID.search(self.last_tool_result())
        return m.group(0) if m else None


@dataclass
class Recorded(ToolResults):
    """One request a host sent its model: its body, the script it belongs to, when it came."""

    body: dict[str, Any]
    script: str | None
    at: float = field(default_factory=time.monotonic)


@dataclass
class Request(Recorded):
    """One request opencode sent: its messages, the tools it offered, the system prompt."""
    wall: float = field(default_factory=time.time)  # to set beside what other processes stamp (the daemon, opencode)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages") or []

    @property
    def tools(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools") or [] if "function" in t]

    @property
    def turn(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def system(self) -> str:
        return "\n".join(text_of(m) for m in self.messages if m.get("role") == "system")

    def tool_results(self) -> list[str]:
        return [text_of(m) for m in self.messages if m.get("role") == "tool"]



def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


Step = Callable[[Request], Call | Say]


class Scripted(Protocol):
    """What a recorded request of either host offers the scripts and the waits."""

    script: str | None
    messages: Any
    tools: list[str]

    @property
    def turn(self) -> int: ...

    def last_tool_result(self) -> str: ...


R = TypeVar("R", bound=Scripted)


class ScriptedServer(Generic[R]):
    """What the scripted models of both hosts share: an HTTP server on loopback, scripts by session marker, every
    request kept, bounded waits on them. A subclass reads its host's requests (`request_of`) and writes its API's
    replies (`_handler`)."""

    def __init__(self, log: Path) -> None:
        self.scripts: dict[str, list[Callable[[R], Call | Say]]] = {}
        self.requests: list[R] = []
        self.log = log
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, name: str, steps: list[Callable[[R], Call | Say]]) -> str:
        """Register a session's script; returns the marker its first prompt must carry."""
        self.scripts[name] = steps
        return f"[script:{name}]"

    def of(self, name: str) -> list[R]:
        with self._lock:
            return [r for r in self.requests if r.script == name]

    def wait_for(self, name: str, predicate: Callable[[list[R]], bool], timeout: float) -> list[R]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                mine = [r for r in self.requests if r.script == name]
                if predicate(mine):
                    return mine
                left = deadline - time.monotonic()
                if left <= 0:
                    last = mine[-1].last_tool_result()[:1500] if mine else None
                    raise AssertionError(f"script {name}: condition not met in {timeout} s; it saw {len(mine)} "
                                         f"request(s), the last tool result: {last!r}")
                self._changed.wait(min(left, 0.5))

    # ---- serving

    def answer(self, request: R) -> Call | Say:
        """The script's reply to a request, recorded; a step that breaks says so through the transcript."""
        self._record(request)
        try:
            return self._reply(request)
        except Exception as exc:
            return Say(f"script error: {exc!r}")

    def _reply(self, request: R) -> Call | Say:
        if request.script is None or not request.tools:
            return Say("Scripted session")  # a title, a summary: anything the host asks on the side
        steps = self.scripts.get(request.script, [])
        if request.turn >= len(steps):
            return Say("done.")
        return steps[request.turn](request)

    def _record(self, request: R) -> R:
        with self._changed:
            self.requests.append(request)
            with self.log.open("a") as f:
                f.write(json.dumps({"script": request.script, "turn": request.turn, "tools": request.tools,
                                    "last": request.messages[-2:]}, ensure_ascii=False)[:20000] + "\n")
            self._changed.notify_all()
        return request

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError


class ModelHandler(BaseHTTPRequestHandler):
    """What the scripted models' HTTP handlers share: quiet, JSON in and out, a stream of server-sent events."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: Any) -> None:
        pass

    def read_json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        return body if isinstance(body, dict) else {}

    def send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: list[str]) -> None:
        """A whole event stream (each event's text, `data: …` with its `event: …` if any), then the connection
        closed."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(f"{event}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


class ScriptedModel(ScriptedServer[Request]):
    """opencode's: an OpenAI-compatible /v1/chat/completions, streamed."""

    @property
    def base_url(self) -> str:
        return self.address + "/v1"

    def request_of(self, body: dict[str, Any]) -> Request:
        first_user = next((text_of(m) for m in body.get("messages") or [] if m.get("role") == "user"), "")
        marker = MARKER.search(first_user)
        return Request(body, marker.group(1) if marker else None)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = model._record(model.request_of(json.loads(self.rfile.read(length) or b"{}")))
                try:
                    reply = model._reply(request)
                except Exception as exc:  # a broken step says so to the test, through the transcript
                    reply = Say(f"script error: {exc!r}")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": f"chatcmpl-{len(model.requests)}", "object": "chat.completion.chunk",
                        "created": int(time.time()), "model": "fake"}

                def send(delta: dict[str, Any], finish: str | None = None) -> None:
                    chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()

                if isinstance(reply, Call):
                    send({"role": "assistant", "tool_calls": [{
                        "index": 0, "id": f"call_{len(model.requests)}", "type": "function",
                        "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)}}]})
                    send({}, "tool_calls")
                else:
                    send({"role": "assistant", "content": reply.text})
                    send({}, "stop")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler
