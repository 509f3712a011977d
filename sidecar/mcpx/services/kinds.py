"""The two kinds of service as kinds of upstream (upstream/kind.py): an OpenAPI service and a command runner. Each
lists its servers' tools and runs a call: it builds the exact request (or run), has the person confirm it when it
is a write, and sends exactly what was confirmed, once.

The confirmation is bound to the request's exact document (`CallScope.confirm`). The request is built again once
the person has accepted, just before it goes: if it is not the same document (the config was reloaded, a variable
a header reads changed), the person is asked again about what it is now; it is never sent unconfirmed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections import ChainMap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import aiohttp
from pydantic import BaseModel

from mcpx.config.environment import filled, references
from mcpx.config.models import CommandsServer, OpenApiServer
from mcpx.services import commands, document, http
from mcpx.services.http import BadArguments
from mcpx.shared.upstream_errors import UpstreamError
from mcpx.upstream import secrets
from mcpx.upstream.kind import (
    Authorizer,
    CallError,
    CallScope,
    InstanceInfo,
    KindFactory,
    Protected,
    UpstreamHost,
    digest,
)

log = logging.getLogger("mcpx.services")

# how many times a call may find its request changed between the person's accept and its sending, asking again
# each time, before it gives up
ASKS = 3


async def confirmed_send(scope: CallScope, prepare: Callable[[], Any], send: Callable[[Any], Any],
                         exact: Callable[[Any], Mapping[str, Any]]) -> dict[str, Any]:
    """Build the request (`prepare`: it and whether it is confirmed, from the config as it stands), have the person
    confirm its exact document when it must be, build it again and send it (`send`) only if it is still exactly
    what was confirmed."""
    r = scope.request
    try:
        request, confirm = await prepare()
        if not confirm:
            result: dict[str, Any] = await send(request)
            return result
        summary = f"{r.server}.{r.tool} would send this request:"
        for _ in range(ASKS):
            await scope.confirm(summary, exact(request))
            again, _ = await prepare()
            if digest(exact(again)) == digest(exact(request)):
                result = await send(again)
                return result
            request = again  # what would go is not what was accepted: ask about what it is now
    except (BadArguments, document.DocumentError) as exc:
        raise CallError(f"{r.server}.{r.tool}: nothing was sent: {exc}") from None
    raise CallError(f"{r.server}.{r.tool}: nothing was sent: the request changed each time it was confirmed")


async def _secrets(server: str, entry: OpenApiServer | CommandsServer) -> dict[str, str]:
    """The entry's secrets from the keychain (the gateway had the person give those missing before the call)."""
    try:
        return await secrets.read(server, entry)
    except secrets.MissingSecrets as exc:
        raise BadArguments(str(exc)) from None


def _never_remembered(scope: CallScope) -> CallError:
    # neither kind remembers anything (upstream/kind.py: `remember`), so no daemon leaves one of their calls to follow
    return CallError(f"{scope.request.server}.{scope.request.tool}: a service's call is not continued after a "
                      "restart; nothing was sent since (call it again to be asked again)")


