"""Benchmark of `mcpx serve`, the MCP surface on stdio: what a host pays for putting mcpx in front of a server.

What it measures, in one run, against a `python -m mcpx daemon` in a temp MCPX_HOME whose one upstream
server, `peer`, is bench/peer_server.py (official mcp SDK, stdio):

1. a trivial `tools/call` (`echo`) by the official SDK client (`mcp.client.Client` with
   `StdioServerParameters`, `session.call_tool`) pointed at `python -m mcpx serve` (tool `peer_echo`)
   versus the same client pointed at the server script itself (tool `echo`), both in the same mode:
   `legacy` (the initialize handshake on both sides) and `auto` (both probe `server/discover`; an SDK
   server and mcpx both answer it, so both end up modern). All four clients are open at once, warmed
   up, then timed in interleaved rounds whose order rotates, so machine noise hits every side alike:
   p50/p99 of each and the ratio mcpx/direct at p50 per mode. In the same rounds, as floors without a
   target, legacy era and no client library: one JSON-RPC line on the pipes of a `mcpx serve`, the
   same message as one frame on the daemon's own websocket (`/v1/mcp/stream`, what serve pumps to),
   and one line on the pipes of a server script. Their differences split what mcpx adds into the
   serve hop and the daemon. Beside every side: the CPU per call (user + system, from /proc) of
   each process on its path (this client, serve, the daemon, the upstream), taken while only that
   side's calls ran.
2. `mcpx serve` start-to-ready: from spawning `python -m mcpx serve` (its `initialize` line already
   written to its stdin) to that answer arriving on its stdout, with the daemon running: p50/p99.
   The same when no daemon runs yet (serve starts one, in a home of its own whose daemon the bench
   then stops again, by the pid in its daemon.json), and
   `python -c pass` as the floor: no Python process starts faster.

`--against REF` runs the mcpx sides of phase 1 and the warm starts of phase 2 on the daemon and the
`mcpx serve` of another git revision too (a checkout of its sidecar/, as bench/upstreams.py does),
interleaved in the same rounds beside this tree's and the same direct sides: before and after a
change, in one run.

Run it from the repository root (the venv has mcpx installed editable):

    .venv/bin/python bench/surface.py                        # about 40 s on 2 cores
    .venv/bin/python bench/surface.py --against main         # and main's daemon and serve beside it, ~70 s
    .venv/bin/python bench/surface.py --profile /tmp/sf      # the daemon and the timed `mcpx serve`s under cProfile

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
from mcp.client.stdio import StdioServerParameters

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # broker and gateway sit beside this file, however it is run
sys.path.insert(0, str(BENCH.parent / "tests"))  # the daemon harness
from broker import Report, both, fmt_ms, ms, p50, p99, say  # noqa: E402
from gateway import RawStdio, era_of, protocol_in_log  # noqa: E402
from harness import Daemon, child_pids, process_cpu_seconds, run_stoppable, scratch_daemon  # noqa: E402
from upstreams import checkout  # noqa: E402

# ---- the plan (sizes chosen so that one run stays well under 2 minutes on 2 cores)

PEER = BENCH / "peer_server.py"
SERVER = "peer"                 # the config's name for it: through mcpx its tools are `peer_<tool>`
MODES = ("legacy", "auto")      # Client(mode=...), the same on both sides
N_WARMUP_CALLS = 40             # untimed calls per side first: process start, imports, first-use caches
ROUNDS, PER_ROUND = 40, 10      # 400 timed calls per side, in blocks of 10, the order rotated every round
N_STARTS = 15                   # `mcpx serve` starts with the daemon running (and as many `python -c pass`)
N_COLD = 6                      # `mcpx serve` starts that start the daemon too
LEGACY_VERSION = "2025-11-25"   # what the raw floors send in their initialize

TARGET_RATIO = 1.5
TARGET_READY_S = 1.0


def upstream_config() -> dict[str, dict[str, Any]]:
    return {SERVER: {"command": sys.executable, "args": [str(PEER)]}}


def serve_argv(profile: str | None = None) -> list[str]:
    return [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else []), "-m", "mcpx", "serve"]


def initialize_line(rid: int = 1) -> bytes:
    msg = {"jsonrpc": "2.0", "id": rid, "method": "initialize",
           "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {},
                      "clientInfo": {"name": "bench-surface", "version": "0"}}}
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


# ---- what the call rounds time

class SdkCaller:
    """The official SDK client's `session.call_tool` on its own stdio connection (as gateway.py's direct side)."""

    def __init__(self, client: Client, tool: str) -> None:
        self.client = client
        self.tool = tool

    async def __call__(self) -> None:
        res = await self.client.session.call_tool(self.tool, {"text": "hi"})
        text = res.content[0].text if res.content and isinstance(res.content[0], types.TextContent) else None
        if res.is_error or text != "echo: hi":
            raise RuntimeError(f"{self.tool}: {res}")


class RawLine(RawStdio):
    """gateway.py's raw JSON-RPC line on a process's pipes, for any command and tool name (legacy era)."""

    tool = "echo"

    @classmethod
    async def spawn(cls, argv: list[str], env: dict[str, str], tool: str, cwd: Path | None = None) -> RawLine:
        proc = await asyncio.create_subprocess_exec(*argv, env=env, cwd=cwd, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        raw = cls(proc, LEGACY_VERSION)
        raw.tool = tool
        await raw.request("initialize", {"protocolVersion": LEGACY_VERSION, "capabilities": {},
                                         "clientInfo": {"name": "bench-raw", "version": "0"}})
        await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return raw

    async def __call__(self) -> None:
        res = await self.request("tools/call", {"name": self.tool, "arguments": {"text": "hi"}})
        if res["content"][0]["text"] != "echo: hi":
            raise RuntimeError(f"raw {self.tool}: {res}")


class RawWs:
    """The same JSON-RPC message as one frame on the daemon's /v1/mcp/stream websocket: serve's far end, no serve."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, tool: str) -> None:
        self.ws = ws
        self.tool = tool
        self.ids = iter(range(1, 10**9))

    @classmethod
    async def connect(cls, http: aiohttp.ClientSession, cwd: Path, tool: str) -> RawWs:
        # the headers `mcpx serve` sends (serve_pump.Bridge._headers), so the daemon sees the same client
        ws = await http.ws_connect("/v1/mcp/stream", headers={"X-Mcpx-Cwd": str(cwd)})
        raw = cls(ws, tool)
        await raw.request("initialize", {"protocolVersion": LEGACY_VERSION, "capabilities": {},
                                         "clientInfo": {"name": "bench-raw-ws", "version": "0"}})
        await ws.send_str(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return raw

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(self.ids)
        await self.ws.send_str(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                                          separators=(",", ":")))
        while True:  # skip anything that is not our reply
            frame = await self.ws.receive()
            if frame.type != aiohttp.WSMsgType.TEXT:
                raise RuntimeError(f"the daemon's stream ended: {frame.type}")
            msg = json.loads(frame.data)
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"raw ws {method}: {msg['error']}")
                return dict(msg["result"])

    async def __call__(self) -> None:
        res = await self.request("tools/call", {"name": self.tool, "arguments": {"text": "hi"}})
        if res["content"][0]["text"] != "echo: hi":
            raise RuntimeError(f"raw ws {self.tool}: {res}")


