#!/usr/bin/env python3
"""Where the suite's CPU goes, by kind of process: the test run under the kernel's process accounting.

The suite is CPU-bound (three workers on two cores), so its wall time is its CPU time over the cores, and what
makes it long is the sum of every process it starts: daemons, the tests' MCP peers, CLI commands, real hosts.
pytest's --durations shows none of that. Process accounting (`accton`, Debian's acct; needs root) records the
CPU of every process as it exits; a `.pth` file put in the venv for the run names each Python process after
what it runs (`mx-daemon`, `mx-call`, `p-sdk_server`, `xdist`), so they can be told apart. Every other
process keeps the name the kernel gives it (node, postgres, chromium, a thread's name for Bun).

    sudo apt-get install acct
    python3 tools/suite_cpu.py -- -n 3 --dist loadgroup tests/e2e     # pytest's arguments after --
    python3 tools/suite_cpu.py --report /var/log/account/pacct.suite --root PID   # an earlier run's table
    python3 tools/suite_cpu.py --timeline-report /var/log/account/suite.timeline   # an earlier run's schedule
    python3 tools/suite_cpu.py --report /var/log/account/pacct.suite --by-test     # its CPU by module

The run also writes its schedule (`--timeline`, JSON lines: each test phase's worker, the worker's pid, start and
stop, as the controller hears it from xdist) and prints what it shows: each module's wall time summed over its
tests, each worker's idle time at the end and the run's tail; then each module's CPU: every process given to the
test its worker was running when the process started (a module's fixture's processes go to its first test).

Only processes descended from the run are counted. The tool is the run's subreaper, so a process whose parent
went (a tmux server and the TUI it runs, a detached daemon) is still under it; the file holds the whole machine's
processes, and a pid comes round again in a long run, so a parent is the record of its ppid alive at the child's
start. A diagnostic, not a test or a bench: it changes nothing in the tree and removes its .pth file when the run
ends.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACCT = Path("/var/log/account/pacct.suite")
HZ = 100.0  # dump-acct prints CPU in the kernel's accounting ticks

# The .pth line: run at every start of the venv's Python, before the program. It reads the process's own
# command line and sets its name (prctl PR_SET_NAME, 15 bytes), which the accounting record keeps.
NAMER = r'''
import os as _o, ctypes as _c
def _mcpx_name():
    try:
        argv = [a.decode(errors="replace") for a in open("/proc/self/cmdline", "rb").read().split(b"\0") if a][1:]
    except OSError:
        return
    while argv and argv[0].startswith("-") and argv[0] not in ("-m", "-c"):
        argv = argv[1:]
    words = [a for a in argv[2:] if not a.startswith("-")]
    if argv[:1] == ["-m"] and len(argv) > 1:
        name = ("mx-" + (words[0] if words else "help")) if argv[1] == "mcpx" else "m-" + argv[1].split(".")[-1]
    elif argv[:1] == ["-c"]:
        name = "xdist" if "exec(eval(" in (argv[1] if len(argv) > 1 else "") else "py-c"
    elif argv:
        base = _o.path.basename(argv[0])
        rest = [a for a in argv[1:] if not a.startswith("-")]
        name = ("mx-" + (rest[0] if rest else "help")) if base == "mcpx" else "p-" + base.removesuffix(".py")
    else:
        return
    try:
        _c.CDLL(None).prctl(15, _c.c_char_p(name[:15].encode()), 0, 0, 0)
    except Exception:
        pass
_mcpx_name()
'''


def pth_line() -> str:
    return "import sys; exec(" + repr(NAMER) + ", {})\n"  # a namespace of its own: its function sees its imports


class Timeline:
    """A pytest plugin on the controller: each test phase's report, as xdist hands it over, one JSON line."""

    def __init__(self, path: str) -> None:
        self.out = open(path, "w")  # noqa: SIM115  (open for the session; closed at its end)

    def pytest_runtest_logreport(self, report: object) -> None:
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        line = {"id": getattr(report, "nodeid", ""), "when": getattr(report, "when", ""),
                "worker": getattr(gateway, "id", "main"), "start": getattr(report, "start", 0.0),
                "stop": getattr(report, "stop", 0.0), "outcome": getattr(report, "outcome", ""),
                "pid": getattr(report, "worker_pid", None)}
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    def pytest_unconfigure(self) -> None:
        self.out.close()


def pytest_configure(config: object) -> None:
    """Loaded with `-p tools.suite_cpu`: the controller (not xdist's workers) writes SUITE_CPU_TIMELINE's lines; each
    worker puts its pid on its reports, so that the processes in the accounting file are found under their worker."""
    path = os.environ.get("SUITE_CPU_TIMELINE")
    if not path:
        return
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Timeline(path), "suite-cpu-timeline")  # type: ignore[attr-defined]
        return
    import pytest  # only in the suite's own Python: this script runs on the system's

    class WorkerPid:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(self) -> Generator[None, Any, Any]:
            report: Any = yield
            report.worker_pid = os.getpid()  # a TestReport keeps an attribute it does not know through xdist
            return report

    config.pluginmanager.register(WorkerPid(), "suite-cpu-worker-pid")  # type: ignore[attr-defined]


