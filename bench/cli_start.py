"""Issue 39's CLI row: how long `mcpx elicit list` takes, start to exit, against a daemon already running, beside
the floor of any Python command line on this machine, `python -c 'import argparse, json, socket'`.

Both are run as a person runs them: the installed `mcpx` entry point (the venv's bin/mcpx, a console script) and
the same interpreter, each a new process, timed from spawn to exit (wall). The two commands alternate, after a
warm-up of each, so load that comes and goes falls on both. Each run starts a fresh scratch daemon with no servers;
`--runs N` repeats that, and the row gives the median of the runs' p50 ratios with (min-max) over them.

Beside it, not a goal: `mcpx elicit list` when no daemon runs yet, so that it starts one (`ensure_running`): the
path a person meets first. Each of those is timed to the command's exit, then the daemon it started is stopped.
`mcpx serve` as a host starts it, on pipes, against the running daemon: from spawn to its `initialize` answered
(wall), and the CPU the serve process spent from spawn to exit (its input closed once answered). And the daemon
alone (issue 36: the suite starts hundreds): `mcpx daemon` with no servers in a new home, from spawn
until its socket answers (harness.Daemon.start, which looks every 20 ms), and the CPU it had spent by then (read
from /proc as it answers: the steadier figure on a shared machine).

And the request/response commands the suite and people run most (issue 39 item 4), each against the same running
daemon, whose config holds the bundled demo server: the CPU (user + system) each spent, spawn to exit, p50 of
CMD_TIMED runs per side and run (`mcpx call` a real call to the demo, declined; `mcpx claude hook` given a question
that is none of mcpx's, the hook's path to the daemon and back).

    .venv/bin/python bench/cli_start.py                  # three runs, a minute or two on 2 cores
    .venv/bin/python bench/cli_start.py --runs 1 --against main   # this code's CLI beside main's, same rounds
    .venv/bin/python bench/cli_start.py --daemon --against main   # only `mcpx daemon` alone (~30 s)

bench/speed.py prints the same rows in its table (`add_rows`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "tests"))
from broker import Report, fmt_ms, say  # noqa: E402
from harness import home_pid, process_cpu_seconds, scratch_daemon, stop_pid  # noqa: E402
from mcpx.config.finding import demo_server  # noqa: E402
from upstreams import checkout  # noqa: E402

GOAL = 3.0                      # issue 39: mcpx elicit list / the floor, wall p50
WARMUP, TIMED = 3, 15           # per side and run: untimed first (the page cache), then timed, alternating
COLD = 3                        # per run: `mcpx elicit list` starting the daemon itself
STARTS = 5                      # per run and side: `mcpx daemon` alone, to its socket answering
FLOOR = [sys.executable, "-c", "import argparse, json, socket"]
COMMAND = ["elicit", "list"]
CMD_WARMUP, CMD_TIMED = 1, 5    # per command, side and run
HOOK_INPUT = json.dumps({"session_id": "bench", "hook_event_name": "Elicitation", "mcp_server_name": "mcpx",
                         "message": "Which?"})
# (row label, argv after `mcpx`, stdin)
CPU_COMMANDS: tuple[tuple[str, list[str], str], ...] = (
    ("mcpx call demo.choose_repository --elicit decline", ["call", "demo.choose_repository", "--elicit", "decline"],
     ""),
    ("mcpx task list", ["task", "list", "--state", "all"], ""),
    ("mcpx tools", ["tools"], ""),
    ("mcpx status", ["status"], ""),
    ("mcpx claude hook", ["claude", "hook"], HOOK_INPUT),
    ("mcpx doctor --no-ask", ["doctor", "--no-ask"], ""),
)
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}) + "\n"


def entry_point() -> list[str]:
    """The installed console script beside this interpreter (what a person types), else `python -m mcpx`."""
    script = Path(sys.executable).with_name("mcpx")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcpx"]


def cached(env: Mapping[str, str]) -> dict[str, str]:
    """`env`, with Python's bytecode cache on: an installed mcpx has its .pyc files (pip writes them), and the
    floor's standard library has its own; PYTHONDONTWRITEBYTECODE (set by some sandboxes) would time mcpx's
    modules compiled from source on every run. The warm-up writes them."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], env: dict[str, str], cwd: Path, stdin: str = "", ok: tuple[int, ...] = (0,)) -> tuple[
        float, float]:
    """Milliseconds from spawn to exit, and of CPU (user + system) the process spent; the command must exit with one
    of `ok`. `stdin`: what it reads (else nothing: its input is closed)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None and proc.stdin is not None
    proc.stdin.write(stdin.encode())  # a few bytes: the pipe takes them before the process reads
    proc.stdin.close()
    err = proc.stderr.read()  # a few lines at most: it cannot fill the pipe before the process ends
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err.decode(errors='replace')[-400:]}")
    return elapsed * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def serve_once(env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """`mcpx serve` on pipes: milliseconds from spawn to its `initialize` answered, and the CPU (user + system) the
    process spent from spawn to exit, its input closed once answered."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*entry_point(), "serve"], env=env, cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(INITIALIZE.encode())
        proc.stdin.flush()
        reply = proc.stdout.readline()
        wall_ms = (time.perf_counter() - t0) * 1000
        if b'"serverInfo"' not in reply:
            raise RuntimeError(f"mcpx serve answered initialize with {reply[:200]!r}")
        proc.stdin.close()
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return wall_ms, (usage.ru_utime + usage.ru_stime) * 1000