@dataclass
class Side:
    name: str
    call: Callable[[], Awaitable[None]]
    times_ms: list[float] = field(default_factory=list)
    # the processes that serve this side's calls, by role ("serve", "daemon", "upstream", "server"), and the CPU
    # (user + system, from /proc) each role spent while this side's blocks ran: only this side's calls ran then
    watch: dict[str, list[int]] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)

    def cpu_ms_per_call(self, role: str) -> float:
        return 1e3 * self.cpu_s.get(role, 0.0) / len(self.times_ms)


def cpu_of(pids: list[int]) -> float:
    """CPU seconds the processes spent so far, all their threads: from schedstat, in nanoseconds (/proc/PID/stat
    counts clock ticks of 10 ms, coarser than a block of plain calls costs a daemon), else from stat."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # one that has gone counts no more
            try:
                total += sum(int((task / "schedstat").read_text().split()[0])
                             for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9
            except (OSError, ValueError, IndexError):
                total += process_cpu_seconds(pid)
    return total


async def timed_block(side: Side, n: int) -> None:
    cpu0 = {role: cpu_of(pids) for role, pids in side.watch.items()}
    for _ in range(n):
        t0 = time.monotonic()
        await side.call()
        side.times_ms.append(ms(time.monotonic() - t0))
    for role, pids in side.watch.items():
        side.cpu_s[role] = side.cpu_s.get(role, 0.0) + cpu_of(pids) - cpu0[role]


async def interleaved(sides: list[Side], rounds: int = ROUNDS, per_round: int = PER_ROUND) -> None:
    """`rounds` rounds of `per_round` calls per side; who goes first rotates, so no side always follows another."""
    for r in range(rounds):
        k = r % len(sides)
        for side in sides[k:] + sides[:k]:
            await timed_block(side, per_round)


async def enter_spawning(stack: contextlib.AsyncExitStack, client: Client) -> tuple[Client, int]:
    """Enter an SDK client and return it with the pid of the process it started (a new child of this one)."""
    before = child_pids(os.getpid())
    entered = await stack.enter_async_context(client)
    new = child_pids(os.getpid()) - before
    if len(new) != 1:
        raise RuntimeError(f"expected the client to start one process, found {sorted(new)}")
    return entered, new.pop()


@dataclass
class Pair:
    mode: str
    mcpx: Side
    direct: Side
    mcpx_protocol: str
    direct_protocol: str
    label: str = ""             # "" for this tree; the revision's name for --against


@dataclass
class Calls:
    pairs: list[Pair]
    raw_serve: Side
    raw_ws: Side
    raw_peer: Side
    upstream: str               # the era and protocol the daemon called `peer` in, from its log
    raw_serve_against: Side | None = None


@dataclass
class Target:
    """A daemon and the `mcpx serve` that goes with it: this tree's (label "") or another revision's."""

    label: str
    daemon: Daemon

    def tag(self, name: str) -> str:
        return f"{name} ({self.label})" if self.label else name


async def phase_calls(targets: list[Target], profile: str | None) -> Calls:
    d = targets[0].daemon
    env = d.env  # MCPX_HOME/MCPX_CONFIG of the bench daemon: `mcpx serve` finds it, and nothing else
    me = [os.getpid()]  # the client side of every pair is this process
    owned: list[tuple[Side, Target]] = []  # the sides whose calls a daemon serves, with it
    async with contextlib.AsyncExitStack() as stack:  # every client and raw process ends with this phase
        http = await stack.enter_async_context(d.session())
        pairs: list[Pair] = []
        for mode in MODES:
            direct, direct_pid = await enter_spawning(stack, Client(
                StdioServerParameters(command=sys.executable, args=[str(PEER)], env=env), mode=mode))
            straight = Side(f"direct {mode}", SdkCaller(direct, "echo"), watch={"client": me, "server": [direct_pid]})
            for target in targets:
                argv = serve_argv(f"{profile}.serve-{mode}" if profile and not target.label else None)
                via, via_pid = await enter_spawning(stack, Client(StdioServerParameters(
                    command=argv[0], args=argv[1:], env=target.daemon.env, cwd=str(target.daemon.home)), mode=mode))
                through = Side(target.tag(f"mcpx {mode}"), SdkCaller(via, f"{SERVER}_echo"),
                               watch={"client": me, "serve": [via_pid]})
                pairs.append(Pair(mode, through, straight, via.protocol_version, direct.protocol_version,
                                  target.label))
                owned.append((through, target))
        raws: list[Side] = []
        for target in targets:
            raw = await RawLine.spawn(serve_argv(), target.daemon.env, f"{SERVER}_echo", cwd=target.daemon.home)
            stack.push_async_callback(raw.close)
            raws.append(Side(target.tag("raw mcpx serve"), raw, watch={"serve": [raw.proc.pid]}))
            owned.append((raws[-1], target))
        raw_ws = await RawWs.connect(http, d.home, f"{SERVER}_echo")
        stack.push_async_callback(raw_ws.ws.close)
        raw_peer = await RawLine.spawn([sys.executable, str(PEER)], env, "echo")
        stack.push_async_callback(raw_peer.close)
        sides = [p.mcpx for p in pairs] + list({id(p.direct): p.direct for p in pairs}.values()) + raws
        sides += [Side("raw daemon ws", raw_ws), Side("raw peer", raw_peer, watch={"server": [raw_peer.proc.pid]})]
        owned.append((sides[-2], targets[0]))
        for side in sides:
            for _ in range(N_WARMUP_CALLS):
                await side.call()
        for side, target in owned:
            pid = target.daemon.pid
            assert pid is not None
            # the upstream processes the daemon started for these calls
            side.watch.update(daemon=[pid], upstream=sorted(child_pids(pid)))
        await interleaved(sides)
    found = protocol_in_log(d, SERVER)
    return Calls(pairs, raws[0], sides[-2], sides[-1], f"{era_of(found)} {found}" if found != "?" else "?",
                 raws[1] if len(raws) > 1 else None)


# ---- phase 2: start-to-ready

async def start_to_ready(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Spawn `mcpx serve` with its initialize already on its stdin; seconds until the answer's line arrives."""
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*argv, env=env, cwd=cwd, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(initialize_line())
    await proc.stdin.drain()
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    took = time.monotonic() - t0
    proc.stdin.close()  # end of input: serve closes its stream and exits
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()
    msg = json.loads(line) if line.strip() else {}
    if msg.get("id") != 1 or "result" not in msg:
        err = (await proc.stderr.read()).decode(errors="replace")[-500:]
        raise RuntimeError(f"mcpx serve answered initialize with {line[:300]!r} (exit {proc.returncode}): {err}")
    return took


