"""What one plain call and one question cost inside the daemon: functions (cProfile), system calls (strace -c).

    .venv/bin/python bench/call_cost.py                 # cProfile: the daemon's top functions per plain call
    .venv/bin/python bench/call_cost.py --strace        # system calls per plain call (strace -c -f on the daemon)
    .venv/bin/python bench/call_cost.py --ask           # the same for elicitation round trips
    .venv/bin/python bench/call_cost.py --cpu           # the daemon's CPU per plain call, by thread (/proc)
    .venv/bin/python bench/call_cost.py --cpu-profile   # cProfile timed by the loop thread's CPU, not the clock
    .venv/bin/python bench/call_cost.py --count         # the Python calls the loop makes per plain call, by layer
    .venv/bin/python bench/call_cost.py --store         # the store's thread: its CPU per plain call, in its work or not
    .venv/bin/python bench/call_cost.py --store-profile # the same, and cProfile (thread CPU as clock) on its work
    .venv/bin/python bench/call_cost.py --instructions  # user-space instructions per plain call (callgrind)
    .venv/bin/python bench/call_cost.py --against main  # the same of another revision's daemon (before/after)
    .venv/bin/python bench/call_cost.py --relay         # the floor: a parsing relay's CPU per plain call, beside --cpu
    .venv/bin/python bench/call_cost.py --relay --durable  # the same relay keeping mcpx's records (--ask: round trips)

A daemon with bench/peer_server.py as its upstream (`peer`, modern era; `asker --legacy` for --ask), the official
SDK client through `mcpx serve` (legacy era, as bench/speed.py); warm-up calls first, then N calls counted. The
figures are per call: the daemon's totals over the counted calls, less a run of the same length with no calls
(the daemon's own timers), divided by N. It is the measuring tool of issue 39 ("measure first"), not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile  # noqa: F401 (the daemon runs under it)
import json
import os
import pstats
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from counted import COUNTED  # noqa: E402
from harness import scratch_daemon  # noqa: E402
from parsing_relay import relay_pid  # noqa: E402
from speed import AskCaller, answer_elicit  # noqa: E402
from surface import SdkCaller  # noqa: E402
from upstreams import checkout  # noqa: E402

PEER = BENCH / "peer_server.py"

# the daemon under cProfile with its loop thread's CPU time as the clock (`python -c THIS OUT -m mcpx daemon`): on a
# loaded machine a wall clock counts the other processes' turns on the core in whatever function was running
CPU_PROFILED = """
import atexit, cProfile, runpy, sys, time
out = sys.argv[1]
sys.argv = sys.argv[3:]
prof = cProfile.Profile(time.thread_time)
atexit.register(lambda: (prof.disable(), prof.dump_stats(out)))
prof.enable()
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""

# the daemon with the store's writer thread watched while the counted calls run (`python -c THIS OUT PROFILE -m mcpx
# daemon`): SIGUSR1 starts, SIGUSR2 stops and writes OUT.json (the thread's id, its CPU inside the work items handed
# to it, their number) and, with PROFILE "1", OUT (cProfile of those items, the thread's CPU time as its clock). In
# Python 3.11 a profile hooks only the thread that enables it: each work item enables it on the store's thread
STORE_WATCHED = """
import cProfile, json, os, runpy, signal, sys, threading, time
from concurrent.futures import thread as pool
try:
    from mcpx.broker.store_thread import StoreThread
except ImportError:  # a revision before it: its store's threads are ThreadPoolExecutor's
    StoreThread = None
out, profiled = sys.argv[1], sys.argv[2] == "1"
sys.argv = sys.argv[4:]
prof = cProfile.Profile(time.thread_time)
on, lock = [False], threading.Lock()
seen = {"tid": 0, "inside": 0.0, "items": 0}
# the store's own thread's items (broker/store_thread.py), or, in a revision before it, ThreadPoolExecutor's
own = StoreThread is not None
run = StoreThread._run_item if own else pool._WorkItem.run
def watched(*item):
    if not (on[0] and threading.current_thread().name.startswith("mcpx-db-write")):
        return run(*item)
    with lock:
        seen["tid"] = threading.get_native_id()
        t = time.thread_time()
        if profiled:
            prof.enable()
        try:
            return run(*item)
        finally:
            if profiled:
                prof.disable()
            seen["inside"] += time.thread_time() - t
            seen["items"] += 1
if own:
    StoreThread._run_item = staticmethod(watched)
else:
    pool._WorkItem.run = watched
signal.signal(signal.SIGUSR1, lambda *_: on.__setitem__(0, True))
def stop(*_):
    on[0] = False
    with lock:
        if profiled:
            prof.dump_stats(out)
        with open(out + ".part", "w") as f:
            json.dump(seen, f)
        os.rename(out + ".part", out + ".json")  # whole, once there
signal.signal(signal.SIGUSR2, stop)
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""

# the daemon under callgrind (`python -c THIS OUT -m mcpx daemon`: the process becomes valgrind's, its pid kept), not
# instrumented until `callgrind_control -i on`: the instructions it runs are the same whatever the machine's load,
# which its CPU time is not (docs/bench.md's life40 measured a lifecycle so). Every thread's: the store's, the loop's
UNDER_CALLGRIND = """
import os, sys
out = sys.argv[1]
os.execvp("valgrind", ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=" + out,
                       sys.executable, *sys.argv[2:]])
