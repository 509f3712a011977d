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

from pydantic import BaseModel, ConfigDict, Field

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError


def binding(tool: str, arguments: dict[str, Any], session: str) -> str:
    """What a retry must match: the same tool, the same arguments, the same session."""
    return hashlib.sha256(json.dumps([tool, arguments, session], sort_keys=True, default=str).encode()).hexdigest()


class Sealed(BaseModel):
    """What a sealed requestState holds (its JSON uses the short names, in this order)."""

    model_config = ConfigDict(populate_by_name=True)

    task: str = Field(alias="t")  # the call (tsk-…) the retry continues
    round: int = Field(alias="r")  # the number of questions the call had raised when it was sealed
    questions: dict[str, str] = Field(alias="q")  # inputRequests key -> a question id, or "slot:KEY" (roots, sampling)
    bound: str = Field(alias="b")  # binding(): the tool, arguments and session a retry must repeat
    expires: float = Field(alias="exp")  # time.time() after which it is refused
    nonce: str = Field(alias="n")  # used once: a second retry with it is refused


class RequestStates:
    def __init__(self, key: bytes, ttl: float = 3600.0) -> None:
        self._key = key
        self._ttl = ttl
        self._used: dict[str, float] = {}

    def seal(self, task: str, round_no: int, questions: dict[str, str], bound: str) -> str:
        """`questions`: each inputRequests key the client answers under, and what it answers (a question id)."""
        sealed = Sealed(task=task, round=round_no, questions=questions, bound=bound, expires=time.time() + self._ttl,
                        nonce=secrets.token_hex(8))
        body = base64.urlsafe_b64encode(json.dumps(sealed.model_dump(by_alias=True)).encode()).decode().rstrip("=")
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        return f"mcpx1.{body}.{mac}"

    def open(self, token: Any, bound: str) -> Sealed:
        """The state's contents, or -32602 for anything forged, stale, for another request, or replayed."""
        if not isinstance(token, str) or token.count(".") != 2 or not token.startswith("mcpx1."):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: mcpx did not issue it")
        _, body, mac = token.split(".")
        want = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, mac):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: its signature does not match")
        # the signature matched, so this is what seal() wrote
        data = Sealed.model_validate_json(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        now = time.time()
        if data.expires < now:
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: it expired")
        if not hmac.compare_digest(data.bound, bound):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid requestState: it belongs to another request "
                                                   "(tool, arguments or session differ)")
        self._used = {n: exp for n, exp in self._used.items() if exp > now}
        if data.nonce in self._used:
            raise RpcError(jsonrpc.INVALID_PARAMS,
                           "Invalid requestState: it was already used (a retry is answered once)")
        self._used[data.nonce] = data.expires
        return data
