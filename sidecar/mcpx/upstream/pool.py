"""The upstream instances: one shared where the era allows it, the session's own where it must be, stopped when idle.

Modern era: a server's questions come back in the call's own result (`input_required`), so any
number of calls from any session share one instance. Legacy era: a legacy server keeps state per
connection (the roots it listed, a login), so each session has its own instances (unless the server's roots are
not its caller's, config `roots`: then every session shares them, upstream/roots.py); and a pushed
`elicitation/create` names no call, so the calls of a tool that asks (or has not yet been seen
to finish without asking) run one at a time, while the calls of tools seen to finish without
asking share an instance, as long as nothing the server asked is pending on it (past CROWDED of them, another of
the session's instances takes a share: one process's one core would bound them). A transparent
client (`/mcp/SERVER`, with its own capabilities) has its session's own instances in either era:
the server sees one connection per client, notifications included, as if mcpx were not there.
Instances start on first use, are replaced when they die, and stop once idle for their server's
`idleTimeout` — all but one: of a session's idle instances of a server, the one used last is kept for the next
call, and the others (spares: left over from calls that ran side by side) stop after SPARE_IDLE; so does an idle
instance started only to list a server's tools once the server has another (a listing takes any idle one).
Each legacy instance is a whole server process, often ~90 MiB: a few dozen calls must not leave a dozen behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from mcpx.config.models import HttpServer, ServerConfig
from mcpx.mcp.http_client import Authorizer
from mcpx.mcp.protocol import Era
from mcpx.mcp.stdio import Spawned
from mcpx.shared.upstream_errors import UnknownServer, UpstreamError
from mcpx.upstream import procinfo
from mcpx.upstream.connection import UpstreamConnection, open_connection
from mcpx.upstream.hooks import Events
from mcpx.upstream.kind import InstanceInfo
from mcpx.upstream.roots import per_caller

log = logging.getLogger("mcpx.upstream")

ANY = "*"              # the session of a lease that only lists a server: any idle instance will do
SHARED = "(shared)"    # the owner of an instance every session uses
COMMON = "(common)"    # the owner of a legacy instance every session uses: its server's roots are not its caller's
LISTING = "(listing)"  # the owner of a legacy instance started to list a server, not for any session's call
FIRST = "(first)"      # the gate of a server's first start, before its era is known
PER_SESSION = 4        # legacy instances one session may have of one server
CROWDED = 8            # quiet calls in flight on one legacy instance past which another of the session's takes a share
REAP_EVERY = 30.0      # the longest the reaper sleeps: how soon an instance that died leaves the pool
SPARE_IDLE = 30.0      # how long a spare idle instance is kept (its server's idleTimeout, when that is shorter)

# what a server is, as far as its process goes: the daemon's own knobs change no instance
_DAEMON_SIDE = {"timeout", "idle_timeout", "elicit", "enabled"}
_fingerprints: dict[int, tuple[ServerConfig, str]] = {}


def entry_fingerprint(entry: ServerConfig) -> str:
    """Which server this is, by how it is started or reached (a changed command is a different server); cached."""
    cached = _fingerprints.get(id(entry))
    if cached is not None and cached[0] is entry:
        return cached[1]
    shape = entry.model_dump(mode="json", exclude=_DAEMON_SIDE)
    fp = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:12]
    if len(_fingerprints) > 1000:
        _fingerprints.clear()
    _fingerprints[id(entry)] = (entry, fp)
    return fp


GroupKey = tuple[str, str, str]  # server, owner (a session, SHARED or LISTING), declared capabilities as JSON
ToolAsks = Literal["asks", "quiet"]  # what a tool's calls were seen to do: ask something, or finish without asking


@dataclass(eq=False)
class Instance:
    conn: UpstreamConnection
    fingerprint: str
    server: str
    owner: str
    declared: str  # "" for mcpx's own capabilities
    wanted: Era | None = None  # the era it was started for (a transparent client's), whatever it turned out to speak
    busy: int = 0
    calling: Counter[str] = field(default_factory=Counter)  # sessions with a lease on it now
    tools: Counter[str] = field(default_factory=Counter)  # the tools of the calls on it now
    last_used: float = field(default_factory=time.monotonic)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    retired: bool = False  # close once its call is done (its era turned out wrong for this server)

    @property
    def era(self) -> Era | None:
        return self.conn.era

    @property
    def key(self) -> GroupKey:
        return (self.server, self.owner, self.declared)

    def serves(self, era: Era | None) -> bool:
        return era is None or era in (self.era, self.wanted)


EraMemory = Callable[[str, str], Awaitable[Era | None]]
EraRecord = Callable[[str, str, Era], Awaitable[None]]


class Pool:
    def __init__(self, entries: Callable[[], dict[str, ServerConfig]], recall: EraMemory, remember: EraRecord,
                 on_tools_changed: Callable[[str], Awaitable[None]] | None = None, spawned: Spawned | None = None,
                 authorizer: Callable[[str, HttpServer], Authorizer] | None = None) -> None:
        self._entries = entries
        self._spawned = spawned  # told of each server process (upstream/children.py)
        self._authorizer = authorizer  # an HTTP server's login (oauth/logins.py), handed to its channel
        self._recall = recall
        self._remember = remember
        self._on_tools_changed = on_tools_changed
        self._groups: dict[GroupKey, list[Instance]] = {}
        self._starting: Counter[GroupKey] = Counter()
        # a start that others wait for instead of repeating it: the outcome is the error it ended with, or None
        self._gates: dict[GroupKey, asyncio.Future[BaseException | None]] = {}
        self._eras: dict[tuple[str, str], Era] = {}  # what each server (as configured) turned out to speak
        self._freed = asyncio.Event()  # set (and replaced) when an instance may take a call it could not before
        self._waiting = 0  # leases waiting on _freed
        # (server, fingerprint) -> tool -> what its calls were seen to do
        self._tool_asks: dict[tuple[str, str], dict[str, ToolAsks]] = {}
        self._wake = asyncio.Event()  # an instance fell idle or the config changed: the reaper looks again
        self._next_reap = 0.0  # when the reaper looks next, unless woken
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._spreading: set[asyncio.Task[None]] = set()  # instances started beside a crowded one (_spread)

    def start(self) -> None:
        self._reaper = asyncio.create_task(self._reap(), name="mcpx-pool-reaper")

    def entry(self, server: str) -> ServerConfig:
        entry = self._entries().get(server)
        if entry is None:
            known = ", ".join(sorted(self._entries())) or "none are configured"
            raise UnknownServer(f"no server {server!r} behind mcpx ({known})")
        return entry

    def instances(self, server: str | None = None) -> list[Instance]:
        return [i for key, group in self._groups.items() if server in (None, key[0]) for i in group]

    async def known_era(self, server: str, fp: str) -> Era | None:
        if (server, fp) not in self._eras:
            era = await self._recall(server, fp)
            if era is not None:
                self._eras[(server, fp)] = era
        return self._eras.get((server, fp))

    async def learn_era(self, server: str, fp: str, era: Era) -> None:
        self._eras[(server, fp)] = era
        await self._remember(server, fp, era)

    # ---- leases

    def lease(self, server: str, session: str, era: Era | None = None, timeout: float = 60.0,
              declared: dict[str, Any] | None = None, tool: str | None = None) -> Lease:
        """An instance of `server` for a call of `session` to `tool`: shared when modern; the session's own
        when legacy, shared by its calls of quiet tools and the call's alone otherwise (and a request that
        is no tool call has one to itself). `session` ANY only lists the server: any idle instance will do.

        `declared` is what the instance tells the server mcpx can deliver (by default mcpx's own
        capabilities); instances that declared something else are kept apart.
        """
        return Lease(self, server, session, era, timeout, declared, tool)

    def lease_now(self, server: str, entry: ServerConfig, fp: str, session: str, tool: str) -> Lease | None:
        """A lease on an instance to be had at once, taken already (`async with` it gives it back), for a call of
        `session` to `tool` of `server` (its config `entry` and its fingerprint `fp`, looked up by the caller) with
        mcpx's own capabilities: None when one would be waited for (the server's era not known in memory yet, no
        instance free, one to start). A plain call's lean path (upstream/gateway.py's `start_lean`) takes one so, or
        goes the full way."""
        want = self._eras.get((server, fp))
        if want is None:
            return None
        found = self._find(server, session, want, fp, "", tool, self._owner(entry, session, ""))
        if found is None or not found.conn.alive:
            return None  # a dead one is the full path's to sweep out, as it starts another
        lease = Lease(self, server, session, None, 0.0, None, tool)
        lease.inst = self._take(found, session, tool)
        return lease

    def _release(self, inst: Instance, session: str, tool: str | None) -> None:
        self._give_back(inst, session, tool)
        inst.last_used = time.monotonic()
        if inst.retired and inst.busy == 0:
            self._stop(inst)
        elif inst.busy == 0:
            # alone in its group and no listing's, it is no spare: its due time needs no look at the others (which
            # would sort every instance on every call's way back)
            alone = len(self._groups.get(inst.key, ())) <= 1
            if not alone or self._due(inst, set() if inst.owner != LISTING else None) < self._next_reap:
                # its idle clock starts now, and runs out before the reaper would look; or it makes an older idle
                # instance beside it a spare, due sooner
                self._wake.set()
        if self._waiting:  # _poke's own test, here: with no lease waiting (nearly always) no call on the way back
            self._poke()

    def _poke(self) -> None:
        """Wake the leases waiting for an instance: one fell free, or stopped waiting for an answer. With none
        waiting, nothing: a lease that waits later waits for the next poke (not a new Event per call)."""
        if self._waiting:
            self._freed.set()
            self._freed = asyncio.Event()

    def tool_asks(self, server: str, fp: str, tool: str | None) -> ToolAsks | None:
        """What calls of `tool` were seen to do on this server (as configured now); None: not seen yet, or
        not a tool call (a listing, a forwarded prompts/get: it takes an idle instance, as it always did)."""
        return None if tool is None else self._tool_asks.get((server, fp), {}).get(tool)

    def _learn(self, server: str, fp: str, tool: str, asks: bool) -> None:
        """A call of `tool` asked (it runs alone from now on, for good) or finished without asking."""
        seen = self._tool_asks.setdefault((server, fp), {})
        if seen.get(tool) == "asks" or (not asks and tool in seen):
            return
        seen[tool] = "asks" if asks else "quiet"
        if asks:
            log.info("upstream %s: %s asks mid-call; its calls run one at a time on an instance", server, tool)

    def renew(self, server: str) -> tuple[int, int]:
        """Every instance of `server` is replaced: an idle one stops at once, a busy one once its calls are done (its
        secrets changed: a process keeps the environment it started with). (stopped, still busy)."""
        stopped = busy = 0
        for inst in self.instances(server):
            if inst.busy:
                inst.retired = True
                busy += 1
            else:
                self._stop(inst)
                stopped += 1
        if stopped or busy:
            log.info("upstream %s: its secrets changed; %d idle instance(s) stopped, %d to stop once free", server,
                     stopped, busy)
        return stopped, busy

    def retire(self, conn: UpstreamConnection) -> None:
        """This instance speaks the wrong era for its server: no new call gets it, and it closes when free."""
        for inst in self.instances():
            if inst.conn is conn:
                inst.retired = True

    async def _acquire(self, server: str, session: str, era: Era | None, timeout: float, decl: str,
                       declared: dict[str, Any] | None, tool: str | None) -> Instance:
        entry = self.entry(server)
        fp = entry_fingerprint(entry)
        deadline = time.monotonic() + timeout
        while True:
            want = era or await self.known_era(server, fp)
            self._sweep(server, fp)
            found = self._find(server, session, want, fp, decl, tool, self._owner(entry, session, decl))
            if found is not None:
                return self._take(found, session, tool)
            if want != "legacy":
                # one start serves everyone: the modern instance, or the first start that learns the era
                gate = (server, FIRST if want is None else SHARED if not decl else session, decl)
                running = self._gates.get(gate)
                if running is None:
                    return self._take(await self._gated_start(gate, server, session, entry, era, declared, decl),
                                      session, tool)
                failed = await asyncio.shield(running)
                if failed is not None:
                    raise UpstreamError(str(failed))
                continue
            key = (server, self._owner(entry, session, decl), decl)
            quiet_wait = self._starting[key] and self.tool_asks(server, fp, tool) == "quiet"  # it can join that one
            if not quiet_wait and self._room(server, key[1], decl, session):
                self._starting[key] += 1
                try:
                    inst = await self._start(server, session, entry, era, declared, decl)
                finally:
                    self._starting[key] -= 1
                    self._poke()
                return self._take(inst, session, tool)
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamError(f"server {server!r}: all {PER_SESSION} instances for this session are busy; "
                                    f"gave up after {timeout:.0f}s")
            self._waiting += 1
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), min(left, 1.0))
            finally:
                self._waiting -= 1

    @staticmethod
    def _owner(entry: ServerConfig, session: str, decl: str) -> str:
        """Whose legacy instances a call of `session` may use: LISTING's for a listing; every session's when the
        server's roots are not its caller's (then nothing of its connection is one session's) and no transparent
        client declared its own capabilities; else the session's own."""
        if session == ANY:
            return LISTING
        return COMMON if not decl and not per_caller(entry) else session

    def _find(self, server: str, session: str, want: Era | None, fp: str, decl: str,
              tool: str | None, owner: str) -> Instance | None:
        """For a quiet tool, the busiest instance it may join that is not crowded; else an idle one; else the least
        busy crowded one (and another is started beside it); else none.

        Quiet calls gather on one instance rather than spread over idle ones: a server process with many
        calls in flight reads and writes them in batches, spending less CPU on each (bench/gateway.py;
        docs/bench.md has the figures), and the instances left idle are stopped after their idleTimeout. Past
        CROWDED calls on one, the server process's one core is what bounds them (bench/cores.py), and the
        session's next instance takes its share.
        """
        joins = self.tool_asks(server, fp, tool) == "quiet"
        idle: Instance | None = None
        busiest: Instance | None = None
        crowded: Instance | None = None
        for inst in self.instances(server):
            if inst.retired or inst.fingerprint != fp or inst.declared != decl or not inst.serves(want):
                continue
            if inst.era == "modern" and inst.owner in (SHARED, session):
                return inst  # modern calls share an instance: each question comes back in its own call's result
            if inst.busy == 0 and (session == ANY or inst.owner in (owner, LISTING)):
                if inst.owner == LISTING and session != ANY and not self._room(server, owner, decl, session):
                    continue  # adopting it would take the session past PER_SESSION: it is left to idle out
                if idle is None or (idle.owner == LISTING and inst.owner == owner):
                    idle = inst
            elif joins and inst.owner == owner and self._joinable(inst):
                if inst.busy >= CROWDED:
                    crowded = inst if crowded is None or inst.busy < crowded.busy else crowded
                elif busiest is None or inst.busy > busiest.busy:
                    busiest = inst
        if busiest is not None:
            return busiest
        if idle is not None and idle.owner == LISTING and session != ANY:
            self._move(idle, owner)  # it only listed tools: the first session to call makes it its own
        if idle is None and crowded is not None and not decl:
            self._spread(server, session, owner)
            return crowded
        return idle

    def _spread(self, server: str, session: str, owner: str) -> None:
        """Start one more legacy instance for `owner`'s quiet calls, in the background, if it has room and none is
        starting: the calls go on joining the crowded one meanwhile, so none waits for a process to start."""
        key = (server, owner, "")
        if self._starting[key] or not self._room(server, owner, "", session):
            return
        self._starting[key] += 1

        async def spread() -> None:
            try:
                inst = await self._start(server, session, self.entry(server), None, None, "")
                log.info("upstream %s: %d or more calls in flight on one instance; another (%s) takes a share", server,
                         CROWDED, inst.conn.pid or inst.conn.describe())
            except UpstreamError as exc:
                log.warning("upstream %s: another instance for its calls in flight did not start: %s", server, exc)
            except Exception:  # a task nobody awaits: what it raised is said here or nowhere
                log.exception("upstream %s: another instance for its calls in flight did not start", server)
            finally:
                self._starting[key] -= 1
                self._poke()

        task = asyncio.create_task(spread(), name=f"mcpx-spread-{server}")
        self._spreading.add(task)
        task.add_done_callback(self._spreading.discard)

    def _room(self, server: str, owner: str, decl: str, session: str) -> bool:
        """Whether `owner` (`session`, or COMMON for it) may have one more legacy instance of `server`: PER_SESSION for
        a session's own; for COMMON's, PER_SESSION for each session calling on them, `session` included."""
        key = (server, owner, decl)
        group = self._groups.get(key, [])
        sessions = len({s for inst in group for s in inst.calling} | {session}) if owner == COMMON else 1
        return len(group) + self._starting[key] < PER_SESSION * sessions

    def _joinable(self, inst: Instance) -> bool:
        """A busy legacy instance takes another quiet call while every lease on it is a quiet call and nothing
        the server asked is pending: a question that comes then has one call to be from, or the calls on it
        finish."""
        quiet = sum(inst.tools.values()) == inst.busy and all(
            self.tool_asks(inst.server, inst.fingerprint, t) == "quiet" for t in inst.tools)
        return inst.era == "legacy" and inst.conn.alive and not inst.conn.asking and quiet

    def _move(self, inst: Instance, owner: str) -> None:
        self._remove(inst)
        inst.owner = owner
        self._groups.setdefault(inst.key, []).append(inst)

    @staticmethod
    def _take(inst: Instance, session: str, tool: str | None) -> Instance:
        # get() rather than Counter's += : a key that _give_back took away (nearly every call's session and tool,
        # once its last lease ended) is not looked for again through Counter.__missing__, a Python call
        inst.busy += 1
        inst.calling[session] = inst.calling.get(session, 0) + 1
        if tool is not None:
            inst.tools[tool] = inst.tools.get(tool, 0) + 1
        return inst

    @staticmethod
    def _give_back(inst: Instance, session: str, tool: str | None) -> None:
        """What _take counted, uncounted: a session or tool with no lease left is gone from its Counter."""
        inst.busy -= 1
        _uncount(inst.calling, session)
        if tool is not None:
            _uncount(inst.tools, tool)

    async def _gated_start(self, gate: GroupKey, server: str, session: str, entry: ServerConfig, era: Era | None,
                           declared: dict[str, Any] | None, decl: str) -> Instance:
        outcome: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self._gates[gate] = outcome
        failed: BaseException | None = None
        try:
            return await self._start(server, session, entry, era, declared, decl)
        except UpstreamError as exc:
            failed = exc  # those waiting for this start hear why it failed; a cancelled start, they retry
            raise
        finally:
            del self._gates[gate]
            outcome.set_result(failed)

    async def _start(self, server: str, session: str, entry: ServerConfig, want: Era | None,
                     declared: dict[str, Any] | None, decl: str) -> Instance:
        fp = entry_fingerprint(entry)
        hint = want or await self.known_era(server, fp)

        async def changed() -> None:
            if self._on_tools_changed is not None:
                await self._on_tools_changed(server)

        auth = self._authorizer(server, entry) if self._authorizer and isinstance(entry, HttpServer) else None
        conn = await open_connection(server, entry, session, hint, declared, auth=auth, events=Events(
            lambda tool, asks: self._learn(server, fp, tool, asks), self._poke, changed), spawned=self._spawned)
        if conn.era is not None and want is None and conn.era != hint:
            # learnt from the server's answer (a start that failed or timed out teaches nothing), and relearnt
            # when a server remembered as modern now answers as a legacy one
            await self.learn_era(server, fp, conn.era)
        owner = SHARED if conn.era == "modern" and not decl else self._owner(entry, session, decl)
        inst = Instance(conn, fp, server, owner, decl, wanted=want)
        self._groups.setdefault(inst.key, []).append(inst)
        return inst

    # ---- ending instances

    def _remove(self, inst: Instance) -> bool:
        group = self._groups.get(inst.key, [])
        if inst not in group:
            return False
        group.remove(inst)
        if not group:
            del self._groups[inst.key]
        return True

    def _stop(self, inst: Instance) -> None:
        """Out of the pool at once (no lease can get it), closed in the background (that may take seconds)."""
        if self._remove(inst):
            task = asyncio.create_task(inst.conn.close(), name=f"mcpx-close-{inst.server}")
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def _sweep(self, server: str, fp: str) -> None:
        for inst in self.instances(server):
            if not inst.conn.alive or (inst.fingerprint != fp and inst.busy == 0):
                self._stop(inst)

    async def reconfigure(self) -> None:
        """Servers gone from the config are closed; changed ones are replaced as their instances free up."""
        entries = self._entries()
        for inst in self.instances():
            entry = entries.get(inst.server)
            if entry is None or (inst.fingerprint != entry_fingerprint(entry) and inst.busy == 0):
                self._stop(inst)
        self._wake.set()  # an idleTimeout may have changed

    def _spares(self) -> set[int]:
        """The idle instances kept only SPARE_IDLE (by id): in each group of idle ones (a server, an owner, what
        was declared) all but the one used last; and a listing's own once its server has another instance."""
        spares: set[int] = set()
        kept: dict[GroupKey, Instance] = {}
        for inst in sorted(self.instances(), key=lambda i: i.last_used, reverse=True):
            if inst.busy:
                continue
            if inst.key in kept or (inst.owner == LISTING and len(self.instances(inst.server)) > 1):
                spares.add(id(inst))
            else:
                kept[inst.key] = inst
        return spares

    def _due(self, inst: Instance, spares: set[int] | None = None) -> float:
        """When an idle instance is to be stopped (monotonic time); at once if its server left the config."""
        entry = self._entries().get(inst.server)
        if entry is None:
            return inst.last_used
        spare = id(inst) in (self._spares() if spares is None else spares)
        return inst.last_used + (min(entry.idle_timeout, SPARE_IDLE) if spare else entry.idle_timeout)

    async def _reap(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait = self._reap_due()
            except Exception:  # the reaper must outlive any one bad pass
                log.exception("the upstream reaper failed a pass")
                wait = REAP_EVERY
            self._next_reap = time.monotonic() + wait
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _reap_due(self) -> float:
        """Stop every instance that died or sat idle past its server's idleTimeout; seconds until the next is due."""
        now = time.monotonic()
        wait = REAP_EVERY
        spares = self._spares()
        for inst in self.instances():
            if inst.busy:
                continue
            left = self._due(inst, spares) - now
            if not inst.conn.alive or left <= 0:
                if inst.conn.alive:
                    log.info("upstream %s: stopping instance %s (%s), idle for %.0fs%s", inst.server,
                             inst.conn.pid or inst.conn.describe(), inst.owner, now - inst.last_used,
                             " (a spare)" if id(inst) in spares else "")
                self._stop(inst)
            else:
                wait = min(wait, left)
        return wait

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for task in list(self._spreading):
            task.cancel()
        await asyncio.gather(*self._spreading, return_exceptions=True)
        for inst in self.instances():
            self._stop(inst)
        await asyncio.gather(*self._closing, return_exceptions=True)

    # ---- what runs now

    async def describe(self) -> list[InstanceInfo]:
        """The instances running now, with their sessions and memory (read from /proc off the loop)."""
        now = time.monotonic()
        entries = self._entries()
        live = [i for i in self.instances() if i.conn.alive]
        spares = self._spares()
        pids = [i.conn.pid for i in live if i.conn.pid is not None]
        usage = await asyncio.to_thread(procinfo.usage, pids)
        out = []
        for inst in sorted(live, key=lambda i: (i.server, i.started_at)):
            use = usage.get(inst.conn.pid) if inst.conn.pid is not None else None
            idle = None if inst.busy else max(0.0, now - inst.last_used)
            entry = entries.get(inst.server)
            out.append(InstanceInfo(
                server=inst.server, pid=inst.conn.pid, era=inst.era, shared=inst.owner in (SHARED, COMMON),
                sessions=sorted(s for s in inst.calling if s != ANY) if inst.owner in (SHARED, COMMON, LISTING)
                else [inst.owner], calls=inst.busy, idle_seconds=None if idle is None else round(idle, 1),
                stops_in=None if idle is None or entry is None else round(max(0.0, self._due(inst, spares) - now), 1),
                spare=idle is not None and id(inst) in spares,
                rss_kib=use.rss_kib if use else None, processes=use.processes if use else None,
                started_at=inst.started_at))
        return out


class Lease:
    """`async with pool.lease(...) as conn`: an instance for the block, given back at its end however it ends.
    A class rather than an asynccontextmanager: every call takes a lease, and the generator's machinery
    was a measurable part of a call's path (bench/speed.py figure 1)."""

    def __init__(self, pool: Pool, server: str, session: str, era: Era | None, timeout: float,
                 declared: dict[str, Any] | None, tool: str | None) -> None:
        self.pool, self.server, self.session, self.era, self.timeout = pool, server, session, era, timeout
        self.declared, self.tool = declared, tool
        self.inst: Instance | None = None

    @property
    def conn(self) -> UpstreamConnection:
        """The instance's connection, once taken."""
        assert self.inst is not None
        return self.inst.conn

    async def __aenter__(self) -> UpstreamConnection:
        if self.inst is not None:  # taken already (Pool.lease_now): the block gives it back
            return self.inst.conn
        decl = "" if self.declared is None else json.dumps(self.declared, sort_keys=True)
        self.inst = await self.pool._acquire(self.server, self.session, self.era, self.timeout, decl, self.declared,
                                             self.tool)
        return self.inst.conn

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        if self.inst is not None:
            inst, self.inst = self.inst, None
            self.pool._release(inst, self.session, self.tool)


def _uncount(counter: Counter[str], key: str) -> None:
    """One of `key` taken off `counter`, and the key gone with its last (`counter -= Counter((key,))` builds two
    Counters to do it, on every call's reply path)."""
    left = counter.get(key, 0) - 1
    if left > 0:
        counter[key] = left
    else:
        counter.pop(key, None)
