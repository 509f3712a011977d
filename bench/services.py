"""Benchmark of a REST service behind mcpx (docs/services.md) against FastMCP's OpenAPI server in front of it.

One GET operation (`get_note` of tests/peers/notes_api.py, a FastAPI service on a loopback port) called by the
official SDK client over stdio, as a host calls any MCP server:

- through mcpx: `python -m mcpx serve` (tool `notes_get_note`), to a daemon in a temp MCPX_HOME whose config has
  the service as an `openapi` entry;
- through FastMCP: bench/fastmcp_openapi.py (`FastMCP.from_openapi`, tool `get_note`) on the same service.

Both clients are open at once, warmed up, then timed in interleaved rounds whose order rotates, so the machine's
noise hits both alike: p50 and p99 of each and the ratio mcpx/FastMCP at p50 (goal: at most 1.0x). The
service's own time is in both; mcpx's path has one hop more (serve → daemon).

    .venv/bin/python bench/services.py           # about 30 s on 2 cores
    .venv/bin/python bench/services.py --short   # a quarter of the rounds: a first look in about 15 s
    .venv/bin/python bench/services.py --short --profile /tmp/svc.prof   # the daemon under cProfile

A benchmark, not a test: it exits 0 whether or not the goal is met, and says MISSED where it is not.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from pathlib import Path

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
from broker import Report, fmt_ms, p50, p99, say  # noqa: E402
from harness import (  # noqa: E402
    PEERS,
    Daemon,
    free_port,
    listening,
    run_stoppable,
    scratch_daemon,
    stop_process,
    wait_started,
)
from surface import SdkCaller, Side, interleaved  # noqa: E402

N_WARMUP = 40
ROUNDS, PER_ROUND = 40, 10  # 400 timed calls a side
GOAL = 1.0


class GetNote(SdkCaller):
    async def __call__(self) -> None:
        res = await self.client.session.call_tool(self.tool, {"note_id": 1})
        if res.is_error:
            raise RuntimeError(f"{self.tool} failed: {res.content}")


async def run(base: str, d: Daemon, rounds: int) -> list[Side]:
    async with contextlib.AsyncExitStack() as stack:
        via = await stack.enter_async_context(Client(StdioServerParameters(
            command=sys.executable, args=["-m", "mcpx", "serve"], env=d.env, cwd=str(d.home))))
        fast = await stack.enter_async_context(Client(StdioServerParameters(
            command=sys.executable, args=[str(BENCH / "fastmcp_openapi.py"), base])))
        sides = [Side("mcpx (serve → daemon → service)", GetNote(via, "notes_get_note")),
                 Side("FastMCP from_openapi (→ service)", GetNote(fast, "get_note"))]
        for side in sides:
            for _ in range(N_WARMUP):
                await side.call()
        await interleaved(sides, rounds, PER_ROUND)
    return sides


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--short", action="store_true", help=f"{ROUNDS // 4} rounds, not {ROUNDS}")
    parser.add_argument("--profile", metavar="FILE", help="run the daemon under cProfile, stats to FILE")
    args = parser.parse_args()
    rounds = ROUNDS // 4 if args.short else ROUNDS
    profiled = ["-m", "cProfile", "-o", args.profile] if args.profile else []
    port = free_port()
    service = subprocess.Popen([sys.executable, str(PEERS / "notes_api.py"), str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_started(service, lambda: listening(port), "the notes service")
        with scratch_daemon("mcpx-bench-svc-", {"servers": {"notes": {"openapi": f"{base}/openapi.json"}}},
                            python_args=profiled) as d:
            sides = run_stoppable(run(base, d, rounds))
    finally:
        stop_process(service)
    report = Report()
    for side in sides:
        report.add(f"{side.name}, p50 / p99", f"{fmt_ms(p50(side.times_ms))} / {fmt_ms(p99(side.times_ms))}")
    ratio = p50(sides[0].times_ms) / p50(sides[1].times_ms)
    report.add("mcpx / FastMCP at p50", f"{ratio:.2f}×", f"≤ {GOAL:.1f}×", ratio <= GOAL)
    say("")
    report.show()
    return 0


if __name__ == "__main__":
    sys.exit(main())
