"""The daemon's aiohttp application: middlewares, the /v1 route table, and the /mcp endpoint."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web

from mcpx.daemon import call_routes, elicit_routes
from mcpx.daemon.api import Api, error_response, errors_middleware
from mcpx.daemon.peers import is_unix
from mcpx.daemon.runtime import RUNTIME, Runtime
from mcpx.keys import MAX_BODY, SHUTDOWN

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The unix socket is the owner's alone (0600); loopback TCP needs the bearer token."""
    if not is_unix(request):
        token = request.app[RUNTIME].token
        given = request.headers.get("Authorization", "")
        if not token or not given.startswith("Bearer ") or not hmac.compare_digest(given[7:].strip(), token):
            return error_response(401, "unauthorized",
                                  "this port needs 'Authorization: Bearer <token>'; the token is in the state "
                                  "directory's 'token' file (mcpx status shows where)")
    return await handler(request)


def build_api() -> Api:
    api = Api()
    api.endpoints.extend(elicit_routes.api.endpoints)
    api.endpoints.extend(call_routes.api.endpoints)
    return api


def stop_streams(app: web.Application) -> None:
    """Stopping: long polls and event streams end now instead of holding the drain open."""
    app[SHUTDOWN].set()
    app[RUNTIME].broker.bus.close()


def make_app(runtime: Runtime) -> web.Application:
    app = web.Application(middlewares=[errors_middleware, auth_middleware], client_max_size=MAX_BODY)
    app[RUNTIME] = runtime
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
