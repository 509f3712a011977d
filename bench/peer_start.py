"""Issue 36 item 7: the CPU of one start of a test peer (tests/peers/sdk_server.py), run directly (`python
sdk_server.py`, as the suite did) beside started through the test worker's fork server (tests/peer_forks.py, the
SDK imported once), each to its `initialize` answered and its exit once its stdin closes.

CPU, not wall: the suite's time on 2 cores is CPU. Direct: the process's own (RUSAGE_CHILDREN). Forked: the
stand-in's (fork_client.py, ours) plus the forked peer's, which the fork server reaps (its cutime+cstime from
/proc). The two kinds alternate, so load that comes and goes falls on both; medians.

    .venv/bin/python bench/peer_start.py            # 5 starts of each, well under a minute on 2 cores
    .venv/bin/python bench/peer_start.py --starts 20
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from harness import PEERS  # noqa: E402
from peer_forks import fork_server, stop_fork_server  # noqa: E402

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
TICKS = os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reaped_cpu(pid: int) -> float:
    """What a process's reaped children spent (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICKS


def one_start(argv: list[str]) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5)
    starts = parser.parse_args().starts
    server = fork_server()
    script = PEERS / "sdk_server.py"
    command, args = server.command(script, ())
    one_start([command, *args])  # the fork server ready, and a warm-up of each
    one_start([sys.executable, str(script)])
    direct: list[tuple[float, float]] = []
    forked: list[tuple[float, float]] = []
    try:
        for _ in range(starts):
            before = children_cpu()
            wall = one_start([sys.executable, str(script)])
            direct.append((children_cpu() - before, wall))
            before, before_reaped = children_cpu(), reaped_cpu(server.proc.pid)
            wall = one_start([command, *args])
            forked.append((children_cpu() - before + reaped_cpu(server.proc.pid) - before_reaped, wall))
    finally:
        stop_fork_server()
    load = os.getloadavg()[0]
    d_cpu, d_wall = (statistics.median(x) for x in zip(*direct, strict=True))
    f_cpu, f_wall = (statistics.median(x) for x in zip(*forked, strict=True))
    print(f"sdk_server.py start to exit, median of {starts} (load {load:.1f} on {os.cpu_count()} cores)")
    print(f"  direct       CPU {d_cpu * 1000:7.0f} ms   wall {d_wall * 1000:7.0f} ms")
    print(f"  fork server  CPU {f_cpu * 1000:7.0f} ms   wall {f_wall * 1000:7.0f} ms")
    print(f"  direct / forked: CPU {d_cpu / f_cpu:.1f}x, wall {d_wall / f_wall:.1f}x")


if __name__ == "__main__":
    main()
