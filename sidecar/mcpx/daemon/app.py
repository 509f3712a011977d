"""The daemon's aiohttp application, built last from parts made before it: the /v1 routes and /mcp."""

from __future__ import annotations

import asyncio
import functools
import hmac
from collections.abc import Callable
from typing import Any

from aiohttp import web

from mcpx.api import auth_routes, call_routes, elicit_routes, inbox_routes
from mcpx.api.inbox_routes import TCP_GUESTS
from mcpx.api.peers import is_unix
from mcpx.api.state import BROKER, CONFIG, GATEWAY, INFO, OPENAPI, PASSED_CLAIMS, DaemonInfo
from mcpx.api.table import Api, GuardedRoutes, error_response
from mcpx.broker.broker import Broker
from mcpx.config.source import ConfigSource
from mcpx.inbox.web_routes import Inbox
from mcpx.shared.names import MAX_BODY
from mcpx.shared.shutdown import SHUTDOWN
from mcpx.surface.dispatch import Surface
from mcpx.surface.http_endpoint import install_mcp_endpoint
from mcpx.upstream.gateway import Gateway


def refused(request: web.Request) -> web.Response | None:
    """The unix socket is the owner's alone (0600); TCP needs the bearer token (given with --listen), but for what
    a guest checks itself. The 401 of a request that may not come in; None for one that may (checked before any
    handler: by each route of the table itself, and by api/table.py's `guarded` around every other route)."""
    if is_unix(request) or any(admits(request) for admits in request.app[TCP_GUESTS]):
        return None
    token = request.app[INFO].token
    given = request.headers.get("Authorization", "")
    if not token:
        return error_response(401, "unauthorized",
                              "this port serves the web inbox (`mcpx inbox` opens it); /v1 and /mcp are served on "
                              "TCP only by a daemon started with --listen, behind its bearer token")
    if not given.startswith("Bearer ") or not hmac.compare_digest(given[7:].strip(), token):
        return error_response(401, "unauthorized",
                              "this port needs 'Authorization: Bearer <token>'; the token is in the state "
                              "directory's 'token' file (mcpx status shows where)")
    return None


def build_api() -> Api:
    api = Api()
    api.endpoints.extend(elicit_routes.api.endpoints)
    api.endpoints.extend(call_routes.api.endpoints)
    api.endpoints.extend(inbox_routes.api.endpoints)
    api.endpoints.extend(auth_routes.api.endpoints)
    return api


def stop_streams(app: web.Application) -> None:
    """Stopping: long polls and event streams end now instead of holding the drain open."""
    if not app[SHUTDOWN].done():
        app[SHUTDOWN].set_result(None)
    app[BROKER].bus.close()


def make_app(info: DaemonInfo, config: ConfigSource, broker: Broker, gateway: Gateway,
             surface: Surface, inbox: Inbox) -> web.Application:
    # no middleware: aiohttp runs each as a coroutine of its own around every request, and with any at all one more
    # of its own (its current app's); the table's routes check and answer their errors themselves (Api.install),
    # the others are guarded as they are added (GuardedRoutes)
    app = web.Application(client_max_size=MAX_BODY)
    app[INFO] = info
    app[CONFIG] = config
    app[BROKER] = broker
    app[GATEWAY] = gateway
    app[TCP_GUESTS] = []
    app[PASSED_CLAIMS] = {}
    routes = GuardedRoutes(app, refused)
    inbox_routes.install(app, inbox, routes)
    auth_routes.install(app, routes)
    app[SHUTDOWN] = asyncio.get_running_loop().create_future()
    api = build_api()
    installed = api.install(app, refused)
    # built on the first GET /v1/openapi.json, not here: the JSON schemas of the routes' 60 models take ~0.1 s of CPU,
    # more than the rest of the app, and most daemons are never asked for them
    openapi: Callable[[], dict[str, Any]] = functools.cache(api.openapi)
    app[OPENAPI] = openapi
    install_mcp_endpoint(app, surface, routes)
    routes.check(installed)  # last: every route is in by now

    async def on_shutdown(app: web.Application) -> None:
        stop_streams(app)

    app.on_shutdown.append(on_shutdown)
    return app