@dataclass
class Run:
    p50_ms: dict[str, float] = field(default_factory=dict)   # label -> p50 wall of `mcpx elicit list`, daemon up
    cpu_ms: dict[str, float] = field(default_factory=dict)   # label -> its p50 CPU (steadier than wall under load)
    cold_ms: dict[str, float] = field(default_factory=dict)  # label -> p50 wall when it starts the daemon
    serve_ms: dict[str, float] = field(default_factory=dict)  # label -> p50 wall of `mcpx serve` to initialize
    serve_cpu_ms: dict[str, float] = field(default_factory=dict)  # label -> its p50 CPU, spawn to exit
    start_ms: dict[str, float] = field(default_factory=dict)  # label -> p50 wall of `mcpx daemon` to its socket
    start_cpu_ms: dict[str, float] = field(default_factory=dict)  # label -> the daemon's p50 CPU by then
    command_cpu_ms: dict[tuple[str, str], float] = field(default_factory=dict)  # (command, label) -> CPU p50
    floor_ms: float = 0.0
    floor_cpu_ms: float = 0.0


def one_run(sidecars: dict[str, Path | None], daemon_only: bool = False) -> Run:
    """Warm sides first, then TIMED rounds in which every side runs once, in an order that rotates. `daemon_only`:
    only `mcpx daemon` alone's starts."""
    run = Run()
    if daemon_only:
        daemon_starts(run, sidecars)
        return run
    kw: dict[str, Any] = {"config": {"servers": {"demo": demo_server()}}}
    daemons = {label: scratch_daemon("mcpx-cli-", sidecar=s, **kw) if s else scratch_daemon("mcpx-cli-", **kw)
               for label, s in sidecars.items()}
    try:
        for d in daemons.values():
            d.start()
        sides: list[tuple[str, list[str], dict[str, str], Path]] = [
            ("floor", FLOOR, cached(os.environ), ROOT),
            *((label, entry_point() + COMMAND, cached(d.env), d.home) for label, d in daemons.items())]
        times: dict[str, list[float]] = {label: [] for label, *_ in sides}
        cpu: dict[str, list[float]] = {label: [] for label, *_ in sides}
        for _label, argv, env, cwd in sides:
            for _ in range(WARMUP):
                timed(argv, env, cwd)
        for i in range(TIMED):
            for label, argv, env, cwd in sides[i % len(sides):] + sides[:i % len(sides)]:
                wall_ms, cpu_ms = timed(argv, env, cwd)
                times[label].append(wall_ms)
                cpu[label].append(cpu_ms)
        run.floor_ms, run.floor_cpu_ms = statistics.median(times.pop("floor")), statistics.median(cpu.pop("floor"))
        run.p50_ms = {label: statistics.median(xs) for label, xs in times.items()}
        run.cpu_ms = {label: statistics.median(xs) for label, xs in cpu.items()}
        served: dict[str, list[tuple[float, float]]] = {label: [] for label in daemons}
        for i in range(WARMUP + TIMED):
            for label, d in daemons.items():
                timing = serve_once(cached(d.env), d.home)
                if i >= WARMUP:
                    served[label].append(timing)
        run.serve_ms = {label: statistics.median(w for w, _ in xs) for label, xs in served.items()}
        run.serve_cpu_ms = {label: statistics.median(c for _, c in xs) for label, xs in served.items()}
        for name, words, stdin in CPU_COMMANDS:
            spent: dict[str, list[float]] = {label: [] for label in daemons}
            for i in range(CMD_WARMUP + CMD_TIMED):
                for label, d in daemons.items():
                    # doctor exits 1 for any problem it finds on this machine (a host not installed): still timed
                    _wall, cpu_ms = timed(entry_point() + words, cached(d.env), d.home, stdin, ok=(0, 1))
                    if i >= CMD_WARMUP:
                        spent[label].append(cpu_ms)
            run.command_cpu_ms.update({(name, label): statistics.median(xs) for label, xs in spent.items()})
        for d in daemons.values():
            d.stop()
        cold: dict[str, list[float]] = {label: [] for label in daemons}
        for _ in range(COLD):
            for label, d in daemons.items():
                cold[label].append(timed(entry_point() + COMMAND, cached(d.env), d.home)[0])
                if (pid := home_pid(d.home)) is not None:
                    stop_pid(pid)
        run.cold_ms = {label: statistics.median(xs) for label, xs in cold.items()}
    finally:
        for d in daemons.values():
            d.cleanup()
    daemon_starts(run, sidecars)
    return run