async def python_start(env: dict[str, str]) -> float:
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass", env=env)
    await proc.wait()
    return time.monotonic() - t0


@dataclass
class Starts:
    warm_s: list[float]
    cold_s: list[float]
    python_s: list[float]
    warm_against_s: list[float] = field(default_factory=list)


async def phase_starts(targets: list[Target], profile: str | None) -> Starts:
    warm: list[float] = []
    cold: list[float] = []
    python: list[float] = []
    against: list[float] = []
    d = targets[0].daemon
    env = d.env
    for target in targets:  # untimed: the page cache holds the imports from here on
        await start_to_ready(serve_argv(), target.daemon.env, target.daemon.home)
    for _ in range(N_STARTS):  # interleaved, so all see the same machine
        python.append(await python_start(env))
        warm.append(await start_to_ready(serve_argv(), env, d.home))
        for target in targets[1:]:
            against.append(await start_to_ready(serve_argv(), target.daemon.env, target.daemon.home))
    # a home of its own with the same config and no daemon: the harness gives the layout, start() is never called;
    # stop() stops the daemon each `mcpx serve` started there (by the pid in its daemon.json)
    idle = scratch_daemon("mcpx-bench-", {"servers": upstream_config()})
    try:
        for i in range(N_COLD):
            argv = serve_argv(f"{profile}.cold{i}" if profile and i == N_COLD - 1 else None)
            cold.append(await start_to_ready(argv, idle.env, idle.home))
            await asyncio.to_thread(idle.stop)
    finally:
        idle.cleanup()
    return Starts(warm, cold, python, against)


