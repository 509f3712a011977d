"""What the daemon's application holds: each part under its own key, so a route reads the parts it uses.

The parts are built before the app, in server.run(), and never change while it serves; a
handler's `call.app[BROKER]` is never missing and never None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from mcpx.broker.broker import Broker
from mcpx.config.source import ConfigSource
from mcpx.system.paths import StatePaths
from mcpx.upstream.gateway import Gateway


@dataclass(frozen=True)
class DaemonInfo:
    """This daemon, as /v1/health and the TCP refusal (daemon/app.py's `refused`) know it."""

    paths: StatePaths
    started_at: datetime
    listen: str | None = None  # HOST:PORT of the loopback TCP listener, when there is one
    token: str | None = None  # the bearer token TCP requires (the unix socket needs none)


INFO: web.AppKey[DaemonInfo] = web.AppKey("info", DaemonInfo)
CONFIG: web.AppKey[ConfigSource] = web.AppKey("config", ConfigSource)
BROKER: web.AppKey[Broker] = web.AppKey("broker", Broker)
GATEWAY: web.AppKey[Gateway] = web.AppKey("gateway", Gateway)
# this API's openapi.json, built when first asked for (daemon/app.py)
OPENAPI: web.AppKey[Callable[[], dict[str, Any]]] = web.AppKey("openapi")
# the questions a host's hook has taken by what it was passed (POST /v1/elicit/passed), by session, while they wait
PASSED_CLAIMS: web.AppKey[dict[str, set[str]]] = web.AppKey("passed_claims", dict)
