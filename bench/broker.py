"""Benchmark of the mcpx broker through its real daemon, over the unix socket.

What it measures, in one run against one fresh `python -m mcpx daemon` (empty config, temp MCPX_HOME):

1. push latency: `POST /v1/elicit` -> the `elicit.open` frame of `GET /v1/events?kinds=elicit.open`
   arriving at a subscriber in another process (both ends stamp time.monotonic(), which is
   CLOCK_MONOTONIC on Linux and so comparable across processes); p50 and p99.
   Beside it, the floor: a bare aiohttp relay (this file, --role relay, no broker, no SQLite) that
   answers the same POST and writes the same kind of frame to its own subscriber process; its
   sends are interleaved with mcpx's, so "mcpx push / relay push" is the cost mcpx adds over
   two aiohttp hops on this machine. GET /v1/health is timed in the same loop, after the same gaps.
2. the reference: a separate process polling `GET /v1/elicit?session=bench-poll` every 250 ms,
   for a smaller batch of questions opened in the same loop; its discovery p50/p99 and poll/push.
3. lifecycles per second: open -> long-poll `/wait` -> accept -> the waiter holds the 200, with
   16 lifecycles in flight; each answer is committed to SQLite (WAL) before the waiter is woken. The three
   requests are sent by bench/lean_http.py's client, not aiohttp's, which cost the bench about as much CPU as the
   server spent (issue 39: on two shared cores the figure was its own client's). --against's and --lifecycles'
   two floor rows are driven by the same client: a bare aiohttp server answering the same requests (`role_floor`),
   and the same server committing each transition to SQLite as mcpx does (`role_durable_floor`,
   bench/durable_floor.py).
4. `GET /v1/elicit?limit=10000` with 10,000 pending questions (and the default 1000-item page).
5. the daemon's VmRSS idle and with the 10,000 pending.

Run it from the repository root (the venv has mcpx installed editable):

    .venv/bin/python bench/broker.py              # the whole run, well under 3 minutes on 2 cores
    .venv/bin/python bench/broker.py --against main   # lifecycles, the 10k listing and RSS, here and on main
    .venv/bin/python bench/broker.py --against main --lifecycles --rounds 8   # figure 6 alone, here and on main
    .venv/bin/python bench/broker.py --lifecycles --rounds 8   # figure 6 alone beside its two floors
    .venv/bin/python bench/broker.py --profile /tmp/daemon.prof   # the same under cProfile, in the daemon
    .venv/bin/python bench/broker.py --lifecycles --rounds 2 --profile /tmp/life.prof   # Python calls per lifecycle

It is a benchmark, not a test: it exits 0 whether or not targets are met, and says MISSED where
one is. The machines here are noisy, so the ratios printed beside the absolute figures (all
measured in this same run) are the figures to compare between runs.

The hidden `--role sse|poll|relay` options are how this file runs its own subscriber and poller processes.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import math
import os
import pstats
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the daemon harness, however this is run
import durable_floor
from counted import COUNTED
from harness import Daemon, process_cpu_seconds, run_stoppable, scratch_daemon, unix_session
from lean_http import LeanHttp

# ---- the plan (sizes chosen so that one run stays well under 3 minutes on 2 cores)

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"repo": {"type": "string"}}}
PUSH_SESSION, POLL_SESSION, LIFE_SESSION, MANY_SESSION = "bench", "bench-poll", "bench-life", "bench-many"
HERE = Path(__file__).resolve()  # this file, started again as each child role
N_WARMUP = 30                   # untimed opens and lifecycles first: connections, first-use caches
N_PUSH = 300                    # questions timed push-side
N_POLL = 120                    # questions timed poll-side, interleaved with the push ones
GAP_S = (0.002, 0.020)          # random gap between sends: no send lines up with the 250 ms poll grid
POLL_INTERVAL_S = 0.250
N_LIFECYCLES = 2000
LIFE_CONCURRENCY = 16
N_MANY = 10_000
OPEN_CONCURRENCY = 32
N_LIST = 20                     # timed listings of each kind
N_HEALTH = 100
SEED = 20240601                 # the same gaps and interleaving every run

TARGET_PUSH_P50_MS = 2.0
TARGET_PUSH_P99_MS = 10.0
TARGET_LIFECYCLES_S = 500.0
TARGET_LIST_P50_MS = 50.0


# ---- small numeric helpers

def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN for no values."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def ms(seconds: float) -> float:
    return seconds * 1000.0


def ask_body(session: str, ttl: float | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": "Which repository?", "requestedSchema": SCHEMA, "session": session}
    if ttl is not None:
        body["ttl"] = ttl
    return body


# ---- results

@dataclass
class Row:
    """One line of the summary: a measured figure, its target (if it has one) and whether it is met."""

    metric: str
    measured: str
    target: str = ""
    ok: bool | None = None      # None: informational, no target

    @property
    def verdict(self) -> str:
        return "" if self.ok is None else ("ok" if self.ok else "MISSED")


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    def add(self, metric: str, measured: str, target: str = "", ok: bool | None = None) -> None:
        self.rows.append(Row(metric, measured, target, ok))

    def show(self) -> None:
        head = ("metric", "measured", "target", "ok?")
        widths = [max(len(head[0]), *(len(r.metric) for r in self.rows)),
                  max(len(head[1]), *(len(r.measured) for r in self.rows)),
                  max(len(head[2]), *(len(r.target) for r in self.rows)), 6]
        line = "+".join("-" * (w + 2) for w in widths)

        def fmt(cells: tuple[str, str, str, str]) -> str:
            # numbers right-aligned, words left-aligned
            pairs = enumerate(zip(cells, widths, strict=True))
            aligned = (f" {c:>{w}} " if i == 1 else f" {c:<{w}} " for i, (c, w) in pairs)
            return "|".join(aligned)

        print(fmt(head))
        print(line)
        for r in self.rows:
            print(fmt((r.metric, r.measured, r.target, r.verdict)))
        missed = [r.metric for r in self.rows if r.ok is False]
        print()
        print(f"MISSED {len(missed)} target(s): {', '.join(missed)}" if missed else "all targets met")


def say(text: str) -> None:
    print(text, flush=True)


# ---- talking to the daemon

async def open_question(http: aiohttp.ClientSession, session: str, ttl: float | None = None) -> str:
    async with http.post("/v1/elicit", json=ask_body(session, ttl)) as r:
        data = await r.json()
        if r.status != 201:
            raise RuntimeError(f"POST /v1/elicit: {r.status} {data}")
        return str(data["elicitation"]["id"])


async def answer(http: aiohttp.ClientSession, eid: str, action: str, content: dict[str, Any] | None = None) -> None:
    async with http.post(f"/v1/elicit/{eid}/{action}", json={"content": content} if content else {}) as r:
        if r.status != 200:
            raise RuntimeError(f"POST /v1/elicit/{eid}/{action}: {r.status} {await r.text()}")
        await r.read()


async def pool(n: int, concurrency: int, job: Callable[[int], Awaitable[None]]) -> None:
    """Run job(0..n-1) with at most `concurrency` in flight; the first failure ends the run."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:  # the shared iterator hands each index to exactly one worker
            await job(i)

    async with asyncio.TaskGroup() as group:  # a failure cancels the other workers, nothing is left dangling
        for _ in range(min(concurrency, n)):
            group.create_task(worker())


