"""The two kinds of service as the gateway uses them: list the tools, prepare a call (the exact request or run,
and whether it must be confirmed), send what was prepared.

A kind is built from its config entry and kept while the entry is unchanged (`Services`); an OpenAPI document is
read once, at the first listing or call.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import aiohttp

from mcpx.config import CommandsServer, OpenApiServer, ServiceConfig
from mcpx.errors import McpxError
from mcpx.services import commands, document, http
from mcpx.services.http import BadArguments
from mcpx.services.outgoing import Outgoing
from mcpx.upstream.environment import filled, references


class UnknownTool(McpxError):
    pass


class Prepared:
    """A call made ready: what will be sent (`outgoing`), whether the person confirms it first, and how to send it."""

    def __init__(self, outgoing: Outgoing, confirm: bool, request: http.HttpRequest | commands.CommandRun) -> None:
        self.outgoing, self.confirm, self.request = outgoing, confirm, request


def confirmed_name(name: str, patterns: list[str]) -> bool:
    """Whether a tool's name is one of `patterns` (names or globs: delete_*)."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class OpenApiKind:
    def __init__(self, name: str, entry: OpenApiServer, base: Path) -> None:
        self.name, self.entry, self.base = name, entry, base
        self._doc: document.Document | None = None
        self._reading = asyncio.Lock()
        self._http: aiohttp.ClientSession | None = None

    async def doc(self) -> document.Document:
        async with self._reading:
            if self._doc is None:
                raw = await document.read(self.entry.openapi, self.base)
                self._doc = document.document(raw, self.entry.openapi)
            return self._doc

    async def operations(self) -> dict[str, document.Operation]:
        """The operations that are tools: an allowed method, included (when `operations.include` names any) and not
        excluded."""
        ops = self.entry.operations
        return {op.name: op for op in (await self.doc()).operations
                if op.method in self.entry.methods and (not ops.include or op.named_by(ops.include))
                and not op.named_by(ops.exclude)}

    async def tools(self) -> list[dict[str, Any]]:
        return [op.tool() for op in (await self.operations()).values()]

    async def base_url(self) -> str:
        if self.entry.base_url:
            return self.entry.base_url
        doc = await self.doc()
        if not doc.servers:
            raise BadArguments(f"server {self.name!r}: its document names no server: give baseUrl in its entry")
        first = doc.servers[0]
        if re.match(r"^https?://", first):
            return first
        if re.match(r"^https?://", self.entry.openapi):
            return urljoin(self.entry.openapi, first)
        raise BadArguments(f"server {self.name!r}: its document's first server {first!r} is relative to a file: give "
                           "baseUrl in its entry")

    def headers(self) -> tuple[list[tuple[str, str]], set[str]]:
        """The entry's headers with ${NAME} filled from the daemon's environment, and which of them are secret."""
        out: list[tuple[str, str]] = []
        secret: set[str] = set()
        for key, value in self.entry.headers.items():
            refs = references(value)
            missing = [r for r in refs if r not in os.environ]
            if missing:
                raise BadArguments(f"server {self.name!r}: its header {key} needs ${{{missing[0]}}}, which is not set "
                                   "in the daemon's environment")
            out.append((key, filled(value, os.environ)))
            if refs:
                secret.add(key.lower())
        return out, secret

    async def prepare(self, tool: str, arguments: dict[str, Any]) -> Prepared:
        op = (await self.operations()).get(tool)
        if op is None:
            raise UnknownTool(f"server {self.name!r} has no tool {tool!r}")
        headers, secret = self.headers()
        request = http.build(self.name, op, arguments, await self.base_url(), headers, secret)
        return Prepared(request.outgoing, op.method in self.entry.confirmed, request)

    async def send(self, prepared: Prepared) -> dict[str, Any]:
        assert isinstance(prepared.request, http.HttpRequest)
        if self._http is None:
            self._http = aiohttp.ClientSession()
        try:
            return await http.send(self._http, prepared.request, self.entry.timeout)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return {"content": [{"type": "text", "text": f"{prepared.request.method} to {self.name} failed: "
                                 f"{exc or type(exc).__name__}"}], "isError": True}

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()


class CommandKind:
    def __init__(self, name: str, entry: CommandsServer, base: Path) -> None:
        self.name, self.entry, self.base = name, entry, base

    async def tools(self) -> list[dict[str, Any]]:
        return [commands.tool(name, c) for name, c in self.entry.commands.items()]

    async def prepare(self, tool: str, arguments: dict[str, Any]) -> Prepared:
        command = self.entry.commands.get(tool)
        if command is None:
            raise UnknownTool(f"server {self.name!r} has no command {tool!r}")
        run = commands.build(self.name, tool, command, arguments, self.base, self.entry.timeout)
        return Prepared(run.outgoing, not command.read_only, run)

    async def send(self, prepared: Prepared) -> dict[str, Any]:
        assert isinstance(prepared.request, commands.CommandRun)
        return await commands.run(prepared.request)

    async def close(self) -> None:
        return None


Kind = OpenApiKind | CommandKind


class Services:
    """The kinds of the config's service entries, each built once per entry as it stands."""

    def __init__(self) -> None:
        self._kinds: dict[str, tuple[ServiceConfig, Kind]] = {}
        self._retired: list[Kind] = []  # kinds of entries since changed: closed with the rest

    def kind(self, name: str, entry: ServiceConfig, base: Path) -> Kind:
        held = self._kinds.get(name)
        if held is not None and held[0] == entry:
            return held[1]
        kind: Kind = OpenApiKind(name, entry, base) if isinstance(entry, OpenApiServer) else \
            CommandKind(name, entry, base)
        if held is not None:
            self._retired.append(held[1])
        self._kinds[name] = (entry, kind)
        return kind

    async def close(self) -> None:
        for kind in [k for _, k in self._kinds.values()] + self._retired:
            await kind.close()
        self._kinds.clear()
        self._retired.clear()
