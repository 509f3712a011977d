"""The exact HTTP request a tool call makes of a REST service, and its response as a tool result.

A request is built whole before anything is sent (`build`): the URL with its path and query filled, every header,
the body's bytes. What the person confirms is that object (services/outgoing.py), and `send` sends that object,
byte for byte. Parameters are serialised as their style says (services/styles.py); a body as JSON, a form
(application/x-www-form-urlencoded) or text, as the operation's media type says.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp
from multidict import CIMultiDict
from pydantic import BaseModel, ConfigDict
from yarl import URL

from mcpx.mcp.http_client import challenge_of
from mcpx.services import styles
from mcpx.services.document import Operation
from mcpx.services.outgoing import HttpExact, http_exact
from mcpx.shared.errors import McpxError

ERROR_START = 500  # characters of an error response's body the result carries
TEXT_LIMIT = 100_000  # characters of a response the tool result carries as text
READ_LIMIT = 4 * 1024 * 1024  # bytes of a response read: binary beyond it is summed up, not carried


class BadArguments(McpxError):
    """The call's arguments do not make a request of this operation; the message says which and why."""


class HttpRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None
    exact: HttpExact  # what the person confirms: all of it, credentials masked


def build(op: Operation, arguments: dict[str, Any], base_url: str, headers: list[tuple[str, str]],
          secret: set[str]) -> HttpRequest:
    """The request `arguments` make of `op` at `base_url`, with the service's own `headers` (`secret`: the lower-case
    names of those whose value is a secret). Each parameter as its style says (services/styles.py), the body as
    its media type says."""
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
    query: list[str] = []
    sent = list(headers)
    cookies: list[str] = []
    try:
        for p in op.parameters:
            value = arguments.get(p.argument)
            if value is None:
                continue
            if p.as_json:
                value = styles.text(value) if isinstance(value, (dict, list)) else json.dumps(value)
            if p.location == "path":
                path = path.replace("{" + p.name + "}", styles.path(p.name, value, p.style, p.explode))
            elif p.location == "query":
                query += styles.query(p.name, value, p.style, p.explode)
            elif p.location == "header":
                sent.append((p.name, styles.header(value, p.explode)))
            else:
                cookies += styles.query(p.name, value, p.style, p.explode)
        body, media, shown = _body(op, arguments.get("body"))
    except styles.StyleRefused as exc:
        raise BadArguments(f"{op.name}: {exc}") from None
    if cookies:
        sent.append(("Cookie", "; ".join(cookies)))
    url = base_url.rstrip("/") + path + (("?" + "&".join(query)) if query else "")
    if media is not None:
        sent.append(("Content-Type", media))
    sent += [("Accept", "application/json, */*;q=0.5"), ("User-Agent", "mcpx")]
    return HttpRequest(method=op.method, url=url, headers=sent, body=body,
                       exact=http_exact(op.method, url, sent, secret, shown))


def _body(op: Operation, value: Any) -> tuple[bytes | None, str | None, Any]:
    """The body's bytes, its Content-Type, and what the person is shown of it: a JSON body as its value (the bytes
    are its one compact serialization), a form's or a text's exactly as sent."""
    if value is None or not op.body or op.body_media is None:
        return None, None, None
    kind = op.body_media.split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        if not isinstance(value, dict):
            raise BadArguments(f"{op.name}: its body is a form ({kind}), so 'body' must be an object of its fields, "
                               f"not {type(value).__name__}")
        form = "&".join(piece for field, v in value.items() if v is not None
                        for piece in styles.query(field, v, *op.body_encoding.get(field, ("form", None))))
        return form.encode(), kind, form
    if kind.startswith("text/"):
        if not isinstance(value, str):
            raise BadArguments(f"{op.name}: its body is text ({kind}), so 'body' must be a string, not "
                               f"{type(value).__name__}")
        charset = next((p.split("=", 1)[1].strip().strip('"') for p in op.body_media.split(";")[1:]
                        if p.strip().lower().startswith("charset=")), None)
        try:
            raw = value.encode(charset or "utf-8")
        except (LookupError, UnicodeEncodeError) as exc:
            raise BadArguments(f"{op.name}: its body cannot be sent as {op.body_media}: {exc}") from None
        return raw, op.body_media if charset else f"{op.body_media}; charset=utf-8", value
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return raw, "application/json", value


class Response(BaseModel):
    """What the service answered, read (up to READ_LIMIT and one byte more)."""

    status: int
    reason: str
    content_type: str
    challenge: str | None  # the WWW-Authenticate of a 401, or of a 403 asking for more scope (a login's business)
    raw: bytes


async def send(http: aiohttp.ClientSession, request: HttpRequest, timeout: float) -> Response:
    """Send exactly `request` once (no retry, no redirect followed) and read the response."""
    # aiohttp adds only Host and Content-Length, which the URL and the body already say: no header of its own
    # choosing, and the URL goes as built (encoded=True: yarl re-encodes nothing)
    async with http.request(request.method, URL(request.url, encoded=True), headers=CIMultiDict(request.headers),
                            data=request.body, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=timeout),
                            skip_auto_headers=("Content-Type", "User-Agent", "Accept-Encoding")) as r:
        raw = bytearray()
        async for chunk in r.content.iter_any():
            raw += chunk
            if len(raw) > READ_LIMIT:
                break
        return Response(status=r.status, reason=r.reason or "", content_type=r.headers.get("Content-Type", ""),
                        challenge=challenge_of(r.status, r.headers), raw=bytes(raw))


def _texty(media: str) -> bool:
    return (media.startswith("text/") or media.endswith(("+xml", "/xml", "/javascript", "/x-www-form-urlencoded",
                                                          "/yaml", "+yaml", "/csv")))


def result(response: Response, url: str) -> dict[str, Any]:
    """A response as MCP's tool result: JSON as text and structured content; text as text; an image as an image
    and other bytes as an embedded resource (each up to READ_LIMIT, beyond it a summary that says what was not
    carried); an HTTP error as an error result with its status and the start of its body."""
    status, reason, content_type, raw = response.status, response.reason, response.content_type, response.raw
    media = content_type.split(";")[0].strip().lower()
    text = raw.decode("utf-8", errors="replace")
    if status >= 400:
        start = text[:ERROR_START] + ("…" if len(text) > ERROR_START else "")
        return {"content": [{"type": "text", "text": f"HTTP {status} {reason}: {start}".rstrip(": ")}],
                "isError": True}
    if not raw:
        return {"content": [{"type": "text", "text": f"HTTP {status} {reason}"}]}
    json_body = media == "application/json" or media.endswith("+json")
    if not (json_body or _texty(media) or "charset=" in content_type.lower() or not media):
        if len(raw) > READ_LIMIT:
            return {"content": [{"type": "text", "text": f"HTTP {status} {reason}: more than {READ_LIMIT} bytes "
                                 f"of {media}, which mcpx does not carry in a result (fetch {url} itself)"}]}
        data = base64.b64encode(raw).decode()
        if media.startswith("image/"):
            return {"content": [{"type": "image", "data": data, "mimeType": media}]}
        return {"content": [{"type": "resource", "resource": {"uri": url, "mimeType": media, "blob": data}}]}
    out: dict[str, Any] = {"content": [{"type": "text", "text": text[:TEXT_LIMIT]}]}
    if json_body and len(raw) <= READ_LIMIT:
        try:
            value = json.loads(text)
        except ValueError:
            return out
        out["structuredContent"] = value if isinstance(value, dict) else {"result": value}
    return out
