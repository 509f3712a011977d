"""One route table: it registers the aiohttp handlers and generates openapi.json, so the two cannot drift.

Handlers receive already-validated pydantic models; anything a caller got wrong becomes a
4xx with a message naming the problem, before a handler (or a stored question) is touched.
"""

from __future__ import annotations

import email.utils
import http
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from pydantic import BaseModel, ValidationError

from mcpx import __version__
from mcpx.api.schemas import ErrorBody
from mcpx.broker.refusals import BrokerError
from mcpx.mcp import jsonrpc
from mcpx.shared import wirejson
from mcpx.shared.errors import McpxError
from mcpx.shared.names import MAX_BODY
from mcpx.shared.routes import PageHandler

log = logging.getLogger("mcpx.daemon")


class RouteError(McpxError):
    """A route's refusal: the HTTP status, a code and a message naming what was wrong (the CLI reads it as ApiError)."""

    def __init__(self, status: int, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def error_response(status: int, code: str, message: str, **details: Any) -> web.Response:
    body = {"error": {"code": code, "message": message, **{k: v for k, v in details.items() if v is not None}}}
    return web.json_response(body, status=status)


def json_reply(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.StreamResponse:
    """A reply of models (and dicts and lists holding them) as the API shows them (wirejson.encode_models)."""
    if headers is None:
        return JsonReply(wirejson.encode_models(value), status)
    return web.Response(body=wirejson.encode_models(value), status=status, headers=headers,
                        content_type="application/json")


SERVER = f"Python/{sys.version_info[0]}.{sys.version_info[1]} aiohttp/{aiohttp.__version__}".encode()
_STATUS = {s.value: f"{s.value} {s.phrase}".encode() for s in http.HTTPStatus}
_dated: list[Any] = [0, b""]  # the second the Date header was last written for, and that header's value


def _date() -> bytes:
    """The Date header's value (RFC 9110's IMF-fixdate), made once a second."""
    now = int(time.time())
    if now != _dated[0]:
        _dated[:] = now, email.utils.formatdate(now, usegmt=True).encode()
    return _dated[1]  # type: ignore[no-any-return]


class JsonReply(web.StreamResponse):
    """A JSON reply whose document is encoded already, sent as one write of its head and body with the headers
    aiohttp's Response would send (Content-Type, Content-Length, Date, Server; Connection where keep-alive needs
    saying), without its machinery around them: a Response's head is built through some twenty calls (its
    headers' dict, the status, prepare, the payload writer's head, its end), three replies a lifecycle.

    For a status with a body, to a request that is not HEAD (the table adds no HEAD routes); `location`: a
    Location header (the daemon's own path, ASCII). No on_response_prepare signal is sent (the daemon has none)."""

    def __init__(self, body: bytes, status: int = 200, location: str | None = None) -> None:
        super().__init__(status=status)
        assert status in _STATUS and status not in (204, 304) and status >= 200
        self._json = body
        self._location = b"" if location is None else b"Location: %s\r\n" % location.encode("ascii")
        self._alive: bool | None = None
        self._sent = False

    @property
    def keep_alive(self) -> bool | None:
        return self._alive

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self._sent:
            return None
        self._sent = True
        alive = self._alive = request.keep_alive
        version = request.version
        if version == aiohttp.HttpVersion11:
            connection = b"" if alive else b"Connection: close\r\n"
        else:
            connection = b"Connection: keep-alive\r\n" if alive else b""
        transport = request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client went away before its reply")
        transport.write(b"HTTP/%d.%d %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\nDate: %s\r\n"
                        b"Server: %s\r\n%s\r\n%s" % (version[0], version[1], _STATUS[self.status], self._location,
                                                    len(self._json), _date(), SERVER, connection, self._json))
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        """Sent whole by prepare."""


def describe_validation(exc: ValidationError, where: str) -> tuple[str, dict[str, str]]:
    fields: dict[str, str] = {}
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or where
        fields[loc] = err["msg"].removeprefix("Value error, ")
    listed = "; ".join(f"{k}: {v}" for k, v in fields.items())
    return f"invalid {where}: {listed}", fields


@dataclass(frozen=True)
class Reply:
    description: str
    model: type[BaseModel] | None = None
    content_type: str = "application/json"
    headers: tuple[str, ...] = ()


@dataclass(slots=True)
class RouteCall:
    """What a handler gets: the request, its path parameters and its validated query, headers and body, and the
    application its route was installed on (the request's own: the daemon has no sub-applications), bound at install
    rather than looked up through the request's match info at each use (three calls a look, several a request)."""

    request: web.Request
    path: dict[str, str]
    query: Any
    body: Any
    headers: Any
    app: web.Application


Handler = Callable[[RouteCall], Awaitable[web.StreamResponse]]
RequestHandler = Callable[[web.Request], Coroutine[Any, Any, web.StreamResponse]]
Refusal = Callable[[web.Request], web.StreamResponse | None]  # a request's refusal, or None when it may come in

# what the wrapper itself answers, so every route whose input it checks lists it
FRAMEWORK_REPLIES = {
    400: Reply("the request is malformed: the message names the parameter or field, and what is wrong with it"),
    401: Reply("on TCP without 'Authorization: Bearer <token>' (the unix socket needs none)"),
    413: Reply(f"the body is larger than {MAX_BODY} bytes"),
}
REF = "#/components/schemas/{model}"
# a request line or header over aiohttp's bound is refused by the HTTP server before any route reads it, in its own
# words: wherever a 400 is listed, so is that one
TOO_LONG = "; a request line or header over 8190 bytes is refused by the HTTP server itself, in text/plain"


@dataclass
class RouteSpec:
    method: str
    path: str
    summary: str
    handler: Handler
    query: type[BaseModel] | None
    body: type[BaseModel] | None
    replies: dict[int, Reply]
    tag: str
    headers: type[BaseModel] | None = None
    params: type[BaseModel] | None = None  # the path's parameters
    # where aiohttp's router tries it among the routes of its path's prefix (lower first; the table's order among
    # equals): it tries each in the order added, a coroutine and a match each, until one takes the request
    order: int = 0

    def all_replies(self) -> dict[int, Reply]:
        """The handler's replies and the wrapper's: a 400 where it checks input, a 413 where it reads a body."""
        extra = {401: FRAMEWORK_REPLIES[401]}
        if any((self.params, self.query, self.headers, self.body)):
            extra[400] = FRAMEWORK_REPLIES[400]
        if self.body is not None:
            extra[413] = FRAMEWORK_REPLIES[413]
        return {**extra, **self.replies}


Validate = Callable[[Any], Any]


def validator(model: type[BaseModel]) -> Validate:
    """`model.model_validate`, without its Python wrapper around pydantic-core's validator (a call each request)."""
    return model.__pydantic_validator__.validate_python


def _validated(validate: Validate, raw: dict[str, str], where: str) -> Any:
    try:
        return validate(raw)
    except ValidationError as exc:
        message, fields = describe_validation(exc, where)
        raise RouteError(400, f"bad_{where}", message, fields=fields) from None


@dataclass
class Api:
    title: str = "mcpx daemon"
    endpoints: list[RouteSpec] = field(default_factory=list)

    def route(self, method: str, path: str, summary: str, *, query: type[BaseModel] | None = None,
              body: type[BaseModel] | None = None, replies: dict[int, Reply], tag: str = "elicit",
              headers: type[BaseModel] | None = None, params: type[BaseModel] | None = None, order: int = 0,
              ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.endpoints.append(RouteSpec(method, path, summary, handler, query, body, replies, tag, headers, params,
                                            order))
            return handler
        return register

    def install(self, app: web.Application, refused: Refusal) -> list[RequestHandler]:
        """The routes on `app`, each refusing what `refused` refuses and answering what it raises as its error reply
        (`guarded`'s work, done in the route's own coroutine: no middleware, which aiohttp runs as a coroutine of its
        own around every request, and then a second one of its own); the handlers it installed."""
        handlers = []
        for ep in sorted(self.endpoints, key=lambda ep: ep.order):  # stable: the table's order among equals
            handlers.append(self._wrap(ep, app, refused))
            app.router.add_route(ep.method, ep.path, handlers[-1])
        return handlers

    @staticmethod
    def _wrap(ep: RouteSpec, app: web.Application, refused: Refusal) -> RequestHandler:
        params = validator(ep.params) if ep.params is not None else None
        query_of = validator(ep.query) if ep.query is not None else None
        headers_of = validator(ep.headers) if ep.headers is not None else None
        names = [f.alias or name for name, f in ep.headers.model_fields.items()] if ep.headers is not None else []
        handler = ep.handler
        body_of = validator(ep.body) if ep.body is not None else None

        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                if (refusal := refused(request)) is not None:
                    return refusal
                path = dict(request.match_info)
                if params is not None:
                    _validated(params, path, "path")
                query = _validated(query_of, dict(request.query.items()), "query") if query_of is not None else None
                headers = None
                if headers_of is not None:
                    headers = _validated(headers_of, {n: request.headers[n] for n in names if n in request.headers},
                                         "header")
                body = await read_json_body(request, body_of) if body_of is not None else None
                return await handler(RouteCall(request, path, query, body, headers, app))
            except Exception as exc:  # each becomes its reply (failure); a cancellation goes on up
                return failure(request, exc)
        return handle

    def openapi(self) -> dict[str, Any]:
        components: dict[str, Any] = {}
        paths: dict[str, Any] = {}

        def schema_of(model: type[BaseModel], mode: Literal["validation", "serialization"]) -> dict[str, Any]:
            # nested models become components of their own, so every $ref resolves in this document
            schema = model.model_json_schema(by_alias=True, ref_template=REF, mode=mode)
            components.update(schema.pop("$defs", {}))
            return schema

        def ref(model: type[BaseModel], mode: Literal["validation", "serialization"] = "serialization",
                ) -> dict[str, str]:
            components[model.__name__] = schema_of(model, mode)
            return {"$ref": REF.format(model=model.__name__)}

        def parameters(model: type[BaseModel], where: str) -> list[dict[str, Any]]:
            schema = schema_of(model, "validation")
            return [{"name": name, "in": where, "required": where == "path" or name in schema.get("required", []),
                     "schema": _param_schema(prop)} for name, prop in schema.get("properties", {}).items()]

        error_ref = ref(ErrorBody)
        for ep in self.endpoints:
            op: dict[str, Any] = {"summary": ep.summary, "tags": [ep.tag], "operationId": ep.handler.__name__}
            params = parameters(ep.params, "path") if ep.params is not None else [
                {"name": name.split(":")[0], "in": "path", "required": True, "schema": {"type": "string"}}
                for name in _path_params(ep.path)]
            if ep.query is not None:
                params += parameters(ep.query, "query")
            if ep.headers is not None:
                params += parameters(ep.headers, "header")
            if params:
                op["parameters"] = params
            if ep.body is not None:
                # an empty body is taken as {}: it may be left out when no field is required
                op["requestBody"] = {"required": any(f.is_required() for f in ep.body.model_fields.values()),
                                     "content": {"application/json": {"schema": ref(ep.body, "validation")}}}
            responses: dict[str, Any] = {}
            for status, reply in sorted(ep.all_replies().items()):
                entry: dict[str, Any] = {"description": reply.description}
                if reply.content_type == "text/event-stream":
                    entry["content"] = {reply.content_type: {"schema": _sse_event(ref(reply.model) if reply.model
                                                                                  else {"type": "string"})}}
                elif reply.model is not None:
                    entry["content"] = {reply.content_type: {"schema": ref(reply.model)}}
                elif status >= 400:
                    entry["content"] = {"application/json": {"schema": error_ref}}
                if status == 400:
                    entry["description"] += TOO_LONG
                    entry["content"]["text/plain"] = {"schema": {"type": "string"}}
                if reply.headers:
                    entry["headers"] = {h: {"schema": {"type": "string"}} for h in reply.headers}
                responses[str(status)] = entry
            op["responses"] = responses
            paths.setdefault(_openapi_path(ep.path), {})[ep.method.lower()] = op
        return {
            "openapi": "3.1.0",
            "info": {"title": self.title, "version": __version__},
            "paths": paths,
            "security": [{"bearer": []}],
            "components": {"schemas": dict(sorted(components.items())),
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                          "description": "required on TCP; the unix socket is 0600"}}},
        }


def _param_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema: an optional one is left out, never sent as null, so null is not among its values."""
    prop = {k: v for k, v in prop.items() if not (k == "default" and v is None)}
    options = [o for o in prop.pop("anyOf", []) if o != {"type": "null"}]
    if len(options) == 1:
        prop.update(options[0])
    elif options:
        prop["anyOf"] = options
    return prop


def _sse_event(data: dict[str, Any]) -> dict[str, Any]:
    """One event of a stream: its id and kind, and its data, a JSON document of `data`'s schema."""
    return {"type": "object", "required": ["data"], "properties": {
        "id": {"type": "string"}, "event": {"type": "string"}, "retry": {"type": "integer"},
        "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data}}}


def _path_params(path: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in path:
        if ch == "{":
            depth, cur = 1, ""
        elif ch == "}" and depth:
            out.append(cur)
            depth = 0
        elif depth:
            cur += ch
    return out


def _openapi_path(path: str) -> str:
    for name in _path_params(path):
        path = path.replace("{" + name + "}", "{" + name.split(":")[0] + "}")
    return path


async def read_json_body(request: web.Request, validate: Validate) -> Any:
    """The body, a JSON object, as `validate` (a body model's `validator`) makes it; else a 4xx naming why."""
    if (length := request.content_length) is not None and length > MAX_BODY:
        raise RouteError(413, "too_large", f"the body is {length} bytes; the limit is {MAX_BODY}")
    payload = request.content
    if payload.is_eof():
        # all of it came in with the headers (a body of a few hundred bytes does): taken as it is, with none of
        # request.read()'s loop of waits (a dozen calls a body)
        raw = payload.read_nowait()
        too_large = len(raw) > MAX_BODY
    else:
        try:
            raw, too_large = await request.read(), False
        except web.HTTPRequestEntityTooLarge:
            too_large = True
    if too_large:
        raise RouteError(413, "too_large", f"the body is larger than the limit of {MAX_BODY} bytes")
    if not raw.strip():
        data: Any = {}
    else:
        try:
            data = wirejson.loads(raw, "the body")
        except wirejson.JsonRefused as exc:
            raise RouteError(400, "too_deep" if exc.too_deep else "bad_json", str(exc)) from None
    if not isinstance(data, dict):
        raise RouteError(400, "bad_body", f"the body must be a JSON object, not {type(data).__name__}")
    # an ASCII body can spell a lone surrogate only as a \u escape: most bodies need no walk to be sure of none
    if (not raw.isascii() or b"\\u" in raw) and (where := wirejson.lone_surrogate(data)) is not None:
        raise RouteError(400, "bad_body", f"invalid body: {where} {wirejson.SURROGATE_PROBLEM}",
                       fields={where: wirejson.SURROGATE_PROBLEM})
    try:
        return validate(data)
    except ValidationError as exc:
        message, fields = describe_validation(exc, "body")
        raise RouteError(400, "bad_body", message, fields=fields) from None


def failure(request: web.Request, exc: Exception) -> web.StreamResponse:
    """What a handler raised, as its reply (called in its `except`): a refusal's status and words, an HTTP error of
    aiohttp's in /v1's shape (JSON-RPC's on /mcp), and anything else a 500 that names it, logged. An HTTP exception
    under 400 (a redirect) goes on up, for aiohttp to send."""
    if isinstance(exc, RouteError | BrokerError):
        return error_response(exc.status, exc.code, exc.message, **exc.details)
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(exc.status, "http_error")
        message = {
            404: f"no route {request.method} {request.path}; see GET /v1/openapi.json",
            405: f"{request.method} is not allowed on {request.path}",
            413: f"the body is larger than the limit of {MAX_BODY} bytes",
        }.get(exc.status, exc.reason)
        response = (rpc_error_response(exc.status, message) if _on_mcp(request)
                    else error_response(exc.status, code, message))
        if "Allow" in exc.headers:  # a 405 says what is allowed (RFC 9110)
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    # a bug: say so, keep serving
    log.error("request %s %s failed", request.method, request.path, exc_info=exc)
    message = f"internal error: {type(exc).__name__}: {exc}"
    return rpc_error_response(500, message) if _on_mcp(request) else error_response(500, "internal", message)


def guarded(handler: PageHandler, refused: Refusal) -> RequestHandler:
    """`handler` behind the daemon's own check (`refused`: TCP without the bearer token), its exceptions answered by
    `failure`: for the routes outside the route table (/mcp, the inbox's pages), which `Api.install` does not wrap."""

    async def guard(request: web.Request) -> web.StreamResponse:
        try:
            refusal = refused(request)
            return refusal if refusal is not None else await handler(request)
        except Exception as exc:  # each becomes its reply (failure); a cancellation goes on up
            return failure(request, exc)

    return guard


async def unmatched(request: web.Request) -> web.StreamResponse:
    """The last route, of any method and path (`guarded` like the rest): what no other route took, a 404, or a 405
    naming the methods of the routes whose path it is, as aiohttp's router would have said."""
    allowed: set[str] = set()
    for resource in request.app.router.resources():
        if resource.canonical != CATCH_ALL:
            _match, methods = await resource.resolve(request)
            allowed |= methods
    if allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    raise web.HTTPNotFound()


CATCH_ALL = "/{tail}"  # unmatched's path, as its resource names it


class GuardedRoutes:
    """The app's router as the parts outside the route table add their routes to it (shared/routes.py's `Routes`:
    the inbox's pages, /mcp, the OAuth callback): each handler put behind `guarded` as it is added, through aiohttp's
    own `add_*`. `check` then holds every route of the app to it, once all are in."""

    def __init__(self, app: web.Application, refused: Refusal) -> None:
        self._router = app.router
        self._refused = refused
        self._guards: set[RequestHandler] = set()

    def _guarded(self, handler: PageHandler) -> RequestHandler:
        wrapped = guarded(handler, self._refused)
        self._guards.add(wrapped)
        return wrapped

    def add_get(self, path: str, handler: PageHandler) -> web.AbstractRoute:
        return self._router.add_get(path, self._guarded(handler))

    def add_post(self, path: str, handler: PageHandler) -> web.AbstractRoute:
        return self._router.add_post(path, self._guarded(handler))

    def add_delete(self, path: str, handler: PageHandler) -> web.AbstractRoute:
        return self._router.add_delete(path, self._guarded(handler))

    def add_route(self, method: str, path: str, handler: PageHandler) -> web.AbstractRoute:
        return self._router.add_route(method, path, self._guarded(handler))

    def check(self, installed: list[RequestHandler]) -> None:
        """`unmatched` added last, then every route of the app found either the table's own (`installed`, which check
        themselves) or guarded here: a route added to the app's router by any other way fails the daemon's start,
        rather than serve without the daemon's check (the work of one middleware, with no coroutine of its own on
        the routes of the table)."""
        self.add_route("*", "/{tail:.*}", unmatched)
        own = set(installed)
        for route in self._router.routes():
            if route.handler not in own and route.handler not in self._guards:
                raise RuntimeError(f"the route {route.method} {route.resource} was added around the daemon's check: "
                                   "add it through the Routes the daemon hands its part (api/table.py GuardedRoutes)")


def _on_mcp(request: web.Request) -> bool:
    return request.path == "/mcp" or request.path.startswith("/mcp/")


def rpc_error_response(status: int, message: str) -> web.Response:
    """An error on /mcp, where every reply is JSON-RPC's shape, never /v1's."""
    code = jsonrpc.INTERNAL_ERROR if status >= 500 else jsonrpc.INVALID_REQUEST
    return web.json_response(jsonrpc.error(None, code, message), status=status)
