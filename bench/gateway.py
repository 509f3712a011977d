"""Benchmark of the mcpx gateway through its real daemon: what a tool call and a question cost on the way through.

What it measures, in one run, against a `python -m mcpx daemon` in a temp MCPX_HOME whose two upstream
servers, `peer` and `asker`, are both bench/peer_server.py (official mcp SDK, stdio):

1. a plain `tools/call` of `echo` through mcpx's REST `POST /v1/call/peer/echo` (200 with the result)
   versus the same server script called directly by the official SDK client (`mcp.client.Client`,
   stdio, one connection, `session.call_tool`), told to speak the era the daemon settled on for
   `peer` (the daemon probes `server/discover`; an SDK server answers it: the modern era). Both sides
   are warmed up, then timed in interleaved rounds, so machine noise hits both alike: p50/p99 of each
   and the ratio mcpx/direct at p50. In the same rounds, as floors without a target: one JSON-RPC
   line written straight to a third copy of the server's stdin (the upstream alone, no client
   library) and `GET /v1/health` (the daemon's HTTP floor).
2. first contact: a few questions from `asker`, whose plain `ctx.elicit` needs the legacy era. The
   daemon tries modern, is refused, re-drives the call in the legacy era and remembers that in
   mcpx.db; the tool reports its pid, so the run shows how many upstream processes the calls took.
   The daemon is then restarted (SIGTERM, same MCPX_HOME) so that it starts `asker` in the legacy
   era it remembers, and the question figures below are taken on that steady state.
3. upstream `elicitation/create` -> the `elicit.open` SSE frame at a subscriber in another process:
   the `ask` tool stamps time.monotonic() immediately before `ctx.elicit` and puts it in the
   question's message text; the subscriber (bench/broker.py `--role sse`) stamps each frame's arrival.
   CLOCK_MONOTONIC is one clock for all processes on Linux, so the two subtract. p50/p99.
   And answer -> the upstream holds it: from just before `POST /v1/elicit/{id}/accept` to the moment
   `ctx.elicit` returns inside the tool (stamped there, returned in its result, read back with
   `GET /v1/tasks/{id}/result`). p50/p99. The reference for both is the SDK talking to itself: the
   same tool called by the SDK client directly (legacy era, as mcpx), its elicitation callback
   stamping the question's arrival and the answer's departure; interleaved with the mcpx ones.
4. throughput with 16 callers in flight: calls/s on a server that may ask (`legacy`, the same
   script serving the handshake era only, where a question names no call), by the official SDK
   client (legacy mode, one connection, 16 calls in flight) through `mcpx serve` (one session)
   versus the same client straight to another copy of the script; blocks of calls alternate between
   the sides, and the ratio mcpx/direct is of total calls over total time. Two workloads: `echo`
   (the issue's figure: the calls cost CPU and nothing else, so on 2 cores it measures what each
   call costs on the way through) and `sleep` of 100 ms (calls that wait on something else, as most
   tools do: it measures how many calls mcpx keeps in flight). `--throughput` runs this alone; with `--against REF` also
   through the daemon (and `mcpx serve`) of another git revision, in the same rounds: before and
   after a change, side by side. bench/speed.py imports `phase_throughput` and `report_throughput`.

Run it from the repository root (the venv has mcpx installed editable):

    .venv/bin/python bench/gateway.py                          # about 45 s on 2 cores
    .venv/bin/python bench/gateway.py --profile /tmp/gw.prof   # the daemon under cProfile (two files)
    .venv/bin/python bench/gateway.py --throughput --against main   # phase 4 alone, this tree beside main

It is a benchmark, not a test: it exits 0 whether or not targets are met, and says MISSED where one
is. The machines here are noisy; the ratios measured side by side in one run are the figures to
compare between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
from mcp.client import Client
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import StdioServerParameters

from mcpx.mcp.protocol import MODERN_VERSIONS  # the modern version the daemon offers its upstreams

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # broker sits beside this file, however it is run
sys.path.insert(0, str(BENCH.parent / "tests"))  # the daemon harness
from broker import Child, Report, both, fmt_ms, ms, p50, p99, say  # noqa: E402
from harness import Daemon, run_stoppable, scratch_daemon  # noqa: E402
from upstreams import checkout  # noqa: E402

# ---- the plan (sizes chosen so that one run stays well under 3 minutes on 2 cores)

PEER = BENCH / "peer_server.py"
PLAIN, ASKER = "peer", "asker"  # two entries, one script: the era mcpx learns for `asker` must not move `peer`
LEGACY = "legacy"               # the script in the handshake era only (--legacy): a server whose questions name no call
SESSION = "bench-gw"
T0_MARK = "t0="                 # how peer_server.py puts its stamp in the question's message
N_WARMUP_CALLS = 40             # untimed calls per side first: process start, imports, first-use caches
ROUNDS, PER_ROUND = 40, 10      # 400 timed plain calls per side, in blocks of 10, the order rotated every round
N_FIRST = 5                     # questions through the daemon that has just learnt `asker` needs the legacy era
N_WARMUP_ASKS = 5               # untimed questions per side first, on the restarted daemon
N_ASKS = 200                    # timed question round trips through mcpx (and as many direct ones)
GAP_S = (0.001, 0.005)          # random pause between round trips: nothing lines up with a timer in the daemon
ANSWER = {"repo": "bench/gateway"}
SEED = 20240602

N_CALLERS = 16                  # phase 4: calls in flight at once on one client connection
TP_WARMUP = 64                  # untimed calls per side first: process starts, first-use caches
TP_ROUNDS, TP_PER_ROUND = 8, 160  # per side: 8 blocks of 160 calls, the order rotated every round


@dataclass(frozen=True)
class Work:
    """What each call of a throughput phase is: the tool, its arguments, the text it answers."""

    label: str
    tool: str
    arguments: dict[str, Any]
    expect: str
    per_round: int = TP_PER_ROUND


ECHO = Work("echo", "echo", {"text": "hi"}, "echo: hi")
# a call that waits on something else (a web API, a database) the way most tools do: 16 in flight take
# 0.1 s a round, so what counts is how many calls are in flight, not the CPU each costs on 2 cores
SLEEP = Work("sleep 100 ms", "sleep", {"seconds": 0.1}, "slept 0.1", per_round=64)

TARGET_RATIO = 1.5
TARGET_THROUGHPUT = 0.8
TARGET_OPEN_P50_MS = 5.0
TARGET_ANSWER_P50_MS = 5.0
MODERN = MODERN_VERSIONS[0]


def upstream_config() -> dict[str, dict[str, Any]]:
    entry = {"command": sys.executable, "args": [str(PEER)]}
    return {PLAIN: dict(entry), ASKER: dict(entry), **legacy_config()}


def legacy_config() -> dict[str, dict[str, Any]]:
    """The upstream phase 4 calls: a daemon given to phase_throughput must have it."""
    return {LEGACY: {"command": sys.executable, "args": [str(PEER), "--legacy"]}}


def era_of(version: str) -> str:
    return "modern" if version in MODERN_VERSIONS else "legacy"


def stamp_in(message: str) -> float:
    """The monotonic stamp peer_server.py wrote into a question's message just before asking."""
    return float(message.rsplit(T0_MARK, 1)[1])


