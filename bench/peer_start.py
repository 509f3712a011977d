"""Issue 36 item 7: the CPU of one start of what the suite starts most, run directly beside forked from the test
worker's fork server of its kind (tests/forks.py): a test peer (tests/peers/sdk_server.py: `python sdk_server.py`,
or the SDK imported once), to its `initialize` answered and its exit once its stdin closes; a daemon
(harness.Daemon: `python -m mcpx daemon`, or mcpx's daemon imported once), to its socket answering and its exit
on SIGTERM; and CLI commands (harness.mcpx_command: `python -m mcpx …`, or its stand-in and mcpx's commands imported
once), each to its exit, against one running daemon.

CPU, not wall: the suite's time on 2 cores is CPU. Direct: the process's own and what it started (RUSAGE_CHILDREN).
Forked: the stand-in's (a peer's or a command's fork_client.py, ours) plus the forked process's, which the fork
server reaps (its cutime+cstime from /proc). The two kinds alternate, so load that comes and goes falls on both;
medians.

    .venv/bin/python bench/peer_start.py            # 5 starts of each, about two minutes on 2 cores
    .venv/bin/python bench/peer_start.py --only cli --starts 10
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import harness  # noqa: E402
from forks import ForkServer, fork_server, stop_fork_servers  # noqa: E402
from harness import PATIENCE, PEERS, Daemon, mcpx_command, mcpx_env, scratch_daemon  # noqa: E402

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
TICKS = os.sysconf("SC_CLK_TCK")
# the commands the suite runs most (docs/bench.md, "The suite's CPU, by kind of process"), and what each is given on
# stdin: a question's call returned (exit 75) or declined, the listings, the config read, Claude Code's hook
COMMANDS: tuple[tuple[tuple[str, ...], str | None], ...] = (
    (("elicit", "list"), None), (("status",), None), (("config", "check"), None),
    (("claude", "hook"), '{"hook_event_name": "Elicitation", "mcp_server_name": "other"}'))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reaped_cpu(pid: int) -> float:
    """What a process's reaped children spent (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICKS


def peer_start(argv: list[str]) -> float:
    """Spawn to exit: initialize answered, then stdin closed. Its wall time."""
    began = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    assert answer.get("id") == 1 and "result" in answer, answer
    proc.stdin.close()
    assert proc.wait(120) == 0
    return time.monotonic() - began


def daemon_start(forked: bool) -> float:
    """A daemon with no servers, started to its socket answering, then stopped (SIGTERM, exit 0). Its wall time."""
    harness.FORK_DAEMONS = forked
    d = scratch_daemon("bps-")
    began = time.monotonic()
    try:
        d.start()
        assert d.forked == forked and d.api().json("GET", "/v1/health")["pid"] == d.pid
        assert d.stop() == 0
    finally:
        d.cleanup()
    return time.monotonic() - began


def cli_run(d: Daemon, args: tuple[str, ...], stdin: str | None, forked: bool) -> float:
    """`mcpx ARGS…` to its exit, as a test runs it (harness.mcpx_command). Its wall time."""
    harness.FORK_CLI = forked
    began = time.monotonic()
    done = subprocess.run(mcpx_command(*args), env=d.env, cwd=d.home, input=stdin, capture_output=True, text=True,
                          timeout=PATIENCE)
    assert done.returncode == 0, (args, done.stderr)
    return time.monotonic() - began


Row = tuple[float, float, float]  # CPU, wall, and the CPU of what the test's process started (a stand-in's)


def side_by_side(direct: Callable[[], float], forked: Callable[[], float], server: ForkServer,
                 starts: int) -> tuple[list[Row], list[Row]]:
    """(CPU, wall, the started process's own CPU) of each start, the two kinds alternating."""
    direct()  # the fork server ready, and a warm-up of each
    forked()
    rows: tuple[list[Row], list[Row]] = ([], [])
    for _ in range(starts):
        before = children_cpu()
        wall = direct()
        rows[0].append((children_cpu() - before, wall, children_cpu() - before))
        before, before_reaped = children_cpu(), reaped_cpu(server.proc.pid)
        wall = forked()
        started = children_cpu() - before
        rows[1].append((started + reaped_cpu(server.proc.pid) - before_reaped, wall, started))
    return rows


def show(what: str, starts: int, direct: list[Row], forked: list[Row]) -> None:
    d_cpu, d_wall, _ = (statistics.median(x) for x in zip(*direct, strict=True))
    f_cpu, f_wall, f_started = (statistics.median(x) for x in zip(*forked, strict=True))
    print(f"{what}, median of {starts} (load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"  direct       CPU {d_cpu * 1000:7.0f} ms   wall {d_wall * 1000:7.0f} ms")
    print(f"  fork server  CPU {f_cpu * 1000:7.0f} ms   wall {f_wall * 1000:7.0f} ms   (what the test started: "
          f"{f_started * 1000:.0f} ms)")
    print(f"  direct / forked: CPU {d_cpu / f_cpu:.1f}x, wall {d_wall / f_wall:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--only", choices=("peer", "daemon", "cli"), help="one kind alone")
    opts = parser.parse_args()
    try:
        if opts.only in (None, "peer"):
            server = fork_server("peers")
            script = PEERS / "sdk_server.py"
            command, args = server.command(script, ())
            direct, forked = side_by_side(lambda: peer_start([sys.executable, str(script)]),
                                          lambda: peer_start([command, *args]), server, opts.starts)
            show("sdk_server.py start to exit", opts.starts, direct, forked)
        if opts.only in (None, "daemon"):
            server = fork_server("daemons", mcpx_env())
            direct, forked = side_by_side(lambda: daemon_start(False), lambda: daemon_start(True), server,
                                          opts.starts)
            show("mcpx daemon start to serving to exit", opts.starts, direct, forked)
        if opts.only in (None, "cli"):
            server = fork_server("cli", mcpx_env())
            with scratch_daemon("bpc-") as d:
                for args, stdin in COMMANDS:
                    direct, forked = side_by_side(partial(cli_run, d, args, stdin, False),
                                                  partial(cli_run, d, args, stdin, True), server, opts.starts)
                    show(f"mcpx {' '.join(args)} to its exit", opts.starts, direct, forked)
    finally:
        stop_fork_servers()


if __name__ == "__main__":
    main()
