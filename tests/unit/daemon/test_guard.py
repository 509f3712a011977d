"""The daemon's routes with no middleware (api/table.py): the table's routes check and answer their own errors, every
other route is guarded the same way, and what no route takes is a 404 or a 405 in /v1's shape."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from pydantic import BaseModel

from harness import serving
from mcpx.api.table import (
    Api,
    GuardedRoutes,
    JsonReply,
    Reply,
    RouteCall,
    RouteError,
    error_response,
    json_reply,
)
from mcpx.shared.names import MAX_BODY


class Body(BaseModel):
    n: int


def build() -> web.Application:
    api = Api()

    @api.route("POST", "/v1/thing", "a table route with a body", body=Body, replies={200: Reply("it")})
    async def thing(call: RouteCall) -> web.StreamResponse:
        return json_reply({"n": call.body.n, "same_app": call.app is call.request.app})

    async def refusing(_request: web.Request) -> web.StreamResponse:
        raise RouteError(409, "taken", "already taken")

    async def failing(_request: web.Request) -> web.StreamResponse:
        raise KeyError("nothing here")

    async def moving(_request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/v1/thing")

    async def plain(_request: web.Request) -> web.StreamResponse:  # aiohttp's own reply of the same document
        return web.Response(body=b'{"n":5}', status=201, headers={"Location": "/v1/x"}, content_type="application/json")

    @api.route("POST", "/v1/lean", "a table route's lean reply", replies={201: Reply("it")})
    async def lean(_call: RouteCall) -> web.StreamResponse:
        return JsonReply(b'{"n":5}', 201, location="/v1/x")

    def refused(request: web.Request) -> web.Response | None:
        if request.headers.get("X-Refuse"):
            return error_response(401, "unauthorized", "refused")
        return None

    app = web.Application(client_max_size=MAX_BODY)
    routes = GuardedRoutes(app, refused)
    routes.add_get("/other", refusing)
    routes.add_get("/broken", failing)
    routes.add_post("/mcp", failing)
    routes.add_get("/moved", moving)
    routes.add_post("/plain", plain)
    routes.check(api.install(app, refused))
    return app


def test_a_route_added_around_the_guard_fails_the_start_and_is_named() -> None:
    """A route put on the app's router other than through GuardedRoutes would serve without the daemon's check (the
    bearer on TCP): the app is refused where it is built, naming the route."""
    app = web.Application()
    routes = GuardedRoutes(app, lambda _request: None)

    async def page(_request: web.Request) -> web.StreamResponse:
        return web.Response(text="page")

    routes.add_get("/inbox", page)
    app.router.add_post("/sneaked", page)
    with pytest.raises(RuntimeError, match=r"POST.*/sneaked"):
        routes.check([])


async def fetch(session: aiohttp.ClientSession, method: str, url: str, **kw: Any) -> tuple[int, Any, Any]:
    async with session.request(method, url, allow_redirects=False, **kw) as r:
        return r.status, (await r.json() if r.content_type == "application/json" else await r.text()), r.headers


async def test_routes_are_guarded_and_what_no_route_takes_is_named() -> None:
    async with serving(build(), shutdown_timeout=0.5) as port, aiohttp.ClientSession() as http:
        base = f"http://127.0.0.1:{port}"
        status, body, _ = await fetch(http, "POST", f"{base}/v1/thing", json={"n": 3})
        assert (status, body) == (200, {"n": 3, "same_app": True})
        status, body, _ = await fetch(http, "POST", f"{base}/v1/thing", json={"n": "x"})
        assert status == 400 and body["error"]["code"] == "bad_body" and "n" in body["error"]["fields"]
        # a body that is not in with its headers (chunked) is read all the same, and one too large is a 413
        async def chunks(*parts: bytes) -> Any:
            for part in parts:
                yield part
        status, body, _ = await fetch(http, "POST", f"{base}/v1/thing", data=chunks(b'{"n"', b": 4}"))
        assert (status, body["n"]) == (200, 4)
        status, body, _ = await fetch(http, "POST", f"{base}/v1/thing",
                                      data=chunks(b'{"n": 1, "pad": "', b"x" * MAX_BODY, b'"}'))
        assert status == 413 and body["error"]["code"] == "too_large"
        # a route outside the table: its refusal in words, a bug a 500 naming it (JSON-RPC's shape on /mcp)
        status, body, _ = await fetch(http, "GET", f"{base}/other")
        assert (status, body["error"]["code"], body["error"]["message"]) == (409, "taken", "already taken")
        status, body, _ = await fetch(http, "GET", f"{base}/broken")
        assert status == 500 and body["error"]["code"] == "internal" and "KeyError" in body["error"]["message"]
        status, body, _ = await fetch(http, "POST", f"{base}/mcp")
        assert status == 500 and body["jsonrpc"] == "2.0" and "KeyError" in body["error"]["message"]
        status, _, headers = await fetch(http, "GET", f"{base}/moved")
        assert status == 302 and headers["Location"] == "/v1/thing"
        # no route: a 404, and a 405 naming what the path allows
        status, body, _ = await fetch(http, "GET", f"{base}/v1/nope")
        assert status == 404 and "no route GET /v1/nope" in body["error"]["message"]
        status, body, headers = await fetch(http, "DELETE", f"{base}/v1/thing")
        assert status == 405 and body["error"]["code"] == "method_not_allowed" and headers["Allow"] == "POST"
        # the refusal comes first, wherever the request goes
        for method, path in (("POST", "/v1/thing"), ("GET", "/other"), ("GET", "/v1/nope")):
            status, body, _ = await fetch(http, method, base + path, json={"n": 1}, headers={"X-Refuse": "1"})
            assert (status, body["error"]["code"]) == (401, "unauthorized"), path


async def exchange(port: int, request: bytes) -> tuple[bytes, bool]:
    """One raw request's reply, its Date header left out, and whether the server kept the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        lines = [line for line in head.split(b"\r\n") if not line.startswith(b"Date: ")]
        length = next(int(line.split(b":")[1]) for line in lines if line.startswith(b"Content-Length:"))
        body = await reader.readexactly(length)
        writer.write(request)  # a second request on the same connection: answered only if it was kept
        kept = bool(await reader.read(1))
        return b"\r\n".join(lines) + body, kept
    finally:
        writer.close()


async def test_a_lean_reply_is_the_bytes_aiohttps_reply_would_be() -> None:
    async with serving(build(), shutdown_timeout=0.5) as port:
        for version, connection, kept in (("1.1", "", True), ("1.1", "Connection: close\r\n", False),
                                          ("1.0", "Connection: keep-alive\r\n", True), ("1.0", "", False)):
            def request(path: str, version: str = version, connection: str = connection) -> bytes:
                return (f"POST {path} HTTP/{version}\r\nHost: x\r\n{connection}Content-Length: 0\r\n\r\n"
                        .encode())
            theirs, ours = await exchange(port, request("/plain")), await exchange(port, request("/v1/lean"))
            assert ours == theirs and ours[1] is kept, (version, connection, ours, theirs)
