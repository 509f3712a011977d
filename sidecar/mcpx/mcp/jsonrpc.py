"""JSON-RPC 2.0 framing, deliberately not MCP-aware: classify, build and check messages.

Messages stay plain dicts so that fields mcpx does not interpret pass through untouched.
"""

from __future__ import annotations

from typing import Any, Literal

from mcpx.shared import wirejson
from mcpx.shared.errors import McpxError

Message = dict[str, Any]
Id = str | int
Kind = Literal["request", "notification", "response", "error"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
URL_ELICITATION_REQUIRED = -32042
MAX_LINE = 8 * 1024 * 1024


class RpcError(McpxError):
    """An error to answer a request with (or one a peer answered ours with)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    @classmethod
    def from_error(cls, err: Any) -> RpcError:
        if not isinstance(err, dict):
            return cls(INTERNAL_ERROR, f"malformed error from peer: {err!r}")
        code = err.get("code")
        return cls(code if isinstance(code, int) else INTERNAL_ERROR, str(err.get("message", "")), err.get("data"))


class FrameError(McpxError):
    """A frame that is not JSON-RPC; `reply` is the error response to send back, if one can be."""

    def __init__(self, reply: Message) -> None:
        super().__init__(reply["error"]["message"])
        self.reply = reply


def request(id: Id, method: str, params: dict[str, Any] | None = None) -> Message:
    msg: Message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: dict[str, Any] | None = None) -> Message:
    msg: Message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result(id: Id | None, value: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": id, "result": value}


def error(id: Id | None, code: int, message: str, data: Any = None) -> Message:
    return {"jsonrpc": "2.0", "id": id, "error": RpcError(code, message, data).to_error()}


def kind(msg: Message) -> Kind:
    if "method" in msg:
        return "request" if "id" in msg else "notification"
    return "error" if "error" in msg else "response"


def check(msg: Any) -> Message:
    """Validate one decoded frame, raising FrameError with the reply JSON-RPC wants."""
    if not isinstance(msg, dict):
        raise FrameError(error(None, INVALID_REQUEST, "a JSON-RPC message must be a JSON object (batches are not "
                                                      "part of MCP)"))
    mid = msg.get("id")
    if msg.get("jsonrpc") != "2.0":
        raise FrameError(error(mid if _valid_id(mid) else None, INVALID_REQUEST, "jsonrpc must be \"2.0\""))
    if "id" in msg and type(mid) not in _ID_TYPES:  # _valid_id, inline: every frame's way
        raise FrameError(error(None, INVALID_REQUEST, "id must be a string or an integer (never null)"))
    if "method" in msg:
        if not isinstance(msg["method"], str) or not msg["method"]:
            raise FrameError(error(mid, INVALID_REQUEST, "method must be a non-empty string"))
        if "params" in msg and not isinstance(msg["params"], dict):
            raise FrameError(error(mid, INVALID_REQUEST, "params must be an object"))
        return msg
    if "id" not in msg:
        raise FrameError(error(None, INVALID_REQUEST, "a message needs a method (request or notification) or an id "
                                                      "(response)"))
    if ("result" in msg) == ("error" in msg):
        raise FrameError(error(mid, INVALID_REQUEST, "a response has exactly one of result and error"))
    return msg


# a JSON-RPC id's types: a string or an integer, a bool being none. Decoded JSON holds no subclass of either, so a
# value's type is looked up as it is, with no isinstance walking its bases (every frame and reply checks one)
_ID_TYPES = frozenset((str, int))


def _valid_id(value: Any) -> bool:
    return type(value) in _ID_TYPES


def id_of(value: Any) -> Id | None:
    """`value` as a request id, or None when it is none (a peer's requestId is not checked by check())."""
    return value if type(value) in _ID_TYPES else None  # _valid_id, inline: every reply's way


def decode(line: str | bytes) -> Message:
    """One frame of a newline-delimited stream."""
    if len(line) > MAX_LINE:
        raise FrameError(error(None, PARSE_ERROR, f"message is larger than {MAX_LINE} bytes"))
    try:
        value = wirejson.loads(line)
    except wirejson.JsonRefused as exc:
        raise FrameError(error(None, PARSE_ERROR, str(exc))) from None
    return check(value)


def encode(msg: Message) -> bytes:
    return wirejson.encode(msg) + b"\n"