# ---- the report

def report_calls(report: Report, calls: Calls) -> None:
    for pair in calls.pairs:
        m, dr = pair.mcpx.times_ms, pair.direct.times_ms
        ratio = p50(m) / p50(dr)
        same = era_of(pair.mcpx_protocol) == era_of(pair.direct_protocol)
        tag = f"[{pair.mode}{', ' + pair.label if pair.label else ''}]"
        report.add(f"{tag} era: client -> mcpx serve, -> direct",
                   f"{era_of(pair.mcpx_protocol)} {pair.mcpx_protocol}, {era_of(pair.direct_protocol)} "
                   f"{pair.direct_protocol}", "the same", same)
        report.add(f"{tag} tools/call via mcpx serve p50 / p99 (n={len(m)})", both(m))
        report.add(f"{tag} tools/call direct SDK stdio p50 / p99 (n={len(dr)})", both(dr))
        report.add(f"{tag} ratio mcpx / direct at p50", f"{ratio:.2f}x", f"<= {TARGET_RATIO:g}x",
                   ratio <= TARGET_RATIO)
        report.add(f"{tag}   mcpx minus direct at p50", fmt_ms(p50(m) - p50(dr)))
        report.add(f"{tag}   CPU per call via mcpx: client + serve + daemon + upstream",
                   " + ".join(f"{pair.mcpx.cpu_ms_per_call(role):.2f}" for role in ("client", "serve", "daemon",
                                                                                     "upstream")) + " ms")
        report.add(f"{tag}   CPU per call direct: client + server",
                   " + ".join(f"{pair.direct.cpu_ms_per_call(role):.2f}" for role in ("client", "server")) + " ms")
    report.add("  era: daemon -> peer (upstream)", calls.upstream)
    report.add("  floor: raw JSON-RPC line via mcpx serve p50 / p99", both(calls.raw_serve.times_ms))
    if calls.raw_serve_against is not None:
        report.add(f"  floor: {calls.raw_serve_against.name} p50 / p99", both(calls.raw_serve_against.times_ms))
    report.add("  floor: raw frame on the daemon's websocket p50 / p99", both(calls.raw_ws.times_ms))
    report.add("  floor: raw JSON-RPC line to the peer p50 / p99", both(calls.raw_peer.times_ms))
    serve, ws, peer = (p50(s.times_ms) for s in (calls.raw_serve, calls.raw_ws, calls.raw_peer))
    report.add("  raw: the serve hop (serve minus websocket) at p50", fmt_ms(serve - ws))
    report.add("  raw: the daemon (websocket minus peer) at p50", fmt_ms(ws - peer))
    report.add("  raw CPU per call: serve + daemon + upstream, via serve",
               " + ".join(f"{calls.raw_serve.cpu_ms_per_call(role):.2f}" for role in ("serve", "daemon", "upstream"))
               + " ms")
    report.add("  raw CPU per call: daemon + upstream, on its websocket",
               " + ".join(f"{calls.raw_ws.cpu_ms_per_call(role):.2f}" for role in ("daemon", "upstream")) + " ms")
    report.add("  raw CPU per call: the server alone", f"{calls.raw_peer.cpu_ms_per_call('server'):.2f} ms")


