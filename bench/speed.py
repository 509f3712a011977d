"""Issues 14 and 39's table in one run: every speed figure of mcpx beside direct, its floors, and the proxies a user
would pick instead.

Seven figures, each a ratio measured side by side in the same run (4 and 6 are absolute, as the
issue's goals are; 4 has its floor beside it), against real processes: the daemon over its real
socket, `mcpx serve` as a host starts it, the official `mcp` SDK client on every side, and
bench/peer_server.py as the upstream.

1. plain `tools/call` (`echo`) p50 through `mcpx serve` / the same SDK client straight to the server.
   Peer rows: FastMCP's proxy (`create_proxy`, bench/fastmcp_proxy.py, on stdio) and sparfenyuk's
   `mcp-proxy` (PyPI; it serves a stdio server over Streamable HTTP, so the SDK client reaches it by
   URL: one hop, as mcpx). The upstream is peer_server.py, which answers `server/discover`: the
   daemon calls it in the modern era (as bench/surface.py's `peer`).
   Floor rows: bench/bare_relay.py, a process that copies the bytes both ways and does nothing else:
   what any process between the client and the server costs here (figures 1-3; it is no peer); and
   bench/parsing_relay.py, a relay in Python that parses every message, renumbers requests and encodes
   them again (what any MCP proxy must do at the least). And the direct client in the era mcpx calls
   `peer` in (modern: `server/discover`, `_meta` on every request), beside the legacy direct client
   every ratio is taken against: what the era alone costs the server (docs/choices.md).
   Also the daemon's CPU per plain call (user + system, all its threads, from /proc, over the blocks
   of mcpx's calls alone).
2. an elicitation round trip: `tools/call ask`, whose tool asks with `ctx.elicit`, answered by the
   client's elicitation callback; p50 through `mcpx serve` / direct. Peer row: FastMCP's stateful
   proxy (`StatefulProxyClient`). The other two are tried once in each run and said not to forward,
   with the error they gave.
3. 16 callers in flight on one client connection: calls/s through each / direct (all three peers).
   Figures 2 and 3 call `peer_server.py --legacy` (the handshake era, where a server asks mid-call
   and the daemon gives a session at most four instances of it, each one call at a time).
4. `GET /v1/elicit?limit=10000` p50 with 10,000 questions pending, beside a bare aiohttp server (a
   process of its own, on a unix socket) sending the same bytes, the requests interleaved; and the
   daemon's resident memory per pending question (its RSS with them, less its RSS before).
5. `POST /v1/elicit` -> the `elicit.open` frame at an SSE subscriber in another process, p50 / the
   same through a bare aiohttp relay (bench/broker.py's phase, interleaved there).
6. durable question lifecycles/s, 16 in flight (bench/broker.py's phase: each answer committed
   before its waiter is woken), sent by bench/lean_http.py's client. Floor row: a bare aiohttp server
   answering the same three requests (broker.py's `role_floor`), with its CPU and the client's per lifecycle:
   what any server on aiohttp costs here, and what the bench itself costs. Second floor row: the same server
   committing each transition to SQLite before it answers, as mcpx does (broker.py's `role_durable_floor`,
   bench/durable_floor.py), with its CPU and its commits' per lifecycle: what any durable Python server costs.
7. `mcpx elicit list` (the installed entry point, a daemon running) / `python -c 'import argparse, json,
   socket'`, wall p50 (bench/cli_start.py, which runs alone too).

The sides of figures 1-3 are all open at once and timed in interleaved rounds whose order rotates,
after a warm-up; 4-6 run on a fresh daemon of their own (no servers). `--runs N` (default 3)
repeats the whole table with new processes each time and prints every figure's median with its
spread (min-max). `--against REF` adds the daemon and `mcpx serve` of another git revision (its
`sidecar/`, from `git archive`, first on PYTHONPATH) as rows beside this code's, in the same rounds
for 1-3 and in alternating order for 4-6, so that before/after is one command.

    .venv/bin/python bench/speed.py                        # about 3-4 minutes on 2 cores
    .venv/bin/python bench/speed.py --short                # the same rows, fewer calls, no peers: 1-2 minutes
    .venv/bin/python bench/speed.py --runs 1 --against main
    .venv/bin/python bench/speed.py --short --calls --against main  # figures 1-3 alone (a call's path), side by side
    .venv/bin/python bench/speed.py --short --broker --against main  # figures 4-6 alone (the broker's), side by side

mcp-proxy pins `mcp<2`, which clashes with the `mcp>=2.3` mcpx is tested with, so it is not in the
test extras: the first run installs mcp-proxy MCP_PROXY_VERSION into a venv of the bench's own,
.venv/peers/mcp-proxy (pip, from the configured index); without it, its rows say why they are missing.

It is a benchmark, not a test: it exits 0 whether or not goals are met, and says MISSED where one is.
The machines here are noisy and shared; compare the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
from aiohttp import web
from mcp.client import Client
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import StdioServerParameters

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))  # the other benches sit beside this file, however it is run
sys.path.insert(0, str(ROOT / "tests"))  # the daemon harness
import broker  # noqa: E402
import cli_start  # noqa: E402
from broker import Child, Report, fmt_ms, ms, p50, say  # noqa: E402
from harness import Daemon, free_port, run_stoppable, scratch_daemon, unix_session  # noqa: E402
from parsing_relay import relay_pid  # noqa: E402
from surface import SdkCaller, Side, interleaved  # noqa: E402
from upstreams import checkout  # noqa: E402

HERE = Path(__file__).resolve()
PEER = BENCH / "peer_server.py"
FASTMCP_PROXY = BENCH / "fastmcp_proxy.py"
BARE_RELAY = BENCH / "bare_relay.py"
PARSING_RELAY = BENCH / "parsing_relay.py"
FLOOR = "a bare asyncio relay"    # the floor row: the cost of a process in the middle, no MCP in it
PARSING = "a parsing Python relay"  # the second floor: every message parsed, renumbered, encoded again
# the third: the parsing relay keeping mcpx's records (a question committed before it is told, each call's end and
# answer recorded after), in mcpx.db's tables (bench/parsing_relay.py --durable): what keeping mcpx's promises costs
DURABLE = "a durable parsing relay"
MODERN_DIRECT = "direct, modern era"  # the direct client in the era mcpx calls the upstream in
# figure 1 through this tree's daemon to the same peer script started legacy-only (`--legacy`): what calling the
# upstream in the legacy era would buy a plain call (issue 39 item 2; docs/choices.md says why mcpx calls modern)
LEGACY_UPSTREAM = "through mcpx to the upstream in the legacy era"
FLOOR_SERVER = "a bare aiohttp server"  # figure 6's floor: the same three requests answered, no broker nor store
DURABLE_FLOOR = "a durable aiohttp server"  # its second: the same, each transition committed to SQLite as mcpx does
MCP_PROXY_VERSION = "0.13.0"
MCP_PROXY_VENV = ROOT / ".venv" / "peers" / "mcp-proxy"

# ---- the plan (sizes chosen so that three runs stay under ~5 minutes on 2 cores, with --against too)

MODE = "legacy"                 # what every client speaks: the era all three proxies understand
WARMUP_CALLS = 30               # untimed plain calls per side first
CALL_ROUNDS, CALLS_PER_ROUND = 20, 10   # 200 timed plain calls per side
WARMUP_ASKS = 5
ASK_ROUNDS, ASKS_PER_ROUND = 12, 5      # 60 timed round trips per side
CALLERS = 16                    # figure 3: callers in flight on one connection
THR_ROUNDS, THR_PER_CALLER = 4, 5       # 4 blocks of 16 x 5 calls per side
N_PUSH, N_POLL, N_HEALTH = 100, 10, 20  # figure 5 (broker.phase_latency; the poller is not a figure here)
N_LIFECYCLES = 1000             # figure 6
N_PENDING = 10_000              # figure 4
N_LISTINGS = 20                 # timed listings of each side, interleaved
ANSWER = {"repo": "bench/speed"}
SEED = 20261203

# ---- the goals of issue 39 (14's for figure 5; lower is better for "<=", higher for ">=")

GOALS: dict[str, tuple[str, float]] = {
    "call": ("<=", 1.2), "ask": ("<=", 1.35), "thr": (">=", 1.2), "list": ("<=", 10.0), "push": ("<=", 1.5),
    "life": (">=", 2000.0), "cpu": ("<=", 0.25), "mem": ("<=", 1.5),
}


def short_plan() -> None:
    """--short: the same rows from fewer calls (peers left out): a run of three takes a minute or two."""
    global WARMUP_CALLS, CALL_ROUNDS, WARMUP_ASKS, ASK_ROUNDS, THR_ROUNDS, N_PUSH, N_LIFECYCLES, N_LISTINGS
    WARMUP_CALLS, CALL_ROUNDS, WARMUP_ASKS, ASK_ROUNDS, THR_ROUNDS = 10, 8, 3, 6, 2
    N_PUSH, N_LIFECYCLES, N_LISTINGS = 30, 400, 6


def servers_config() -> dict[str, Any]:
    py = sys.executable
    return {"servers": {"peer": {"command": py, "args": [str(PEER)]},
                        "asker": {"command": py, "args": [str(PEER), "--legacy"]}}}


# ---- the routes from the SDK client to the upstream

@dataclass
class Route:
    """One way for the SDK client to reach an upstream: straight, through an mcpx, or through a peer proxy."""

    label: str
    kind: str                       # direct | direct-modern | relay | parsing-relay | mcpx | fastmcp | ...
    daemon: Daemon | None = None    # an mcpx route's daemon (its env makes `mcpx serve` find it)
    goal: bool = False              # a row the issue sets a goal for (mcpx's own)


async def answer_elicit(_ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person at the client, answering at once."""
    return types.ElicitResult(action="accept", content=dict(ANSWER))