"""


# the layers a plain call crosses, by module, in the order it meets them (--count sums the calls of each)
LAYERS = (("the pipes and the JSON (mcp/stdio.py, jsonrpc, wirejson)", ("mcp/stdio.py", "mcp/jsonrpc.py",
                                                                        "shared/wirejson.py")),
          ("the host's pipe (surface/pipe_endpoint.py)", ("surface/pipe_endpoint.py",)),
          ("JSON-RPC peers (mcp/peer.py, outbound)", ("mcp/peer.py", "mcp/outbound.py")),
          ("the surface's dispatch, names, sessions (surface/)", ("surface/",)),
          ("the call: record, lean path, run, lifecycle (call/)", ("call/",)),
          ("the gateway, the kind, the pool, the connection (upstream/)", ("upstream/",)),
          ("the broker and the store (broker/)", ("broker/",)),
          ("other mcpx code", ("/mcpx/",)),
          ("asyncio and uvloop's Python parts", ("asyncio/", "uvloop/")),
          ("the standard library, other packages, frozen modules", ("/",)),
          ("C functions (builtins, methods)", ("~",)))


# the layers a plain call's own path runs through, once each call whatever the load (the rest move with the commits)
PATH_LAYERS = {name for name, _parts in LAYERS[:6]} | {LAYERS[7][0]}


def layer_of(path: str) -> str:
    return next((name for name, parts in LAYERS if any(p in path for p in parts)), LAYERS[-2][0])


def print_counts(prof: Path, n: int, top: int, what: str = "plain call") -> None:
    """The loop's function calls per counted call (`what`: a plain call, or a question's round trip with --ask):
    Python functions and C ones, by layer, and the most called."""
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    by_layer: dict[str, float] = {}
    python = c_calls = 0
    for (path, _line, _name), (_cc, nc, *_rest) in stats.items():
        if path == "~":
            c_calls += nc
        else:
            python += nc
        by_layer[layer_of(path)] = by_layer.get(layer_of(path), 0) + nc
    print(f"the loop's calls per {what} (n={n}): {python / n:.1f} Python functions, {c_calls / n:.1f} C functions")
    for name, _parts in LAYERS:
        if by_layer.get(name):
            print(f"  {by_layer[name] / n:7.1f}  {name}")
    # the calls' ends ride together, one unit a commit (broker/writes.py's CallEnds): how many calls share one moves
    # with the calls' pace (the machine's load), and the broker's, asyncio's and the standard library's rows with it
    # Calls._forget_finished: called once for all the ends a commit wrote
    units = sum(nc for (path, _line, name), (_cc, nc, *_rest) in stats.items()
                if path.endswith("call/lifecycle.py") and name == "_forget_finished")
    if units:
        on_path = sum(v for k, v in by_layer.items() if k in PATH_LAYERS)
        print(f"  {units / n:7.2f}  commits of the calls' ends per {what} (a unit each); the call's own path, "
              f"the layers above the broker's: {on_path / n:.1f} Python calls")
    print(f"the most called Python functions, per {what}:")
    rows = sorted(((nc, key) for key, (_cc, nc, *_rest) in stats.items() if key[0] != "~"), reverse=True)
    for nc, (path, line, name) in rows[:top]:
        short = path.split("/mcpx/", 1)[1] if "/mcpx/" in path else path.rsplit("/", 2)[-1]
        print(f"  {nc / n:6.2f}  {short}:{line}({name})")


async def calls(env: dict[str, str], home: Path, ask: bool, warm: int, n: int, started: asyncio.Event,
                counting: asyncio.Event) -> None:
    py = sys.executable
    target = StdioServerParameters(command=py, args=["-m", "mcpx", "serve"], env=env, cwd=str(home))
    async with Client(target, mode="legacy", elicitation_callback=answer_elicit) as client:
        call = AskCaller(client, "asker_ask") if ask else SdkCaller(client, "peer_echo")
        for _ in range(warm):
            await call()
        started.set()
        await counting.wait()
        for _ in range(n):
            await call()


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) each thread of `pid` has used: the main one (the event loop's), then the others by
    name and id (the store's writer, the thread pool's). The scheduler's own count, to the nanosecond (/proc's
    schedstat; stat's ticks are 10 ms, which the store thread's share of a short run is a few of)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            used = int((task / "schedstat").read_text().split()[0]) / 1e9
            name = "main (the loop)" if task.name == str(pid) else f"{(task / 'comm').read_text().strip()} {task.name}"
            out[name] = used
    return out


def print_store(seen: dict[str, float], before: dict[str, float], after: dict[str, float], n: int) -> None:
    """The store's writer thread per plain call: its CPU (/proc), the part inside the work handed to it (commits,
    checkpoints) and the rest (waking, waiting for the next item), and the work items per call."""
    name = next((k for k in after if k.endswith(f" {int(seen['tid'])}")), None)
    if name is None:
        print("the store's thread ran no work while the calls were counted")
        return
    cpu = after[name] - before.get(name, 0.0)
    print(f"the store's thread per plain call (n={n}): {cpu / n * 1000:.3f} ms of CPU (/proc, {name}); inside its "
          f"work items {seen['inside'] / n * 1000:.3f} ms, outside them {(cpu - seen['inside']) / n * 1000:.3f} ms; "
          f"{seen['items'] / n:.3f} work items (commits, checkpoints) per call")


async def callgrind(*args: str) -> None:
    proc = await asyncio.create_subprocess_exec("callgrind_control", *args, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL)
    if await proc.wait():
        raise RuntimeError(f"callgrind_control {' '.join(args)} failed")


async def instructions_dumped(pid: int, out: Path, part: int) -> int:
    """Dump what callgrind counted since the last dump (a dump zeroes its counters), wait for the file, and return
    its total of instructions."""
    await callgrind("-d", str(pid))
    async with asyncio.timeout(120):
        while (total := totals(Path(f"{out}.{part}"))) is None:  # noqa: ASYNC110 -- valgrind writes it, no one tells
            await asyncio.sleep(0.1)
    return total


def calls_to(dump: Path, name: str) -> int:
    """How many times the functions whose name holds `name` were called in a callgrind dump (its `calls=` lines
    under a `cfn=`; a name is written once, then by its number)."""
    names: dict[bytes, str] = {}
    total, callee = 0, None
    with dump.open("rb") as f:
        for line in f:
            if m := re.match(rb"(c?fn)=\((\d+)\)(?: (.*))?", line):
                if m.group(3):
                    names[m.group(2)] = m.group(3).decode(errors="replace")
                callee = m.group(2) if m.group(1) == b"cfn" else None
            elif callee is not None and line.startswith(b"calls="):
                if name in names.get(callee, ""):
                    total += int(line[6:].split()[0])
                callee = None
    return total


def totals(dump: Path) -> int | None:
    """A callgrind dump's total of instructions, once it is written whole (its `totals:` line is its last)."""
    with contextlib.suppress(OSError):
        if m := re.search(rb"^totals:\s*(\d+)", dump.read_bytes(), re.M):
            return int(m.group(1))
    return None


