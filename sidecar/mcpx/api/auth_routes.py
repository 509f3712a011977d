"""Logins to HTTP servers and REST services with `auth` (docs/auth.md): /v1/auth for `mcpx auth`, and
/oauth/callback on the TCP listener, where the browser comes back from the authorization server.

The callback is open on TCP without the bearer token (the browser has none): what it carries is checked instead —
a `state` mcpx handed out in a login link and has not seen back yet, taken once; anything else is refused with a
page that says so, and nothing is done.
"""

from __future__ import annotations

import logging

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from mcpx.api.inbox_routes import TCP_GUESTS
from mcpx.api.state import CONFIG, GATEWAY
from mcpx.api.table import Api, Reply, RouteCall, RouteError
from mcpx.broker.models import OpenRequest, WireModel
from mcpx.config.models import HttpServer, OpenApiServer
from mcpx.inbox import pages
from mcpx.inbox.web_routes import html
from mcpx.oauth.login_error import LoginError
from mcpx.oauth.logins import CALLBACK_PATH, Logins
from mcpx.oauth.models import LoginView, Protected
from mcpx.shared.routes import Routes
from mcpx.shared.upstream_errors import UpstreamError

log = logging.getLogger("mcpx.oauth")
api = Api()


class ServerPath(BaseModel):
    server: str = Field(min_length=1, max_length=200)


class AuthList(WireModel):
    logins: list[LoginView]


class LoginStarted(WireModel):
    server: str
    question: str = Field(description="the login question: its answer says how the login ended")
    url: str = Field(description="the authorization server's login page")


class LoggedOut(WireModel):
    server: str
    was_logged_in: bool
    revoked: bool = Field(description="the authorization server revoked the tokens (it offers RFC 7009)")


class CompleteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, max_length=8192, description="the address the browser ended on after the login "
                     "(or its query: code=…&state=…)")


class Completed(WireModel):
    server: str


async def _protected(call: RouteCall) -> tuple[str, Protected]:
    """The server named in the path and what its login is for: an HTTP server's, or a REST service's with auth."""
    name = call.path["server"]
    if name not in call.app[CONFIG].config.servers:
        raise RouteError(404, "unknown_server", f"no server {name!r} behind mcpx")
    try:
        protected = await call.app[GATEWAY].protected(name)
    except UpstreamError as exc:
        raise RouteError(502, "login_failed", f"server {name!r}: {exc}") from None
    if protected is None:
        raise RouteError(400, "not_http", f"server {name!r} logs in nowhere: only HTTP servers and REST services "
                         "with auth do")
    return name, protected


def _logins(call: RouteCall) -> Logins:
    return call.app[GATEWAY].logins


@api.route("GET", "/v1/auth", "Each HTTP server's (and REST service's) login: logged in (as whom, scopes, expiry), "
           "needs login, or none",
           tag="auth", replies={200: Reply("the logins (never a token)", AuthList)})
async def list_logins(call: RouteCall) -> web.StreamResponse:
    logins = _logins(call)
    servers: dict[str, HttpServer | Protected] = {}
    for name, entry in call.app[CONFIG].config.servers.items():
        if isinstance(entry, HttpServer):
            servers[name] = entry
        elif isinstance(entry, OpenApiServer) and entry.auth is not None:
            try:  # a service's login is for its base URL, which its document may give
                found = await call.app[GATEWAY].protected(name)
            except UpstreamError as exc:
                log.warning("server %s: its login cannot be listed: %s", name, exc)
                continue
            if found is not None:
                servers[name] = found
    for name, target in servers.items():
        await logins.load(name, target)
    return web.json_response(AuthList(logins=logins.views(servers)).wire())


@api.route("POST", "/v1/auth/{server}/login", "Ask the person to log in to the server now (its login question)",
           tag="auth", params=ServerPath,
           replies={200: Reply("the login question", LoginStarted), 404: Reply("no such server"),
                    400: Reply("not an HTTP server"), 502: Reply("the login could not be begun (discovery, "
                                                                  "registration): the message says which step")})
async def login(call: RouteCall) -> web.StreamResponse:
    name, entry = await _protected(call)
    config = call.app[CONFIG]
    try:
        handle = await _logins(call).asking(name, entry, OpenRequest(
            session=config.fallback_session(), session_source="fallback", server="mcpx", message="-"))
    except LoginError as exc:
        raise RouteError(502, "login_failed", f"server {name!r}: {exc}") from None
    return web.json_response(LoginStarted(server=name, question=handle.id,
                                          url=handle.elicitation.url or "").wire())


@api.route("POST", "/v1/auth/{server}/logout", "Forget the server's login, revoked where the server offers it",
           tag="auth", params=ServerPath,
           replies={200: Reply("forgotten", LoggedOut), 404: Reply("no such server"),
                    400: Reply("not an HTTP server")})
async def logout(call: RouteCall) -> web.StreamResponse:
    name, entry = await _protected(call)
    was, revoked = await _logins(call).logout(name, entry)
    return web.json_response(LoggedOut(server=name, was_logged_in=was, revoked=revoked).wire())


@api.route("POST", "/v1/auth/complete", "Complete a login with the address the browser ended on (a browser on "
           "another device, which cannot reach this daemon's /oauth/callback)", tag="auth", body=CompleteBody,
           replies={200: Reply("logged in", Completed),
                    400: Reply("not the return of a login mcpx has open, or the server refused it")})
async def complete(call: RouteCall) -> web.StreamResponse:
    try:
        server = await _logins(call).complete(call.body.url, by="person:cli")
    except LoginError as exc:
        raise RouteError(400, "login_refused", str(exc)) from None
    return web.json_response(Completed(server=server).wire())


async def callback(request: web.Request) -> web.StreamResponse:
    """Where the authorization server sends the browser back: the login completed, or a page saying why not."""
    logins: Logins = request.app[GATEWAY].logins
    try:
        server = await logins.complete(str(request.url), by="person:browser")
    except LoginError as exc:
        return html(pages.message_page("Login not completed", str(exc)), 400)
    return html(pages.message_page(f"Logged in to {server}", "mcpx has the login; the calls that waited for it go "
                                   "on. You can close this tab."))


def _admits(request: web.Request) -> bool:
    return request.path == CALLBACK_PATH and request.method == "GET"


def install(app: web.Application, routes: Routes) -> None:
    routes.add_get(CALLBACK_PATH, callback)
    app[TCP_GUESTS].append(_admits)
