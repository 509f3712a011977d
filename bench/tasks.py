"""A task's question round trip (Tasks extension, SEP-2663): through mcpx against the client driving the task directly.

The upstream is a FastMCP server with fastmcp-tasks on Streamable HTTP (this file's `--peer` role, a process
of its own): one tool, `confirm(what)`, task required, which asks a confirmation through the task (an
InputRequiredResult; the answer comes back with `tasks/update`) and completes with the answer it got.

- direct: a client of the bench's own, raw modern JSON-RPC over one keep-alive HTTP connection (the mcp SDK
  client does not speak the Tasks extension; fastmcp-tasks' client is FastMCP's), declaring the extension in
  each request's `_meta`: `tools/call` -> the task handle; `tasks/get` every `pollIntervalMs` until
  `input_required`; `tasks/update` with the answer at once; `tasks/get` every `pollIntervalMs` until
  `completed`, whose inlined result is the call's.
- through mcpx: a real daemon (tests/harness.py) with the peer as an HTTP server in its config; `POST
  /v1/call/t/confirm` over the daemon's unix socket. The daemon declares the extension (the peer declared it
  in `server/discover`), gets the handle, polls, and opens the task's request as a question; the bench,
  subscribed to `/v1/events` (elicit.open), answers it over REST the moment its frame arrives; the daemon
  sends `tasks/update`, polls to `completed` and the call ends with the task's result (the POST's 200, or
  its 202 and then `GET /v1/tasks/{id}/result`).

Timed on both sides from just before the call is sent to the result in hand; also from the call to the
question seen (direct: the `tasks/get` that says `input_required`; mcpx: the elicit.open frame). Both sides
are warm (two rounds each first) and timed in interleaved rounds, in random order within each pair. `--runs
N` (default 3) repeats it with new processes each time and prints each figure's median over the runs with its
spread (min-max).

The peer's poll interval dominates both sides: each side sleeps it at least twice (before it sees the
question, and after it answered). `--poll-ms` (default 50) sets it in the peer's tool; 50 ms is mcpx's own
floor (mcp/tasks.py POLL_FLOOR: it never polls faster, nor sooner than that after sending an answer), so at 50
both sides keep the same schedule and the difference is mcpx's own work: the SSE frame, the REST answer, the
daemon's commits and hops. The goal is issue 14's for a question's round trip: p50 through mcpx within 1.5x
of direct.

    .venv/bin/python bench/tasks.py                     # about 30 s on 2 cores (a minute at --poll-ms 200)
    .venv/bin/python bench/tasks.py --runs 1 --rounds 40 --poll-ms 200

Needs fastmcp-tasks (./dev installs it: its tasks_peer). It is a benchmark, not a test: it exits 0 whether or
not the goal is met, and says MISSED where it is not. The machines here are noisy and shared; compare the
ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))  # the other benches sit beside this file, however it is run
sys.path.insert(0, str(ROOT / "tests"))  # the daemon harness
from broker import Report, fmt_ms, ms, p50, say  # noqa: E402
from harness import Daemon, free_port, listening, run_stoppable, scratch_daemon, stop_process, wait_started  # noqa: E402

TASKS = "io.modelcontextprotocol/tasks"
MODERN = "2026-07-28"
SERVER = "t"
SESSION = "bench-tasks"
ANSWER = {"confirm": True}
GOAL = 1.5  # issue 14: a question's round trip through mcpx within 1.5x of direct
WARMUP = 2


# ---- the peer (its own process: `python bench/tasks.py --peer PORT --poll-ms N`)

def run_peer(port: int, poll_ms: int) -> None:
    """FastMCP with fastmcp-tasks on 127.0.0.1:PORT/mcp; `confirm` asks through its task and says what it got."""
    app = FastMCP("bench-tasks-peer")
    app.add_extension(TasksExtension())
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}

    @app.tool(task=TaskConfig(mode="required", poll_interval=timedelta(milliseconds=poll_ms)))
    async def confirm(what: str, ctx: Context) -> Any:
        if not ctx.input_responses:
            return mcp_types.InputRequiredResult(input_requests={"ok": mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(message=f"Really {what}?", requested_schema=schema))})
        got = {k: v.model_dump(by_alias=True, mode="json", exclude_none=True) for k, v in ctx.input_responses.items()}
        return json.dumps({"what": what, "got": got})

    app.run("streamable-http", host="127.0.0.1", port=port, show_banner=False)


@contextlib.contextmanager
def peer_process(poll_ms: int) -> Any:
    """The peer on a free port, for the block; its /mcp URL. Stopped however the block ends."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, __file__, "--peer", str(port), "--poll-ms", str(poll_ms)],
                                stdout=log, stderr=log)

        def evidence() -> str:
            log.seek(0)
            return log.read().decode(errors="replace")[-2000:]

        try:
            wait_started(proc, lambda: listening(port), f"the tasks peer on port {port}", evidence=evidence,
                         interval=0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop_process(proc, 5)


def check(text: str, what: str) -> None:
    """The task's result says the peer got our answer to our question."""
    data = json.loads(text)
    if data.get("what") != what or data.get("got", {}).get("ok") != {"action": "accept", "content": ANSWER}:
        raise RuntimeError(f"the peer's task completed with {data}, not the answer given for {what!r}")


# ---- direct: the client drives the task itself

class Direct:
    """A modern client over one keep-alive connection, declaring the Tasks extension on every request."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        self.ids = 0

    async def rpc(self, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        self.ids += 1
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "extensions": {TASKS: {}}},
                "io.modelcontextprotocol/clientInfo": {"name": "bench-tasks", "version": "0"}}
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": {**params, "_meta": meta}}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
                   "Mcp-Method": method, "Mcp-Name": name}
        async with self.http.post(self.url, json=body, headers=headers) as r:
            text = await r.text()
        if "data:" in text:  # an SSE answer: its last data line is the response
            text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
        reply: dict[str, Any] = json.loads(text)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply["result"]
        return result

    async def __call__(self, what: str) -> tuple[float, float]:
        """(call -> question seen, call -> result), in seconds."""
        t0 = time.monotonic()
        handle = await self.rpc("tools/call", {"name": "confirm", "arguments": {"what": what}}, "confirm")
        if handle.get("resultType") != "task":
            raise RuntimeError(f"tools/call confirm did not make a task: {handle}")
        tid = handle["taskId"]
        interval = handle.get("pollIntervalMs", 5000) / 1000
        seen = 0.0
        answered: set[str] = set()
        while True:
            await asyncio.sleep(interval)
            task = await self.rpc("tasks/get", {"taskId": tid}, tid)
            interval = task.get("pollIntervalMs", interval * 1000) / 1000
            if task["status"] == "completed":
                done = time.monotonic()
                check(task["result"]["content"][0]["text"], what)
                return seen - t0, done - t0
            if task["status"] != "input_required" and task["status"] != "working":
                raise RuntimeError(f"the peer's task ended {task['status']}: {task}")
            fresh = {k for k in task.get("inputRequests") or {} if k not in answered}
            if fresh:
                seen = seen or time.monotonic()
                answered |= fresh
                await self.rpc("tasks/update", {"taskId": tid, "inputResponses": {
                    k: {"action": "accept", "content": ANSWER} for k in fresh}}, tid)

    async def close(self) -> None:
        await self.http.close()


# ---- through mcpx: the daemon drives the task, the bench answers its question

class Through:
    """POST /v1/call over the daemon's socket; the question answered from its elicit.open frame."""

    def __init__(self, d: Daemon) -> None:
        self.http = d.session()
        self.frames: asyncio.Queue[tuple[float, str, dict[str, Any]]] = asyncio.Queue()
        self.reader: asyncio.Task[None] | None = None
        self.d = d

    async def start(self) -> None:
        ready = asyncio.Event()
        self.reader = asyncio.create_task(self._read(ready))
        await asyncio.wait({self.reader, asyncio.create_task(ready.wait())}, return_when=asyncio.FIRST_COMPLETED)
        if self.reader.done():
            self.reader.result()
            raise RuntimeError("the event stream ended before its first frame")

    async def _read(self, ready: asyncio.Event) -> None:
        async with (self.d.session() as http, http.get("/v1/events", params={"kinds": "elicit.open"},
                                                       timeout=aiohttp.ClientTimeout(total=None)) as resp):
            resp.raise_for_status()
            async for raw in resp.content:
                if raw.startswith(b"data:"):
                    rec = json.loads(raw[5:])
                    if rec.get("elicit"):
                        self.frames.put_nowait((time.monotonic(), rec["elicit"], rec.get("data") or {}))
                elif raw.startswith(b"id:"):
                    ready.set()  # the daemon subscribed us before this first frame: nothing is missed from here

    async def __call__(self, what: str) -> tuple[float, float]:
        t0 = time.monotonic()
        call = asyncio.create_task(self._post(what))
        frame = asyncio.create_task(self.frames.get())
        await asyncio.wait({call, frame}, return_when=asyncio.FIRST_COMPLETED)
        if not frame.done():  # the call ended before any question: it is an error, say it
            frame.cancel()
            raise RuntimeError(f"POST /v1/call/{SERVER}/confirm ended without a question: {call.result()}")
        seen, eid, data = frame.result()
        if data.get("tool") not in (None, "confirm"):
            raise RuntimeError(f"an elicit.open frame for another call: {data}")
        async with self.http.post(f"/v1/elicit/{eid}/accept", json={"content": ANSWER}) as r:
            if r.status != 200:
                raise RuntimeError(f"POST /v1/elicit/{eid}/accept: {r.status} {await r.text()}")
            await r.read()
        status, body = await call
        if status == 202:
            async with self.http.get(f"/v1/tasks/{body['task']}/result", params={"timeout": "30"}) as r:
                status, body = r.status, await r.json()
        done = time.monotonic()
        if status != 200 or body.get("state") != "completed":
            raise RuntimeError(f"the call through mcpx ended {status} {body}")
        check(body["result"]["content"][0]["text"], what)
        return seen - t0, done - t0

    async def _post(self, what: str) -> tuple[int, dict[str, Any]]:
        async with self.http.post(f"/v1/call/{SERVER}/confirm",
                                  json={"arguments": {"what": what}, "session": SESSION}) as r:
            return r.status, await r.json()

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader
        await self.http.close()


# ---- one run, and the table

@dataclass
class RunFigures:
    direct: list[tuple[float, float]] = field(default_factory=list)  # (question seen, result) per round, s
    mcpx: list[tuple[float, float]] = field(default_factory=list)

    def p50(self, side: str, which: int) -> float:
        return ms(p50([r[which] for r in getattr(self, side)]))


async def one_run(rounds: int, poll_ms: int, rng: random.Random) -> RunFigures:
    figures = RunFigures()
    with peer_process(poll_ms) as url, scratch_daemon("mcpx-bench-tasks-", {"servers": {SERVER: {"url": url}}}) as d:
        direct, through = Direct(url), Through(d)
        try:
            await through.start()
            for i in range(WARMUP):  # the daemon's first call discovers the peer and starts its connection
                await through(f"warm-{i}")
                await direct(f"warm-{i}")
            for i in range(rounds):
                sides = [("direct", direct), ("mcpx", through)]
                rng.shuffle(sides)
                for name, side in sides:
                    getattr(figures, name).append(await side(f"round-{i}-{name}"))
        finally:
            await through.close()
            await direct.close()
    return figures


def spread(values: list[float], fmt: Any = fmt_ms) -> str:
    med = statistics.median(values)
    return f"{fmt(med)} ({fmt(min(values))} - {fmt(max(values))})" if len(values) > 1 else fmt(med)


def times(x: float) -> str:
    return f"{x:.2f}x"


async def run(runs: int, rounds: int, poll_ms: int, seed: int) -> None:
    rng = random.Random(seed)
    results: list[RunFigures] = []
    for n in range(runs):
        started = time.monotonic()
        f = await one_run(rounds, poll_ms, rng)
        results.append(f)
        say(f"run {n + 1}/{runs} ({time.monotonic() - started:.0f} s, {rounds} rounds a side): "
            f"round trip p50 direct {fmt_ms(f.p50('direct', 1))}, through mcpx {fmt_ms(f.p50('mcpx', 1))} "
            f"({times(f.p50('mcpx', 1) / f.p50('direct', 1))}); question seen p50 direct "
            f"{fmt_ms(f.p50('direct', 0))}, through mcpx {fmt_ms(f.p50('mcpx', 0))}")
    report = Report()
    trip_ratio = [f.p50("mcpx", 1) / f.p50("direct", 1) for f in results]
    report.add(f"task question round trip p50, direct (poll {poll_ms} ms)",
               spread([f.p50("direct", 1) for f in results]))
    report.add("the same through mcpx (/v1/call, answered on elicit.open)", spread([f.p50("mcpx", 1) for f in results]))
    report.add("  mcpx / direct", spread(trip_ratio, times), f"<= {GOAL}x", statistics.median(trip_ratio) <= GOAL)
    report.add("  mcpx - direct", spread([f.p50("mcpx", 1) - f.p50("direct", 1) for f in results]))
    report.add("call -> question seen p50, direct (tasks/get)", spread([f.p50("direct", 0) for f in results]))
    report.add("the same through mcpx (elicit.open frame)", spread([f.p50("mcpx", 0) for f in results]))
    print()
    say(f"medians of {runs} run(s), spread min-max; {rounds} interleaved rounds a side per run, the peer's "
        f"pollIntervalMs {poll_ms}")
    report.show()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="whole runs, new processes each (default 3)")
    ap.add_argument("--rounds", type=int, default=20, help="timed round trips a side per run (default 20)")
    ap.add_argument("--poll-ms", type=int, default=50, help="the peer's pollIntervalMs (default 50, mcpx's floor)")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--peer", type=int, metavar="PORT", help=argparse.SUPPRESS)  # the peer's own process
    opts = ap.parse_args()
    if opts.peer is not None:
        run_peer(opts.peer, opts.poll_ms)
        return 0
    run_stoppable(run(opts.runs, opts.rounds, opts.poll_ms, opts.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
