"""`mcpx demo-server`: a small dual-era MCP server on stdio, with no dependency beyond mcpx itself.

Legacy clients (after `initialize`) are asked mid-call with `elicitation/create`; modern
(2026-07-28) requests get `input_required` results whose `requestState` is HMAC-signed, so a
retry is all the state it needs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcpx import __version__
from mcpx.demo.tools import TOOLS, Answers, DemoTool
from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.mcp.peer import Peer
from mcpx.mcp.protocol import LATEST_LEGACY, LEGACY_VERSIONS, META_CAPABILITIES, META_VERSION, MODERN_VERSIONS
from mcpx.mcp.stdio import StreamChannel
from mcpx.shared.names import DEMO_KEY_FILE

INFO = {"name": "mcpx-demo", "version": __version__}
CAPABILITIES = {"tools": {"listChanged": False}}


def _text(text: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


class StateSeal:
    """requestState the client cannot forge: signed, bound to the tool and its arguments, short-lived."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    @staticmethod
    def _binding(tool: str, args: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps([tool, args], sort_keys=True).encode()).hexdigest()[:32]

    def seal(self, tool: str, args: dict[str, Any], answers: Answers) -> str:
        body = base64.urlsafe_b64encode(json.dumps(
            {"b": self._binding(tool, args), "a": answers, "exp": time.time() + 3600}).encode()).decode()
        mac = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
        return f"demo1.{body}.{mac}"

    def open(self, token: str, tool: str, args: dict[str, Any]) -> Answers:
        try:
            _, body, mac = token.split(".")
        except ValueError:
            raise RpcError(jsonrpc.INVALID_PARAMS, "invalid requestState") from None
        if not hmac.compare_digest(hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest(), mac):
            raise RpcError(jsonrpc.INVALID_PARAMS, "invalid requestState")
        data = json.loads(base64.urlsafe_b64decode(body))
        if data["b"] != self._binding(tool, args) or data["exp"] < time.time():
            raise RpcError(jsonrpc.INVALID_PARAMS, "requestState does not belong to this request, or expired")
        return list(data["a"])


def _key(environ: Mapping[str, str]) -> bytes:
    """MCPX_DEMO_KEY itself; else the key in the file MCPX_DEMO_KEY_FILE names (the daemon makes it in its state
    directory and passes its name to the embedded default's demo), so a requestState signed before a restart opens
    after it; else one drawn for this process alone."""
    if key := environ.get("MCPX_DEMO_KEY"):
        return key.encode()
    if path := environ.get(DEMO_KEY_FILE):
        with contextlib.suppress(OSError):
            kept = Path(path).read_bytes()
            if len(kept) >= 32:
                return kept
    return secrets.token_bytes(32)


class DemoServer:
    def __init__(self) -> None:
        self.peer: Peer | None = None
        self.legacy_caps: dict[str, Any] | None = None
        self.legacy_version = LATEST_LEGACY
        self.seal = StateSeal(_key(os.environ))

    async def on_request(self, msg: Message) -> dict[str, Any]:
        method = msg["method"]
        params = msg.get("params") or {}
        meta = params.get("_meta") or {}
        modern = meta.get(META_VERSION)
        if modern is not None and modern not in MODERN_VERSIONS:
            raise RpcError(jsonrpc.UNSUPPORTED_VERSION, "Unsupported protocol version",
                           {"supported": list(MODERN_VERSIONS), "requested": modern})
        if method == "initialize":
            asked = params.get("protocolVersion")
            self.legacy_version = asked if asked in LEGACY_VERSIONS else LATEST_LEGACY
            self.legacy_caps = params.get("capabilities") or {}
            return {"protocolVersion": self.legacy_version, "capabilities": CAPABILITIES, "serverInfo": INFO,
                    "instructions": "A demo of questions in the middle of tool calls; nothing here is real."}
        if method == "server/discover":
            return {"resultType": "complete", "supportedVersions": list(MODERN_VERSIONS), "capabilities": CAPABILITIES,
                    "_meta": {"io.modelcontextprotocol/serverInfo": INFO}}
        if method == "ping":
            return {}
        if method == "tools/list":
            result: dict[str, Any] = {"tools": [t.describe() for t in TOOLS.values()]}
            return {**result, "resultType": "complete"} if modern else result
        if method == "tools/call":
            tool = TOOLS.get(params.get("name", ""))
            if tool is None:
                raise RpcError(jsonrpc.INVALID_PARAMS, f"unknown tool {params.get('name')!r}")
            args = params.get("arguments") or {}
            if modern:
                return await self._call_modern(tool, args, params, meta.get(META_CAPABILITIES) or {})
            return await self._call_legacy(tool, args)
        raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}")

    @staticmethod
    def _can_ask(caps: dict[str, Any], mode: str) -> bool:
        elicitation = caps.get("elicitation")
        if not isinstance(elicitation, dict):
            return False
        return mode in elicitation or (mode == "form" and not elicitation)

    async def _call_legacy(self, tool: DemoTool, args: dict[str, Any]) -> dict[str, Any]:
        answers: Answers = []
        while (question := tool.questions(args, answers)) is not None:
            mode = "url" if question.url else "form"
            if not self._can_ask(self.legacy_caps or {}, mode):
                return _text(f"{tool.name} needs to ask a {mode}-mode question, and this client cannot answer one.",
                             error=True)
            params = question.params()
            if mode == "url":
                params["elicitationId"] = secrets.token_hex(8)
            assert self.peer is not None
            answer = await self.peer.request("elicitation/create", params)
            answers.append(answer)
            if answer.get("action") != "accept":
                break
        return _text(tool.finish(args, answers))

    async def _call_modern(self, tool: DemoTool, args: dict[str, Any], params: dict[str, Any],
                           caps: dict[str, Any]) -> dict[str, Any]:
        answers: Answers = self.seal.open(params["requestState"], tool.name, args) if "requestState" in params else []
        answer = (params.get("inputResponses") or {}).get(f"q{len(answers)}")
        if answer is not None:
            answers.append(answer)
        # a retry without the answer simply gets the same question again
        question = None if answers and answers[-1].get("action") != "accept" else tool.questions(args, answers)
        if question is None:
            return {**_text(tool.finish(args, answers)), "resultType": "complete"}
        return self._input_required(tool, args, answers, question, caps)

    def _input_required(self, tool: DemoTool, args: dict[str, Any], answers: Answers, question: Any,
                        caps: dict[str, Any]) -> dict[str, Any]:
        mode = "url" if question.url else "form"
        if not self._can_ask(caps, mode):
            raise RpcError(jsonrpc.MISSING_CAPABILITY, f"{tool.name} needs elicitation ({mode})",
                           {"requiredCapabilities": {"elicitation": {mode: {}}}})
        return {"resultType": "input_required",
                "inputRequests": {f"q{len(answers)}": {"method": "elicitation/create", "params": question.params()}},
                "requestState": self.seal.seal(tool.name, args, answers)}


async def serve_stdio() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=jsonrpc.MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    server = DemoServer()
    peer = Peer(StreamChannel(reader, writer, "client"), server.on_request, name="demo")
    server.peer = peer
    peer.start()
    await peer.closed.wait()


def main() -> int:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_stdio())
    return 0