# ---- the four things timed in the plain-call rounds

class McpxCaller:
    """`POST /v1/call/peer/echo` over the daemon's unix socket, one keep-alive connection."""

    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http = http
        self.last_task = ""

    async def __call__(self) -> None:
        async with self.http.post(f"/v1/call/{PLAIN}/echo",
                                  json={"arguments": {"text": "hi"}, "session": SESSION}) as r:
            body = await r.json()
        if r.status != 200 or body["result"]["content"][0]["text"] != "echo: hi":
            raise RuntimeError(f"POST /v1/call/{PLAIN}/echo: {r.status} {body}")
        self.last_task = body["task"]


async def task_era(http: aiohttp.ClientSession, task: str) -> str:
    """The era the daemon ran a call's task in."""
    async with http.get(f"/v1/tasks/{task}") as r:
        return str((await r.json())["era"])


class DirectCaller:
    """The official SDK client on its own stdio connection to another copy of the server."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def __call__(self) -> None:
        # session.call_tool is what Client.call_tool wraps, minus its input_required driver: the
        # fastest public way to repeat a call; it still checks the result against the output schema
        res = await self.client.session.call_tool("echo", {"text": "hi"})
        text = res.content[0].text if res.content and isinstance(res.content[0], types.TextContent) else None
        if res.is_error or text != "echo: hi":
            raise RuntimeError(f"direct echo: {res}")


class RawStdio:
    """One JSON-RPC line to the server's stdin, one line back: the upstream's own cost, no client library."""

    def __init__(self, proc: asyncio.subprocess.Process, version: str) -> None:
        self.proc = proc
        self.version = version
        self.ids = iter(range(1, 10**9))
        # a modern request carries the version and the client's capabilities in every _meta
        self.meta = {"io.modelcontextprotocol/protocolVersion": version,
                     "io.modelcontextprotocol/clientCapabilities": {},
                     "io.modelcontextprotocol/clientInfo": {"name": "bench-raw", "version": "0"}}

    @classmethod
    async def start(cls, env: dict[str, str], version: str) -> RawStdio:
        proc = await asyncio.create_subprocess_exec(sys.executable, str(PEER), env=env, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        raw = cls(proc, version)
        if era_of(version) == "legacy":
            await raw.request("initialize", {"protocolVersion": version, "capabilities": {},
                                             "clientInfo": {"name": "bench-raw", "version": "0"}})
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return raw

    async def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        rid = next(self.ids)
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:  # skip anything that is not our reply (a log notification, say)
            line = await self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the raw peer closed its stdout")
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"raw {method}: {msg['error']}")
                return dict(msg["result"])

    async def __call__(self) -> None:
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
        if era_of(self.version) == "modern":
            params["_meta"] = self.meta
        res = await self.request("tools/call", params)
        if res["content"][0]["text"] != "echo: hi":
            raise RuntimeError(f"raw echo: {res}")

    async def close(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # an SDK stdio server ends at EOF
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


class HealthCaller:
    """`GET /v1/health`: one request and one small SQLite read, the daemon's HTTP floor."""

    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http = http

    async def __call__(self) -> None:
        async with self.http.get("/v1/health") as r:
            await r.read()


