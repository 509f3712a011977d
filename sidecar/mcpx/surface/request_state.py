"""The requestState mcpx hands a modern client: HMAC-signed, bound to the request, short-lived, used once.

The client must echo it verbatim on its retry (MRTR); mcpx treats what comes back as
attacker-controlled and refuses anything it did not mint for exactly this request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError


def binding(tool: str, arguments: dict[str, Any], session: str) -> str:
    """What a retry must match: the same tool, the same arguments, the same session."""
    return hashlib.sha256(json.dumps([tool, arguments, session], sort_keys=True, default=str).encode()).hexdigest()


class RequestStates:
    def __init__(self, key: bytes, ttl: float = 3600.0) -> None:
        self._key = key
        self._ttl = ttl
        self._used: dict[str, float] = {}

    def seal(self, task: str, round_no: int, questions: dict[str, str], bound: str) -> str:
        """`questions`: each inputRequests key the client answers under, and what it answers (a question id)."""
        body = base64.urlsafe_b64encode(json.dumps({
            "t": task, "r": round_no, "q": questions, "b": bound, "exp": time.time() + self._ttl,
            "n": secrets.token_hex(8)}).encode()).decode().rstrip("=")
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        return f"mcpx1.{body}.{mac}"

    def open(self, token: Any, bound: str) -> dict[str, Any]:
        """The state's contents, or -32602 for anything forged, stale, for another request, or replayed."""
        if not isinstance(token, str) or token.count(".") != 2 or not token.startswith("mcpx1."):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: mcpx did not issue it")
        _, body, mac = token.split(".")
        want = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, mac):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: its signature does not match")
        # the signature matched, so this is the dict seal() wrote
        data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        now = time.time()
        if data.get("exp", 0) < now:
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: it expired")
        if not hmac.compare_digest(str(data.get("b")), bound):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: it belongs to another request "
                                                   "(tool, arguments or session differ)")
        nonce = str(data.get("n"))
        self._used = {n: exp for n, exp in self._used.items() if exp > now}
        if nonce in self._used:
            raise RpcError(jsonrpc.INVALID_PARAMS,
                           "Invalid requestState: it was already used (a retry is answered once)")
        self._used[nonce] = data["exp"]
        return data
