"""A scripted model behind an OpenAI-compatible /v1/chat/completions, for driving real opencode; and what every
host's scripted model shares (tests/claude, tests/codex and tests/gemini's `fake_model.py` build on it).

A script is a list of steps, one per model turn of a session: turn N is the request whose messages
hold N assistant messages, so a retried request gets the same step. Each step sees the request and
returns a `Call` (a tool call) or a `Say` (text that ends the turn). Sessions are told apart by a
marker in their first user message (`[script:NAME]`). Every request is kept, with what the model
answered and when, so a test can read exactly what the model was shown and a bench can time it.

A host's model is a `ScriptedServer` subclass that says how its API's requests read (its `Recorded`
subclass, `request_type`, and `first_user_text`) and how its replies are written (`_handler`, on
`ModelHandler`); recording, the scripts, the waits and the reply's time are here, once.
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
from typing import Any, Generic, Self, TypeVar

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
    """One request a host sent its model: its body, the script it belongs to, when it came, what the model answered
    and when that answer had been sent whole."""

    body: dict[str, Any]
    script: str | None
    at: float = field(default_factory=time.monotonic)
    wall: float = field(default_factory=time.time)  # to set beside what other processes stamp (the daemon, a host)
    reply: Call | Say | None = None
    replied: float | None = None  # time.monotonic() once the reply was written whole

    # what each host's API holds: the conversation (`messages` in the chat APIs), the tools offered, the script's
    # turns taken so far
    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tools(self) -> list[str]:
        raise NotImplementedError

    @property
    def turn(self) -> int:
        raise NotImplementedError


@dataclass
class Request(Recorded):
    """One request opencode sent: its messages, the tools it offered, the system prompt."""

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


def text_in(content: Any) -> str:
    """The text of a message's or a tool result's content, in any of the hosts' APIs: a string, or a list of parts
    (those that hold text, joined by lines)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part["text"]) for part in content if isinstance(part, dict) and "text" in part)
    return ""


def text_of(message: dict[str, Any]) -> str:
    return text_in(message.get("content"))


Step = Callable[[Request], Call | Say]


R = TypeVar("R", bound=Recorded)


class ScriptedServer(Generic[R]):
    """What the scripted models of both hosts share: an HTTP server on loopback, scripts by session marker, every
    request kept, bounded waits on them. A subclass reads its host's requests (`request_of`) and writes its API's
    replies (`_handler`)."""

    request_type: type[R]
    api_root = ""  # where the host's API is below the server's address: the host's base URL ends so

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

    @property
    def base_url(self) -> str:
        """What the host is told its model's API is at."""
        return self.address + self.api_root

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

    @staticmethod
    def first_user_text(body: dict[str, Any]) -> str:
        """The text of the first user message of a request (where a script's marker is), as the host's API holds it."""
        raise NotImplementedError

    def request_of(self, body: dict[str, Any]) -> R:
        marker = MARKER.search(self.first_user_text(body))
        return self.request_type(body, marker.group(1) if marker else None)

    def answer(self, request: R) -> Call | Say:
        """The script's reply to a request, recorded; a step that breaks says so through the transcript. The handler
        calls `sent` once the reply is written whole."""
        self._record(request)
        try:
            request.reply = self._reply(request)
        except Exception as exc:
            request.reply = Say(f"script error: {exc!r}")
        return request.reply

    @staticmethod
    def sent(request: R) -> None:
        request.replied = time.monotonic()

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

    request_type = Request
    api_root = "/v1"

    @staticmethod
    def first_user_text(body: dict[str, Any]) -> str:
        return next((text_of(m) for m in body.get("messages") or [] if m.get("role") == "user"), "")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(ModelHandler):
            def do_GET(self) -> None:
                self.send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self) -> None:
                request = model.request_of(self.read_json())
                reply = model.answer(request)
                n = len(model.requests)
                base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": "fake"}

                def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
                    return "data: " + json.dumps({**base, "choices": [{"index": 0, "delta": delta,
                                                                       "finish_reason": finish}]})

                if isinstance(reply, Call):
                    events = [chunk({"role": "assistant", "tool_calls": [{
                        "index": 0, "id": f"call_{n}", "type": "function",
                        "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)}}]}),
                        chunk({}, "tool_calls")]
                else:
                    events = [chunk({"role": "assistant", "content": reply.text}), chunk({}, "stop")]
                self.send_events([*events, "data: [DONE]"])
                model.sent(request)

        return Handler