# ---- phase 1: plain calls side by side

@dataclass
class Side:
    name: str
    call: Callable[[], Awaitable[None]]
    times_ms: list[float] = field(default_factory=list)
    daemon_cpu_s: float = 0.0   # the daemon's CPU while this side's blocks ran


async def timed_block(side: Side, n: int, d: Daemon) -> None:
    cpu0 = d.cpu_seconds()
    for _ in range(n):
        t0 = time.monotonic()
        await side.call()
        side.times_ms.append(ms(time.monotonic() - t0))
    side.daemon_cpu_s += d.cpu_seconds() - cpu0


async def interleaved(sides: list[Side], d: Daemon) -> None:
    """ROUNDS rounds of PER_ROUND calls per side; who goes first rotates, so no side always follows another."""
    for r in range(ROUNDS):
        k = r % len(sides)
        for side in sides[k:] + sides[:k]:
            await timed_block(side, PER_ROUND, d)


@dataclass
class Plain:
    mcpx: Side
    direct: Side
    raw: Side
    health: Side
    mcpx_era: str
    mcpx_protocol: str
    direct_protocol: str


def protocol_in_log(d: Daemon, server: str) -> str:
    """The protocol version the daemon logged for `server` (its last connection), or '?'."""
    found = re.findall(rf"upstream {server}: \w+ era, protocol (\S+)", d.tail(1_000_000))
    return found[-1] if found else "?"