class OpenApiKind:
    """REST services from their OpenAPI documents: each document read once per entry, one HTTP client for all."""

    name = "openapi"
    entries: tuple[type[BaseModel], ...] = (OpenApiServer,)

    def __init__(self, host: UpstreamHost, base: Callable[[], Path]) -> None:
        """`base`: the directory a relative document path is read from (the config file's)."""
        self.host, self.base = host, base
        self._docs: dict[str, tuple[OpenApiServer, asyncio.Task[document.Document]]] = {}
        # server -> the document and entry its tools were chosen from, and those tools
        self._tools_of: dict[str, tuple[document.Document, OpenApiServer, dict[str, document.Operation]]] = {}
        self._http: aiohttp.ClientSession | None = None

    def start(self) -> None:
        return None  # nothing runs between calls

    def _entry(self, server: str) -> OpenApiServer:
        entry = self.host.entries().get(server)
        assert isinstance(entry, OpenApiServer), f"{server} is not an OpenAPI service"
        return entry

    async def doc(self, server: str, entry: OpenApiServer) -> document.Document:
        """The entry's document, read once (every caller waits on the one read)."""
        held = self._docs.get(server)
        failed = held is not None and held[1].done() and (held[1].cancelled() or held[1].exception() is not None)
        if held is None or held[0] != entry or failed:  # a read that failed is tried again at the next use
            base = self.base()
            read = asyncio.create_task(self._read(entry, base), name=f"mcpx-openapi-{server}")
            held = self._docs[server] = (entry, read)
        return await asyncio.shield(held[1])

    @staticmethod
    async def _read(entry: OpenApiServer, base: Path) -> document.Document:
        doc = document.document(await document.read(entry.openapi, base), entry.openapi)
        for why in doc.skipped:
            log.info("%s: an operation mcpx cannot send is not a tool: %s", doc.title, why)
        return doc

    async def operations(self, server: str, entry: OpenApiServer) -> dict[str, document.Operation]:
        """The operations that are tools: an allowed method, included (when `operations.include` names any) and not
        excluded."""
        doc = await self.doc(server, entry)
        held = self._tools_of.get(server)
        if held is not None and held[0] is doc and held[1] is entry:  # once per document and entry, not per call
            return held[2]
        ops = entry.operations
        tools = {op.name: op for op in doc.operations
                 if op.method in entry.methods and (not ops.include or op.named_by(ops.include))
                 and not op.named_by(ops.exclude)}
        self._tools_of[server] = (doc, entry, tools)
        return tools

    async def tools(self, server: str) -> list[dict[str, Any]]:
        try:
            return [op.tool() for op in (await self.operations(server, self._entry(server))).values()]
        except document.DocumentError as exc:
            raise UpstreamError(f"server {server!r}: {exc}") from None

    async def _base_url(self, server: str, entry: OpenApiServer) -> str:
        if entry.base_url:
            return entry.base_url
        doc = await self.doc(server, entry)
        if not doc.servers:
            raise BadArguments(f"server {server!r}: its document names no server: give baseUrl in its entry")
        first = doc.servers[0]
        if re.match(r"^https?://", first):
            return first
        if re.match(r"^https?://", entry.openapi):
            return urljoin(entry.openapi, first)
        raise BadArguments(f"server {server!r}: its document's first server {first!r} is relative to a file: give "
                           "baseUrl in its entry")

    @staticmethod
    async def _headers(server: str, entry: OpenApiServer) -> tuple[list[tuple[str, str]], set[str]]:
        """The entry's headers with ${NAME} filled from its secrets (the keychain) or else the daemon's environment,
        and which of them are secret (every one that has a reference)."""
        # looked up, not copied: os.environ decodes each variable as it is read (a copy costs ~0.1 ms a call)
        known = ChainMap(await _secrets(server, entry) if entry.secrets else {}, os.environ)
        out: list[tuple[str, str]] = []
        secret: set[str] = set()
        for key, value in entry.headers.items():
            refs = references(value)
            if missing := [name for name in refs if name not in known]:
                raise BadArguments(f"server {server!r}: its header {key} needs ${{{missing[0]}}}, which is neither "
                                   "one of its secrets nor set in the daemon's environment")
            out.append((key, filled(value, known)))
            if refs:
                secret.add(key)
        return out, secret

    async def protected(self, server: str) -> Protected | None:
        """What the service's login is for (upstream/kind.py's LoginKind), for `mcpx auth`: None without `auth`."""
        entry = self._entry(server)
        if entry.auth is None:
            return None
        try:
            return self._protected(entry, await self._base_url(server, entry))
        except (BadArguments, document.DocumentError) as exc:
            raise UpstreamError(str(exc)) from None

    @staticmethod
    def _protected(entry: OpenApiServer, base_url: str) -> Protected:
        assert entry.auth is not None
        return Protected(url=base_url, auth=entry.auth, ttl=entry.elicit.ttl)

    async def _login(self, scope: CallScope, entry: OpenApiServer, base_url: str) -> Authorizer | None:
        """The service's login, when its entry has `auth`: its token held (kept, or refreshed if it is about to
        expire); CallError when there is none, on which the gateway asks the person to log in and calls again."""
        r = scope.request
        if entry.auth is None:
            return None
        login = self.host.authorizer(r.server, self._protected(entry, base_url))
        if await login.authorization() is None:
            # no token yet: as if the service had said 401 (discovery, then what the keychain keeps), before
            # anything is sent, a write above all
            refused = await login.challenged(401, None)
            if refused is not None:
                raise CallError(f"{r.server}.{r.tool} was not sent: {refused}")
        return login

    @staticmethod
    async def _authorized(scope: CallScope, request: http.HttpRequest, login: Authorizer | None) -> http.HttpRequest:
        """`request` with the login's header (masked in what is shown: a refreshed token is the same request)."""
        if login is None:
            return request
        authorization = await login.authorization()
        if authorization is None:
            raise CallError(f"{scope.request.server}.{scope.request.tool} was not sent: its login ended meanwhile")
        scope.secret(authorization.partition(" ")[2])
        headers = [(k, authorization if k == "Authorization" else v) for k, v in request.headers]
        return request.model_copy(update={"headers": headers})

    async def call(self, scope: CallScope) -> dict[str, Any]:
        r = scope.request
        login: Authorizer | None = None

        async def prepare() -> tuple[http.HttpRequest, bool]:
            nonlocal login
            # the entry as it stands now: a config reloaded while the person was reading is seen before sending
            entry = self.host.entries().get(r.server)
            if not isinstance(entry, OpenApiServer):
                raise BadArguments(f"server {r.server!r} is no longer an OpenAPI service of the config")
            op = (await self.operations(r.server, entry)).get(r.tool)
            if op is None:
                raise BadArguments(f"server {r.server!r} has no tool {r.tool!r} (its document, methods and "
                                   "operations decide its tools: `mcpx tools` lists them)")
            headers, secret = await self._headers(r.server, entry)
            for name, value in headers:
                if name in secret:
                    scope.secret(value)
            base_url = await self._base_url(r.server, entry)
            login = await self._login(scope, entry, base_url)
            if login is not None:  # its value is put in as the request goes (_authorized); never shown
                headers.append(("Authorization", "Bearer"))
                secret.add("Authorization")
            request = http.build(op, r.arguments, base_url, headers, secret)
            return request, op.method in entry.confirmed

        async def send(request: http.HttpRequest) -> dict[str, Any]:
            if self._http is None:
                self._http = aiohttp.ClientSession()
            try:
                for _attempt in range(2):
                    sent = await self._authorized(scope, request, login)
                    response = await scope.deadline.run(http.send(self._http, sent, scope.entry.timeout),
                                                        f"{r.server}.{r.tool}")
                    if login is None or response.challenge is None:
                        break
                    # refused its token (expired early, revoked): refreshed, the same request goes once more;
                    # else the login is needed again, and the gateway asks for it
                    refused = await login.challenged(response.status, response.challenge)
                    if refused is not None:
                        raise CallError(f"{r.server}.{r.tool}: {refused}")
                return http.result(response, request.url)
            except aiohttp.ClientError as exc:
                return {"content": [{"type": "text", "text": f"{request.method} {request.url} failed: "
                                     f"{exc or type(exc).__name__}"}], "isError": True}

        return await confirmed_send(scope, prepare, send, lambda req: req.exact)

    async def follow(self, scope: CallScope, state: Mapping[str, Any]) -> dict[str, Any]:
        raise _never_remembered(scope)

    async def instances(self) -> list[InstanceInfo]:
        return []

    async def reconfigure(self) -> None:
        entries = self.host.entries()
        for server in [s for s, (entry, _) in self._docs.items() if entries.get(s) != entry]:
            del self._docs[server]
            self._tools_of.pop(server, None)

    async def stop(self) -> None:
        for _, read in self._docs.values():
            read.cancel()
        self._docs.clear()
        self._tools_of.clear()
        if self._http is not None:
            await self._http.close()
            self._http = None


