"""One HTTP server's (or REST service's) login: what discovery found, the tokens in use; the wire's Authorizer for
the server.

A server that answers 401 is looked up (discovery.py); a login kept in the keychain for that authorization server
and resource is used (refreshed when it is about to expire, or when the server refuses it); without one the server
"needs login", and the request fails saying so (logins.py asks the person). Nothing here is touched for a server
that never answers 401: no keychain read, no discovery, no header.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp

from mcpx.oauth import discovery, flow, vault
from mcpx.oauth.login_error import LoginError
from mcpx.oauth.models import LoginView, OAuthClient, Protected, ResourceMetadata, ServerMetadata, Tokens
from mcpx.shared.masking import shown_url
from mcpx.system import keychain

log = logging.getLogger("mcpx.oauth")

ISSUER_FACT = "oauth-issuer:"  # + the server's url: which authorization server its login is at (not a secret)


class Keeper(Protocol):
    """What a login needs of the daemon's logins (logins.Logins): the HTTP client, the store's facts, the client
    mcpx is at an authorization server, and where tokens are kept."""

    @property
    def http(self) -> aiohttp.ClientSession: ...

    async def fact(self, key: str) -> Any: ...

    async def client_for(self, login: Login, register: bool = True) -> OAuthClient | None: ...

    async def keep(self, login: Login, tokens: Tokens) -> None: ...

    async def forget(self, login: Login) -> None: ...


def union_scopes(*sets: str | list[str] | None) -> str:
    """Scopes joined once each, in the order first named."""
    out: list[str] = []
    for s in sets:
        for scope in (s.split() if isinstance(s, str) else s or []):
            if scope not in out:
                out.append(scope)
    return " ".join(out)


class Login:
    """One HTTP server's login (the module's docstring)."""

    def __init__(self, logins: Keeper, server: str, entry: Protected) -> None:
        self.logins = logins
        self.server = server
        self.entry = entry
        self.resource: ResourceMetadata | None = None
        self.meta: ServerMetadata | None = None
        self.tokens: Tokens | None = None
        self.needs_login = False
        self.problem: str | None = None  # why it needs login and what to do, for status
        self.why: str | None = None  # why it needs login, in a few words, for its question
        self.wanted_scope: str | None = None  # what the last challenge asked for (a step-up widens it)
        self._loaded = False  # the keychain was read for the issuer kept in the store
        self._lock = asyncio.Lock()

    @property
    def issuer(self) -> str | None:
        return self.meta.issuer if self.meta else None

    @property
    def resource_id(self) -> str:
        """The resource parameter (RFC 8707): the metadata's resource, else the server's URL without fragment."""
        return self.resource.resource if self.resource else self.entry.url.split("#")[0]

    # ---- the Authorizer the wire calls

    async def authorization(self) -> str | None:
        if not self._loaded:
            async with self._lock:
                await self._load_kept()
        tokens = self.tokens
        if tokens is not None and tokens.expiring() and tokens.refresh_token is not None:
            async with self._lock:
                if self.tokens is tokens:
                    await self._refresh()
            tokens = self.tokens
        return f"Bearer {tokens.access_token}" if tokens is not None else None

    async def challenged(self, status: int, www_authenticate: str | None) -> str | None:
        sent = self.tokens
        async with self._lock:
            challenge = discovery.challenge(www_authenticate)
            try:
                if self.meta is None or status == 401:
                    self.resource, self.meta = await discovery.discover(self.logins.http, self.entry.url,
                                                                        challenge.resource_metadata)
            except LoginError as exc:
                self._needs(f"its login could not be looked up: {exc}")
                return self.problem
            if status == 403:  # a step-up (insufficient_scope): a login with the wider scope
                granted = self.tokens.scope if self.tokens else None
                self.wanted_scope = union_scopes(self.wanted_scope, granted, challenge.scope)
                self._needs(f"it wants more scope ({challenge.scope or 'unnamed'}) than the login gave")
                return self.problem
            self.wanted_scope = challenge.scope or self.wanted_scope
            if self.tokens is None or self.tokens is sent:
                self.tokens = await asyncio.to_thread(self._kept_tokens)
            if self.tokens is not None and self.tokens is not sent and (
                    sent is None or self.tokens.access_token != sent.access_token):
                return None  # a login kept from before (a restart), or one made meanwhile: try it
            if self.tokens is not None and self.tokens.refresh_token is not None and await self._refresh():
                return None
            if not self.needs_login:  # a refresh that failed just now says more
                self._needs("it needs a login")
            return self.problem

    # ---- keeping

    def _kept_tokens(self) -> Tokens | None:
        if self.issuer is None:
            return None
        try:
            return vault.tokens(self.issuer, self.resource_id)
        except (keychain.NoKeychain, keychain.KeychainError) as exc:
            log.warning("server %s: its login could not be read from the keychain: %s", self.server, exc)
            return None

    async def load_kept(self) -> None:
        """What an earlier daemon kept for this server, read once (for `mcpx auth list` before any call)."""
        async with self._lock:
            await self._load_kept()

    async def _load_kept(self) -> None:
        """Once: a login kept by an earlier daemon, found by the issuer the store remembers for the server."""
        if self._loaded:
            return
        self._loaded = True
        issuer = await self.logins.fact(ISSUER_FACT + self.entry.url)
        if not isinstance(issuer, str):
            return
        try:
            self.meta = await discovery.server_metadata(self.logins.http, issuer)
            self.resource = await discovery.resource_metadata(self.logins.http, self.entry.url, None)
        except LoginError as exc:
            log.warning("server %s: its kept login's authorization server could not be read: %s", self.server, exc)
            self.meta = None
            return
        self.tokens = await asyncio.to_thread(self._kept_tokens)

    async def _refresh(self) -> bool:
        """A new access token from the refresh token (the lock held); False, and "needs login", when refused."""
        assert self.tokens is not None and self.meta is not None
        try:
            client = await self.logins.client_for(self, register=False)
            if client is None:
                raise LoginError("the client that logged in is no longer kept")
            fresh = await flow.refresh(self.logins.http, self.meta, client, self.tokens, self.resource_id)
        except LoginError as exc:
            log.info("server %s: refreshing its login failed: %s", self.server, exc)
            self.tokens = None
            await self.logins.forget(self)
            self._needs(f"its login could not be refreshed ({exc})")
            return False
        await self.logins.keep(self, fresh)
        return True

    def _needs(self, why: str) -> None:
        self.needs_login = True
        self.why = why
        where = urlsplit(self.meta.issuer).netloc if self.meta else shown_url(self.entry.url)
        self.problem = f"server {self.server!r} needs login at {where}: {why} (a call asks for it, or run `mcpx auth " \
                       f"login {self.server}`)"

    def logged_in(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self.needs_login = False
        self.problem = None
        self.wanted_scope = None

    def view(self, asking: str | None) -> LoginView:
        t = self.tokens
        state = "asking" if asking else "needs-login" if self.needs_login else "logged-in" if t else "none"
        return LoginView(server=self.server, url=shown_url(self.entry.url), state=state, issuer=self.issuer,
                         subject=t.subject if t else None, scopes=(t.scope or "").split() if t else [],
                         expires_at=t.expires_at if t else None, question=asking, problem=self.problem)