def strace_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
        if m:
            counts[m.group(2)] = int(m.group(1))
    return counts


async def relay_cpu(args: argparse.Namespace) -> None:
    """The floor of the daemon's loop: bench/parsing_relay.py (reads, parses, renumbers and writes again every line,
    on uvloop, as the daemon's pipes do) between the same client and peer, its CPU per plain call (or round trip,
    --ask) from /proc; --durable: the relay keeping mcpx's records too (a question committed before it is told, each
    call's end and answer after, in mcpx.db's tables), all its threads."""
    py = sys.executable
    durable = ["--durable", str(Path(tempfile.mkdtemp(prefix="mcpx-cost-relay-")) / "mcpx.db")] if args.durable else []
    peer = [str(PEER), "--legacy"] if args.ask else [str(PEER)]
    target = StdioServerParameters(command=py, args=[str(BENCH / "parsing_relay.py"), *durable, py, *peer])
    async with Client(target, mode="legacy", elicitation_callback=answer_elicit) as client:
        call = AskCaller(client, "ask") if args.ask else SdkCaller(client, "echo")
        for _ in range(args.warm):
            await call()
        relay = relay_pid(args.durable)
        before = sum(thread_cpu(relay).values())
        for _ in range(args.n):
            await call()
        used = sum(thread_cpu(relay).values()) - before
    what = f"a {'durable ' if args.durable else ''}parsing relay's CPU per {'round trip' if args.ask else 'plain call'}"
    print(f"{what} (n={args.n}): {used / args.n * 1000:.3f} ms")