async def wait_http(url: str, proc: asyncio.subprocess.Process, timeout: float = 60.0) -> None:
    """Until `url` answers 200 (mcp-proxy has started its server and its stdio client), bounded."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise RuntimeError(f"mcp-proxy exited {proc.returncode} before serving")
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(url) as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.05)
    raise RuntimeError(f"mcp-proxy did not serve {url} within {timeout:.0f}s")


async def stop_proc(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def connect(stack: contextlib.AsyncExitStack, route: Route, server: str, upstream: list[str],
                  env: dict[str, str]) -> tuple[Client, str]:
    """Open the route's SDK client (legacy era, answering questions) to `upstream`; the client and the tool prefix.
    `server` is the name the mcpx daemons' config gives that upstream."""
    py = sys.executable
    target: StdioServerParameters | str
    prefix = ""
    mode = MODE
    if route.kind in ("direct", "direct-modern"):
        target = StdioServerParameters(command=py, args=upstream, env=env)
        mode = "auto" if route.kind == "direct-modern" else MODE  # server/discover first: the modern era
    elif route.kind in ("relay", "parsing-relay"):
        script = BARE_RELAY if route.kind == "relay" else PARSING_RELAY
        target = StdioServerParameters(command=py, args=[str(script), py, *upstream], env=env)
    elif route.kind == "durable-relay":  # its records in a file of its own, gone with the bench's run
        where = stack.enter_context(tempfile.TemporaryDirectory(prefix="mcpx-durable-relay-"))
        target = StdioServerParameters(
            command=py, args=[str(PARSING_RELAY), "--durable", str(Path(where) / "mcpx.db"), py, *upstream], env=env)
    elif route.kind == "mcpx":
        assert route.daemon is not None
        d = route.daemon
        target = StdioServerParameters(command=py, args=["-m", "mcpx", "serve"], env=d.env, cwd=str(d.home))
        prefix = f"{server}_"
    elif route.kind.startswith("fastmcp"):
        flags = ["--stateful"] if route.kind == "fastmcp-stateful" else []
        target = StdioServerParameters(command=py, args=[str(FASTMCP_PROXY), *flags, "--", py, *upstream],
                                       env={**env, "FASTMCP_LOG_LEVEL": "CRITICAL"})
    else:  # mcp-proxy: a server of its own on a loopback port, which starts the stdio upstream
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            str(MCP_PROXY_VENV / "bin" / "mcp-proxy"), "--host", "127.0.0.1", "--port", str(port), "--log-level",
            "WARNING", "--pass-environment", "--", py, *upstream, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        stack.push_async_callback(stop_proc, proc)
        await wait_http(f"http://127.0.0.1:{port}/status", proc)
        target = f"http://127.0.0.1:{port}/mcp"
    client = await stack.enter_async_context(Client(target, mode=mode, elicitation_callback=answer_elicit))
    return client, prefix


