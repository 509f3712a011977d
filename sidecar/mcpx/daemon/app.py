"""The daemon's aiohttp application: middlewares, the /v1 route table, and the /mcp endpoint."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web

from mcpx.daemon import call_routes, elicit_routes
from mcpx.daemon.api import MAX_BODY, Api, error_response, errors_middleware
from mcpx.daemon.elicit_routes import SHUTDOWN
from mcpx.daemon.peers import is_unix
from mcpx.daemon.runtime import RUNTIME, Runtime
from mcpx.inbox import api_routes as inbox_routes
from mcpx.inbox.api_routes import TCP_GUESTS
from mcpx.inbox.routes import Inbox

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The unix socket is the owner's alone (0600); TCP needs the bearer token (given with --listen), but for what
    a guest checks itself."""
    if not is_unix(request) and not any(admits(request) for admits in request.app.get(TCP_GUESTS, [])):
        token = request.app[RUNTIME].token
        given = request.headers.get("Authorization", "")
        if not token:
            return error_response(401, "unauthorized",
                                  "this port serves the web inbox (`mcpx inbox` opens it); /v1 and /mcp are served on "
                                  "TCP only by a daemon started with --listen, behind its bearer token")
        if not given.startswith("Bearer ") or not hmac.compare_digest(given[7:].strip(), token):
            return error_response(401, "unauthorized",
                                  "this port needs 'Authorization: Bearer <token>'; the token is in the state "
                                  "directory's 'token' file (mcpx status shows where)")
    return await handler(request)


def build_api() -> Api:
    api = Api()
    api.endpoints.extend(elicit_routes.api.endpoints)
    api.endpoints.extend(call_routes.api.endpoints)
    api.endpoints.extend(inbox_routes.api.endpoints)
    return api


def stop_streams(app: web.Application) -> None:
    """Stopping: long polls and event streams end now instead of holding the drain open."""
    app[SHUTDOWN].set()
    app[RUNTIME].broker.bus.close()


def make_app(runtime: Runtime, inbox: Inbox | None = None) -> web.Application:
    app = web.Application(middlewares=[errors_middleware, auth_middleware], client_max_size=MAX_BODY)
    app[RUNTIME] = runtime
    app[TCP_GUESTS] = []
    if inbox is not None:
        inbox_routes.install(app, inbox)
    app[SHUTDOWN] = asyncio.Event()
    api = build_api()
    api.install(app)
    app["openapi"] = api.openapi()
    if runtime.gateway is not None:
        from mcpx.mcp.http_surface import install_mcp_endpoint
        from mcpx.mcp.request_state import RequestStates, load_key
        from mcpx.mcp.surface import Surface

        install_mcp_endpoint(app, Surface(runtime, RequestStates(load_key(runtime.paths.request_state_key))))

    async def on_shutdown(app: web.Application) -> None:
        stop_streams(app)

    app.on_shutdown.append(on_shutdown)
    return app