async def main_async(args: argparse.Namespace) -> None:
    if args.relay:
        await relay_cpu(args)
        return
    py = sys.executable
    config = {"servers": {"peer": {"command": py, "args": [str(PEER)]},
                          "asker": {"command": py, "args": [str(PEER), "--legacy"]}}}
    prof = Path(tempfile.mkdtemp(prefix="mcpx-cost-")) / "daemon.prof"
    # --against: that revision's sidecar, the daemon and `mcpx serve` both (git archive into the scratch directory)
    sidecar = {"sidecar": checkout(args.against, prof.parent)} if args.against else {}
    plain = args.strace or args.cpu
    grind = prof.with_suffix(".callgrind")
    store = args.store or args.store_profile
    profiled = (["-c", CPU_PROFILED, str(prof)] if args.cpu_profile else ["-c", COUNTED, str(prof)] if args.count
                else ["-c", STORE_WATCHED, str(prof), "1" if args.store_profile else "0"] if store
                else ["-c", UNDER_CALLGRIND, str(grind)] if args.instructions
                else ["-m", "cProfile", "-o", str(prof)])
    d = scratch_daemon("mcpx-cost-", config, python_args=[] if plain else profiled, **sidecar)
    d.start(**({"timeout": 600.0} if args.instructions else {}))  # under valgrind it starts ~50x slower
    started, counting = asyncio.Event(), asyncio.Event()
    runner = asyncio.create_task(calls(d.env, d.home, args.ask, args.warm, args.n, started, counting))
    try:
        await started.wait()
        tracer = None
        if args.strace:
            out = prof.with_suffix(".strace")
            tracer = await asyncio.create_subprocess_exec("strace", "-c", "-f", "-o", str(out), "-p", str(d.pid),
                                                          stderr=asyncio.subprocess.PIPE)
            assert tracer.stderr is not None
            # "Process N attached with M threads": strace traces them all from here on
            await asyncio.wait_for(tracer.stderr.readline(), 30)
        before = thread_cpu(d.pid) if args.cpu or store else {}
        if args.count or store:
            os.kill(d.pid, signal.SIGUSR1)
        if args.instructions:
            await callgrind("-i", "on", str(d.pid))
        began = asyncio.get_running_loop().time()
        counting.set()
        await runner
        if args.instructions:
            # the calls' last ends ride behind their replies (writes.BEHIND) and are written a moment later; then
            # the daemon's own timers over as long again, with no calls, taken off
            await asyncio.sleep(1.0)
            took = asyncio.get_running_loop().time() - began
            counted = await instructions_dumped(d.pid, grind, 1)
            await asyncio.sleep(took)
            idle = await instructions_dumped(d.pid, grind, 2)
            await callgrind("-i", "off", str(d.pid))
            what = "question round trip" if args.ask else "plain call"
            print(f"the daemon's user-space instructions per {what} (n={args.n}, callgrind, every thread): "
                  f"{(counted - idle) / args.n:,.0f} ({counted / args.n:,.0f} counted, less {idle / args.n:,.0f} "
                  f"of the daemon's own over as long with no calls)")
            # the calls' ends commit together, as many as came within a horizon (writes.BEHIND): under valgrind a
            # call takes ~50x as long, so fewer share a commit than on a quick machine, and how many moves with the
            # machine's load; each commit costs ~100-200k instructions, so compare runs at about the same rate
            # (an item put on its queue: broker/store_thread.py's, or before it ThreadPoolExecutor's)
            handed = calls_to(Path(f"{grind}.1"), "SimpleQueue_put")
            print(f"  {handed / args.n:.3f} hand-offs to the store's thread a call (its commits and checkpoints)")
            if args.save:
                shutil.copy(f"{grind}.1", args.save)
        if args.count or store:
            if store:
                # the calls' last ends ride behind their replies: a commit's horizon (writes.BEHIND) later they are
                # written; the thread's CPU is read before the watch stops, as the watch's count ends
                await asyncio.sleep(0.2)
                store_cpu = thread_cpu(d.pid)
            os.kill(d.pid, signal.SIGUSR2)
            written = prof.with_suffix(".prof.json") if store else prof
            async with asyncio.timeout(30):
                while not written.exists():  # noqa: ASYNC110 -- the daemon's signal handler renames it there, whole
                    await asyncio.sleep(0.05)
        if store:
            print_store(json.loads(written.read_text()), before, store_cpu, args.n)
        if args.cpu:
            after = thread_cpu(d.pid)
            what = "question round trip" if args.ask else "plain call"
            total = sum(after.values()) - sum(before.values())
            print(f"the daemon's CPU per {what} (n={args.n}): {total / args.n * 1000:.3f} ms")
            for name in sorted(after, key=lambda k: before.get(k, 0.0) - after[k])[:5]:
                print(f"  {name:24} {(after[name] - before.get(name, 0.0)) / args.n * 1000:.3f} ms")
        if tracer is not None:
            tracer.send_signal(signal.SIGINT)
            await asyncio.wait_for(tracer.wait(), 30)
            counts = strace_counts(out.read_text())
            counts.pop("total", None)
            total = sum(counts.values())
            print(f"system calls per {'question round trip' if args.ask else 'plain call'} (n={args.n}): "
                  f"{total / args.n:.1f}")
            for name, count in sorted(counts.items(), key=lambda kv: -kv[1])[:15]:
                print(f"  {name:20} {count / args.n:6.2f}")
    finally:
        runner.cancel()  # its `mcpx serve` first: one left running would start a daemon of its own
        await asyncio.gather(runner, return_exceptions=True)
        d.stop()
    if args.store_profile:
        stats = pstats.Stats(str(prof))
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
        if args.save:
            shutil.copy(prof, args.save)
    elif args.count:
        print_counts(prof, args.n, args.top, "question's round trip" if args.ask else "plain call")
        if args.save:
            shutil.copy(prof, args.save)
    elif not plain and not store and not args.instructions:
        stats = pstats.Stats(str(prof))
        # the per-call path: the daemon's own code and what it calls per message (startup's imports are left out)
        stats.sort_stats("tottime").print_stats(r"/mcpx/(?!cli|api/table|daemon/server)", args.top)
        stats.sort_stats("cumulative").print_stats(r"/mcpx/(?!cli|api/table|daemon/server)", args.top)
        if args.save:
            shutil.copy(prof, args.save)
        for what in ("create_task", "model_validate", "validate_python", "dumps", "execute", "getpid", "commit"):
            stats.sort_stats("ncalls").print_stats(what, 5)
    with contextlib.suppress(OSError):
        shutil.rmtree(prof.parent)
    d.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--strace", action="store_true", help="count system calls rather than profile")
    parser.add_argument("--cpu", action="store_true", help="the daemon's CPU per call by thread, not profiled")
    parser.add_argument("--cpu-profile", action="store_true",
                        help="profile with the loop thread's CPU time as cProfile's clock (slower, but true on a "
                             "loaded machine)")
    parser.add_argument("--count", action="store_true",
                        help="count the Python calls the daemon's loop makes per call, by layer (cProfile on the "
                             "loop's thread during the counted calls only)")
    parser.add_argument("--store", action="store_true",
                        help="the store's writer thread per call: its CPU, inside its work items and outside them")
    parser.add_argument("--store-profile", action="store_true",
                        help="--store, and cProfile (the thread's CPU time as clock) on the store thread's work")
    parser.add_argument("--instructions", action="store_true",
                        help="the daemon's user-space instructions per call, every thread (callgrind: slow, but the "
                             "same whatever the load; --save keeps the calls' dump for callgrind_annotate)")
    parser.add_argument("--ask", action="store_true", help="elicitation round trips rather than plain calls")
    parser.add_argument("--relay", action="store_true",
                        help="the floor: bench/parsing_relay.py's CPU per plain call between the same client and peer")
    parser.add_argument("--durable", action="store_true",
                        help="with --relay: the relay keeping mcpx's records (bench/parsing_relay.py --durable)")
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--warm", type=int, default=50)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--save", metavar="FILE", help="keep the profile there (pstats), to read it again")
    parser.add_argument("--against", metavar="REF", help="profile the daemon of this git revision instead")
    args = parser.parse_args()
    if args.strace and shutil.which("strace") is None:
        parser.error("strace is not installed")
    if args.instructions and shutil.which("callgrind_control") is None:
        parser.error("valgrind (callgrind) is not installed")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