class AskCaller:
    """`tools/call ask`: the tool asks, the client's callback answers, the tool returns what it got."""

    def __init__(self, client: Client, tool: str) -> None:
        self.client = client
        self.tool = tool

    async def __call__(self) -> None:
        res = await self.client.session.call_tool(self.tool, {})
        text = res.content[0].text if res.content and isinstance(res.content[0], types.TextContent) else ""
        if res.is_error:
            raise RuntimeError(text[:300] or str(res)[:300])
        got = json.loads(text)
        if got.get("action") != "accept" or got.get("data") != ANSWER:
            raise RuntimeError(f"{self.tool}: the tool got {got}")


async def throughput(call: Callable[[], Awaitable[None]], callers: int, per_caller: int) -> tuple[int, float]:
    """`callers` loops of `per_caller` calls each, all on one connection at once: (calls, seconds)."""
    async def caller() -> None:
        for _ in range(per_caller):
            await call()

    t0 = time.monotonic()
    async with asyncio.TaskGroup() as group:
        for _ in range(callers):
            group.create_task(caller())
    return callers * per_caller, time.monotonic() - t0


# ---- figures 1-3

Values = dict[tuple[str, str], float]   # (figure, row label) -> this run's value
Notes = dict[str, str]                  # row label -> why it has no figure (a peer that does not forward)