async def phase_plain(d: Daemon, http: aiohttp.ClientSession) -> Plain:
    mcpx = McpxCaller(http)
    for _ in range(N_WARMUP_CALLS):  # the first starts `peer` in the daemon and settles its era
        await mcpx()
    mcpx_era = await task_era(http, mcpx.last_task)
    # the direct client speaks the era the daemon settled on: legacy -> initialize, modern -> adopt the version
    version = MODERN if mcpx_era == "modern" else "legacy"
    params = StdioServerParameters(command=sys.executable, args=[str(PEER)], env=d.env)  # the env mcpx gives it
    async with contextlib.AsyncExitStack() as stack:  # the direct and raw peers end with this phase
        client = await stack.enter_async_context(Client(params, mode=version))
        raw = await RawStdio.start(d.env, client.protocol_version)
        stack.push_async_callback(raw.close)
        sides = [Side("mcpx", mcpx), Side("direct", DirectCaller(client)), Side("raw", raw),
                 Side("health", HealthCaller(http))]
        for side in sides[1:]:
            for _ in range(N_WARMUP_CALLS):
                await side.call()
        await interleaved(sides, d)
        return Plain(mcpx=sides[0], direct=sides[1], raw=sides[2], health=sides[3], mcpx_era=mcpx_era,
                     mcpx_protocol=protocol_in_log(d, PLAIN), direct_protocol=client.protocol_version)


# ---- phase 2 and 3: questions

@dataclass
class AskSample:
    eid: str
    asked: float            # upstream, just before ctx.elicit
    answering: float        # bench, just before POST /accept (direct: the callback, as it returns)
    returned: float         # upstream, just after ctx.elicit returned
    pid: int                # the upstream process that asked
    received: float = 0.0   # the question's arrival: the SSE frame (mcpx) or the callback's entry (direct)
    call_ms: float = 0.0    # mcpx: POST /v1/call -> its 202
    accept_ms: float = 0.0  # mcpx: POST /accept round trip
    task: str = ""          # mcpx: the call's task


def tool_report(text: str, asked: float | None = None) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    if data["action"] != "accept" or data["data"] != ANSWER or (asked is not None and data["asked"] != asked):
        raise RuntimeError(f"the upstream got {data}, not the answer given to the question stamped {asked!r}")
    return data


async def mcpx_ask(http: aiohttp.ClientSession) -> AskSample:
    t0 = time.monotonic()
    async with http.post(f"/v1/call/{ASKER}/ask", json={"arguments": {}, "session": SESSION}) as r:
        body = await r.json()
    call_ms = ms(time.monotonic() - t0)
    if r.status != 202 or body.get("status") != "input-required":
        raise RuntimeError(f"POST /v1/call/{ASKER}/ask: {r.status} {body}")
    q = body["elicitation"]
    asked = stamp_in(q["message"])
    answering = time.monotonic()  # just before the answer leaves: metric 3 includes the whole request
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": ANSWER}) as r:
        await r.read()
    accept_ms = ms(time.monotonic() - answering)
    if r.status != 200:
        raise RuntimeError(f"POST /v1/elicit/{q['id']}/accept: {r.status}")
    async with http.get(f"/v1/tasks/{body['task']}/result", params={"timeout": "30"}) as r:
        done = await r.json()
    if r.status != 200 or done.get("state") != "completed":
        raise RuntimeError(f"GET /v1/tasks/{body['task']}/result: {r.status} {done}")
    report = tool_report(done["result"]["content"][0]["text"], asked)
    return AskSample(q["id"], asked, answering, report["returned"], report["pid"], call_ms=call_ms,
                     accept_ms=accept_ms, task=body["task"])


