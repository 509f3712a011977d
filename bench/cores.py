"""Figure 3 from every process: what 16 callers cost each process on their way, and the ceiling two cores set.

    .venv/bin/python bench/cores.py              # about a minute on 2 cores
    .venv/bin/python bench/cores.py --rounds 6   # more alternated rounds

bench/speed.py's figure 3 (16 callers in flight on one SDK client connection, `echo` on bench/peer_server.py
--legacy) timed through each route, with the CPU of every process on the route taken over its own blocks (user +
system, all threads, /proc's schedstat): the client (this process: the official SDK client), what is between (a
relay, or `mcpx serve` and the daemon), and the upstream (the server processes: one direct and through a relay,
the instances the daemon started through mcpx). Per route: calls/s, each process's CPU per call, the cores the
route kept busy (all its CPU over the wall time), and its ceiling on this machine's cores: the calls/s at which
their CPU would run out (cores / CPU per call). Issue 39's goal for figure 3 is mcpx at 1.2x direct's calls/s: a
route whose ceiling is below that cannot meet it here, however its work is scheduled.

It is a benchmark, not a test: it exits 0 and prints a table. The routes' blocks alternate, in rotating order.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
import speed  # noqa: E402
from harness import run_stoppable, scratch_daemon  # noqa: E402
from surface import SdkCaller, cpu_of  # noqa: E402

CALLERS, PER_CALLER = 16, 10  # a block: 160 calls, as speed.py's figure 3 times them (THR_PER_CALLER 5)


def children(pid: int) -> set[int]:
    out: set[int] = set()
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int((proc / "stat").read_text().rsplit(") ", 1)[1].split()[1]) == pid:
                out.add(int(proc.name))
    return out


def tree(pids: set[int]) -> set[int]:
    """`pids` and all their descendants now."""
    seen, todo = set(pids), list(pids)
    while todo:
        for kid in children(todo.pop()) - seen:
            seen.add(kid)
            todo.append(kid)
    return seen


@dataclass
class Route:
    label: str
    kind: str
    call: SdkCaller | None = None
    between: set[int] = field(default_factory=set)  # the relay, or `mcpx serve` and the daemon
    upstream: set[int] = field(default_factory=set)
    calls: int = 0
    wall: float = 0.0
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("client", "between", "upstream"), 0.0))


async def block(route: Route, daemon_pid: int | None) -> None:
    assert route.call is not None
    if daemon_pid is not None:  # the daemon's instances of the server, as they are now (it starts them as it needs)
        route.upstream = tree(children(daemon_pid))
    roles = {"client": {os.getpid()}, "between": route.between, "upstream": route.upstream}
    before = {role: cpu_of(sorted(pids)) for role, pids in roles.items()}
    n, secs = await speed.throughput(route.call, CALLERS, PER_CALLER)
    for role, pids in roles.items():
        route.cpu[role] += cpu_of(sorted(pids)) - before[role]
    route.calls += n
    route.wall += secs


async def run(rounds: int) -> None:
    d = scratch_daemon("mcpx-cores-", speed.servers_config())
    d.start()
    try:
        routes = [Route("direct", "direct"), Route(speed.PARSING, "parsing-relay"),
                  Route(speed.DURABLE, "durable-relay"), Route("mcpx", "mcpx")]
        async with contextlib.AsyncExitStack() as stack:
            for route in routes:
                before = children(os.getpid())
                client, prefix = await speed.connect(stack, speed.Route(route.label, route.kind,
                                                                        d if route.kind == "mcpx" else None),
                                                     "asker", [str(speed.PEER), "--legacy"], d.env)
                spawned = tree(children(os.getpid()) - before)
                if route.kind == "mcpx":
                    route.between = spawned | {d.pid}  # `mcpx serve` (it hands its pipes over) and the daemon
                elif route.kind == "direct":
                    route.upstream = spawned
                else:  # the relay, and the server it started
                    relays = children(os.getpid()) - before
                    route.between, route.upstream = relays, spawned - relays
                route.call = SdkCaller(client, f"{prefix}echo")
                await speed.throughput(route.call, CALLERS, 2)  # warm: mcpx starts the instances it will use
            for r in range(rounds):
                k = r % len(routes)
                for route in routes[k:] + routes[:k]:
                    await block(route, d.pid if route.kind == "mcpx" else None)
    finally:
        d.cleanup()
    cores = os.cpu_count() or 1
    direct = routes[0].calls / routes[0].wall
    print(f"figure 3 from every process: {CALLERS} callers, {rounds} blocks of {CALLERS * PER_CALLER} calls a route, "
          f"{cores} cores, load now {os.getloadavg()[0]:.2f}")
    print(f"{'route':26s} {'calls/s':>8s} {'/direct':>8s} {'client':>8s} {'between':>8s} {'upstream':>9s} "
          f"{'all':>7s} {'cores busy':>10s} {'ceiling':>8s} {'/direct':>8s}")
    for route in routes:
        rate = route.calls / route.wall
        per = {role: 1e3 * cpu / route.calls for role, cpu in route.cpu.items()}
        total = sum(per.values())
        ceiling = cores * 1e3 / total
        print(f"{route.label:26s} {rate:7.0f}  {rate / direct:7.2f}x {per['client']:6.3f}ms {per['between']:6.3f}ms "
              f"{per['upstream']:7.3f}ms {total:5.2f}ms {sum(route.cpu.values()) / route.wall:10.2f} {ceiling:7.0f} "
              f"{ceiling / direct:7.2f}x")
    print("CPU per call, each process over its route's own blocks; ceiling: the calls/s at which all the cores "
          "would be busy with this route's processes alone (cores / CPU per call)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=4, help="alternated blocks of each route (default 4)")
    args = parser.parse_args()
    run_stoppable(run(args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
