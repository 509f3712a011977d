"""Benchmark of the upstream processes a daemon holds: 20 sessions x 3 servers, calling, then idle.

One run, against a `python -m mcpx daemon` in a temp MCPX_HOME with three upstream servers:

- `modern`: bench/peer_server.py (the official mcp SDK), which answers `server/discover`: the modern era;
- `legacy`: the same script with `--legacy` (the SDK's handshake-only loop): the legacy era;
- `everything`: @modelcontextprotocol/server-everything under node (legacy only), the server the
  issue counted six copies of; left out, and said so, when node or node_modules is missing.

Twenty sessions each start one call to each server at once (60 calls of CALL_S seconds, through
`POST /v1/call/...?wait=0`). While they run, the daemon's child processes are read from /proc
every POLL_S: the peak count and the peak resident memory (each child with the processes it
started). Then the same once the calls are done, and again once the servers' `idleTimeout`
(IDLE_S here, 10 min by default) has passed: the instances must be gone, and the run says how
long after the last call they went.

`--against REF` runs the same workload, in the same run, on the daemon of another revision (its
`sidecar/` taken from git with `git archive`), for the figures side by side; that daemon has no
`idleTimeout`, so its idle figure is read IDLE_S after the calls as well.

    .venv/bin/python bench/upstreams.py                  # about 30 s on 2 cores
    .venv/bin/python bench/upstreams.py --against main   # and the same on main, beside it

It is a benchmark, not a test: it exits 0 and prints MISSED where a target is not met.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from mcpx.upstream import procinfo

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))  # broker sits beside this file, however it is run
sys.path.insert(0, str(ROOT / "tests"))  # the daemon harness
from broker import Report, fmt_mib, say  # noqa: E402
from harness import Daemon, child_pids, run_stoppable, scratch_daemon  # noqa: E402

SESSIONS = 20
CALL_S = 3.0          # each call's own length: long enough that all 60 are in flight together
POLL_S = 0.1          # how often /proc is read while they run
IDLE_S = 8.0          # the idleTimeout this run gives each server: more than the spread of the calls' ends
STOP_BOUND_S = 30.0   # how long the run waits for the idle instances to go before it says they did not
PEER = BENCH / "peer_server.py"
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"


def servers(with_idle_timeout: bool) -> dict[str, dict[str, Any]]:
    extra = {"idleTimeout": f"{IDLE_S:g}s"} if with_idle_timeout else {}
    out = {"modern": {"command": sys.executable, "args": [str(PEER)], **extra},
           "legacy": {"command": sys.executable, "args": [str(PEER), "--legacy"], **extra}}
    if EVERYTHING.exists() and shutil.which("node"):
        out["everything"] = {"command": "node", "args": [str(EVERYTHING.resolve()), "stdio"], **extra}
    return out


def call_of(server: str) -> tuple[str, dict[str, Any]]:
    if server == "everything":
        return "trigger-long-running-operation", {"duration": CALL_S, "steps": 1}
    return "sleep", {"seconds": CALL_S}


def server_of(cmdline: str) -> str:
    if "mcp-server-everything" in cmdline or "server-everything" in cmdline:
        return "everything"
    return "legacy" if "--legacy" in cmdline else "modern"


@dataclass
class Snapshot:
    """The daemon's upstream processes at one moment: per server, how many and their resident memory."""

    processes: dict[str, int] = field(default_factory=dict)
    rss_kib: dict[str, int] = field(default_factory=dict)
    daemon_kib: int = 0

    @property
    def total_processes(self) -> int:
        return sum(self.processes.values())

    @property
    def total_kib(self) -> int:
        return sum(self.rss_kib.values())


def snapshot(d: Daemon) -> Snapshot:
    snap = Snapshot(daemon_kib=d.rss_kib())
    kids = sorted(child_pids(d.pid))
    usage = procinfo.usage(kids)
    for pid in kids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        use = usage.get(pid)
        if use is None:
            continue
        name = server_of(cmdline)
        snap.processes[name] = snap.processes.get(name, 0) + use.processes
        snap.rss_kib[name] = snap.rss_kib.get(name, 0) + use.rss_kib
    return snap


@dataclass
class Run:
    label: str
    servers: list[str]
    peak: Snapshot
    after: Snapshot
    idle: Snapshot
    stopped_after_s: float | None  # from the last call's end to no upstream process left; None: not within the bound
    released_after_s: float | None  # from the last call's end to no instance in GET /v1/upstreams (the reaper's part)
    failures: list[str]


async def start_calls(http: aiohttp.ClientSession, names: list[str]) -> list[str]:
    async def one(session: str, server: str) -> str:
        tool, arguments = call_of(server)
        async with http.post(f"/v1/call/{server}/{tool}", params={"wait": "0"},
                             json={"arguments": arguments, "session": session}) as r:
            body = await r.json()
        if r.status not in (200, 202):
            raise RuntimeError(f"POST /v1/call/{server}/{tool}: {r.status} {body}")
        return str(body["task"])

    return await asyncio.gather(*(one(f"bench-s{i:02d}", s) for i in range(1, SESSIONS + 1) for s in names))


async def finished(http: aiohttp.ClientSession, task: str) -> str | None:
    """None when the call completed, else why not."""
    async with http.get(f"/v1/tasks/{task}/result", params={"timeout": str(CALL_S * 20)}) as r:
        body = await r.json()
    if r.status == 200 and body.get("state") == "completed":
        return None
    return str(body.get("error") or body.get("state") or r.status)


