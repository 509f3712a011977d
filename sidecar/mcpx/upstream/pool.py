"""A small pool of upstream instances, keyed by server and session.

On stdio nothing on the wire says which call a pushed `elicitation/create` belongs to, so a
legacy instance carries one call at a time and each session gets its own instances: a
question is then always attributed exactly, never guessed. Modern instances are stateless
and are shared. Instances start on first use, are replaced when they die, and idle ones
are closed after a while.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcpx.config import ServerConfig
from mcpx.mcp.protocol import Era
from mcpx.upstream.connection import UpstreamConnection, UpstreamError, open_connection

log = logging.getLogger("mcpx.upstream")

PER_KEY = 4  # instances one session may have of one server
IDLE_CLOSE = 300.0


_fingerprints: dict[int, tuple[ServerConfig, str]] = {}


def entry_fingerprint(entry: ServerConfig) -> str:
    """Which configuration of a server this is (a changed entry is a different server); cached per entry object."""
    cached = _fingerprints.get(id(entry))
    if cached is not None and cached[0] is entry:
        return cached[1]
    fp = hashlib.sha256(json.dumps(entry.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:12]
    if len(_fingerprints) > 1000:
        _fingerprints.clear()
    _fingerprints[id(entry)] = (entry, fp)
    return fp


@dataclass
class Instance:
    conn: UpstreamConnection
    fingerprint: str
    busy: int = 0
    last_used: float = field(default_factory=time.monotonic)
    retired: bool = False  # close once its call is done (its era turned out wrong for this server)

    @property
    def era(self) -> Era | None:
        return self.conn.era


EraMemory = Callable[[str, str], Awaitable[Era | None]]
EraRecord = Callable[[str, str, Era], Awaitable[None]]


class Pool:
    def __init__(self, entries: Callable[[], dict[str, ServerConfig]], recall: EraMemory, remember: EraRecord,
                 on_tools_changed: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._entries = entries
        self._recall = recall
        self._remember = remember
        self._on_tools_changed = on_tools_changed
        self._instances: dict[tuple[str, str], list[Instance]] = {}
        self._starting: dict[tuple[str, str], int] = {}
        self._eras: dict[tuple[str, str], Era] = {}  # what each server (as configured) turned out to speak
        self._freed = asyncio.Condition()
        self._reaper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reaper = asyncio.create_task(self._reap(), name="mcpx-pool-reaper")

    def entry(self, server: str) -> ServerConfig:
        entry = self._entries().get(server)
        if entry is None:
            known = ", ".join(sorted(self._entries())) or "none are configured"
            raise UnknownServer(f"no server {server!r} behind mcpx ({known})")
        return entry

    def instances(self, server: str | None = None) -> list[Instance]:
        return [i for (s, _), group in self._instances.items() if server in (None, s) for i in group]

    async def known_era(self, server: str, fp: str) -> Era | None:
        if (server, fp) not in self._eras:
            era = await self._recall(server, fp)
            if era is not None:
                self._eras[(server, fp)] = era
        return self._eras.get((server, fp))

    async def learn_era(self, server: str, fp: str, era: Era) -> None:
        self._eras[(server, fp)] = era
        await self._remember(server, fp, era)

    async def _start(self, server: str, session: str, entry: ServerConfig, want: Era | None,
                     declared: dict[str, Any] | None) -> Instance:
        fp = entry_fingerprint(entry)
        hint = want or await self.known_era(server, fp)
        conn = await open_connection(server, entry, session, hint, declared)
        if conn.era is not None and want is None and hint is None:
            await self.learn_era(server, fp, conn.era)

        async def changed() -> None:
            if self._on_tools_changed is not None:
                await self._on_tools_changed(server)

        conn.on_tools_changed = changed
        return Instance(conn, fp)

    @contextlib.asynccontextmanager
    async def lease(self, server: str, session: str, era: Era | None = None, timeout: float = 60.0,
                    declared: dict[str, Any] | None = None) -> AsyncIterator[UpstreamConnection]:
        """An instance of `server` for `session`'s call: exclusive when legacy, shared when modern.

        `declared` is what the instance tells the server mcpx can deliver (by default mcpx's own
        capabilities); instances that declared something else are kept apart.
        """
        key = (server, session if declared is None else f"{session}|{json.dumps(declared, sort_keys=True)}")
        inst = await self._acquire(server, key, era, timeout, declared)
        try:
            yield inst.conn
        finally:
            inst.busy -= 1
            inst.last_used = time.monotonic()
            if inst.retired and inst.busy == 0:
                group = self._instances.get(key, [])
                if inst in group:
                    group.remove(inst)
                asyncio.create_task(inst.conn.close())
            async with self._freed:
                self._freed.notify_all()

    def retire(self, conn: UpstreamConnection) -> None:
        """This instance speaks the wrong era for its server: no new call gets it, and it closes when free."""
        for inst in self.instances():
            if inst.conn is conn:
                inst.retired = True

    async def _acquire(self, server: str, key: tuple[str, str], era: Era | None, timeout: float,
                       declared: dict[str, Any] | None) -> Instance:
        entry = self.entry(server)
        fp = entry_fingerprint(entry)
        session = key[1].split("|", 1)[0]
        deadline = time.monotonic() + timeout
        era = era or await self.known_era(server, fp)
        while True:
            group = self._instances.setdefault(key, [])
            for dead in [i for i in group if not i.conn.alive or i.fingerprint != fp and i.busy == 0]:
                group.remove(dead)
                asyncio.create_task(dead.conn.close())
            for inst in group:
                if inst.retired or inst.fingerprint != fp or (era is not None and inst.era != era):
                    continue
                if inst.era == "modern" or inst.busy == 0:
                    inst.busy += 1
                    return inst
            if len(group) + self._starting.get(key, 0) < PER_KEY:
                self._starting[key] = self._starting.get(key, 0) + 1
                try:
                    inst = await self._start(server, session, entry, era, declared)
                finally:
                    self._starting[key] -= 1
                inst.busy += 1
                self._instances.setdefault(key, []).append(inst)
                return inst
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamError(f"server {server!r}: all {PER_KEY} instances for this session are busy; "
                                    f"gave up after {timeout:.0f}s")
            async with self._freed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), min(left, 1.0))

    async def drop(self, server: str | None = None, only_idle: bool = False) -> None:
        for key in list(self._instances):
            if server is not None and key[0] != server:
                continue
            group = self._instances[key]
            for inst in list(group):
                if only_idle and inst.busy:
                    continue
                group.remove(inst)
                await inst.conn.close()
            if not group:
                self._instances.pop(key, None)

    async def reconfigure(self) -> None:
        """Servers gone from the config are closed; changed ones are replaced as their instances free up."""
        entries = self._entries()
        for key in list(self._instances):
            server = key[0]
            if server not in entries:
                await self.drop(server)
            else:
                fp = entry_fingerprint(entries[server])
                for inst in list(self._instances.get(key, [])):
                    if inst.fingerprint != fp and inst.busy == 0:
                        self._instances[key].remove(inst)
                        await inst.conn.close()

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(30)
            now = time.monotonic()
            for group in list(self._instances.values()):
                for inst in list(group):
                    if inst.busy == 0 and (now - inst.last_used > IDLE_CLOSE or not inst.conn.alive):
                        group.remove(inst)
                        await inst.conn.close()

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        await asyncio.gather(*(i.conn.close() for i in self.instances()), return_exceptions=True)
        self._instances.clear()


class UnknownServer(UpstreamError):
    pass