class CommandKind:
    """Commands as tools: each call one process, started without a shell and ended with the call."""

    name = "command"
    entries: tuple[type[BaseModel], ...] = (CommandsServer,)

    def __init__(self, host: UpstreamHost, base: Callable[[], Path]) -> None:
        """`base`: the directory a relative `cwd` is taken from (the config file's)."""
        self.host, self.base = host, base

    def start(self) -> None:
        return None  # nothing runs between calls

    async def tools(self, server: str) -> list[dict[str, Any]]:
        entry = self.host.entries().get(server)
        assert isinstance(entry, CommandsServer), f"{server} is not a commands entry"
        return [commands.tool(name, c) for name, c in entry.commands.items()]

    async def call(self, scope: CallScope) -> dict[str, Any]:
        r = scope.request

        async def prepare() -> tuple[commands.CommandRun, bool]:
            # the entry as it stands now: a config reloaded while the person was reading is seen before running
            entry = self.host.entries().get(r.server)
            if not isinstance(entry, CommandsServer):
                raise BadArguments(f"server {r.server!r} is no longer a commands entry of the config")
            command = entry.commands.get(r.tool)
            if command is None:
                raise BadArguments(f"server {r.server!r} has no command {r.tool!r} (it has: "
                                   f"{', '.join(sorted(entry.commands))})")
            held = await _secrets(r.server, entry)
            for value in held.values():
                scope.secret(value)
            run = commands.build(r.server, r.tool, command, r.arguments, self.base(), entry.timeout, held)
            return run, not command.read_only

        async def send(run: commands.CommandRun) -> dict[str, Any]:
            return await commands.run(run)

        return await confirmed_send(scope, prepare, send, lambda run: run.exact)

    async def follow(self, scope: CallScope, state: Mapping[str, Any]) -> dict[str, Any]:
        raise _never_remembered(scope)

    async def instances(self) -> list[InstanceInfo]:
        return []

    async def reconfigure(self) -> None:
        return None  # nothing is kept per entry

    async def stop(self) -> None:
        return None  # each run ends with its call


def service_kinds(base: Callable[[], Path]) -> list[KindFactory]:
    """The two kinds, as the gateway is handed them (upstream/kind.py); `base`: the directory a relative path in an
    entry is read from (the config file's)."""
    return [lambda host: OpenApiKind(host, base), lambda host: CommandKind(host, base)]