class DirectAsker:
    """The SDK client answering the same tool's question itself, stamping the question in and the answer out."""

    def __init__(self) -> None:
        self.received = 0.0
        self.answering = 0.0
        self.client: Client | None = None

    async def on_elicit(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.received = time.monotonic()
        result = types.ElicitResult(action="accept", content=dict(ANSWER))
        self.answering = time.monotonic()  # the last moment before the SDK takes the answer back
        return result

    async def __call__(self) -> AskSample:
        assert self.client is not None
        res = await self.client.session.call_tool("ask", {})
        text = res.content[0].text if res.content and isinstance(res.content[0], types.TextContent) else "{}"
        report = tool_report(text)
        return AskSample("direct", report["asked"], self.answering, report["returned"], report["pid"],
                         received=self.received)


@dataclass
class FirstContact:
    """The first questions of a back-channel server through a daemon that has never called it."""

    samples: list[AskSample]
    redrives: int           # "calling it in the legacy era from now on", as the daemon logged it

    @property
    def processes(self) -> int:
        return len({s.pid for s in self.samples})


async def phase_first_contact(d: Daemon, http: aiohttp.ClientSession) -> FirstContact:
    """A daemon learns that `asker` needs the legacy era on its first call; the next calls should just use it."""
    samples = [await mcpx_ask(http) for _ in range(N_FIRST)]
    return FirstContact(samples, d.tail(1_000_000).count(f"server {ASKER} answers server/discover but asks"))


@dataclass
class Asks:
    mcpx: list[AskSample]
    direct: list[AskSample]
    missing_frames: int
    wrong_frames: int       # a frame for our question naming another server or tool
    mcpx_era: str
    direct_protocol: str

    def open_ms(self) -> list[float]:
        return [ms(s.received - s.asked) for s in self.mcpx if s.received]

    def answer_ms(self) -> list[float]:
        return [ms(s.returned - s.answering) for s in self.mcpx]


async def phase_asks(d: Daemon, http: aiohttp.ClientSession, rng: random.Random) -> Asks:
    async with contextlib.AsyncExitStack() as stack:  # the subscriber and the direct peer end with this phase
        sub = await Child.start("sse", d.socket)  # bench/broker.py's subscriber, in a process of its own
        stack.callback(sub.kill)
        for _ in range(N_WARMUP_ASKS):
            last = await mcpx_ask(http)
        mcpx_era = await task_era(http, last.task)
        # a back-channel question needs the legacy era on the direct side too
        asker = DirectAsker()
        params = StdioServerParameters(command=sys.executable, args=[str(PEER)], env=d.env)
        client = await stack.enter_async_context(Client(params, mode="legacy", elicitation_callback=asker.on_elicit))
        asker.client = client
        for _ in range(N_WARMUP_ASKS):
            await asker()
        mcpx_samples: list[AskSample] = []
        direct_samples: list[AskSample] = []
        for i in range(N_ASKS):
            turns: list[tuple[list[AskSample], Callable[[], Awaitable[AskSample]]]] = [
                (mcpx_samples, lambda: mcpx_ask(http)), (direct_samples, asker)]
            for samples, ask in turns if i % 2 == 0 else turns[::-1]:  # who goes first alternates
                await asyncio.sleep(rng.uniform(*GAP_S))
                samples.append(await ask())
        await asyncio.sleep(0.2)  # the last frame lands
        frames = await sub.finish()
        direct_protocol = client.protocol_version
    missing = wrong = 0
    for s in mcpx_samples:
        frame = frames.get(s.eid)
        if frame is None:
            missing += 1
        elif (frame["server"], frame["tool"]) != (ASKER, "ask"):
            wrong += 1
        else:
            s.received = float(frame["at"])
    return Asks(mcpx_samples, direct_samples, missing, wrong, mcpx_era, direct_protocol)


# ---- phase 4: 16 callers in flight

@dataclass
class Flow:
    """One side of the throughput rounds: an SDK client connection and the calls it carried, timed per block."""

    name: str
    client: Client
    prefix: str  # the server's name and an underscore through mcpx, nothing direct
    calls: int = 0
    seconds: float = 0.0
    rates: list[float] = field(default_factory=list)  # calls/s of each block

    @property
    def rate(self) -> float:
        return self.calls / self.seconds


async def in_flight(flow: Flow, work: Work, n: int, callers: int = N_CALLERS) -> float:
    """`n` calls, `callers` of them in flight at once on the flow's one connection; seconds they took."""
    left = n
    tool = flow.prefix + work.tool

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            res = await flow.client.session.call_tool(tool, work.arguments)
            text = res.content[0].text if res.content and isinstance(res.content[0], types.TextContent) else None
            if res.is_error or text != work.expect:
                raise RuntimeError(f"{flow.name} {tool}: {res}")

    t0 = time.monotonic()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return time.monotonic() - t0


@dataclass
class Throughput:
    work: Work
    flows: list[Flow]  # through each daemon's `mcpx serve`, in the order given; direct last


async def phase_throughput(daemons: dict[str, Daemon], work: Work = ECHO) -> Throughput:
    """Calls/s with N_CALLERS in flight: the SDK client (legacy mode) through `mcpx serve` of each daemon (which
    must have legacy_config()'s server) and straight to the script, in blocks that alternate between the sides."""
    async with contextlib.AsyncExitStack() as stack:  # every client, and what it started, ends with this phase
        flows: list[Flow] = []
        for label, d in daemons.items():  # `python -m mcpx serve` of the daemon's own tree (its env's PYTHONPATH)
            params = StdioServerParameters(command=sys.executable, args=["-m", "mcpx", "serve"], env=d.env,
                                           cwd=str(d.home))
            flows.append(Flow(f"mcpx {label}".rstrip(), await stack.enter_async_context(Client(params, mode="legacy")),
                              f"{LEGACY}_"))
        entry = legacy_config()[LEGACY]
        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env=next(iter(daemons.values())).env)
        flows.append(Flow("direct", await stack.enter_async_context(Client(params, mode="legacy")), ""))
        for flow in flows:
            await in_flight(flow, work, TP_WARMUP)
        for r in range(TP_ROUNDS):
            k = r % len(flows)
            for flow in flows[k:] + flows[:k]:
                took = await in_flight(flow, work, work.per_round)
                flow.calls += work.per_round
                flow.seconds += took
                flow.rates.append(work.per_round / took)
    return Throughput(work, flows)


