"""The CLI's way to the daemon: its unix socket, or MCPX_DAEMON_URL with the bearer token.

The CLI never opens SQLite itself — answers must go through the daemon so waiters wake
and events are published.

This module is the standard library only (no aiohttp, no asyncio, no pydantic): a command that asks the daemon
one thing and prints the reply (`mcpx elicit list`, `mcpx status`) starts in a few tens of milliseconds with
DaemonApi, one blocking HTTP/1.1 exchange per request. What streams or runs in an event loop (`mcpx elicit watch`,
the TUI, scripts) uses daemon_client.DaemonClient on aiohttp, with these same errors and headers.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from mcpx.shared.errors import McpxError
from mcpx.system import agentshell
from mcpx.system.paths import StatePaths
from mcpx.system.sockets import socket_alive

if TYPE_CHECKING:
    from mcpx.client.replies import AnswerDoc

EX_UNAVAILABLE = 69
MAX_HEAD = 64 * 1024  # a reply's status line and headers; the daemon's are a few hundred bytes


class NoDaemon(McpxError):
    def __init__(self, where: str, detail: str = "") -> None:
        hint = "start one with `mcpx daemon` (or `mcpx daemon --listen 127.0.0.1:PORT` for TCP)"
        super().__init__(f"no mcpx daemon answers on {where}{': ' + detail if detail else ''}; {hint}")


class ApiError(McpxError):
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        err = body.get("error", {}) if isinstance(body, dict) else {}
        self.code = err.get("code", "error")
        self.fields: dict[str, str] = err.get("fields") or {}
        super().__init__(err.get("message") or f"HTTP {status}")


@dataclass
class ApiResponse:
    status: int
    body: Any
    headers: dict[str, str]


def agent_environment() -> bool:
    """Is this CLI run by an agent (opencode sets AGENT=1 for the processes its tools start)?

    Its parents count too, as they do for the daemon, which refuses a person's answer from such a
    process: the CLI then answers as an agent rather than be refused.
    """
    if agentshell.mark_of(os.environ) is not None:
        return True
    if not agentshell.proc_available():
        return False
    try:
        return agentshell.marked_lineage(os.getpid()) is not None
    except agentshell.ProcessUnseen:
        return False


def default_headers() -> dict[str, str]:
    headers = {"X-Mcpx-Cwd": os.getcwd()}  # no pid: the daemon asks the kernel for it
    if session := os.environ.get("MCPX_SESSION_ID"):
        headers["X-Mcpx-Session"] = session
        headers["X-Mcpx-Session-Source"] = "env"
    return headers


def ensure_running(what: str) -> None:
    """Start a detached daemon for this state directory, as `mcpx serve`, doctor and scripts do, unless one answers
    already or MCPX_DAEMON_URL names one elsewhere (not ours to start); said on stderr when one was started.
    NoDaemon when none would start, with why."""
    if os.environ.get("MCPX_DAEMON_URL"):
        return
    paths = StatePaths.current()
    # ensure_daemon asks the same first; asked here, a daemon that answers costs no import of the launcher (and
    # through it pydantic): the common case of every command that may start one
    if socket_alive(paths.socket):
        return
    from mcpx.daemon.launch import LaunchError, ensure_daemon

    try:
        started = ensure_daemon(paths, what=what)
    except LaunchError as exc:
        raise NoDaemon(str(paths.socket), f"none ran, and one would not start: {exc}") from None
    if started:
        print("mcpx: no daemon was running; started one (`mcpx daemon stop` stops it)", file=sys.stderr, flush=True)


def answer_body(content: dict[str, Any] | None, reason: str | None) -> dict[str, Any]:
    """The body of POST /v1/elicit/ID/ACTION: the content (an accept's), the reason (a decline's or a cancel's)."""
    body: dict[str, Any] = {}
    if content is not None:
        body["content"] = content
    if reason:
        body["reason"] = reason
    return body


@dataclass
class DaemonAddress:
    """Where the daemon is and who asks: its socket in the state directory, or MCPX_DAEMON_URL (a daemon elsewhere,
    with MCPX_TOKEN or the state directory's token as its bearer); the answerer an answer is sent as."""

    paths: StatePaths = field(default_factory=StatePaths.current)
    base_url: str | None = None
    token: str | None = None
    answerer: str = ""

    @classmethod
    def of(cls, paths: StatePaths | None = None, base_url: str | None = None, token: str | None = None,
           answerer: str | None = None) -> DaemonAddress:
        return cls(paths or StatePaths.current(),
                   (base_url or os.environ.get("MCPX_DAEMON_URL") or "").rstrip("/") or None,
                   token or os.environ.get("MCPX_TOKEN"),
                   answerer or ("agent:cli" if agent_environment() else "person:cli"))

    @property
    def where(self) -> str:
        return self.base_url or str(self.paths.socket)

    def headers(self) -> dict[str, str]:
        """What every request carries: the caller's directory and session, and the bearer token over TCP."""
        headers = default_headers()
        if self.base_url:
            token = self.token
            if token is None and self.paths.token.exists():
                token = self.paths.token.read_text().strip()
            if token:
                headers["Authorization"] = f"Bearer {token}"
        return headers


class DaemonApi:
    """The daemon's API, one blocking request at a time, each on a connection of its own (`Connection: close`):
    what a command that asks and prints needs, at the cost of a socket connect per request (tens of µs on the
    unix socket). The errors are DaemonClient's: NoDaemon when none answers, ApiError for a refusal."""

    def __init__(self, paths: StatePaths | None = None, base_url: str | None = None, token: str | None = None,
                 answerer: str | None = None) -> None:
        self.endpoint = DaemonAddress.of(paths, base_url, token, answerer)
        self.answerer = self.endpoint.answerer

    def request(self, method: str, path: str, *, json_body: Any = None, params: dict[str, Any] | None = None,
                timeout: float = 30.0, headers: dict[str, str] | None = None, ok: tuple[int, ...] = ()) -> ApiResponse:
        clean = {k: str(v) for k, v in (params or {}).items() if v is not None}
        target = path + ("?" + urlencode(clean, quote_via=quote) if clean else "")
        body = b"" if json_body is None else json.dumps(json_body).encode()
        sent = {**self.endpoint.headers(), **(headers or {})}
        if json_body is not None:
            sent["Content-Type"] = "application/json"
        deadline = time.monotonic() + timeout
        try:
            status, head, raw = self._exchange(method, target, sent, body, deadline)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(self.endpoint.where, str(exc)) from None
        except (ConnectionResetError, BrokenPipeError, EOFError):
            raise NoDaemon(self.endpoint.where, "it closed the connection (stopping?)") from None
        low = {k.lower(): v for k, v in head.items()}
        content_type, _, params_text = low.get("content-type", "").partition(";")
        charset = next((v.strip().strip('"') for k, _, v in (p.partition("=") for p in params_text.split(";"))
                        if k.strip().lower() == "charset"), "utf-8")
        text = raw.decode(charset, errors="replace")
        value: Any = json.loads(text) if text and content_type.strip().lower() == "application/json" else text
        if status >= 400 and status not in ok:
            raise ApiError(status, value)
        return ApiResponse(status, value, head)

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw).body

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.request("POST", path, json_body=body if body is not None else {}, **kw).body

    def answer(self, eid: str, action: str, content: dict[str, Any] | None = None, reason: str | None = None) -> Any:
        return self.post(f"/v1/elicit/{eid}/{action}", answer_body(content, reason),
                         headers={"X-Mcpx-Answerer": self.answerer})

    # ---- one HTTP/1.1 exchange

    def _connect(self, deadline: float) -> tuple[socket.socket, str]:
        """A connected socket, and the Host header and path prefix of the daemon's address."""
        if not self.endpoint.base_url:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(_left(deadline))
            try:
                sock.connect(str(self.endpoint.paths.socket))
            except BaseException:
                sock.close()
                raise
            return sock, "mcpx"
        url = urlsplit(self.endpoint.base_url)
        port = url.port or (443 if url.scheme == "https" else 80)
        host = url.hostname or "localhost"
        sock = socket.create_connection((host, port), timeout=_left(deadline))
        if url.scheme == "https":
            import ssl  # only a daemon behind TLS pays for it

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        return sock, url.netloc

    def _exchange(self, method: str, target: str, headers: dict[str, str], body: bytes,
                  deadline: float) -> tuple[int, dict[str, str], bytes]:
        sock, host = self._connect(deadline)
        prefix = urlsplit(self.endpoint.base_url).path.rstrip("/") if self.endpoint.base_url else ""
        lines = [f"{method} {prefix}{target} HTTP/1.1", f"Host: {host}", "Connection: close",
                 "Accept: application/json", f"Content-Length: {len(body)}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                sock.close()
                raise ValueError(f"header {name} holds a line break: {value!r}")
            lines.append(f"{name}: {value}")
        with sock:
            sock.settimeout(_left(deadline))
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            return _read_reply(sock, deadline)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the daemon did not reply in time")
    return left


def _read_reply(sock: socket.socket, deadline: float) -> tuple[int, dict[str, str], bytes]:
    """The status, the headers and the body of the reply on `sock`: by Content-Length, chunked,
    or to the end of the connection (which `Connection: close` asked for)."""
    buf = b""

    def more() -> bytes:
        sock.settimeout(_left(deadline))
        data = sock.recv(65536)
        if not data:
            raise EOFError
        return data

    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            raise ValueError("the daemon's reply has no end of headers")
        buf += more()
    head_bytes, _, buf = buf.partition(b"\r\n\r\n")
    status_line, *header_lines = head_bytes.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP reply: {status_line[:80]!r}")
    head = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        head[name.strip()] = value.strip()
    low = {k.lower(): v for k, v in head.items()}
    if low.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while True:
            while b"\r\n" not in buf:
                buf += more()
            size_line, _, buf = buf.partition(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            while len(buf) < size + 2:
                buf += more()
            if size == 0:
                return int(parts[1]), head, out
            out += buf[:size]
            buf = buf[size + 2:]
    if "content-length" in low:
        length = int(low["content-length"])
        while len(buf) < length:
            buf += more()
        return int(parts[1]), head, buf[:length]
    while True:
        try:
            buf += more()
        except EOFError:
            return int(parts[1]), head, buf


RESTART_PAUSE = 1.0  # seconds between a wait for an answer that found no daemon and the next


def answer_wait_step(deadline: float) -> float:
    """One long poll of a wait for an answer (`wait_for_answer` and its blocking twin): what is left of the wait,
    at least 1 s and at most 30 s, so that a daemon's restart is found within one step."""
    return max(1.0, min(30.0, deadline - time.monotonic()))


def wait_for_answer_blocking(eid: str, seconds: float, paths: StatePaths | None = None) -> AnswerDoc | None:
    """daemon_client.wait_for_answer without an event loop (`mcpx claude hook`, which waits and does nothing else):
    the question's answer once it has one (an expiry is the answer cancel), waiting up to `seconds` through the
    daemon's restarts. None if none came in time; ApiError 410 if it was abandoned."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        wait = answer_wait_step(deadline)
        try:
            resp = DaemonApi(paths).request("GET", f"/v1/elicit/{eid}/wait", params={"timeout": wait},
                                            timeout=wait + 10)
        except NoDaemon:
            time.sleep(RESTART_PAUSE)  # the daemon restarts; the question waits in its store
            continue
        if resp.status == 200:
            answer: AnswerDoc = resp.body
            return answer
    return None