def report_starts(report: Report, starts: Starts) -> None:
    w50 = p50(starts.warm_s)
    report.add(f"mcpx serve start -> initialize answered p50 (n={len(starts.warm_s)})", fmt_ms(ms(w50)),
               f"<= {TARGET_READY_S:g} s", w50 <= TARGET_READY_S)
    report.add("mcpx serve start -> initialize answered p99", fmt_ms(ms(p99(starts.warm_s))))
    if starts.warm_against_s:
        report.add("  the same, the other revision's serve and daemon, p50 / p99",
                   f"{fmt_ms(ms(p50(starts.warm_against_s)))} / {fmt_ms(ms(p99(starts.warm_against_s)))}")
    report.add(f"  the same, no daemon yet (serve starts one) p50 / p99 (n={len(starts.cold_s)})",
               f"{fmt_ms(ms(p50(starts.cold_s)))} / {fmt_ms(ms(p99(starts.cold_s)))}")
    report.add(f"  floor: python -c pass p50 / p99 (n={len(starts.python_s)})",
               f"{fmt_ms(ms(p50(starts.python_s)))} / {fmt_ms(ms(p99(starts.python_s)))}")


# ---- the run

async def run(profile: str | None, against: str | None) -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mcpx-against-") as tmp:
        targets = [Target("", scratch_daemon("mcpx-bench-", {"servers": upstream_config()},
                                             python_args=["-m", "cProfile", "-o", profile] if profile else []))]
        if against:
            targets.append(Target(against, scratch_daemon("mcpx-bench-", {"servers": upstream_config()},
                                                          sidecar=checkout(against, Path(tmp)))))
        calls, starts = await measure(targets, profile)
    say(f"      the run took {time.monotonic() - started:.0f} s")

    report = Report()
    report_calls(report, calls)
    report_starts(report, starts)
    print()
    report.show()
    print()
    print("direct: the same SDK client and mode, pointed at the server script instead of `mcpx serve`; raw: one")
    print("hand-written JSON-RPC message (legacy era, no client library) on serve's pipes, on the daemon's websocket")
    print("and on the server's pipes: the serve hop and the daemon apart. CPU per call is user + system time from")
    print("/proc of each process while that side's blocks ran (client: this process). Start-to-ready counts from")
    print("the spawn to the initialize answer on stdout.")