def report_throughput(report: Report, tp: Throughput) -> None:
    direct = tp.flows[-1]
    head = f"{N_CALLERS} in flight, {tp.work.label}:"
    report.add(f"{head} direct SDK stdio, calls/s (n={direct.calls})", f"{direct.rate:.0f}")
    for flow in tp.flows[:-1]:
        ratio = flow.rate / direct.rate
        blocks = sorted(r / d for r, d in zip(flow.rates, direct.rates, strict=True))
        report.add(f"{head} {flow.name} serve, calls/s (n={flow.calls})", f"{flow.rate:.0f}")
        report.add(f"  ratio {flow.name} / direct (blocks {blocks[0]:.2f}-{blocks[-1]:.2f})", f"{ratio:.2f}x",
                   f">= {TARGET_THROUGHPUT:g}x", ratio >= TARGET_THROUGHPUT)


# ---- the report

def report_plain(report: Report, plain: Plain) -> None:
    m, dr = plain.mcpx.times_ms, plain.direct.times_ms
    ratio = p50(m) / p50(dr)
    report.add("era: mcpx -> peer, direct SDK client", f"{plain.mcpx_era} {plain.mcpx_protocol}, "
               f"{era_of(plain.direct_protocol)} {plain.direct_protocol}", "the same",
               plain.mcpx_era == era_of(plain.direct_protocol))
    report.add(f"tools/call via mcpx REST p50 / p99 (n={len(m)})", both(m))
    report.add(f"tools/call direct SDK stdio p50 / p99 (n={len(dr)})", both(dr))
    report.add("ratio mcpx / direct at p50", f"{ratio:.2f}x", f"<= {TARGET_RATIO:g}x", ratio <= TARGET_RATIO)
    report.add("  mcpx minus direct at p50", fmt_ms(p50(m) - p50(dr)))
    report.add("  floor: raw JSON-RPC line on stdio p50 / p99", both(plain.raw.times_ms))
    report.add("  floor: GET /v1/health p50 / p99", both(plain.health.times_ms))
    report.add("  daemon CPU per mcpx call", f"{1e3 * plain.mcpx.daemon_cpu_s / len(m):.2f} ms")