async def pending_ids(http: aiohttp.ClientSession) -> list[str]:
    async with http.get("/v1/elicit", params={"limit": "10000"}) as r:
        return [q["id"] for q in (await r.json())["elicitations"]]


async def cancel_all_pending(http: aiohttp.ClientSession) -> int:
    """So that a later phase sees exactly the pending questions it opened."""
    ids = await pending_ids(http)
    await pool(len(ids), OPEN_CONCURRENCY, lambda i: answer(http, ids[i], "cancel"))
    return len(ids)


async def timed_health(http: aiohttp.ClientSession) -> float:
    t0 = time.monotonic()
    async with http.get("/v1/health") as r:
        await r.read()
    return time.monotonic() - t0


async def pending_count(http: aiohttp.ClientSession) -> int:
    async with http.get("/v1/health") as r:
        return int((await r.json())["pending"])


# ---- the subscriber, poller and relay processes (this same file, --role sse|poll|relay; bench/gateway.py's too)

class Child:
    """A helper process that says `ready` on stdout, records until its stdin closes, then prints JSON."""

    def __init__(self, proc: asyncio.subprocess.Process, role: str) -> None:
        self.proc = proc
        self.role = role

    @classmethod
    async def start(cls, role: str, socket: Path, *extra: str, timeout: float = 15.0, script: Path = HERE) -> Child:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), "--role", role, "--socket", str(socket), *extra,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        child = cls(proc, role)
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        except TimeoutError:
            child.kill()
            raise RuntimeError(f"the {role} process did not get ready in {timeout:.0f}s") from None
        if line.strip() != b"ready":
            child.kill()
            raise RuntimeError(f"the {role} process said {line!r} instead of ready")
        return child

    async def finish(self, timeout: float = 15.0) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        out = await asyncio.wait_for(self.proc.stdout.read(), timeout)
        await asyncio.wait_for(self.proc.wait(), timeout)
        if self.proc.returncode != 0:
            raise RuntimeError(f"the {self.role} process exited {self.proc.returncode}")
        return json.loads(out.strip().splitlines()[-1])

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


async def stdin_closed() -> None:
    """The parent closes our stdin to say: stop recording and report."""
    await asyncio.to_thread(sys.stdin.buffer.read)


async def role_sse(socket: str) -> None:
    """Subscribe to elicit.open and stamp each frame the moment its first line arrives: {id: {at, server, tool}}."""
    seen: dict[str, dict[str, Any]] = {}
    ready = asyncio.Event()

    async def read(resp: aiohttp.ClientResponse) -> None:
        frame_at = 0.0
        async for raw in resp.content:  # one line at a time
            now = time.monotonic()
            if raw in (b"\n", b"\r\n"):
                frame_at = 0.0
                continue
            if not frame_at:
                frame_at = now  # a frame is written in one piece; its first line is when it arrived
            if raw.startswith(b"data:"):
                rec = json.loads(raw[5:])
                if rec.get("elicit"):
                    data = rec.get("data") or {}
                    seen.setdefault(rec["elicit"], {"at": frame_at, "server": data.get("server"),
                                                    "tool": data.get("tool")})
            elif raw.startswith(b"id:"):
                # the daemon subscribes before it writes the first, id-only frame: from here nothing is missed
                ready.set()

    async with (unix_session(socket, timeout=None) as http,
                http.get("/v1/events", params={"kinds": "elicit.open"}) as resp):
        resp.raise_for_status()
        reader = asyncio.create_task(read(resp))
        await asyncio.wait({reader, asyncio.create_task(ready.wait())}, return_when=asyncio.FIRST_COMPLETED)
        if reader.done():
            reader.result()
            raise RuntimeError("the event stream ended before its first frame")
        print("ready", flush=True)
        await stdin_closed()
        reader.cancel()
    print(json.dumps(seen), flush=True)


