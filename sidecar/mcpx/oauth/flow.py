"""The OAuth 2.1 steps of a login, over the daemon's own HTTP client (aiohttp), with authlib's protocol pieces.

register: dynamic client registration (RFC 7591, `application_type` native for a loopback redirect).
begin: the authorization link, with PKCE S256 (RFC 7636), a fresh `state` and the `resource` (RFC 8707).
finish: the address the browser was sent back to, checked (its `state` by the caller, once; `iss` per RFC 9207;
an error the server put there), and its code exchanged with the verifier and the resource.
refresh: a new access token from the refresh token, for the same resource. revoke: RFC 7009, where offered.
Nothing here knows the daemon or keeps anything: logins.py does. authlib is imported by the steps that use it, so
a daemon that never logs in never loads it.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
from pydantic import BaseModel

from mcpx.oauth.discovery import same_issuer
from mcpx.oauth.login_error import LoginError
from mcpx.oauth.models import OAuthClient, ServerMetadata, Tokens
from mcpx.shared import wirejson
from mcpx.shared.masking import shown_url

FORM = "application/x-www-form-urlencoded"


class PendingLogin(BaseModel):
    """A login begun: what its link carries and what the code's exchange needs back. In memory only."""

    server: str
    state: str
    verifier: str
    issuer: str
    resource: str
    scope: str
    redirect_uri: str
    url: str


async def register(http: aiohttp.ClientSession, meta: ServerMetadata, redirect_uri: str) -> OAuthClient:
    """Register mcpx as a public client (no secret: it runs on the person's machine). No `scope` is registered:
    a resource's scopes are asked for with each login, and a server may refuse to register ones it does not list
    itself (oidc-provider does)."""
    if meta.registration_endpoint is None:
        raise LoginError(f"the authorization server {meta.issuer} offers no dynamic client registration: give the "
                         'server an "auth": {"clientId": ...} registered there')
    loopback = urlsplit(redirect_uri).hostname in ("127.0.0.1", "localhost", "::1")
    body = {"client_name": "mcpx", "redirect_uris": [redirect_uri], "grant_types": ["authorization_code",
            "refresh_token"], "response_types": ["code"], "token_endpoint_auth_method": "none",
            "application_type": "native" if loopback else "web"}
    data = await _post_json(http, meta, meta.registration_endpoint, "to register mcpx", json=body)
    client_id = data.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise LoginError(f"the authorization server {meta.issuer} registered mcpx without a client_id")
    method = data.get("token_endpoint_auth_method", "none")
    secret = data.get("client_secret")
    return OAuthClient(client_id=client_id, client_secret=secret if isinstance(secret, str) else None,
                  token_endpoint_auth_method=method if isinstance(method, str) else "none", redirect_uri=redirect_uri,
                  registered=True)


def begin(server: str, meta: ServerMetadata, client: OAuthClient, resource: str, scope: str) -> PendingLogin:
    from authlib.common.security import generate_token
    from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
    from authlib.oauth2.rfc7636 import create_s256_code_challenge

    verifier = generate_token(64)
    state = generate_token(32)
    # offline_access (a refresh token) needs prompt=consent at an OpenID server (OpenID Connect Core §11), which
    # drops the scope without it; a plain OAuth server ignores a prompt it does not know
    extra = {"prompt": "consent"} if "offline_access" in scope.split() else {}
    url = prepare_grant_uri(meta.authorization_endpoint, client.client_id, "code", redirect_uri=client.redirect_uri,
                            scope=scope or None, state=state, code_challenge=create_s256_code_challenge(verifier),
                            code_challenge_method="S256", resource=resource, **extra)
    return PendingLogin(server=server, state=state, verifier=verifier, issuer=meta.issuer, resource=resource,
                        scope=scope, redirect_uri=client.redirect_uri, url=url)


def callback_params(address: str) -> dict[str, str]:
    """The query of the address the browser was sent back to (or a pasted code=…&state=… alone)."""
    query = urlsplit(address).query if "://" in address or address.startswith("/") else address.lstrip("?")
    return dict(parse_qsl(query))


async def finish(http: aiohttp.ClientSession, meta: ServerMetadata, client: OAuthClient, pending: PendingLogin,
                 params: dict[str, str]) -> Tokens:
    """The tokens for the code the browser brought back; the caller has matched `state` to `pending` already."""
    iss = params.get("iss")
    if iss is not None and not same_issuer(iss, meta.issuer):
        raise LoginError(f"the login came back from {iss}, not {meta.issuer} (RFC 9207): refused")
    if iss is None and meta.authorization_response_iss_parameter_supported:
        raise LoginError(f"the login came back without the iss {meta.issuer} promises (RFC 9207): refused")
    if "error" in params:
        words = params.get("error_description") or params["error"]
        raise LoginError(f"the authorization server {meta.issuer} ended the login: {words}")
    code = params.get("code")
    if not code:
        raise LoginError("the address has no code: paste the whole address the browser ended on")
    return await _token(http, meta, client, "authorization_code", code=code, redirect_uri=pending.redirect_uri,
                        code_verifier=pending.verifier, resource=pending.resource)


async def refresh(http: aiohttp.ClientSession, meta: ServerMetadata, client: OAuthClient, tokens: Tokens,
                  resource: str) -> Tokens:
    if tokens.refresh_token is None:
        raise LoginError("the login has no refresh token")
    fresh = await _token(http, meta, client, "refresh_token", refresh_token=tokens.refresh_token, resource=resource)
    update: dict[str, object] = {"subject": fresh.subject or tokens.subject}
    if fresh.refresh_token is None:
        update["refresh_token"] = tokens.refresh_token  # the server kept the old one (no rotation)
    if fresh.scope is None:
        update["scope"] = tokens.scope
    return fresh.model_copy(update=update)