async def measure(targets: list[Target], profile: str | None) -> tuple[Calls, Starts]:
    try:
        for target in targets:
            target.daemon.start()
            say(f"daemon{' of ' + target.label if target.label else ''} pid {target.daemon.pid}, MCPX_HOME "
                f"{target.daemon.home}")
        say(f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; upstream `{SERVER}`: {PEER.name}")
        say(f"[1/2] tools/call: SDK clients in modes {', '.join(MODES)} to `mcpx serve` and to {PEER.name}, plus "
            f"raw lines to each; {N_WARMUP_CALLS} warm-up calls per side, then {ROUNDS} rounds of {PER_ROUND} ...")
        calls = await phase_calls(targets, profile)
        for pair in calls.pairs:
            say(f"      mode={pair.mode}{' ' + pair.label if pair.label else ''}: the client spoke "
                f"{pair.mcpx_protocol} to mcpx serve and {pair.direct_protocol} to the server; the daemon called "
                f"`{SERVER}` in {calls.upstream}")
        say(f"[2/2] start-to-ready: {N_STARTS} `mcpx serve` starts (and `python -c pass`) with the daemon up, "
            f"then {N_COLD} with no daemon yet ...")
        starts = await phase_starts(targets, profile)
    except BaseException:
        for target in targets:
            t = target.daemon
            alive = t.proc is not None and t.proc.poll() is None
            say(f"\nbenchmark aborted; daemon {'still running' if alive else 'exited'}; state kept in {t.home}\n"
                f"--- daemon stderr (tail) ---\n{t.tail()}")
            t.keep = True
        raise
    finally:
        for target in targets:
            code = target.daemon.stop()  # SIGTERM: the daemon drains, closes its upstreams and exits
            say(f"      daemon{' of ' + target.label if target.label else ''} stopped with SIGTERM, exit {code}")
            target.daemon.cleanup()
        if profile:
            say(f"profiles written to {profile} (daemon), {profile}.serve-<mode> (the SDK clients' mcpx serve) "
                f"and {profile}.cold{N_COLD - 1} (the last serve that started a daemon)")
    return calls, starts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--profile", metavar="FILE", help="cProfile the daemon to FILE and the timed `mcpx serve` "
                                                          "processes to FILE.serve-<mode> and FILE.cold<n>")
    parser.add_argument("--against", metavar="REF", help="also run the mcpx sides on this git revision's daemon and "
                                                         "`mcpx serve`, interleaved with this tree's")
    args = parser.parse_args()
    run_stoppable(run(args.profile, args.against))  # SIGTERM too stops the daemon and the clients
    return 0


if __name__ == "__main__":
    sys.exit(main())
