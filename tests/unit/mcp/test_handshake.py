"""Which era an upstream speaks (upstream/handshake.py), settled over a scripted wire: no process, no network."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.peer import PeerClosed
from mcpx.mcp.protocol import LATEST_MODERN
from mcpx.shared.upstream_errors import UpstreamError
from mcpx.upstream.handshake import settle_era

DECLARED = {"elicitation": {"form": {}}}
LEGACY = {"protocolVersion": "2025-11-25", "serverInfo": {"name": "old"}, "capabilities": {"tools": {}}}


class Wire:
    """Answers each method with the next of its script (an exception is raised); notes what happened."""

    def __init__(self, **script: list[Any]) -> None:
        self.script = script
        self.log: list[str] = []

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.log.append(method)
        answer = self.script[method.replace("/", "_")].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, dict)
        return answer

    async def initialized(self, version: str) -> None:
        self.log.append(f"initialized {version}")

    async def restart(self) -> None:
        self.log.append("restart")


async def test_a_modern_answer_to_discover_settles_the_modern_era() -> None:
    wire = Wire(server_discover=[{"supportedVersions": ["2099-01-01", LATEST_MODERN], "capabilities": {"tools": {}},
                                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "new"}}}])
    facts = await settle_era(wire, "srv", DECLARED, None, "process")
    assert (facts.era, facts.version, facts.server_info) == ("modern", LATEST_MODERN, {"name": "new"})
    assert wire.log == ["server/discover"]


async def test_the_unsupported_version_refusal_naming_ours_is_modern() -> None:
    refusal = RpcError(jsonrpc.UNSUPPORTED_VERSION, "no", {"supported": [LATEST_MODERN]})
    facts = await settle_era(Wire(server_discover=[refusal]), "srv", DECLARED, None, "process")
    assert (facts.era, facts.version) == ("modern", LATEST_MODERN)


@pytest.mark.parametrize("discover", [RpcError(jsonrpc.METHOD_NOT_FOUND, "no such method"),
                                      {"supportedVersions": ["2099-01-01"]}])
async def test_any_other_answer_is_a_legacy_server_then_initialized(discover: Any) -> None:
    wire = Wire(server_discover=[discover], initialize=[LEGACY])
    facts = await settle_era(wire, "srv", DECLARED, None, "process")
    assert (facts.era, facts.version, facts.server_info) == ("legacy", "2025-11-25", {"name": "old"})
    assert wire.log == ["server/discover", "initialize", "initialized 2025-11-25"]


@pytest.mark.parametrize("refusal", [RpcError(jsonrpc.INVALID_REQUEST, "era settled"), PeerClosed("gone")])
async def test_a_server_that_refuses_initialize_after_discover_is_asked_fresh(refusal: Exception) -> None:
    wire = Wire(server_discover=[RpcError(jsonrpc.METHOD_NOT_FOUND, "no")], initialize=[refusal, LEGACY])
    facts = await settle_era(wire, "srv", DECLARED, None, "process")
    assert facts.era == "legacy"
    assert wire.log == ["server/discover", "initialize", "restart", "initialize", "initialized 2025-11-25"]


async def test_a_remembered_legacy_era_skips_the_probe() -> None:
    wire = Wire(initialize=[LEGACY])
    assert (await settle_era(wire, "srv", DECLARED, "legacy", "process")).era == "legacy"
    assert wire.log == ["initialize", "initialized 2025-11-25"]


async def test_a_version_mcpx_does_not_speak_is_refused_by_name() -> None:
    wire = Wire(initialize=[{"protocolVersion": "1999-01-01"}])
    with pytest.raises(UpstreamError, match=r"server 'srv' answered initialize with protocolVersion '1999-01-01'"):
        await settle_era(wire, "srv", DECLARED, "legacy", "process")
