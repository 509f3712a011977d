"""Who issues tokens for a server, and where: the MCP authorization spec's discovery (2025-11-25).

A 401's WWW-Authenticate names the protected resource metadata (RFC 9728) or the well-known paths are tried;
that names the authorization server, whose metadata is read from RFC 8414's and OpenID's well-known paths, in the
spec's order, its `issuer` checked against the one named (RFC 8414 §3.3). A server that offers no PKCE S256 is
refused: the spec forbids a login without it.
"""

from __future__ import annotations

import re
from typing import TypeVar
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, ValidationError

from mcpx.oauth.login_error import LoginError
from mcpx.oauth.models import Challenge, ResourceMetadata, ServerMetadata
from mcpx.shared import wirejson
from mcpx.shared.masking import shown_url

M = TypeVar("M", bound=BaseModel)
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]*)')


def challenge(www_authenticate: str | None) -> Challenge:
    """The Bearer challenge's parameters (error, scope, resource_metadata); the rest is left."""
    found: dict[str, str] = {}
    for key, value in _PARAM.findall(www_authenticate or ""):
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        found.setdefault(key.lower(), value)
    return Challenge.model_validate(found)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def same_issuer(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


async def _get_json(http: aiohttp.ClientSession, url: str) -> dict[str, object] | None:
    """A well-known document, or None where there is none (404 and the like); a server that cannot be reached is
    a LoginError (an answer of 5xx says nothing of whether the document exists)."""
    try:
        async with http.get(url, headers={"Accept": "application/json"}) as resp:
            if resp.status >= 500 or resp.status == 429:
                raise LoginError(f"{shown_url(url)} answered HTTP {resp.status}")
            if resp.status != 200:
                return None
            data = wirejson.loads(await resp.text(), shown_url(url))
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise LoginError(f"{shown_url(url)} could not be reached: {exc}") from None
    except wirejson.JsonRefused:
        return None
    return data if isinstance(data, dict) else None


def resource_urls(server_url: str, given: str | None) -> list[str]:
    """Where the protected resource metadata may be: the challenge's, then the path-aware well-known, then the
    root one (RFC 9728 §3.1)."""
    parts = urlsplit(server_url)
    path = parts.path.rstrip("/")
    urls = [given] if given else []
    if path:
        urls.append(f"{_origin(server_url)}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{_origin(server_url)}/.well-known/oauth-protected-resource")
    return urls


def _valid(model: type[M], data: dict[str, object], url: str, what: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise LoginError(f"the {what} at {shown_url(url)} is not usable: {'.'.join(map(str, first['loc']))} "
                         f"{first['msg']}") from None


async def resource_metadata(http: aiohttp.ClientSession, server_url: str,
                            given: str | None) -> ResourceMetadata | None:
    for url in resource_urls(server_url, given):
        data = await _get_json(http, url)
        if data is None:
            continue
        found = _valid(ResourceMetadata, data, url, "protected resource metadata")
        if not found.authorization_servers:
            raise LoginError(f"the protected resource metadata at {shown_url(url)} names no authorization server")
        if not server_url.rstrip("/").startswith(found.resource.rstrip("/")):
            raise LoginError(f"the protected resource metadata at {shown_url(url)} is for {found.resource}, "
                             f"not {shown_url(server_url)}")
        return found
    return None


def server_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414's path-inserted well-known, then OpenID's inserted and appended (the MCP spec's order)."""
    from authlib.oauth2.rfc8414 import get_well_known_url  # here: a daemon that never logs in never loads authlib

    path = urlsplit(issuer).path.rstrip("/")
    oauth = get_well_known_url(issuer, external=True)
    oidc = get_well_known_url(issuer, external=True, suffix="openid-configuration")
    if not path:
        return [oauth, oidc]
    return [oauth, oidc, f"{issuer.rstrip('/')}/.well-known/openid-configuration"]


async def server_metadata(http: aiohttp.ClientSession, issuer: str) -> ServerMetadata:
    for url in server_metadata_urls(issuer):
        data = await _get_json(http, url)
        if data is None:
            continue
        found = _valid(ServerMetadata, data, url, "authorization server metadata")
        if not same_issuer(found.issuer, issuer):
            raise LoginError(f"the authorization server metadata at {shown_url(url)} names issuer {found.issuer}, "
                             f"not {issuer}")
        if "S256" not in found.code_challenge_methods_supported:
            raise LoginError(f"the authorization server {issuer} does not offer PKCE S256, without which the MCP "
                             "authorization spec forbids a login")
        return found
    raise LoginError(f"the authorization server {issuer} publishes no metadata (tried "
                     f"{', '.join(server_metadata_urls(issuer))})")


async def discover(http: aiohttp.ClientSession, server_url: str,
                   given: str | None) -> tuple[ResourceMetadata | None, ServerMetadata]:
    """The server's resource metadata (None for a server that publishes none: its origin is then the
    authorization server, as the 2025-03-26 spec had it) and its authorization server's metadata."""
    resource = await resource_metadata(http, server_url, given)
    issuer = resource.authorization_servers[0] if resource else _origin(server_url)
    return resource, await server_metadata(http, issuer)