async def pool_empty(http: aiohttp.ClientSession) -> bool | None:
    """Whether the daemon lists no upstream instance; None for a daemon without GET /v1/upstreams."""
    async with http.get("/v1/upstreams") as r:
        if r.status == 404:
            return None
        return not (await r.json())["instances"]


async def workload(label: str, d: Daemon, names: list[str], reaps: bool) -> Run:
    async with d.session(limit=200) as http:
        peak = Snapshot()
        tasks = await start_calls(http, names)
        waiting = asyncio.gather(*(finished(http, t) for t in tasks))
        while not waiting.done():  # the peak while they run
            snap = snapshot(d)
            if (snap.total_processes, snap.total_kib) > (peak.total_processes, peak.total_kib):
                peak = snap
            await asyncio.wait([waiting], timeout=POLL_S)
        failures = [f for f in await waiting if f is not None]
        ended = time.monotonic()
        after = snapshot(d)
        stopped = released = None
        deadline = ended + STOP_BOUND_S
        while time.monotonic() < deadline:  # the events: the pool lets go of them all, then their processes end
            if released is None and reaps and await pool_empty(http):
                released = time.monotonic() - ended
            if snapshot(d).total_processes == 0:
                stopped = time.monotonic() - ended
                break
            if not reaps and time.monotonic() - ended > IDLE_S + 2:
                break  # a daemon without idleTimeout: read it IDLE_S (and a little) after the calls
            await asyncio.sleep(POLL_S)
        idle = snapshot(d)
    return Run(label, names, peak, after, idle, stopped, released, failures)


def checkout(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "sidecar"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "sidecar"


async def measure(label: str, daemon: Daemon, reaps: bool) -> Run:
    names = sorted(servers(False))
    with daemon:
        say(f"{label}: {SESSIONS} sessions x {len(names)} servers ({', '.join(names)}), calls of {CALL_S:g}s ...")
        return await workload(label, daemon, names, reaps)


def mib(snap: Snapshot, server: str | None = None) -> str:
    kib = snap.total_kib if server is None else snap.rss_kib.get(server, 0)
    procs = snap.total_processes if server is None else snap.processes.get(server, 0)
    return f"{procs:>3} proc  {fmt_mib(kib):>11}"


def table(runs: list[Run]) -> None:
    names = runs[0].servers
    head = ["", *[r.label for r in runs]]
    rows: list[list[str]] = []
    for phase, pick in (("calling (peak)", lambda r: r.peak), ("calls done", lambda r: r.after),
                        (f"idle {IDLE_S:g}s later", lambda r: r.idle)):
        for server in [*names, None]:
            rows.append([f"{phase:<16} {server or 'all':<10}", *[mib(pick(r), server) for r in runs]])
    rows.append(["daemon itself (calls done)", *[fmt_mib(r.after.daemon_kib) for r in runs]])
    rows.append(["idle processes gone, after the calls",
                 *[f"{r.stopped_after_s:.1f} s" if r.stopped_after_s is not None else "not gone" for r in runs]])
    rows.append(["failed calls", *[str(len(r.failures)) for r in runs]])
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    say(" | ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)))
    say("-+-".join("-" * w for w in widths))
    for row in rows:
        say(" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                           strict=True))))


async def main_async(against: str | None) -> None:
    runs = [await measure("this code", scratch_daemon("mcpx-bench-", {"servers": servers(True)}), reaps=True)]
    if against:
        with tempfile.TemporaryDirectory(prefix="mcpx-against-") as tmp:
            # the daemon of another revision: its sidecar/ first on PYTHONPATH
            old = scratch_daemon("mcpx-bench-", {"servers": servers(False)}, sidecar=checkout(against, Path(tmp)))
            runs.append(await measure(against, old, reaps=False))
    say("")
    table(runs)
    for run in runs:
        for why, count in Counter(f[:300] for f in run.failures).most_common(3):
            say(f"{run.label}: {count} call(s) failed: {why}")
    this = runs[0]
    modern_shared = this.peak.processes.get("modern", 0) == 1
    report = Report()
    report.add("modern: one shared instance for all sessions", f"{this.peak.processes.get('modern', 0)} process(es)",
               "1", modern_shared)
    for name in this.servers:
        if name != "modern":
            report.add(f"{name}: one instance per session while calling", f"{this.peak.processes.get(name, 0)}",
                       f"<= {SESSIONS}", this.peak.processes.get(name, 0) <= SESSIONS)
    let_go, gone = this.released_after_s, this.stopped_after_s
    report.add(f"idle instances out of the pool (idleTimeout {IDLE_S:g}s)",
               f"{let_go:.1f} s after the calls" if let_go is not None else "not out", f"<= {IDLE_S + 1:g} s",
               let_go is not None and let_go <= IDLE_S + 1)
    report.add("  ... and their processes ended", f"{gone:.1f} s after the calls" if gone is not None else "not gone",
               f"<= {IDLE_S + 5:g} s", gone is not None and gone <= IDLE_S + 5)
    report.add("calls that failed", str(len(this.failures)), "0", not this.failures)
    say("")
    report.show()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", metavar="REF", help="also run the workload on this git revision's daemon")
    args = parser.parse_args()
    run_stoppable(main_async(args.against))  # SIGTERM too stops the daemon and its servers
    return 0


if __name__ == "__main__":
    sys.exit(main())
