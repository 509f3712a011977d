"""mcpx's exceptions have one root: `except McpxError` catches what mcpx raised on purpose, whichever layer."""

from __future__ import annotations

import pytest

from mcpx.api.table import RouteError
from mcpx.broker.refusals import BrokerError, Gone, QuestionEnded
from mcpx.broker.store import StoreRefused
from mcpx.call.failures import CallError, UnknownTask
from mcpx.client.transport import ApiError, NoDaemon
from mcpx.config.problems import ConfigError
from mcpx.mcp.jsonrpc import RpcError
from mcpx.mcp.peer import PeerClosed
from mcpx.shared.errors import McpxError
from mcpx.shared.upstream_errors import UpstreamError


@pytest.mark.parametrize("family", [BrokerError, Gone, QuestionEnded, StoreRefused, ConfigError, RpcError,
                                    PeerClosed, UpstreamError, CallError, UnknownTask, RouteError, NoDaemon,
                                    ApiError])
def test_every_family_derives_from_the_one_root(family: type[BaseException]) -> None:
    assert issubclass(family, McpxError)


def test_the_root_is_an_exception_and_catches_a_broker_refusal() -> None:
    with pytest.raises(McpxError) as caught:
        raise Gone("elc-0123456789abcdef expired", state="expired")
    assert isinstance(caught.value, Exception) and caught.value.details == {"state": "expired"}