def report_first(report: Report, first: FirstContact) -> None:
    n = len(first.samples)
    report.add(f"fresh daemon, back-channel server: upstream processes for {n} questions", f"{first.processes}",
               "1 (re-used)", first.processes == 1)
    report.add(f"  legacy re-drives logged for those {n} calls", f"{first.redrives}")
    report.add("  POST /v1/call -> 202 input-required p50", fmt_ms(p50([s.call_ms for s in first.samples])))


def report_asks(report: Report, asks: Asks) -> None:
    opened, answered = asks.open_ms(), asks.answer_ms()
    d_open = [ms(s.received - s.asked) for s in asks.direct]
    d_answer = [ms(s.returned - s.answering) for s in asks.direct]
    procs = len({s.pid for s in asks.mcpx})
    report.add("era: mcpx -> asker, direct SDK client", f"{asks.mcpx_era}, {era_of(asks.direct_protocol)} "
               f"{asks.direct_protocol}", "the same", asks.mcpx_era == era_of(asks.direct_protocol))
    report.add(f"after the restart: upstream processes for {len(asks.mcpx)} questions", f"{procs}", "1", procs == 1)
    o50, a50 = p50(opened), p50(answered)
    report.add(f"elicitation/create -> elicit.open SSE p50 (n={len(opened)})", fmt_ms(o50),
               f"<= {TARGET_OPEN_P50_MS:g} ms", o50 <= TARGET_OPEN_P50_MS)
    report.add("elicitation/create -> elicit.open SSE p99", fmt_ms(p99(opened)))
    report.add("  reference: -> the SDK client's callback p50 / p99", both(d_open))
    report.add(f"answer -> ctx.elicit returns p50 (n={len(answered)})", fmt_ms(a50),
               f"<= {TARGET_ANSWER_P50_MS:g} ms", a50 <= TARGET_ANSWER_P50_MS)
    report.add("answer -> ctx.elicit returns p99", fmt_ms(p99(answered)))
    report.add("  reference: the SDK callback's return -> ctx.elicit p50 / p99", both(d_answer))
    report.add("  POST /v1/call -> 202 input-required p50", fmt_ms(p50([s.call_ms for s in asks.mcpx])))
    report.add("  POST /v1/elicit/{id}/accept round trip p50", fmt_ms(p50([s.accept_ms for s in asks.mcpx])))
    if asks.missing_frames or asks.wrong_frames:
        report.add("elicit.open frames missing / naming another server", f"{asks.missing_frames} / "
                   f"{asks.wrong_frames}", "0 / 0", False)


# ---- the run

def profile_args(profile: str | None, suffix: str = "") -> list[str]:
    return ["-m", "cProfile", "-o", profile + suffix] if profile else []