async def role_relay(socket: str) -> None:
    """The floor for push: an aiohttp server that relays each POST to its subscribers as one SSE frame."""
    subscribers: list[web.StreamResponse] = []
    stopping = asyncio.Event()
    count = 0

    async def post(request: web.Request) -> web.Response:
        nonlocal count
        body = await request.json()
        count += 1
        eid = f"elc-relay{count:06d}"
        data = json.dumps({"kind": "elicit.open", "elicit": eid, "session": body.get("session")})
        frame = f"id: {count}\nevent: elicit.open\ndata: {data}\n\n".encode()
        for sub in subscribers:
            await sub.write(frame)
        return web.json_response({"elicitation": {"id": eid, "state": "pending"}}, status=201)

    async def events(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        subscribers.append(resp)
        await resp.write(b"id: 0\n\n")
        try:
            await stopping.wait()  # aiohttp does not cancel a handler when its client goes away
        finally:
            subscribers.remove(resp)
        return resp

    app = web.Application()
    app.router.add_post("/v1/elicit", post)
    app.router.add_get("/v1/events", events)
    await serve_until_closed(app, socket, stopping.set)
    print(json.dumps({"relayed": count}), flush=True)


async def serve_until_closed(app: web.Application, socket: str, stopping: Callable[[], None] = lambda: None) -> None:
    """A helper process's server on `socket`: `ready` once it listens, until its stdin closes (`stopping` then)."""
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.UnixSite(runner, socket).start()
    print("ready", flush=True)
    await stdin_closed()
    stopping()
    await runner.cleanup()


def role_floor(socket: str, store: Path | None = None, thread: bool = False) -> None:
    """The floor for lifecycles: an aiohttp server on uvloop (the daemon's loop) that serves a lifecycle's three
    requests and nothing else: POST /v1/elicit parses the body and answers 201 with the question as the daemon
    does, /wait holds until the accept, the accept parses its body, wakes it and answers 200 with the question and
    its answer (the daemon's documents, bench/durable_floor.py's). No broker, no validation: what the same client
    and the same three aiohttp requests cost on this machine. With `store` (`role_durable_floor`), each transition is
    committed there before it is answered or told."""
    import uvloop  # the daemon's loop, so that the floor is measured as the daemon runs

    waiting: dict[str, tuple[dict[str, Any], float, asyncio.Future[dict[str, Any]]]] = {}
    opened = itertools.count(1)
    durable: durable_floor.DurableStore | None = None

    async def post(request: web.Request) -> web.Response:
        eid = f"elc-{next(opened):016x}"
        body = await request.json()
        now = time.time()
        q = durable_floor.question(eid, body, now)
        waiting[eid] = (q, now, asyncio.get_running_loop().create_future())
        if durable is not None:
            await durable.submit(durable_floor.opened(q, now))  # on disk before anyone hears of it
        return web.json_response({"elicitation": {**q, "secondsLeft": int(durable_floor.TTL_S)}}, status=201)

    async def wait(request: web.Request) -> web.Response:
        eid = request.match_info["id"]
        got = await asyncio.shield(waiting[eid][2])  # the accept may have come first: it sets, the wait takes
        del waiting[eid]
        return web.json_response(got)

    async def accept(request: web.Request) -> web.Response:
        eid = request.match_info["id"]
        body = await request.json()
        q, asked, answered = waiting[eid]
        got = durable_floor.answer(eid, body.get("content"), asked, time.time())
        if durable is not None and not await durable.submit(durable_floor.answered(q, got)):
            return web.json_response({"error": f"{eid} is not pending"}, status=409)
        answered.set_result(got)  # only once committed: the waiter is woken from the stored answer
        return web.json_response({"elicitation": {**q, "state": "answered", "secondsLeft": 0}, "answer": got,
                                  "escalated": False})

    async def serve() -> None:
        nonlocal durable
        if store is not None:
            durable = durable_floor.DurableStore(store, thread)
        app = web.Application()
        app.router.add_post("/v1/elicit", post)
        app.router.add_get("/v1/elicit/{id}/wait", wait)
        app.router.add_post("/v1/elicit/{id}/accept", accept)
        await serve_until_closed(app, socket)
        done: dict[str, float] = {"lifecycles": next(opened) - 1}
        if durable is not None:
            await durable.close()
            done.update(durable.counts)
        print(json.dumps(done), flush=True)

    uvloop.run(serve())


def role_durable_floor(socket: str) -> None:
    """The durable floor for lifecycles: `role_floor` with bench/durable_floor.py's store under it (mcpx.db's tables,
    mcpx's pragmas and group commit), in a file beside the socket: what a Python server on aiohttp that commits each
    transition before it answers costs, with none of mcpx's layers."""
    role_floor(socket, Path(socket).with_suffix(".db"))


def role_durable_floor_thread(socket: str) -> None:
    """`role_durable_floor` committing each batch on a writer thread, not on the loop (`--thread`)."""
    role_floor(socket, Path(socket).with_suffix(".db"), thread=True)


async def role_poll(socket: str, session: str, interval: float) -> None:
    """What a client without push does: list the session's pending questions every `interval` seconds."""
    seen: dict[str, float] = {}
    polls = 0
    stop = asyncio.create_task(stdin_closed())
    async with unix_session(socket, timeout=None) as http:
        start = time.monotonic()
        while not stop.done():
            async with http.get("/v1/elicit", params={"session": session}) as r:
                body = await r.json()
            now = time.monotonic()  # the poller knows of a question once the listing is in hand
            for q in body["elicitations"]:
                seen.setdefault(q["id"], now)
            if polls == 0:
                print("ready", flush=True)
            polls += 1
            # a fixed-rate schedule: the period is the interval, not the interval plus the request
            await asyncio.wait({stop}, timeout=max(0.0, start + polls * interval - time.monotonic()))
    print(json.dumps({"seen": seen, "polls": polls}), flush=True)


# ---- the phases

@dataclass
class Latency:
    push_ms: list[float]
    post_ms: list[float]        # the sender's own round trip of the same POSTs
    health_ms: list[float]      # GET /v1/health round trips back to back: one request with one SQLite read
    health_gap_ms: list[float]  # the same, each after a gap like the POSTs'
    relay_ms: list[float]       # push latency through the bare aiohttp relay, sends interleaved with mcpx's
    poll_ms: list[float]
    push_same_ms: list[float]   # push latency of the very questions the poller timed
    missing_push: int
    missing_poll: int
    polls: int


async def phase_latency(d: Daemon, http: aiohttp.ClientSession, rng: random.Random, n_push: int = N_PUSH,
                        n_poll: int = N_POLL, n_health: int = N_HEALTH) -> Latency:
    relay_socket = d.home.parent / "relay.sock"  # beside the home, not in it
    children: list[Child] = []
    try:
        sse = await Child.start("sse", d.socket)
        children.append(sse)
        poller = await Child.start("poll", d.socket, "--session", POLL_SESSION, "--interval", str(POLL_INTERVAL_S))
        children.append(poller)
        relay = await Child.start("relay", relay_socket)
        children.append(relay)
        relay_sse = await Child.start("sse", relay_socket)
        children.append(relay_sse)
        async with unix_session(relay_socket, timeout=None) as relay_http:
            for _ in range(N_WARMUP):  # first requests pay for connection set-up and first-use caches
                await open_question(http, "bench-warmup")
                await open_question(relay_http, "bench-warmup")
            health = [ms(await timed_health(http)) for _ in range(n_health)]
            # push, poll, relay and health requests interleaved in one loop, one at a time, so all see
            # the same machine
            plan = [PUSH_SESSION] * n_push + [POLL_SESSION] * n_poll + ["relay"] * n_push + ["health"] * n_health
            rng.shuffle(plan)
            sent: dict[str, tuple[str, float]] = {}
            post: list[float] = []
            health_gap: list[float] = []
            for session in plan:
                await asyncio.sleep(rng.uniform(*GAP_S))
                if session == "health":
                    health_gap.append(ms(await timed_health(http)))
                    continue
                t0 = time.monotonic()  # just before the POST: the latency includes the whole request
                eid = await open_question(relay_http if session == "relay" else http, session)
                if session != "relay":
                    post.append(ms(time.monotonic() - t0))
                sent[eid] = (session, t0)
        await asyncio.sleep(2 * POLL_INTERVAL_S + 0.1)  # the last frames land, the poller takes two more turns
        pushed = {eid: float(frame["at"])
                  for child in (sse, relay_sse) for eid, frame in (await child.finish()).items()}
        polled = await poller.finish()
        await relay.finish()
    finally:
        for child in children:
            child.kill()
    push: list[float] = []
    poll: list[float] = []
    same: list[float] = []
    relayed: list[float] = []
    missing_push = missing_poll = 0
    for eid, (session, t0) in sent.items():
        if eid in pushed:
            {PUSH_SESSION: push, POLL_SESSION: same, "relay": relayed}[session].append(ms(pushed[eid] - t0))
        else:
            missing_push += 1
        if session == POLL_SESSION:
            if eid in polled["seen"]:
                poll.append(ms(polled["seen"][eid] - t0))
            else:
                missing_poll += 1
    return Latency(push, post, health, health_gap, relayed, poll, same, missing_push, missing_poll,
                   int(polled["polls"]))


@dataclass
class Lifecycles:
    n: int
    seconds: float
    each_ms: list[float]
    daemon_cpu_s: float
    bench_cpu_s: float
    durable: int
    anomalies: Counter[str]


MAX_WAIT_RETRIES = 20
LIFE_ASK = json.dumps(ask_body(LIFE_SESSION)).encode()
LIFE_ACCEPT = json.dumps({"content": {"repo": "a/b"}}).encode()


async def lifecycle(http: LeanHttp, anomalies: Counter[str]) -> float:
    """open -> waiter long-polls -> accept -> the waiter has its 200; returns how long that took. The same three
    requests a client of the REST API makes, sent by bench/lean_http.py's client: aiohttp's costs the bench as much
    CPU as a bare aiohttp server costs to answer (the floor row), and on two shared cores figure 6 then measured
    mostly its own client."""
    t0 = time.monotonic()
    status, body = await http.request("POST", "/v1/elicit", LIFE_ASK)
    if status != 201:
        raise RuntimeError(f"POST /v1/elicit: {status} {body!r}")
    eid = json.loads(body)["elicitation"]["id"]
    # the waiter's request goes out before the accept; whichever the daemon handles first, /wait
    # answers 200 only from the stored answer, i.e. after it has committed
    waiter = asyncio.create_task(wait_answer(http, eid, anomalies))
    try:
        await asyncio.sleep(0)  # the bench's own order: the waiter's request is written first
        status, body = await http.request("POST", f"/v1/elicit/{eid}/accept", LIFE_ACCEPT)
        if status != 200:
            raise RuntimeError(f"POST /v1/elicit/{eid}/accept: {status} {body!r}")
        got = await waiter
    finally:
        waiter.cancel()  # a no-op when it is done; no orphan when the accept failed
    if got.get("action") != "accept" or got.get("content") != {"repo": "a/b"}:
        raise RuntimeError(f"wait {eid} returned {got}")
    return time.monotonic() - t0


async def wait_answer(http: LeanHttp, eid: str, anomalies: Counter[str]) -> dict[str, Any]:
    """Long-poll /wait until it gives the answer, counting replies that should not happen.

    A 404 for an id the daemon has just returned 201 for, or a 204 long before the timeout, are
    daemon bugs (stale reads); a real client would ask again, so the benchmark does too, and says so.
    """
    for _ in range(MAX_WAIT_RETRIES):
        t0 = time.monotonic()
        status, body = await http.request("GET", f"/v1/elicit/{eid}/wait?timeout=30")
        if status == 200:
            return dict(json.loads(body))
        if status == 404:
            anomalies["/wait 404 for a question just opened"] += 1
        elif status == 204 and time.monotonic() - t0 < 25:
            anomalies["/wait 204 long before its 30 s timeout"] += 1
        else:
            raise RuntimeError(f"wait {eid}: {status} {body!r}")
    raise RuntimeError(f"wait {eid}: no answer after {MAX_WAIT_RETRIES} tries")


def bench_cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def phase_lifecycles(d: Daemon, n: int = N_LIFECYCLES) -> Lifecycles:
    each: list[float] = []
    anomalies: Counter[str] = Counter()
    http = LeanHttp(str(d.socket))

    async def job(_i: int) -> None:
        each.append(await lifecycle(http, anomalies))

    try:
        await pool(N_WARMUP, LIFE_CONCURRENCY, job)  # untimed: opens the connections the timed run reuses
        each.clear()
        cpu0, bench0, t0 = d.cpu_seconds(), bench_cpu_seconds(), time.monotonic()
        await pool(n, LIFE_CONCURRENCY, job)
        elapsed = time.monotonic() - t0
    finally:
        http.close()
    durable = durable_answers(d.paths.db, LIFE_SESSION)
    return Lifecycles(n, elapsed, [ms(x) for x in each], d.cpu_seconds() - cpu0,
                      bench_cpu_seconds() - bench0, durable, anomalies)


@dataclass
class Floor:
    """One floor's lifecycles (`floor_lifecycles`): per second, and its CPU and the client's per lifecycle (s)."""

    rate: float
    server_s: float
    client_s: float
    said: dict[str, float]  # what the floor process said when it stopped (the durable one: its commits' counts)
    stored: int = 0         # the durable floor's answers, read from its file by this process


async def floor_lifecycles(socket: Path, n: int = N_LIFECYCLES, role: str = "floor") -> Floor:
    """Figure 6's floor: a bare aiohttp server (`role_floor`) answering the same three requests, driven by the same
    client the same way; `role` "durable-floor": the same server committing each transition as mcpx does."""
    bare = await Child.start(role, socket)
    http = LeanHttp(str(socket))
    anomalies: Counter[str] = Counter()
    try:
        await pool(N_WARMUP, LIFE_CONCURRENCY, lambda _i: lifecycle(http, anomalies))
        cpu0, bench0, t0 = process_cpu_seconds(bare.proc.pid), bench_cpu_seconds(), time.monotonic()
        await pool(n, LIFE_CONCURRENCY, lambda _i: lifecycle(http, anomalies))
        elapsed = time.monotonic() - t0
        floor = Floor(n / elapsed, (process_cpu_seconds(bare.proc.pid) - cpu0) / n,
                      (bench_cpu_seconds() - bench0) / n, {})
    finally:
        http.close()
        said = await bare.finish()
    floor.said = said
    if role == "durable-floor":
        floor.stored = durable_answers(socket.with_suffix(".db"), LIFE_SESSION)
    return floor


def durable_answers(db: Path, session: str) -> int:
    """Answers of `session` as another process reads them from mcpx.db: what a kill -9 would leave."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT COUNT(*) FROM answers a JOIN elicitations e ON e.id = a.id "
                           "WHERE e.session = ? AND e.state = 'answered'", (session,)).fetchone()
        return int(row[0])
    finally:
        conn.close()


def journal_mode(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


@dataclass
class Listing:
    open_seconds: float
    pending: int
    rss_pending_kib: int        # with the questions pending, before any listing allocated its buffers
    big_ms: list[float]
    big_bytes: int
    big_count: int
    default_ms: list[float]
    default_bytes: int
    default_count: int


async def timed_get(http: aiohttp.ClientSession, params: dict[str, str]) -> tuple[float, int, int]:
    """(seconds to the last byte, body bytes, count) of one listing."""
    t0 = time.monotonic()
    async with http.get("/v1/elicit", params=params) as r:
        body = await r.read()
    elapsed = time.monotonic() - t0
    return elapsed, len(body), int(json.loads(body)["count"])


async def open_many(http: aiohttp.ClientSession, n: int = N_MANY) -> float:
    """Open n questions in MANY_SESSION, OPEN_CONCURRENCY in flight; the seconds it took."""
    async def job(_i: int) -> None:
        await open_question(http, MANY_SESSION, ttl=3600)  # a long ttl: none may expire while we look

    t0 = time.monotonic()
    await pool(n, OPEN_CONCURRENCY, job)
    return time.monotonic() - t0


async def phase_many(d: Daemon, http: aiohttp.ClientSession) -> Listing:
    opened = await open_many(http)
    pending = await pending_count(http)
    rss = d.rss_kib()
    results: dict[str, tuple[list[float], int, int]] = {}
    for name, params in (("big", {"limit": "10000"}), ("default", {})):
        times, size, count = [], 0, 0
        for i in range(N_LIST + 2):
            elapsed, size, count = await timed_get(http, params)
            if i >= 2:  # the first two warm the page cache and the connection
                times.append(ms(elapsed))
        results[name] = (times, size, count)
    return Listing(opened, pending, rss, *results["big"], *results["default"])


# ---- --against REF: the same phases on this checkout's daemon and another revision's, alternated

def checkout(ref: str, into: Path) -> Path:
    root = HERE.parent.parent
    archive = subprocess.run(["git", "-C", str(root), "archive", ref, "sidecar"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "sidecar"


FLOORS = {"floor": "floor", "durable floor": "durable-floor"}  # figure 6's floors, by column: their --role


async def run_against(ref: str | None, listing: bool = True, rounds: int = 4, thread: bool = False) -> None:
    """Lifecycles/s, the 10k listing and RSS on two daemons at once: this checkout's and `ref`'s (`ref` None: this
    checkout's alone). The lifecycles run in alternating rounds and the listings alternate request by request, so
    the load of the machine at any moment falls on both alike; compare the ratios. Figure 6's two floors run in the
    same rounds: a bare aiohttp server answering the same three requests (`role_floor`: what the client and aiohttp
    alone cost) and the same server committing each transition as mcpx does (`role_durable_floor`: what any
    durable Python server on aiohttp costs). Without `listing`, the lifecycles alone (figure 6, in a minute or so).
    `thread`: a third floor, the durable one committing on a writer thread (`role_durable_floor_thread`)."""
    floors = {**FLOORS, "durable, thread": "durable-floor-thread"} if thread else FLOORS
    with tempfile.TemporaryDirectory(prefix="mcpx-against-") as tmp:
        daemons = {"this": scratch_daemon("mcpx-bench-")}
        if ref is not None:
            daemons[ref] = scratch_daemon("mcpx-bench-", sidecar=checkout(ref, Path(tmp)))
        sockets = {name: Path(tmp) / f"{role}.sock" for name, role in floors.items()}
        bare: dict[str, Child] = {}
        said: dict[str, dict[str, float]] = {}
        try:
            for d in daemons.values():
                d.start()
            for name, role in floors.items():
                bare[name] = await Child.start(role, sockets[name])
            limit = 2 * max(LIFE_CONCURRENCY, OPEN_CONCURRENCY) + 8
            sessions = {name: d.session(limit=limit) for name, d in daemons.items()}
            cpu_of: dict[str, Callable[[], float]] = {name: d.cpu_seconds for name, d in daemons.items()}
            cpu_of.update({name: functools.partial(process_cpu_seconds, child.proc.pid)
                           for name, child in bare.items()})
            try:
                idle = {name: (await pending_count(http), daemons[name].rss_kib())[1]
                        for name, http in sessions.items()}
                say(f"{N_LIFECYCLES} lifecycles on each daemon and on each floor, {LIFE_CONCURRENCY} in flight, in "
                    f"{rounds} alternating rounds, load {os.getloadavg()[0]:.2f} ...")
                living = {**{name: LeanHttp(str(d.socket)) for name, d in daemons.items()},
                          **{name: LeanHttp(str(sockets[name])) for name in floors}}
                spent = dict.fromkeys(living, 0.0)
                cpu = dict.fromkeys(living, 0.0)
                client = dict.fromkeys(living, 0.0)
                anomalies: Counter[str] = Counter()
                for lean in living.values():  # untimed: the connections the timed run reuses
                    await pool(N_WARMUP, LIFE_CONCURRENCY, lambda _i, h=lean: lifecycle(h, anomalies))
                for _ in range(rounds):
                    for name, lean in living.items():
                        cpu0, bench0, t0 = cpu_of[name](), bench_cpu_seconds(), time.monotonic()
                        await pool(N_LIFECYCLES // rounds, LIFE_CONCURRENCY,
                                   lambda _i, h=lean: lifecycle(h, anomalies))
                        spent[name] += time.monotonic() - t0
                        cpu[name] += cpu_of[name]() - cpu0
                        client[name] += bench_cpu_seconds() - bench0
                rss: dict[str, int] = {}
                listed: dict[str, list[float]] = {name: [] for name in daemons}
                if listing:
                    say(f"{N_MANY} pending questions on each daemon, then listings alternating between them ...")
                for name, http in sessions.items() if listing else ():
                    await pool(N_MANY, OPEN_CONCURRENCY,
                               lambda _i, h=http: open_question(h, MANY_SESSION, ttl=3600))
                    rss[name] = daemons[name].rss_kib()
                for i in range(N_LIST + 2 if listing else 0):
                    for name, http in sessions.items():
                        elapsed, _, count = await timed_get(http, {"limit": "10000"})
                        if count != N_MANY:
                            raise RuntimeError(f"{name} listed {count} of {N_MANY}")
                        if i >= 2:
                            listed[name].append(ms(elapsed))
            finally:
                for lean in living.values():
                    lean.close()
                for http in sessions.values():
                    await http.close()
        finally:
            for name, child in bare.items():
                said[name] = await child.finish()
            for d in daemons.values():
                d.cleanup()
        stored = durable_answers(sockets["durable floor"].with_suffix(".db"), LIFE_SESSION)
    this, then = "this", ref or "this"
    rows = [("lifecycles/s", {n: f"{N_LIFECYCLES / spent[n]:.0f}/s" for n in living},
             spent[then] / spent[this]),
            ("daemon CPU per lifecycle", {n: f"{1e3 * cpu[n] / N_LIFECYCLES:.2f} ms" for n in living},
             cpu[this] / cpu[then]),
            ("the client's CPU per lifecycle", {n: f"{1e3 * client[n] / N_LIFECYCLES:.2f} ms" for n in living},
             client[this] / client[then])]
    rows += [("GET ?limit=10000 p50", {n: fmt_ms(p50(listed[n])) for n in daemons},
             p50(listed[this]) / p50(listed[then])),
            ("daemon RSS per pending question", {n: f"{(rss[n] - idle[n]) / N_MANY:.2f} KiB" for n in daemons},
             (rss[this] - idle[this]) / max(1, rss[then] - idle[then]))] if listing else []
    columns = [*daemons, *floors]
    print()
    print(f"{'':34} " + " ".join(f"{c:>13}" for c in columns) + (f"   this / {ref}" if ref else ""))
    for metric, cells, ratio in rows:
        print(f"{metric:34} " + " ".join(f"{cells.get(c, ''):>13}" for c in columns)
              + (f"   {ratio:.2f}x" if ref else ""))
    print(f"floor: a bare aiohttp server (uvloop) answering the same three requests, no broker nor store; durable "
          f"floor: the same committing each transition as mcpx does (bench/durable_floor.py); each side driven by "
          f"bench/lean_http.py's client. this / floor lifecycles/s {spent['floor'] / spent[this]:.2f}x, this / "
          f"durable floor {spent['durable floor'] / spent[this]:.2f}x; load {os.getloadavg()[0]:.1f}")
    print(durable_share(said["durable floor"], stored))
    for what, count in sorted(anomalies.items()):
        print(f"anomaly: {what}: {count}")


def durable_share(counts: dict[str, float], stored: int) -> str:
    """What the durable floor said of its commits (`DurableStore.counts`, over every lifecycle it served, the
    warm-up's included), per lifecycle, and how many answers another process reads from its file."""
    n = max(1, int(counts["lifecycles"]))
    units = counts["units"] / max(1.0, counts["commits"])
    return (f"durable floor: {counts['commits'] / n:.2f} commits a lifecycle ({units:.1f} units each); its commits' "
            f"CPU on the loop {1e3 * counts['commit_s'] / n:.3f} ms a lifecycle (COMMIT alone "
            f"{1e3 * counts['commit_only_s'] / n:.3f} ms), its checkpoints' "
            f"{1e3 * counts['checkpoint_s'] / n:.3f} ms; answers read back from its file {stored}/{n}")


# ---- --lifecycles --profile: the Python calls the daemon's loop makes per lifecycle, by layer

# the layers a lifecycle's requests cross, by path, the first that matches (the store's modules before the broker's)
LIFE_LAYERS = (("aiohttp's own Python (server, web_protocol, web_request, ...)", ("/aiohttp/",)),
               ("multidict, yarl, propcache", ("/multidict/", "/yarl/", "/propcache/")),
               ("mcpx's /v1 routes and middleware (api/, daemon/)", ("/mcpx/api/", "/mcpx/daemon/")),
               ("pydantic", ("/pydantic/", "/pydantic_core/")),
               ("the waiters (broker/waiters.py)", ("/mcpx/broker/waiters.py",)),
               ("the store and its writes (broker/store, sqlite, sql, writes, commits, reads)",
                tuple(f"/mcpx/broker/{m}.py" for m in ("store", "stores", "sqlite", "sql", "writes", "commits",
                                                       "reads", "schema"))),
               ("the broker (broker/)", ("/mcpx/broker/",)),
               ("other mcpx code (shared/, presentation/, config/)", ("/mcpx/",)),
               ("asyncio and uvloop's Python parts", ("asyncio/", "uvloop/")),
               ("the standard library and other packages", ("/",)),
               ("C functions (builtins, methods)", ("~",)))


def life_layer(path: str) -> str:
    return next((name for name, parts in LIFE_LAYERS if any(p in path for p in parts)), LIFE_LAYERS[-2][0])


def print_life_counts(prof: str, n: int, top: int = 40) -> None:
    """The loop's function calls per lifecycle: Python functions and C ones, by layer, and the most called."""
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    by_layer: Counter[str] = Counter()
    for (path, _line, _name), (_cc, nc, *_rest) in stats.items():
        by_layer[life_layer(path)] += nc
    c_calls = by_layer[LIFE_LAYERS[-1][0]]  # "~": cProfile's name for a builtin's file
    print(f"the daemon loop's calls per lifecycle (n={n}): {(by_layer.total() - c_calls) / n:.1f} Python functions, "
          f"{c_calls / n:.1f} C functions")
    for name, _parts in LIFE_LAYERS:
        if by_layer[name]:
            print(f"  {by_layer[name] / n:7.1f}  {name}")

    def short(path: str) -> str:
        return path.split("/mcpx/", 1)[1] if "/mcpx/" in path else "/".join(path.rsplit("/", 2)[-2:])

    print("the most called Python functions, per lifecycle:")
    rows = sorted(((nc, key) for key, (_cc, nc, *_rest) in stats.items() if key[0] != "~"), reverse=True)
    for nc, (path, line, name) in rows[:top]:
        print(f"  {nc / n:6.2f}  {short(path)}:{line}({name})")
    # the profile's clock is the loop thread's CPU, inflated by the profile itself (most where calls are many): a
    # guide to where the time goes, the counts above are the figure
    print("the most CPU by itself (µs of the profiled loop's CPU per lifecycle; calls):")
    rows_t = sorted(((tt, nc, key) for key, (_cc, nc, tt, *_rest) in stats.items()), reverse=True)
    for tt, nc, (path, line, name) in rows_t[:top]:
        print(f"  {1e6 * tt / n:7.1f}  {nc / n:5.1f}  {short(path)}:{line}({name})")


async def run_counted(profile: str, rounds: int) -> None:
    """Lifecycles (500 a round) on a daemon whose loop is profiled while they run, not during its start or the
    warm-up: its Python calls per lifecycle, by layer (pstats in `profile`)."""
    n = 500 * rounds
    out = Path(profile)
    out.unlink(missing_ok=True)  # noqa: ASYNC240 -- before the daemon starts, nothing else runs
    d = scratch_daemon("mcpx-bench-", python_args=["-c", COUNTED, str(out)])
    http = LeanHttp(str(d.socket))
    anomalies: Counter[str] = Counter()
    try:
        d.start()
        await pool(N_WARMUP, LIFE_CONCURRENCY, lambda _i: lifecycle(http, anomalies))
        os.kill(d.pid, signal.SIGUSR1)
        await pool(n, LIFE_CONCURRENCY, lambda _i: lifecycle(http, anomalies))
        os.kill(d.pid, signal.SIGUSR2)
        async with asyncio.timeout(30):
            while not out.exists():  # noqa: ASYNC110, ASYNC240 -- the daemon's signal handler renames it there, whole
                await asyncio.sleep(0.05)
    finally:
        http.close()
        d.stop()
        d.cleanup()
    say(f"daemon profile written to {profile}")
    print_life_counts(profile, n)
    for what, count in sorted(anomalies.items()):
        print(f"anomaly: {what}: {count}")


# ---- the run

def fmt_ms(x: float) -> str:
    return f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms"


def p50(values: list[float]) -> float:
    return percentile(values, 50)


def p99(values: list[float]) -> float:
    return percentile(values, 99)


def both(values: list[float]) -> str:
    return f"{fmt_ms(p50(values))} / {fmt_ms(p99(values))}"


def latency_line(what: str, seconds: list[float], target_s: float | None, width: int = 48) -> str:
    """One row of latencies in seconds: p50 and p99 in ms, and MISSED when p50 is not under `target_s`."""
    flag = "" if target_s is None or p50(seconds) < target_s else f"  MISSED (target {target_s:g} s)"
    return f"  {what:<{width}} p50 {fmt_ms(ms(p50(seconds))):>10}   p99 {fmt_ms(ms(p99(seconds))):>10}{flag}"


def fmt_mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


async def run(profile: str | None) -> None:
    extra = ["-m", "cProfile", "-o", profile] if profile else []
    rng = random.Random(SEED)
    report = Report()
    d = scratch_daemon("mcpx-bench-", python_args=extra)
    try:
        d.start()
        async with d.session(limit=2 * max(LIFE_CONCURRENCY, OPEN_CONCURRENCY) + 8) as http:
            await pending_count(http)
            rss_idle = d.rss_kib()
            say(f"daemon pid {d.pid}, MCPX_HOME {d.home}, {os.cpu_count()} cpus, "
                f"load {os.getloadavg()[0]:.2f}; idle RSS {fmt_mib(rss_idle)}")

            say(f"[1/3] push vs poll: {N_PUSH} + {N_POLL} questions (+ {N_PUSH} through the bare relay), one at a "
                f"time, gaps {GAP_S[0] * 1000:.0f}-{GAP_S[1] * 1000:.0f} ms ...")
            lat = await phase_latency(d, http, rng)
            say(f"      {len(lat.push_ms)} push samples, {len(lat.poll_ms)} poll samples over {lat.polls} polls; "
                f"missing: push {lat.missing_push}, poll {lat.missing_poll}")
            say(f"      cancelled {await cancel_all_pending(http)} leftover pending questions")

            say(f"[2/3] {N_LIFECYCLES} lifecycles, {LIFE_CONCURRENCY} in flight ...")
            life = await phase_lifecycles(d)
            say(f"      {life.seconds:.2f} s; daemon CPU {life.daemon_cpu_s:.2f} s "
                f"({100 * life.daemon_cpu_s / life.seconds:.0f}% of a core), this process "
                f"{life.bench_cpu_s:.2f} s ({100 * life.bench_cpu_s / life.seconds:.0f}%)")
            mode = journal_mode(d.paths.db)

            say(f"[3/3] {N_MANY} pending questions, {OPEN_CONCURRENCY} opens in flight, then listings ...")
            many = await phase_many(d, http)
            rss_listed = d.rss_kib()
            say(f"      opened in {many.open_seconds:.1f} s ({N_MANY / many.open_seconds:.0f}/s); "
                f"pending per /v1/health: {many.pending}")
    except BaseException:
        # keep the evidence: the daemon's state directory and the end of what it printed
        alive = d.proc is not None and d.proc.poll() is None
        tail = d.tail()
        say(f"\nbenchmark aborted; daemon {'still running' if alive else f'exited {d.proc and d.proc.returncode}'}; "
            f"state kept in {d.home}\n--- daemon stderr (tail) ---\n{tail}")
        if "draining" in tail:
            # this file signals the daemon only in the `finally` below, after the run
            say("NOTE: the daemon was sent SIGTERM/SIGINT during the run, not by this benchmark; run it again")
        d.keep = True
        raise
    finally:
        d.stop()
        if profile:
            say(f"daemon profile written to {profile}")
        d.cleanup()

    push50, push99 = percentile(lat.push_ms, 50), percentile(lat.push_ms, 99)
    poll50, poll99 = percentile(lat.poll_ms, 50), percentile(lat.poll_ms, 99)
    report.add(f"push latency p50 (n={len(lat.push_ms)})", fmt_ms(push50), f"<= {TARGET_PUSH_P50_MS:g} ms",
               push50 <= TARGET_PUSH_P50_MS)
    report.add("push latency p99", fmt_ms(push99), f"<= {TARGET_PUSH_P99_MS:g} ms", push99 <= TARGET_PUSH_P99_MS)
    post50, health50 = percentile(lat.post_ms, 50), percentile(lat.health_ms, 50)
    report.add("  POST /v1/elicit round trip p50 (sender)", fmt_ms(post50))
    report.add("  GET /v1/health round trip p50, after gaps | back to back",
               f"{fmt_ms(percentile(lat.health_gap_ms, 50))} | {fmt_ms(health50)}")
    report.add("  ratio push p50 / POST round trip p50", f"{push50 / post50:.2f}x")
    relay50 = percentile(lat.relay_ms, 50)
    report.add(f"  bare aiohttp relay push p50 / p99 (floor, n={len(lat.relay_ms)})",
               f"{fmt_ms(relay50)} / {fmt_ms(percentile(lat.relay_ms, 99))}")
    report.add("  ratio mcpx push p50 / relay push p50", f"{push50 / relay50:.2f}x")
    report.add(f"push latency p50, the poll batch (n={len(lat.push_same_ms)})",
               fmt_ms(percentile(lat.push_same_ms, 50)))
    report.add(f"poll 250 ms discovery p50 (n={len(lat.poll_ms)})", fmt_ms(poll50), "reference")
    report.add("poll 250 ms discovery p99", fmt_ms(poll99), "reference")
    report.add("ratio poll/push at p50", f"{poll50 / push50:.0f}x", "push faster", poll50 > push50)
    if lat.missing_push or lat.missing_poll:
        report.add("frames / listings never seen", f"{lat.missing_push} / {lat.missing_poll}", "0 / 0", False)
    rate = life.n / life.seconds
    report.add(f"lifecycles/s ({LIFE_CONCURRENCY} in flight, n={life.n})", f"{rate:.0f}/s",
               f">= {TARGET_LIFECYCLES_S:g}/s", rate >= TARGET_LIFECYCLES_S)
    report.add("lifecycle p50 / p99",
               f"{fmt_ms(percentile(life.each_ms, 50))} / {fmt_ms(percentile(life.each_ms, 99))}")
    report.add("daemon CPU per lifecycle", f"{1e3 * life.daemon_cpu_s / life.n:.2f} ms")
    report.add("answers durable (read by another process)", f"{life.durable}/{life.n + N_WARMUP}",
               "all", life.durable == life.n + N_WARMUP)
    report.add("mcpx.db journal mode", mode, "wal", mode == "wal")
    for what, count in sorted(life.anomalies.items()):
        report.add(what, f"{count}", "0 (retried)", False)
    big50, def50 = percentile(many.big_ms, 50), percentile(many.default_ms, 50)
    report.add(f"GET ?limit=10000 p50 ({many.big_count} of {many.pending} pending)", fmt_ms(big50),
               f"<= {TARGET_LIST_P50_MS:g} ms", big50 <= TARGET_LIST_P50_MS)
    report.add("GET ?limit=10000 response size", f"{many.big_bytes / 1e6:.2f} MB")
    report.add(f"GET default listing p50 ({many.default_count} items)", fmt_ms(def50))
    report.add("GET default listing response size", f"{many.default_bytes / 1e6:.2f} MB")
    report.add("ratio list 10000 / default p50", f"{big50 / def50:.1f}x")
    report.add(f"open rate, {OPEN_CONCURRENCY} in flight", f"{N_MANY / many.open_seconds:.0f}/s")
    rss_many = many.rss_pending_kib
    report.add("daemon RSS idle | 10,000 pending | after listings",
               f"{fmt_mib(rss_idle)} | {fmt_mib(rss_many)} | {fmt_mib(rss_listed)}")
    report.add("daemon RSS per pending question", f"{(rss_many - rss_idle) / N_MANY:.2f} KiB")
    report.add("ratio RSS 10,000 pending / idle", f"{rss_many / rss_idle:.1f}x")

    print()
    report.show()
    print()
    print("durable: each answer is committed to mcpx.db before any waiter is woken. The DB is SQLite in WAL mode")
    print("(read from the file above) with synchronous=NORMAL (set per connection by mcpx/broker/sqlite.py): a commit")
    print("survives the daemon being killed (kill -9); a power loss may roll back the last few.")
    print("RSS after listings: each keep-alive connection that carried a 5 MB listing keeps about that much until")
    print(f"it closes (Python {sys.version.split()[0]} asyncio/aiohttp write buffering); this client had up to "
          f"{OPEN_CONCURRENCY} connections open.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--profile", metavar="FILE", help="run the daemon under cProfile, stats to FILE; with "
                        "--lifecycles, its loop only while 500 x --rounds lifecycles run, and their Python calls "
                        "per lifecycle by layer")
    parser.add_argument("--against", metavar="REF", help="lifecycles, the 10k listing and RSS here and on this git "
                        "revision's daemon, side by side")
    parser.add_argument("--lifecycles", action="store_true", help="figure 6's lifecycles alone beside its two floors "
                        "(with --against, REF's too), no 10k listing (about a minute)")
    parser.add_argument("--rounds", type=int, default=4, help="with --against: alternating rounds (default 4)")
    parser.add_argument("--thread", action="store_true", help="with --lifecycles: a third floor, the durable one "
                        "committing each batch on a writer thread rather than on the loop (issue 39's experiment)")
    parser.add_argument("--role", choices=("sse", "poll", "relay", "floor", "durable-floor", "durable-floor-thread"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--session", help=argparse.SUPPRESS)
    parser.add_argument("--interval", type=float, default=POLL_INTERVAL_S, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "sse":
        asyncio.run(role_sse(args.socket))
    elif args.role == "poll":
        asyncio.run(role_poll(args.socket, args.session, args.interval))
    elif args.role == "relay":
        asyncio.run(role_relay(args.socket))
    elif args.role == "floor":
        role_floor(args.socket)
    elif args.role == "durable-floor":
        role_durable_floor(args.socket)
    elif args.role == "durable-floor-thread":
        role_durable_floor_thread(args.socket)
    elif args.lifecycles and args.profile:
        run_stoppable(run_counted(args.profile, args.rounds))
    elif args.against or args.lifecycles:
        run_stoppable(run_against(args.against, listing=not args.lifecycles, rounds=args.rounds,
                                  thread=args.thread))
    else:
        run_stoppable(run(args.profile))  # SIGTERM too stops the daemon and the helper processes
    return 0


if __name__ == "__main__":
    sys.exit(main())