def timeline_report(path: Path, top: int = 25) -> None:
    phases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not phases:
        print("no test phases in", path)
        return
    t0 = min(p["start"] for p in phases)
    end = max(p["stop"] for p in phases)
    modules: dict[str, float] = collections.defaultdict(float)
    tests: dict[str, float] = collections.defaultdict(float)
    spans: dict[str, list[tuple[float, float, str]]] = collections.defaultdict(list)
    for p in phases:
        took = p["stop"] - p["start"]
        modules[p["id"].split("::")[0]] += took
        tests[p["id"]] += took
        spans[p["worker"]].append((p["start"], p["stop"], p["id"]))
    print(f"\nthe schedule: {len(tests)} tests in {end - t0:.0f} s from the first test's start to the last's end")
    print(f"\nmodules by their tests' wall time (setup + call + teardown, summed), top {top}:")
    for name, took in sorted(modules.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {took:7.1f} s  {name}")
    print(f"\ntests by wall time, top {top}:")
    for name, took in sorted(tests.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {took:7.1f} s  {name}")
    print("\nworkers: busy time, and when each ran its last test")
    for worker, rows in sorted(spans.items()):
        rows.sort()
        busy = sum(b - a for a, b, _ in rows)
        last = max(b for _, b, _ in rows)
        print(f"  {worker}: busy {busy:6.0f} s, idle at the end {end - last:5.0f} s")
    print("\nthe tail: each worker's last five tests (from, to: seconds into the run)")
    for worker, rows in sorted(spans.items()):
        seen: dict[str, tuple[float, float]] = {}
        for a, b, nodeid in rows:
            first, _ = seen.get(nodeid, (a, b))
            seen[nodeid] = (first, b)
        for nodeid, (a, b) in sorted(seen.items(), key=lambda kv: kv[1])[-5:]:
            print(f"  {worker}  {a - t0:6.0f}-{b - t0:6.0f} s  {nodeid}")


def adopt_orphans() -> None:
    """Make this process the subreaper of the run: a process whose parent has gone (a tmux server, which forks
    away from its client, with the TUI it runs; a detached daemon) is re-parented here, not to init, so the
    accounting file still has it under the run."""
    import ctypes

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans(child: subprocess.Popen[bytes]) -> None:
    """Reap each adopted process when it exits (a zombie would look alive to a test waiting for it to go); the
    run's own process is left to its Popen."""
    import threading

    def reap() -> None:
        while True:
            try:
                gone = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                return
            if gone is None or gone.si_pid == child.pid:
                return
            os.waitpid(gone.si_pid, 0)

    threading.Thread(target=reap, daemon=True).start()


def run(pytest_args: list[str], venv: Path, timeline: Path, pacct: Path) -> int:
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    pth = purelib / "zz_suite_cpu_names.pth"
    pacct.write_bytes(b"")
    pth.write_text(pth_line())
    try:
        subprocess.run(["accton", str(pacct)], check=True, stdout=subprocess.DEVNULL)
        try:
            print(f"the run's root, for --report --root: {os.getpid()}", flush=True)
            adopt_orphans()
            proc = subprocess.Popen(["/usr/bin/time", "-f", "the run: wall %e s, user %U s, system %S s",
                                     str(venv / "bin" / "python"), "-m", "pytest", "-p", "tools.suite_cpu",
                                     *pytest_args], cwd=ROOT, env={**os.environ, "SUITE_CPU_TIMELINE": str(timeline)})
            reap_orphans(proc)
            code = proc.wait()
        finally:
            subprocess.run(["accton", "off"], check=False, stdout=subprocess.DEVNULL)
    finally:
        pth.unlink(missing_ok=True)
    report(pacct, os.getpid())
    timeline_report(timeline)
    by_test(pacct, timeline, {})
    return code


@dataclasses.dataclass(frozen=True)
class Process:
    name: str
    cpu: float  # s, user + system
    pid: int
    ppid: int
    start: float  # epoch s, to the second
    end: float


def processes(pacct: Path) -> list[Process]:
    dumped = subprocess.run(["dump-acct", str(pacct)], capture_output=True, text=True, check=True).stdout
    found = []
    for line in dumped.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) >= 15:
            start = time.mktime(time.strptime(f[14], "%a %b %d %H:%M:%S %Y"))
            found.append(Process(f[0], (float(f[2]) + float(f[3])) / HZ, int(f[9]), int(f[10]), start,
                                 start + float(f[4]) / HZ))
    return found


class Tree:
    """Who started whom. A pid is used again over a long run (and the machine's other processes are in the file
    too): a process's parent is the record of its ppid that was alive when it started (the start is to the second)."""

    def __init__(self, found: list[Process]) -> None:
        self.lives: dict[int, list[Process]] = collections.defaultdict(list)
        for proc in found:
            self.lives[proc.pid].append(proc)

    def ancestors(self, proc: Process) -> list[int]:
        """The pids above `proc`, nearest first; the last is one whose own parent has no record (init, a shell)."""
        chain = []
        for _ in range(256):
            chain.append(proc.ppid)
            up = next((p for p in self.lives.get(proc.ppid, ()) if p.start - 1 <= proc.start <= p.end + 1), None)
            if up is None:
                break
            proc = up
        return chain


def report(pacct: Path, root: int | None, top: int = 40) -> None:
    """The table: every process descended from `root` (all of the file's, without one), by its name."""
    found = processes(pacct)
    tree = Tree(found)
    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for proc in found:
        if root is None or proc.pid == root or root in tree.ancestors(proc):
            kinds[proc.name][0] += 1
            kinds[proc.name][1] += proc.cpu
    total = sum(cpu for _, cpu in kinds.values())
    print(f"\nCPU by kind of process: {total:.0f} s over {sum(int(n) for n, _ in kinds.values())} processes")
    for name, (n, cpu) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {name:16s} {int(n):6d} processes  {cpu:8.1f} s  {cpu / total:6.1%}  {cpu / n * 1000:7.0f} ms each")


def by_test(pacct: Path, timeline: Path, workers: dict[str, int], top: int = 30) -> None:
    """Each process's CPU given to the test its worker was running when it started (a module's processes started
    by its fixture go to its first test): the CPU of what each module starts, which the worker's own does not
    include. A worker is found in the file by its pid (the timeline's lines carry it)."""
    phases = [json.loads(line) for line in timeline.read_text().splitlines() if line.strip()]
    pids = dict(workers)
    for phase in phases:
        if phase.get("pid"):
            pids[phase["worker"]] = phase["pid"]
    spans: dict[str, list[tuple[float, float, str]]] = collections.defaultdict(list)
    for phase in phases:
        spans[phase["worker"]].append((phase["start"], phase["stop"], phase["id"]))
    for rows in spans.values():
        rows.sort()
    worker_of = {pid: worker for worker, pid in pids.items()}
    found = processes(pacct)
    tree = Tree(found)
    modules: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    names: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    tests: dict[str, float] = collections.defaultdict(float)
    own = 0.0
    for proc in found:
        if proc.pid in worker_of:
            own += proc.cpu
            continue
        worker = next((worker_of[pid] for pid in tree.ancestors(proc) if pid in worker_of), None)
        if worker is None:
            continue
        # the test whose phase had begun by the process's start (the start is to the second: the latest such)
        began = [nodeid for start, _, nodeid in spans[worker] if start <= proc.start + 1]
        nodeid = began[-1] if began else "(before the first test)"
        module = nodeid.split("::")[0]
        modules[module][0] += 1
        modules[module][1] += proc.cpu
        names[module][proc.name] += proc.cpu
        tests[nodeid] += proc.cpu
    total = sum(cpu for _, cpu in modules.values())
    print(f"\nCPU of the processes the tests started, by module: {total:.0f} s (the workers' own: {own:.0f} s)")
    for module, (n, cpu) in sorted(modules.items(), key=lambda kv: -kv[1][1])[:top]:
        most = sorted(names[module].items(), key=lambda kv: -kv[1])[:4]
        print(f"  {cpu:7.1f} s  {int(n):5d} processes  {module}   ({', '.join(f'{k} {v:.0f}' for k, v in most)})")
    print(f"\ntests by the CPU of the processes they started, top {top}:")
    for nodeid, cpu in sorted(tests.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {cpu:7.1f} s  {nodeid}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv", help="the venv whose Python runs the suite")
    parser.add_argument("--report", type=Path, help="print the table of an earlier run's accounting file")
    parser.add_argument("--root", type=int, help="with --report: count only this process's descendants (the pid "
                        "the run printed first: this tool's own)")
    parser.add_argument("--by-test", action="store_true", help="with --report and --timeline: the CPU of what "
                        "each module's tests started")
    parser.add_argument("--workers", default="", help="with --by-test, for a timeline without the workers' pids: "
                        "gw0=PID,gw1=PID,…")
    parser.add_argument("--pacct", type=Path, default=PACCT, help=f"the accounting file the run writes ({PACCT})")
    parser.add_argument("--timeline", type=Path, default=PACCT.with_name("suite.timeline"),
                        help="where the run writes its schedule (default: suite.timeline beside the accounting file)")
    parser.add_argument("--timeline-report", type=Path, help="print the schedule of an earlier run's timeline")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments (after --)")
    args = parser.parse_args()
    if args.report and args.by_test:
        workers = {k: int(v) for k, v in (w.split("=") for w in args.workers.split(",") if w)}
        by_test(args.report, args.timeline, workers)
        return 0
    if args.report:
        report(args.report, args.root)
        return 0
    if args.timeline_report:
        timeline_report(args.timeline_report)
        return 0
    if os.geteuid() != 0:
        print("process accounting needs root (accton)", file=sys.stderr)
        return 2
    return run(args.pytest_args, args.venv, args.timeline, args.pacct)


if __name__ == "__main__":
    sys.exit(main())