async def run(profile: str | None) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    d = scratch_daemon("mcpx-bench-", {"servers": upstream_config()}, python_args=profile_args(profile))
    stopped_by_us = False
    try:
        d.start()
        say(f"daemon pid {d.pid}, MCPX_HOME {d.home}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; "
            f"upstreams `{PLAIN}` and `{ASKER}`: {PEER.name}")
        async with d.session() as http:
            say(f"[1/4] plain tools/call: {N_WARMUP_CALLS} warm-up calls per side, then {ROUNDS} rounds of "
                f"{PER_ROUND} per side (mcpx, direct, raw, health) ...")
            plain = await phase_plain(d, http)
            say(f"      mcpx called `{PLAIN}` in the {plain.mcpx_era} era ({plain.mcpx_protocol}); the direct client "
                f"spoke {plain.direct_protocol}")
            say(f"[2/4] first contact: {N_FIRST} questions from `{ASKER}` through this daemon ...")
            first = await phase_first_contact(d, http)
            say(f"      {first.processes} upstream process(es) asked them; {first.redrives} legacy re-drive(s)")
        # The daemon remembers the era it learnt (in mcpx.db) across restarts; a new daemon starts `asker`
        # in the legacy era directly, the way the pool means to go on.
        stopped_by_us = True
        code = d.stop()
        d.python_args = profile_args(profile, ".asks")
        d.start()
        stopped_by_us = False
        say(f"      daemon restarted (SIGTERM, exit {code}; same MCPX_HOME), new pid {d.pid}")
        async with d.session() as http:
            say(f"[3/4] questions: {N_WARMUP_ASKS} warm-up, then {N_ASKS} through mcpx interleaved with {N_ASKS} "
                "straight to the SDK client ...")
            asks = await phase_asks(d, http, rng)
            say(f"      mcpx asked through `{ASKER}` in the {asks.mcpx_era} era; the direct client spoke "
                f"{asks.direct_protocol}; {len(asks.open_ms())} frames matched")
        say(f"[4/4] throughput: {N_CALLERS} callers in flight through `mcpx serve` to `{LEGACY}` and direct, "
            f"{TP_ROUNDS} rounds per side of {ECHO.per_round} calls of {ECHO.label}, then of {SLEEP.per_round} of "
            f"{SLEEP.label} ...")
        throughput = [await phase_throughput({"": d}, work) for work in (ECHO, SLEEP)]
    except BaseException:
        alive = d.proc is not None and d.proc.poll() is None
        say(f"\nbenchmark aborted; daemon {'still running' if alive else 'exited'}; state kept in {d.home}\n"
            f"--- daemon stderr (tail) ---\n{d.tail()}")
        if not alive and not stopped_by_us:
            say("NOTE: the daemon exited during the run and this benchmark did not stop it (another process may "
                "have sent it SIGTERM); run it again")
        d.keep = True
        raise
    finally:
        code = d.stop()  # SIGTERM: the daemon drains, closes its upstreams and exits
        if profile:
            say(f"daemon profiles written to {profile} (phases 1-2) and {profile}.asks (phase 3)")
        d.cleanup()
    say(f"      daemon stopped with SIGTERM, exit {code}; the run took {time.monotonic() - started:.0f} s")

    report = Report()
    report_plain(report, plain)
    report_first(report, first)
    report_asks(report, asks)
    for tp in throughput:
        report_throughput(report, tp)
    print()
    report.show()
    print()
    print("direct: the mcp SDK client (session.call_tool on one stdio connection) to its own copy of the server;")
    print("raw: a hand-written JSON-RPC line to a third copy: what the upstream itself costs. Both floors bound what")
    print("any gateway in between could reach. Phase 3 runs on a restarted daemon, which recalls `asker`'s era from")
    print("mcpx.db: in the daemon that first learnt it, every further question started a new upstream (phase 2).")


async def run_throughput(against: str | None) -> None:
    """Phase 4 alone: this tree's daemon and, with `against`, another revision's, side by side in one run."""
    with contextlib.ExitStack() as stack:
        daemons = {"": stack.enter_context(scratch_daemon("mcpx-bench-", {"servers": legacy_config()}))}
        if against:
            tree = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mcpx-against-")))
            daemons = {"(this tree)": daemons[""], f"({against})": stack.enter_context(scratch_daemon(
                "mcpx-bench-", {"servers": legacy_config()}, sidecar=checkout(against, tree)))}
        say(f"throughput: {N_CALLERS} callers in flight through `mcpx serve` of {len(daemons)} daemon(s) to "
            f"`{LEGACY}` and direct; {TP_ROUNDS} rounds per side of {ECHO.per_round} calls of {ECHO.label}, then "
            f"of {SLEEP.per_round} of {SLEEP.label}; load {os.getloadavg()[0]:.2f} ...")
        throughput = [await phase_throughput(daemons, work) for work in (ECHO, SLEEP)]
    report = Report()
    for tp in throughput:
        report_throughput(report, tp)
    print()
    report.show()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--profile", metavar="FILE", help="run the daemon under cProfile, stats to FILE and FILE.asks")
    parser.add_argument("--throughput", action="store_true", help="run phase 4 (16 callers in flight) alone")
    parser.add_argument("--against", metavar="REF", help="with --throughput: also through this git revision's daemon")
    args = parser.parse_args()
    if args.against and not args.throughput:
        parser.error("--against goes with --throughput")
    # SIGTERM too stops the daemons and the peers
    run_stoppable(run_throughput(args.against) if args.throughput else run(args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