def daemon_starts(run: Run, sidecars: dict[str, Path | None]) -> None:
    """STARTS of `mcpx daemon` alone per side, alternating, into `run`."""
    started: dict[str, list[tuple[float, float]]] = {label: [] for label in sidecars}
    for i in range(1 + STARTS):  # the first, untimed: it writes the bytecode a checkout has none of yet
        for label, s in sidecars.items():
            timing = daemon_start(s)
            if i:
                started[label].append(timing)
    run.start_ms = {label: statistics.median(w for w, _ in xs) for label, xs in started.items()}
    run.start_cpu_ms = {label: statistics.median(c for _, c in xs) for label, xs in started.items()}


def daemon_start(sidecar: Path | None) -> tuple[float, float]:
    """`mcpx daemon` with no servers in a new home: milliseconds from spawn until its socket answers, and the CPU
    (user + system) it had spent by then."""
    d = scratch_daemon("mcpx-start-", sidecar=sidecar) if sidecar else scratch_daemon("mcpx-start-")
    d.env = cached(d.env)
    try:
        t0 = time.perf_counter()
        d.start()
        wall_ms = (time.perf_counter() - t0) * 1000
        return wall_ms, process_cpu_seconds(d.pid) * 1000
    finally:
        d.cleanup()


def spread(xs: list[float], ratio: bool = False) -> str:
    med = statistics.median(xs)
    show = (lambda x: f"{x:.2f}x") if ratio else fmt_ms
    return show(med) if len(xs) == 1 else f"{show(med)} ({show(min(xs))}-{show(max(xs))})"


def measure(runs: int, against: str | None = None, daemon_only: bool = False) -> tuple[list[Run], list[str]]:
    """`runs` runs of this code's CLI (and, with `against`, that revision's beside it); the labels in order."""
    with tempfile.TemporaryDirectory(prefix="mcpx-cli-") as tmp:
        sidecars: dict[str, Path | None] = {"mcpx": None}
        if against:
            sidecars[f"mcpx @{against}"] = checkout(against, Path(tmp))
        out = []
        for i in range(runs):
            say(f"  cli run {i + 1}/{runs}: load {os.getloadavg()[0]:.2f} ...")
            out.append(one_run(sidecars, daemon_only))
        return out, list(sidecars)


def add_rows(report: Report, runs: int, against: str | None = None, daemon_only: bool = False) -> None:
    """Measure, and add the rows to `report`: bench/speed.py's one line."""
    results, labels = measure(runs, against, daemon_only)
    if daemon_only:
        for label in labels:
            daemon_rows(report, results, label)
        return
    report.add("7 python -c 'import argparse, json, socket' wall p50", spread([r.floor_ms for r in results]))
    for label in labels:
        ratios = [r.p50_ms[label] / r.floor_ms for r in results]
        if label == "mcpx":  # the goal is this code's; another revision's row is there to compare
            report.add(f"7 `mcpx elicit list` ({label}) / the floor, wall p50", spread(ratios, ratio=True),
                       f"<= {GOAL:g}x", statistics.median(ratios) <= GOAL)
        else:
            report.add(f"7 `mcpx elicit list` ({label}) / the floor, wall p50", spread(ratios, ratio=True))
        report.add(f"7   `mcpx elicit list` ({label}) wall p50", spread([r.p50_ms[label] for r in results]))
        report.add(f"7   ({label}) / the floor, CPU p50 (user + system)",
                   spread([r.cpu_ms[label] / r.floor_cpu_ms for r in results], ratio=True))
        report.add(f"7   ({label}) starting the daemon itself, wall p50", spread([r.cold_ms[label] for r in results]))
        report.add(f"7   ({label}) `mcpx serve` to initialize answered, wall p50",
                   spread([r.serve_ms[label] for r in results]))
        report.add(f"7   ({label}) `mcpx serve`, CPU p50 (spawn to exit)",
                   spread([r.serve_cpu_ms[label] for r in results]))
        daemon_rows(report, results, label)
        for name, _words, _stdin in CPU_COMMANDS:
            report.add(f"7   ({label}) `{name}`, CPU p50 (spawn to exit)",
                       spread([r.command_cpu_ms[(name, label)] for r in results]))


def daemon_rows(report: Report, results: list[Run], label: str) -> None:
    report.add(f"7   ({label}) `mcpx daemon` alone to its socket, wall p50",
               spread([r.start_ms[label] for r in results]))
    report.add(f"7   ({label}) `mcpx daemon` alone to its socket, CPU p50",
               spread([r.start_cpu_ms[label] for r in results]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh daemons and rounds, this many times (default 3)")
    parser.add_argument("--against", metavar="REF", help="also time that git revision's CLI, in the same rounds")
    parser.add_argument("--daemon", action="store_true", help="only `mcpx daemon` alone, to its socket answering")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    say(f"{os.cpu_count()} cpus, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.runs} run(s) of "
        f"{TIMED} timed rounds; entry point {' '.join(entry_point())}")
    started = time.monotonic()
    report = Report()
    add_rows(report, args.runs, args.against, args.daemon)
    say(f"took {time.monotonic() - started:.0f} s; load now {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    report.show()
    return 0


if __name__ == "__main__":
    sys.exit(main())