async def revoke(http: aiohttp.ClientSession, meta: ServerMetadata, client: OAuthClient, tokens: Tokens) -> bool:
    """Revoke the refresh token (and with it, at most servers, the grant) and the access token; False where the
    server offers no revocation."""
    from authlib.oauth2.rfc7009 import prepare_revoke_token_request

    if meta.revocation_endpoint is None:
        return False
    revoked = False
    for token, hint in ((tokens.refresh_token, "refresh_token"), (tokens.access_token, "access_token")):
        if token is None:
            continue
        body, headers = prepare_revoke_token_request(token, hint, headers={"Content-Type": FORM})
        form, headers = _client_auth(client, dict(parse_qsl(body)), headers)
        status, text = await _post(http, meta.revocation_endpoint, data=form, headers=headers)
        if status == 200:
            revoked = True
        elif not _oauth_error(text).startswith("unsupported_token_type"):
            # a token of a type it cannot revoke (a JWT access token: it just expires) is not a refusal (RFC 7009
            # §2.2.1); anything else is
            raise LoginError(f"the authorization server {meta.issuer} refused to revoke the login: HTTP {status} "
                             f"{_oauth_error(text)}")
    return revoked


async def _post(http: aiohttp.ClientSession, url: str, **request: Any) -> tuple[int, str]:
    """POST to an endpoint of the authorization server: its status and body; LoginError when it cannot be reached."""
    try:
        async with http.post(url, **request) as resp:
            return resp.status, await resp.text()
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise LoginError(f"{shown_url(url)} could not be reached: {exc}") from None


async def _post_json(http: aiohttp.ClientSession, meta: ServerMetadata, url: str, what: str,
                     **request: Any) -> dict[str, object]:
    """POST to an endpoint whose answer is a JSON object (registration, token); LoginError saying `what` was
    refused, and the server's OAuth error, otherwise."""
    status, text = await _post(http, url, **request)
    if status not in (200, 201):
        raise LoginError(f"the authorization server {meta.issuer} refused {what}: HTTP {status} {_oauth_error(text)}")
    return _json(text, f"answer to {what}")


def _client_auth(client: OAuthClient, form: dict[str, str], headers: dict[str, str]) -> tuple[dict[str, str],
                                                                                      dict[str, str]]:
    """How the client proves itself at the token and revocation endpoints (RFC 6749 §2.3.1)."""
    if client.token_endpoint_auth_method == "client_secret_basic" and client.client_secret:
        pair = base64.b64encode(f"{client.client_id}:{client.client_secret}".encode()).decode()
        return form, {**headers, "Authorization": f"Basic {pair}"}
    form = {**form, "client_id": client.client_id}
    if client.token_endpoint_auth_method == "client_secret_post" and client.client_secret:
        form["client_secret"] = client.client_secret
    return form, headers


async def _token(http: aiohttp.ClientSession, meta: ServerMetadata, client: OAuthClient, grant: str,
                 **params: str | None) -> Tokens:
    from authlib.oauth2.rfc6749.parameters import prepare_token_request

    body = prepare_token_request(grant, **{k: v for k, v in params.items() if v is not None})
    form, headers = _client_auth(client, dict(parse_qsl(body)), {"Content-Type": FORM, "Accept": "application/json"})
    what = "the refresh" if grant == "refresh_token" else "the login code"
    data = await _post_json(http, meta, meta.token_endpoint, what, data=form, headers=headers)
    access = data.get("access_token")
    if not isinstance(access, str) or not access:
        raise LoginError(f"the authorization server {meta.issuer} answered with no access_token")
    expires_in = data.get("expires_in")
    lifetime = float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else None
    refresh_token, scope = data.get("refresh_token"), data.get("scope")
    return Tokens(access_token=access, token_type=str(data.get("token_type") or "Bearer"),
                  refresh_token=refresh_token if isinstance(refresh_token, str) else None,
                  expires_at=time.time() + lifetime if lifetime else None, lifetime=lifetime,
                  scope=scope if isinstance(scope, str) else None,
                  subject=_subject(data.get("id_token")) or _subject(access))


def _subject(token: object) -> str | None:
    """Whom a JWT (an id_token, or an access token that is one) names, for `mcpx auth list`; read, not trusted:
    it is shown to the person who logged in and decides nothing."""
    if not isinstance(token, str) or token.count(".") != 2:
        return None
    try:
        part = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(claims, dict):
        return None
    who = claims.get("email") or claims.get("preferred_username") or claims.get("name") or claims.get("sub")
    return who if isinstance(who, str) else None


def _json(text: str, what: str) -> dict[str, object]:
    try:
        data = wirejson.loads(text, what)
    except wirejson.JsonRefused as exc:
        raise LoginError(f"the authorization server's {what} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LoginError(f"the authorization server's {what} is not a JSON object")
    return data


def _oauth_error(text: str) -> str:
    """An OAuth error body in words (RFC 6749 §5.2), never echoing more than its error and description."""
    try:
        data = wirejson.loads(text, "its error")
    except wirejson.JsonRefused:
        return text[:200]
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        desc = data.get("error_description")
        return f"{data['error']}" + (f" ({desc})" if isinstance(desc, str) else "")
    return text[:200]