async def plain_calls(routes: list[Route], env: dict[str, str], values: Values) -> None:
    """Figure 1 on the modern-capable upstream: every route open at once, rounds interleaved."""
    async with contextlib.AsyncExitStack() as stack:
        sides: list[Side] = []
        for route in routes:
            client, prefix = await connect(stack, route, "peer", [str(PEER)], env)
            side = Side(route.label, SdkCaller(client, f"{prefix}echo"))
            if route.daemon is not None:  # the daemon's CPU over this side's blocks: its calls alone ran then
                side.watch = {"daemon": [route.daemon.pid]}
            elif route.kind == "durable-relay":  # the same of the durable relay: the floor of that figure
                side.watch = {"daemon": [relay_pid(durable=True)]}
            sides.append(side)
            if route.kind == "mcpx" and route.label == "mcpx":
                client, prefix = await connect(stack, route, "asker", [str(PEER), "--legacy"], env)
                legacy = Side(LEGACY_UPSTREAM, SdkCaller(client, f"{prefix}echo"))
                legacy.watch = side.watch
                sides.append(legacy)
        for side in sides:
            for _ in range(WARMUP_CALLS):
                await side.call()
        await interleaved(sides, CALL_ROUNDS, CALLS_PER_ROUND)
    base = p50(sides[0].times_ms)
    values[("call.direct_ms", sides[0].name)] = base
    for side in sides[1:]:
        values[("call", side.name)] = p50(side.times_ms) / base
        if side.watch:
            values[("cpu", side.name)] = side.cpu_ms_per_call("daemon")


async def asking_calls(routes: list[Route], env: dict[str, str], values: Values, notes: Notes) -> None:
    """Figures 2 and 3 on the handshake-era upstream, every route open at once."""
    async with contextlib.AsyncExitStack() as stack:
        askers: list[Side] = []
        plain: list[Side] = []
        for route in routes:
            client, prefix = await connect(stack, route, "asker", [str(PEER), "--legacy"], env)
            plain.append(Side(route.label, SdkCaller(client, f"{prefix}echo")))
            ask = Side(route.label, AskCaller(client, f"{prefix}ask"))
            try:  # a proxy that does not forward a question fails here, and says why
                await asyncio.wait_for(ask.call(), 30)
            except (RuntimeError, TimeoutError) as e:
                notes[route.label] = f"does not forward it: {str(e).strip()[:200] or type(e).__name__}"
                continue
            askers.append(ask)
        for side in askers:
            for _ in range(WARMUP_ASKS):
                await side.call()
        await interleaved(askers, ASK_ROUNDS, ASKS_PER_ROUND)
        # figure 3: an untimed block first (mcpx starts the instances a session may have), then rotated rounds
        done: dict[str, list[float]] = {s.name: [0.0, 0.0] for s in plain}
        for side in plain:
            await throughput(side.call, CALLERS, 2)
        for r in range(THR_ROUNDS):
            k = r % len(plain)
            for side in plain[k:] + plain[:k]:
                n, secs = await throughput(side.call, CALLERS, THR_PER_CALLER)
                done[side.name][0] += n
                done[side.name][1] += secs
    direct = askers[0]
    assert direct.name == routes[0].label
    values[("ask.direct_ms", direct.name)] = p50(direct.times_ms)
    for side in askers[1:]:
        values[("ask", side.name)] = p50(side.times_ms) / p50(direct.times_ms)
    rates = {name: n / secs for name, (n, secs) in done.items()}
    values[("thr.direct_per_s", routes[0].label)] = rates[routes[0].label]
    for route in routes[1:]:
        values[("thr", route.label)] = rates[route.label] / rates[routes[0].label]


