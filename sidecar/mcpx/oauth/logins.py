"""The daemon's logins: one per HTTP server (login.py, the wire's Authorizer for it), and its one question.

A server without a usable login "needs login" (login.py). A call that meets that asks the person (`asking`):
one url-mode question from `mcpx` per server, which every call needing the login waits on; its link is the
authorization server's login page. The browser comes back to the daemon's own `/oauth/callback` (or the person
pastes the address it ended on: `complete`); its `state` is taken once, the code exchanged, the tokens kept
(vault.py), and the question answered `accept` — so the calls go on.

The tokens live in memory and the keychain only: never in the store (a question holds the login link, whose
`state` is spent once used), a log, the audit, the event stream or an output.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from mcpx.broker.broker import Broker, Handle
from mcpx.broker.models import Answer, Elicitation, OpenRequest, StoredTask
from mcpx.broker.refusals import QuestionEnded
from mcpx.broker.store import QuestionFilter
from mcpx.config.models import HttpServer
from mcpx.config.source import ConfigSource
from mcpx.oauth import discovery, flow, vault
from mcpx.oauth.login import ISSUER_FACT, Login, union_scopes
from mcpx.oauth.login_error import LoginError
from mcpx.oauth.models import LoginView, OAuthClient, Protected, Tokens
from mcpx.shared.masking import shown_url
from mcpx.system import keychain

log = logging.getLogger("mcpx.oauth")

MARK = "mcpx-login:"  # + the server: the upstreamId of mcpx's login question for it
CALLBACK_PATH = "/oauth/callback"


class Logins:
    """Every HTTP server's login; the one open login question per server; the callback that completes one."""

    def __init__(self, broker: Broker, settings: ConfigSource, tools_changed: Callable[[str], Awaitable[None]]) -> None:
        self.broker = broker
        self.settings = settings
        self._tools_changed = tools_changed
        self.callback_url: str | None = None  # the daemon's http://host:port/oauth/callback, once it listens
        self._http: aiohttp.ClientSession | None = None
        self._logins: dict[str, Login] = {}
        self._asking: dict[str, tuple[Handle, asyncio.Task[None]]] = {}
        self._pending: dict[str, tuple[flow.PendingLogin, Handle]] = {}  # state -> the login begun, its question
        self._opening: dict[str, asyncio.Lock] = {}

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self._http

    def login(self, server: str, entry: HttpServer | Protected) -> Login:
        """The server's login (the Authorizer its HTTP channel, or a REST service's requests, are given); a changed
        entry starts afresh."""
        protected = Protected.of(entry)
        found = self._logins.get(server)
        if found is None or found.entry != protected:
            found = self._logins[server] = Login(self, server, protected)
        return found

    def held(self, server: str) -> Protected | None:
        """What the server's login is for, once it has one."""
        found = self._logins.get(server)
        return found.entry if found is not None else None

    def needs_login(self, server: str) -> bool:
        found = self._logins.get(server)
        return found is not None and found.needs_login

    def problem(self, server: str) -> str | None:
        found = self._logins.get(server)
        return found.problem if found is not None and found.needs_login else None

    async def fact(self, key: str) -> Any:
        return await self.broker.fact(key)

    # ---- the client mcpx is at an authorization server

    async def client_for(self, login: Login, register: bool = True) -> OAuthClient | None:
        """The config's client, else the one mcpx registered there for this redirect address, else (when
        `register`) a new registration, kept."""
        assert login.meta is not None
        redirect = self._redirect_uri()
        auth = login.entry.auth
        if auth.client_id is not None:
            secret = None
            if auth.client_secret is not None:
                try:
                    secret = await asyncio.to_thread(keychain.get, login.server, auth.client_secret)
                except (keychain.NoKeychain, keychain.KeychainError) as exc:
                    raise LoginError(f"its client secret {auth.client_secret} could not be read: {exc}") from None
                if secret is None:
                    raise LoginError(f"its client secret {auth.client_secret} is not in the keychain (run `mcpx "
                                     f"secrets set {login.server} {auth.client_secret}`)")
            return OAuthClient(client_id=auth.client_id, client_secret=secret, redirect_uri=redirect,
                          token_endpoint_auth_method="client_secret_basic" if secret else "none")
        issuer = login.meta.issuer
        try:
            kept = await asyncio.to_thread(vault.client, issuer, redirect)
        except (keychain.NoKeychain, keychain.KeychainError) as exc:
            raise LoginError(f"mcpx keeps a login only in the OS keychain, and {exc}") from None
        if kept is not None or not register:
            return kept
        client = await flow.register(self.http, login.meta, redirect)
        try:
            await asyncio.to_thread(vault.keep_client, issuer, client)
        except (keychain.NoKeychain, keychain.KeychainError) as exc:
            raise LoginError(f"mcpx keeps a login only in the OS keychain, and {exc}") from None
        log.info("server %s: registered mcpx as client %s at %s", login.server, client.client_id, issuer)
        return client

    def _redirect_uri(self) -> str:
        if self.callback_url is None:
            raise LoginError("the daemon is not listening yet for the login's return")
        return self.callback_url

    def _scope(self, login: Login) -> str:
        """The config's scopes, else the challenge's, else all the resource lists; with offline_access where the
        authorization server offers it (a refresh token: no new login when the access token expires)."""
        assert login.meta is not None
        base = login.entry.auth.scopes or login.wanted_scope or (login.resource.scopes_supported
                                                                   if login.resource else [])
        extra = ["offline_access"] if "offline_access" in login.meta.scopes_supported else []
        return union_scopes(base, login.wanted_scope, extra)

    # ---- keeping a login

    async def keep(self, login: Login, tokens: Tokens) -> None:
        assert login.issuer is not None
        try:
            await asyncio.to_thread(vault.keep_tokens, login.issuer, login.resource_id, tokens)
        except (keychain.NoKeychain, keychain.KeychainError) as exc:
            raise LoginError(f"the login could not be kept: {exc}") from None
        await self.broker.set_fact(ISSUER_FACT + login.entry.url, login.issuer)
        login.logged_in(tokens)

    async def forget(self, login: Login) -> None:
        if login.issuer is None:
            return
        try:
            await asyncio.to_thread(vault.forget_tokens, login.issuer, login.resource_id)
        except (keychain.NoKeychain, keychain.KeychainError) as exc:
            log.warning("server %s: its login could not be forgotten in the keychain: %s", login.server, exc)

    # ---- the question

    async def asking(self, server: str, entry: HttpServer | Protected, request: OpenRequest,
                     stored_with: Callable[[Elicitation, bool], StoredTask] | None = None) -> Handle:
        """The open login question for the server: the one open already, or a new one (with `request`'s session
        and call). LoginError when no login can be begun (discovery or registration failed)."""
        async with self._opening.setdefault(server, asyncio.Lock()):
            found = self._asking.get(server)
            if found is not None:
                return found[0]
            login = self.login(server, entry)
            if login.meta is None:
                login.resource, login.meta = await discovery.discover(self.http, login.entry.url, None)
            client = await self.client_for(login)
            assert client is not None and login.meta is not None
            scope = self._scope(login)
            pending = flow.begin(server, login.meta, client, login.resource_id, scope)
            where = urlsplit(login.meta.issuer).netloc
            why = f" ({login.why})" if login.needs_login and login.why else ""
            message = (f"Log in to {server} ({shown_url(login.entry.url)}) at {where} so mcpx can call it for you"
                       + (f", with scope {scope}" if scope else "") + f"{why}. The login is kept in this machine's "
                       "keychain for you alone. If the browser cannot come back to this machine, paste the address "
                       "it ends on into `mcpx auth complete`.")
            handle = await self.broker.open(request.model_copy(update={
                "server": "mcpx", "tool": server, "message": message, "mode": "url", "url": pending.url,
                "requested_schema": None, "upstream_id": MARK + server, "audience": "human",
                "ttl": self._ttl(login.entry)}), stored_with)
            self._pending[pending.state] = (pending, handle)
            keeper = asyncio.create_task(self._keep_open(server, pending.state, handle), name=f"mcpx-login-{server}")
            self._asking[server] = (handle, keeper)
            return handle

    def _ttl(self, entry: Protected) -> float:
        """How long a login question waits: a person goes to a browser, perhaps on a phone, and logs in there, so it
        waits as the server's own questions do (its `elicit.ttl`, else the config's), never less than mcpx's own
        short questions (`elicit.askTimeout`)."""
        elicit = self.settings.config.elicit
        return max(entry.ttl or elicit.ttl, elicit.ask_timeout)

    async def _keep_open(self, server: str, state: str, handle: Handle) -> None:
        """Until the question ends; then its link's state is spent whatever ended it."""
        try:
            await handle.answer()
        except QuestionEnded:
            pass
        finally:
            self._pending.pop(state, None)
            if (found := self._asking.get(server)) is not None and found[0] is handle:
                del self._asking[server]

    async def complete(self, address: str, by: str) -> str:
        """The browser's return (the callback, or its address pasted): the state taken once, the code exchanged,
        the login kept and its question answered accept by `by`. The server's name; LoginError naming why not."""
        params = flow.callback_params(address)
        state = params.get("state")
        taken = self._pending.pop(state, None) if state else None
        if taken is None:
            raise LoginError("this is not the return of a login mcpx has open (its state is unknown, or was used "
                             "already): nothing was done")
        pending, handle = taken
        login = self._logins.get(pending.server)
        if login is None or login.meta is None or login.issuer != pending.issuer:
            raise LoginError(f"server {pending.server!r}'s login changed meanwhile: nothing was done")
        try:
            client = await self.client_for(login, register=False)
            if client is None:
                raise LoginError("the client that began the login is no longer kept")
            tokens = await flow.finish(self.http, login.meta, client, pending, params)
            await self.keep(login, tokens)
        except LoginError as exc:
            await self.broker.abandon(handle.id, f"the login failed: {exc}")
            raise
        log.info("server %s: logged in at %s (%s)", pending.server, login.issuer, handle.id)
        try:
            await self.broker.answer(handle.id, "accept", None, by=by)
        except Exception as exc:  # answered or ended meanwhile: the login is kept all the same
            log.info("server %s: its login question %s was not answered: %s", pending.server, handle.id, exc)
        await self._tools_changed(pending.server)
        return pending.server

    async def settled(self, server: str, handle: Handle) -> Answer:
        return await handle.answer()

    # ---- what the person sees and does

    def views(self, servers: Mapping[str, HttpServer | Protected]) -> list[LoginView]:
        out = []
        for server, entry in sorted(servers.items()):
            found = self._asking.get(server)
            out.append(self.login(server, entry).view(found[0].id if found else None))
        return out

    async def load(self, server: str, entry: HttpServer | Protected) -> Login:
        """The server's login with what is kept read (for a listing of logins before any call)."""
        login = self.login(server, entry)
        await login.load_kept()
        return login

    async def logout(self, server: str, entry: HttpServer | Protected) -> tuple[bool, bool]:
        """Forget the server's login, revoking it where the server offers revocation: (was logged in, revoked)."""
        login = await self.load(server, entry)
        tokens = login.tokens
        revoked = False
        if tokens is not None and login.meta is not None:
            client = await self.client_for(login, register=False)
            if client is not None:
                try:
                    revoked = await flow.revoke(self.http, login.meta, client, tokens)
                except LoginError as exc:
                    log.warning("server %s: its login was not revoked: %s", server, exc)
        await self.forget(login)
        login.tokens = None
        login.needs_login = False
        login.problem = None
        await self._tools_changed(server)  # listed again when next asked: a listing now needs a login
        return tokens is not None, revoked

    async def abandon_orphans(self) -> None:
        """At start: a login question left open by the daemon before this one has a link whose state no daemon
        holds, so it ends; the server's next call asks again."""
        for q in await self.broker.questions(QuestionFilter(state="pending", server="mcpx")):
            if (q.upstream_id or "").startswith(MARK):
                await self.broker.abandon(q.id, "the mcpx daemon that asked restarted; the server's next call asks "
                                                "again")

    async def close(self) -> None:
        keepers = [keeper for _h, keeper in self._asking.values()]
        for keeper in keepers:
            keeper.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
