"""The exact HTTP request a tool call makes of a REST service, and its response as a tool result.

A request is built whole before anything is sent (`build`): the URL with its path and query filled, every header,
the body's bytes. What the person confirms is that object (services/outgoing.py), and `send` sends that object,
byte for byte. Parameters are serialised as OpenAPI's defaults say: a path value percent-encoded whole, a query
array as the key repeated (form, explode), an object as its JSON text, a boolean as true/false.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from multidict import CIMultiDict
from pydantic import BaseModel, ConfigDict

from mcpx.services.document import Operation
from mcpx.services.outgoing import http_exact
from mcpx.shared.errors import McpxError

ERROR_START = 500  # characters of an error response's body the result carries
TEXT_LIMIT = 100_000  # characters of a response the tool result carries as text


class BadArguments(McpxError):
    """The call's arguments do not make a request of this operation; the message says which and why."""


class HttpRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None
    exact: dict[str, Any]  # what the person confirms: all of it, credentials masked


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def build(op: Operation, arguments: dict[str, Any], base_url: str, headers: list[tuple[str, str]],
          secret: set[str]) -> HttpRequest:
    """The request `arguments` make of `op` at `base_url`, with the service's own `headers` (`secret`: the lower-case
    names of those whose value is a secret)."""
    known = {p.argument for p in op.parameters} | ({"body"} if op.body else set())
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise BadArguments(f"{op.name} takes no argument {', '.join(map(repr, unknown))} (it takes: "
                           f"{', '.join(sorted(known)) or 'none'})")
    missing = [p.argument for p in op.parameters if p.required and arguments.get(p.argument) is None]
    if op.body_required and arguments.get("body") is None:
        missing.append("body")
    if missing:
        raise BadArguments(f"{op.name} needs {', '.join(map(repr, missing))}")
    path = op.path
    query: list[tuple[str, str]] = []
    sent = list(headers)
    cookies: list[str] = []
    for p in op.parameters:
        value = arguments.get(p.argument)
        if value is None:
            continue
        if p.location == "path":
            path = path.replace("{" + p.name + "}", quote(_scalar(value), safe=""))
        elif p.location == "query":
            if isinstance(value, list) and p.explode is not False:
                query += [(p.name, _scalar(v)) for v in value]
            elif isinstance(value, list):
                query.append((p.name, ",".join(_scalar(v) for v in value)))
            else:
                query.append((p.name, _scalar(value)))
        elif p.location == "header":
            sent.append((p.name, _scalar(value)))
        else:
            cookies.append(f"{p.name}={quote(_scalar(value), safe='')}")
    if cookies:
        sent.append(("Cookie", "; ".join(cookies)))
    url = base_url.rstrip("/") + path + (("?" + urlencode(query)) if query else "")
    body: bytes | None = None
    if op.body and arguments.get("body") is not None:
        body = json.dumps(arguments["body"], ensure_ascii=False, separators=(",", ":")).encode()
        sent.append(("Content-Type", "application/json"))
    sent += [("Accept", "application/json, */*;q=0.5"), ("User-Agent", "mcpx")]
    return HttpRequest(method=op.method, url=url, headers=sent, body=body,
                       exact=http_exact(op.method, url, sent, secret, body))


async def send(http: aiohttp.ClientSession, request: HttpRequest, timeout: float) -> dict[str, Any]:
    """Send exactly `request` once (no retry, no redirect followed) and make a tool result of the response."""
    # aiohttp adds only Host and Content-Length, which the URL and the body already say: no header of its own choosing
    async with http.request(request.method, request.url, headers=CIMultiDict(request.headers), data=request.body,
                            allow_redirects=False, timeout=aiohttp.ClientTimeout(total=timeout),
                            skip_auto_headers=("Content-Type", "User-Agent", "Accept-Encoding")) as r:
        raw = await r.read()
        return result(r.status, r.reason or "", r.headers.get("Content-Type", ""), raw)


def result(status: int, reason: str, content_type: str, raw: bytes) -> dict[str, Any]:
    """A response as MCP's tool result: a JSON one as structured content too; an HTTP error as an error result
    with its status and the start of its body."""
    text = raw.decode("utf-8", errors="replace")
    if status >= 400:
        start = text[:ERROR_START] + ("…" if len(text) > ERROR_START else "")
        return {"content": [{"type": "text", "text": f"HTTP {status} {reason}: {start}".rstrip(": ")}],
                "isError": True}
    if not raw:
        return {"content": [{"type": "text", "text": f"HTTP {status} {reason}"}]}
    out: dict[str, Any] = {"content": [{"type": "text", "text": text[:TEXT_LIMIT]}]}
    if "json" in content_type.split(";")[0]:
        try:
            data = json.loads(text)
        except ValueError:
            return out
        out["structuredContent"] = data if isinstance(data, dict) else {"result": data}
    return out