# ---- figures 4-6: the broker, on a daemon of its own

async def role_bare(socket: str, body: bytes) -> None:
    """The floor of figure 4: aiohttp sending a listing's bytes (read once, from a file) for every GET."""

    async def listing(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/elicit", listing)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.UnixSite(runner, socket).start()
    print("ready", flush=True)
    await broker.stdin_closed()
    await runner.cleanup()
    print(json.dumps({"bytes": len(body)}), flush=True)


async def listing_vs_bare(d: Daemon, http: aiohttp.ClientSession) -> tuple[list[float], list[float], int, float]:
    """Figure 4: N_PENDING questions opened, then GET ?limit=10000 on mcpx and on the bare server, alternating;
    the daemon's RSS per pending question, taken before any listing allocated its buffers."""
    await broker.cancel_all_pending(http)
    rss_before = d.rss_kib()
    await broker.open_many(http, N_PENDING)
    kib_each = (d.rss_kib() - rss_before) / N_PENDING
    params = {"limit": "10000"}
    for _ in range(2):  # the page cache and the connection
        await broker.timed_get(http, params)
    async with http.get("/v1/elicit", params=params) as r:
        body = await r.read()
    body_file = d.home.parent / "listing.json"  # beside the home, not in it
    body_file.write_bytes(body)
    bare_socket = d.home.parent / "bare.sock"
    bare = await Child.start("bare", bare_socket, "--body", str(body_file), timeout=60, script=HERE)
    mcpx_ms: list[float] = []
    bare_ms: list[float] = []
    try:
        async with unix_session(bare_socket, timeout=None) as bare_http:
            for _ in range(2):
                await broker.timed_get(bare_http, params)
            for i in range(N_LISTINGS):
                pair = [(mcpx_ms, http), (bare_ms, bare_http)]
                for times, session in pair if i % 2 == 0 else pair[::-1]:
                    elapsed, _size, count = await broker.timed_get(session, params)
                    if count < N_PENDING:
                        raise RuntimeError(f"a listing held {count} questions, not {N_PENDING}")
                    times.append(ms(elapsed))
        await bare.finish()
    finally:
        bare.kill()
    return mcpx_ms, bare_ms, len(body), kib_each


async def broker_figures(label: str, d: Daemon, rng: random.Random, values: Values) -> None:
    with d:
        async with d.session(limit=2 * max(broker.LIFE_CONCURRENCY, broker.OPEN_CONCURRENCY) + 8) as http:
            await broker.pending_count(http)
            t0 = time.monotonic()
            lat = await broker.phase_latency(d, http, rng, N_PUSH, N_POLL, N_HEALTH)
            if lat.missing_push:
                raise RuntimeError(f"{label}: {lat.missing_push} elicit.open frames never arrived")
            await broker.cancel_all_pending(http)
            t1 = time.monotonic()
            life = await broker.phase_lifecycles(d, N_LIFECYCLES)
            if life.durable != life.n + broker.N_WARMUP or life.anomalies:
                raise RuntimeError(f"{label}: {life.durable} of {life.n + broker.N_WARMUP} answers durable, "
                                   f"anomalies {dict(life.anomalies)}")
            t2 = time.monotonic()
            mcpx_ms, bare_ms, size, kib_each = await listing_vs_bare(d, http)
            say(f"      push {t1 - t0:.0f} s, lifecycles {t2 - t1:.0f} s, 10,000 pending and listings "
                f"{time.monotonic() - t2:.0f} s")
    values[("push", label)] = p50(lat.push_ms) / p50(lat.relay_ms)
    values[("push.mcpx_ms", label)] = p50(lat.push_ms)
    values[("push.relay_ms", label)] = p50(lat.relay_ms)
    values[("life", label)] = life.n / life.seconds
    values[("list", label)] = p50(mcpx_ms)
    values[("list.bare_ratio", label)] = p50(mcpx_ms) / p50(bare_ms)
    values[("list.bare_ms", label)] = p50(bare_ms)
    values[("list.mb", label)] = size / 1e6
    values[("mem", label)] = kib_each


# ---- one run, and the table

@dataclass
class Plan:
    against: str | None
    old_sidecar: Path | None
    mcp_proxy: str | None               # None: available; else why its rows are missing
    short: bool = False                 # --short: fewer calls, no peers
    calls_only: bool = False            # --calls: figures 1-3 alone (a call's path), no broker or CLI figures
    broker_only: bool = False           # --broker: figures 4-6 alone (the broker's), no calls or CLI figures
    notes: Notes = field(default_factory=dict)


def mcpx_labels(plan: Plan) -> list[str]:
    return ["mcpx"] + ([f"mcpx @{plan.against}"] if plan.old_sidecar is not None else [])


def mcpx_daemon(plan: Plan, label: str, config: dict[str, Any] | None) -> Daemon:
    """A daemon, not started, in a scratch home: this code's, or (label "mcpx @REF") that revision's."""
    if label == "mcpx":
        return scratch_daemon("mcpx-speed-", config)
    return scratch_daemon("mcpx-speed-", config, sidecar=plan.old_sidecar)


async def one_run(plan: Plan, index: int, rng: random.Random) -> Values:
    values: Values = {}
    if plan.broker_only:
        return await broker_run(plan, index, rng, values)
    daemons: list[tuple[str, Daemon]] = []
    try:
        for label in mcpx_labels(plan):
            daemons.append((label, mcpx_daemon(plan, label, servers_config())))
            daemons[-1][1].start()
        ours = [Route("direct", "direct"), Route(FLOOR, "relay"), Route(PARSING, "parsing-relay"),
                Route(DURABLE, "durable-relay"), *(Route(label, "mcpx", d, goal=True) for label, d in daemons)]
        modern = Route(MODERN_DIRECT, "direct-modern")  # figure 1 alone: figures 2-3's server speaks legacy only
        proxy = [] if plan.short else [Route("FastMCP create_proxy", "fastmcp")]
        if plan.mcp_proxy is None and not plan.short:
            proxy.append(Route(f"mcp-proxy {MCP_PROXY_VERSION} (HTTP)", "mcp-proxy"))
        # the stateful proxy is FastMCP's form for a server that asks: figures 2 and 3 (a plain call takes the
        # same path through it as through create_proxy's, within a few percent in trial runs)
        stateful = Route("FastMCP stateful proxy", "fastmcp-stateful")
        env = daemons[0][1].env
        plain = [*ours[:1], modern, *ours[1:], *proxy]
        say(f"  run {index + 1}: [1] plain calls, {len(plain)} routes, load {os.getloadavg()[0]:.2f} ...")
        t0 = time.monotonic()
        await plain_calls(plain, env, values)
        say(f"  run {index + 1}: [2-3] questions and {CALLERS} callers ({time.monotonic() - t0:.0f} s so far) ...")
        await asking_calls([*ours, *([] if plan.short else [stateful]), *proxy], env, values, plan.notes)
        say(f"  run {index + 1}: [1-3] took {time.monotonic() - t0:.0f} s")
    finally:
        for _label, d in daemons:
            d.cleanup()
    return values if plan.calls_only else await broker_run(plan, index, rng, values)


async def broker_run(plan: Plan, index: int, rng: random.Random, values: Values) -> Values:
    """Figures 4-6 of one run, on a daemon of each revision, one after the other."""
    labels = mcpx_labels(plan)
    if index % 2:
        labels.reverse()  # who goes first alternates between runs
    for label in labels:
        say(f"  run {index + 1}: [4-6] {label}: push, {N_LIFECYCLES} lifecycles, {N_PENDING} pending, "
            f"load {os.getloadavg()[0]:.2f} ...")
        t0 = time.monotonic()
        await broker_figures(label, mcpx_daemon(plan, label, None), rng, values)
        say(f"  run {index + 1}: [4-6] {label} took {time.monotonic() - t0:.0f} s")
    for label, role in ((FLOOR_SERVER, "floor"), (DURABLE_FLOOR, "durable-floor")):
        with tempfile.TemporaryDirectory(prefix="mcpx-floor-") as where:
            floor = await broker.floor_lifecycles(Path(where) / "floor.sock", N_LIFECYCLES, role)
        values[("life", label)] = floor.rate
        values[("life.server_ms", label)] = 1e3 * floor.server_s
        values[("life.client_ms", label)] = 1e3 * floor.client_s
        if floor.said.get("commits"):
            n = floor.said["lifecycles"]
            values[("life.commit_ms", label)] = 1e3 * floor.said["commit_s"] / n
            if floor.stored != n:
                raise RuntimeError(f"{label}: {floor.stored} of {n:.0f} answers read back from its file")
    return values


def spread(xs: list[float], fmt: Callable[[float], str]) -> str:
    med = statistics.median(xs)
    return fmt(med) if len(xs) == 1 else f"{fmt(med)} ({fmt(min(xs))}-{fmt(max(xs))})"


def ratio(x: float) -> str:
    return f"{x:.2f}x"


def per_s(x: float) -> str:
    return f"{x:.0f}/s"


def kib(x: float) -> str:
    return f"{x:.2f} KiB"


def table(runs: list[Values], plan: Plan) -> Report:
    report = Report()
    labels: list[str] = []
    for run in runs:
        for _fig, label in run:
            if label not in labels:
                labels.append(label)

    def got(fig: str, label: str) -> list[float]:
        return [run[(fig, label)] for run in runs if (fig, label) in run]

    def row(fig: str, title: str, label: str, fmt: Callable[[float], str], goal: bool, unit: str = "") -> None:
        name = title.format(label) if "{}" in title else f"{title}: {label}"
        xs = got(fig, label)
        if not xs:
            if label in plan.notes and fig in ("ask",):
                report.add(name, plan.notes[label][:60])
            return
        if not goal:
            report.add(name, spread(xs, fmt))
            return
        op, target = GOALS[fig]
        med = statistics.median(xs)
        ok = med <= target if op == "<=" else med >= target
        report.add(name, spread(xs, fmt), f"{op} {target:g}{unit}", ok)

    mcpx = [label for label in labels if label.startswith("mcpx")]
    peers = [label for label in labels
             if label not in mcpx and label not in ("direct", FLOOR, PARSING, DURABLE, MODERN_DIRECT, LEGACY_UPSTREAM)]
    for fig, title, floor, fmt_floor in (
            ("call", "1 plain tools/call p50", "call.direct_ms", fmt_ms),
            ("ask", "2 elicitation round trip p50", "ask.direct_ms", fmt_ms),
            ("thr", f"3 {CALLERS} callers in flight, calls/s", "thr.direct_per_s", per_s)):
        row(floor, title, "direct", fmt_floor, False)
        n = title[:1]
        row(fig, f"{n}   {{}} (the floor of any process between) / direct", FLOOR, ratio, False)
        row(fig, f"{n}   {{}} (the floor of any MCP proxy) / direct", PARSING, ratio, False)
        row(fig, f"{n}   {{}} (the floor of a proxy keeping mcpx's records) / direct", DURABLE, ratio, False)
        row(fig, f"{n}   {{}} (what the era mcpx calls in costs the server) / direct", MODERN_DIRECT, ratio, False)
        for label in mcpx:
            row(fig, f"{n}   {{}} / direct", label, ratio, True, "x")
        for label in peers:
            row(fig, f"{n}   {{}} / direct", label, ratio, False)
        if fig == "call":
            row("cpu", f"{n}   {{}}'s CPU per plain call (the floor of the daemon's)", DURABLE, fmt_ms, False)
            for label in mcpx:
                row("cpu", f"{n}   the daemon's CPU per plain call, {{}}", label, fmt_ms, True, " ms")
            row(fig, f"{n}   {{}} / direct", LEGACY_UPSTREAM, ratio, False)
            row("cpu", f"{n}   the daemon's CPU per plain call, {{}}", LEGACY_UPSTREAM, fmt_ms, False, " ms")
        if peers and mcpx:
            best = [statistics.median(got(fig, p)) for p in peers if got(fig, p)]
            if best:
                mine = statistics.median(got(fig, mcpx[0]))
                ahead = mine < min(best) if GOALS[fig][0] == "<=" else mine > max(best)
                report.add(f"{n}   mcpx ahead of every peer that does it", "yes" if ahead else "no", "ahead", ahead)
    for label in mcpx:
        row("list", "4 GET /v1/elicit?limit=10000 p50, 10,000 pending", label, fmt_ms, True, " ms")
        row("list.bare_ratio", "4   {} / a bare aiohttp send of the same bytes", label, ratio, False)
        row("list.bare_ms", "4   the bare aiohttp send p50, beside {}", label, fmt_ms, False)
        row("mem", "4   daemon memory per pending question, {}", label, kib, True, " KiB")
    for label in mcpx:
        row("push", "5 opened -> SSE subscriber p50 / bare aiohttp relay", label, ratio, True, "x")
        row("push.mcpx_ms", "5   opened -> SSE subscriber p50", label, fmt_ms, False)
        row("push.relay_ms", "5   the bare aiohttp relay p50, beside {}", label, fmt_ms, False)
    for label in mcpx:
        row("life", "6 durable question lifecycles/s", label, per_s, True, "/s")
    row("life", "6   {} (no broker nor store), lifecycles/s", FLOOR_SERVER, per_s, False)
    row("life.server_ms", "6   {}'s CPU per lifecycle", FLOOR_SERVER, fmt_ms, False)
    row("life", "6   {} (each transition committed as mcpx does), lifecycles/s", DURABLE_FLOOR, per_s, False)
    row("life.server_ms", "6   {}'s CPU per lifecycle", DURABLE_FLOOR, fmt_ms, False)
    row("life.commit_ms", "6   of which {}'s commits on the loop (SQLite)", DURABLE_FLOOR, fmt_ms, False)
    row("life.client_ms", "6   the bench client's CPU per lifecycle on {} (bench/lean_http.py)", FLOOR_SERVER, fmt_ms,
        False)
    return report


def ensure_mcp_proxy() -> str | None:
    """mcp-proxy in a venv of the bench's own (it pins mcp<2); None when it is there, else why not."""
    exe = MCP_PROXY_VENV / "bin" / "mcp-proxy"
    pip = MCP_PROXY_VENV / "bin" / "pip"
    installed = subprocess.run([str(pip), "show", "mcp-proxy"], capture_output=True, text=True) if pip.exists() \
        else None
    if installed is not None and f"Version: {MCP_PROXY_VERSION}" in installed.stdout and exe.exists():
        return None
    say(f"installing mcp-proxy {MCP_PROXY_VERSION} into {MCP_PROXY_VENV} (a venv of its own: it pins mcp<2) ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(MCP_PROXY_VENV)], check=True, capture_output=True)
        subprocess.run([str(pip), "install", "-q", f"mcp-proxy=={MCP_PROXY_VERSION}"], check=True,
                       capture_output=True, text=True, timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        why = getattr(e, "stderr", None) or str(e)
        return f"could not install it: {str(why).strip().splitlines()[-1][:200]}"
    return None


async def main_async(runs: int, against: str | None, short: bool, calls_only: bool = False,
                     broker_only: bool = False) -> None:
    started = time.monotonic()
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory(prefix="mcpx-speed-") as tmp:
        old = checkout(against, Path(tmp)) if against else None
        proxy = None if short or broker_only else await asyncio.to_thread(ensure_mcp_proxy)
        plan = Plan(against, old, proxy, short, calls_only, broker_only)
        say(f"{os.cpu_count()} cpus, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {runs} run(s)"
            + (f"; beside the daemon and `mcpx serve` of {against}" if against else ""))
        if plan.mcp_proxy:
            say(f"mcp-proxy rows left out: {plan.mcp_proxy}")
        results = [await one_run(plan, i, rng) for i in range(runs)]
    report = table(results, plan)
    if not calls_only and not broker_only:
        cli_start.add_rows(report, runs, against)  # 7: `mcpx elicit list` / python -c, bench/cli_start.py
    say(f"the run took {time.monotonic() - started:.0f} s; load now "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    report.show()
    print()
    for label, why in plan.notes.items():
        print(f"elicitation through {label}: {why}")
    print("Each figure: the median of the runs, and (min-max) over them. Ratios are against the same SDK client")
    print("(legacy era) straight to the same server script, timed in the same interleaved rounds; mcp-proxy is")
    print("reached over Streamable HTTP (it serves stdio servers that way), all others over stdio.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="repeat the whole table this many times (default 3)")
    parser.add_argument("--against", metavar="REF", help="also run the mcpx rows on this git revision")
    parser.add_argument("--short", action="store_true", help="fewer calls and no peers: a run of three in 1-2 min")
    parser.add_argument("--calls", action="store_true", help="figures 1-3 alone: a plain call, a question, 16 callers")
    parser.add_argument("--broker", action="store_true", help="figures 4-6 alone: the 10k listing, push, lifecycles")
    parser.add_argument("--role", choices=("bare",), help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--body", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bare":
        asyncio.run(role_bare(args.socket, Path(args.body).read_bytes()))
        return 0
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.short:
        short_plan()
    # SIGTERM too stops the daemons and every peer
    run_stoppable(main_async(args.runs, args.against, args.short, args.calls, args.broker))
    return 0


if __name__ == "__main__":
    sys.exit(main())
