"""Where a login is kept: the OS keychain (keychain.py), never a file, the store, a log or an output.

Keyed by authorization server and resource: service `mcpx-oauth:ISSUER`, username `tokens RESOURCE` for the
tokens, `client REDIRECT_URI` for the client mcpx registered there (a new redirect address, a daemon on another
port, registers anew; the same one is reused, so a restart registers nothing). Every function blocks (a D-Bus
round trip): the daemon calls them off its loop.
"""

from __future__ import annotations

from pydantic import ValidationError

from mcpx.oauth.models import OAuthClient, Tokens
from mcpx.system import keychain

SERVICE = "mcpx-oauth:"  # + the authorization server's issuer


def tokens(issuer: str, resource: str) -> Tokens | None:
    text = keychain.read(SERVICE + issuer, "tokens " + resource)
    try:
        return Tokens.model_validate_json(text) if text else None
    except ValidationError:
        return None  # not one mcpx wrote: as if there were none (a login replaces it)


def keep_tokens(issuer: str, resource: str, value: Tokens) -> None:
    keychain.write(SERVICE + issuer, "tokens " + resource, value.model_dump_json(exclude_none=True))


def forget_tokens(issuer: str, resource: str) -> bool:
    return keychain.delete(SERVICE + issuer, "tokens " + resource)


def client(issuer: str, redirect_uri: str) -> OAuthClient | None:
    text = keychain.read(SERVICE + issuer, "client " + redirect_uri)
    try:
        return OAuthClient.model_validate_json(text) if text else None
    except ValidationError:
        return None


def keep_client(issuer: str, value: OAuthClient) -> None:
    keychain.write(SERVICE + issuer, "client " + value.redirect_uri, value.model_dump_json(exclude_none=True))
