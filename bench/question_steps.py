"""Where an elicitation round trip's time goes inside the daemon, step by step (issue 39 item 3: measure first).

    .venv/bin/python bench/question_steps.py                 # 300 round trips after 50 warm-up ones
    .venv/bin/python bench/question_steps.py -n 100 --against main
    .venv/bin/python bench/question_steps.py --profile "in elicitation/create,out elicitation/create"  # one step's

The daemon runs with a small wrapper (`-c STEPS OUT "" -m mcpx daemon`) that stamps time.monotonic_ns() on every message
it decodes or encodes (mcpx.mcp.jsonrpc's decode and encode, through which every MCP message in and out passes; the
write follows the encode in the same step) and on each batch the SQLite store commits (its start, its end, its units,
and whether it ran on the loop's thread). The client is the official SDK's through `mcpx serve` (legacy era, whose
stdio the daemon takes over), the upstream bench/peer_server.py --legacy, as bench/speed.py's figure 2. Per round
trip, the daemon's steps:

    call in -> call out      the host's tools/call read -> the upstream's tools/call written
    asked   -> question out  the upstream's elicitation/create read -> the question written to the host
    answer in -> reply out   the host's answer read -> the upstream's ElicitResult written
    result in -> result out  the upstream's tools/call result read -> the host's result written
    result out -> commit     the host's result written -> the round trip's commits begun (and where they ran)

and between them the time outside the daemon (the host's and the upstream's own work, the pipes). Medians over the
counted round trips, in µs. A wall clock on a loaded machine counts other processes' turns too: read the steps
against each other in one run, and --against's run beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from harness import scratch_daemon  # noqa: E402
from speed import AskCaller, answer_elicit  # noqa: E402
from upstreams import checkout  # noqa: E402

PEER = BENCH / "peer_server.py"
TOP = 45
SAVE: list[str] = []  # --save: where the profile is kept

# the daemon with its messages and commits stamped; what it saw is written to OUT as JSON lines at its exit
STEPS = """
import atexit, cProfile, json, runpy, sys, threading, time
out, edges, marks = sys.argv[1], sys.argv[2], sys.argv[3]
sys.argv = sys.argv[5:]
seen = []
# edges "in elicitation/create,out elicitation/create": cProfile (the loop thread's CPU as its clock) runs from each
# first stamp to the next second one, whatever runs on the loop in between; "" profiles nothing
prof = cProfile.Profile(time.thread_time) if edges else None
start_at, stop_at = (tuple(e.split(" ", 1)) for e in edges.split(",")) if edges else (None, None)
stamp = time.monotonic_ns
cpu = time.thread_time_ns
from mcpx.mcp import jsonrpc
from mcpx.broker import sqlite

def kind(msg):
    if not isinstance(msg, dict):
        return None
    method = msg.get("method")
    if method in ("tools/call", "elicitation/create"):
        return method
    result = msg.get("result")
    if isinstance(result, dict):
        if "action" in result:
            return "answer"
        if "content" in result:
            return "result"
    return None

decode, encode = jsonrpc.decode, jsonrpc.encode

def profiled(side, what):
    if prof is None:
        return
    if (side, what) == stop_at:
        prof.disable()
    if (side, what) == start_at:
        prof.enable()

def decoded(line):
    msg = decode(line)
    what = kind(msg)
    if what is not None:
        seen.append((stamp(), "in", what, cpu()))
        profiled("in", what)
    return msg

def encoded(msg):
    what = kind(msg)
    if what is not None:
        profiled("out", what)
    data = encode(msg)
    if what is not None:
        seen.append((stamp(), "out", what, cpu()))
    return data

jsonrpc.decode, jsonrpc.encode = decoded, encoded

# a message written from a callback (a reply written in the step that has it: Peer.reply_now, reply_early) is encoded
# by the channel's send_now itself, not by jsonrpc.encode: stamped there alike
from mcpx.mcp import stdio
send_now = stdio._Sending.send_now

def sent_now(self, msg):
    what = kind(msg)
    if what is not None:
        profiled("out", what)
    try:
        return send_now(self, msg)
    finally:
        if what is not None:
            seen.append((stamp(), "out", what, cpu()))

stdio._Sending.send_now = sent_now
batch = sqlite.SqliteStore._run_batch
main = threading.main_thread()

def run_batch(self, units, patience=0.0):
    began = stamp()
    try:
        return batch(self, units, patience)
    finally:
        seen.append((began, "commit", [stamp() - began, len(units), threading.current_thread() is main], 0))

sqlite.SqliteStore._run_batch = run_batch

# marks "mcpx.broker.rules:question_of,...": the loop thread's CPU stamped as each is entered and as it returns
import asyncio, functools, importlib

def marked(name, fn):
    if asyncio.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def stamped(*a, **k):
            seen.append((stamp(), "enter", name, cpu()))
            try:
                return await fn(*a, **k)
            finally:
                seen.append((stamp(), "exit", name, cpu()))
    else:
        @functools.wraps(fn)
        def stamped(*a, **k):
            seen.append((stamp(), "enter", name, cpu()))
            try:
                return fn(*a, **k)
            finally:
                seen.append((stamp(), "exit", name, cpu()))
    return stamped

for spec in filter(None, marks.split(",")):
    module, _, qual = spec.partition(":")
    owner = importlib.import_module(module)
    *path, last = qual.split(".")
    for part in path:
        owner = getattr(owner, part)
    setattr(owner, last, marked(qual, getattr(owner, last)))

def dump():
    if prof is not None:
        prof.dump_stats(out + ".prof")
    with open(out, "w") as f:
        for row in seen:
            f.write(json.dumps(row) + "\\n")

atexit.register(dump)
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""

STEPS_SHOWN = [
    ("call in -> call out", ("in", "tools/call"), ("out", "tools/call")),
    ("(the upstream until it asks)", ("out", "tools/call"), ("in", "elicitation/create")),
    ("asked -> question out", ("in", "elicitation/create"), ("out", "elicitation/create")),
    ("(the host answering)", ("out", "elicitation/create"), ("in", "answer")),
    ("answer in -> reply out", ("in", "answer"), ("out", "answer")),
    ("(the upstream until its result)", ("out", "answer"), ("in", "result")),
    ("result in -> result out", ("in", "result"), ("out", "result")),
]


async def round_trips(env: dict[str, str], home: Path, warm: int, n: int) -> None:
    target = StdioServerParameters(command=sys.executable, args=["-m", "mcpx", "serve"], env=env, cwd=str(home))
    async with Client(target, mode="legacy", elicitation_callback=answer_elicit) as client:
        call = AskCaller(client, "asker_ask")
        for _ in range(warm + n):
            await call()


def trips(rows: list[list[Any]]) -> list[dict[str, Any]]:
    """The stamps cut into round trips, each from a host's tools/call read to the next one; the commits that began
    in a round trip are its own."""
    out: list[dict[str, Any]] = []
    for at, side, what, used in rows:
        if side == "in" and what == "tools/call":
            out.append({"stamps": {}, "cpu": {}, "commits": [], "marks": {}})
        if not out:
            continue
        if side == "commit":
            out[-1]["commits"].append((at, *what))
        elif side in ("enter", "exit"):
            out[-1]["marks"].setdefault((side, what), used)
        else:
            out[-1]["stamps"].setdefault((side, what), at)
            out[-1]["cpu"].setdefault((side, what), used)
    return out


def report(label: str, rows: list[list[Any]], warm: int, marks: str = "") -> None:
    counted = [t for t in trips(rows)[warm:] if len(t["stamps"]) == 8]
    print(f"\n{label}: {len(counted)} round trips counted; medians in µs: wall (its p90), and the loop thread's CPU")
    total = total_cpu = 0.0
    for name, start, end in STEPS_SHOWN:
        gaps = [(t["stamps"][end] - t["stamps"][start]) / 1000 for t in counted]
        used = [(t["cpu"][end] - t["cpu"][start]) / 1000 for t in counted]
        med, med_cpu = statistics.median(gaps), statistics.median(used)
        inside = not name.startswith("(")
        total += med if inside else 0.0
        total_cpu += med_cpu if inside else 0.0
        print(f"  {name:34} {med:8.1f}   (p90 {statistics.quantiles(gaps, n=10)[-1]:8.1f})   cpu {med_cpu:7.1f}")
    whole = [(t["stamps"][("out", "result")] - t["stamps"][("in", "tools/call")]) / 1000 for t in counted]
    print(f"  {'the daemon, four steps summed':34} {total:8.1f}                  cpu {total_cpu:7.1f}")
    print(f"  {'call in -> result out':34} {statistics.median(whole):8.1f}")
    commits = [c for t in counted for c in t["commits"]]
    per = len(commits) / max(1, len(counted))
    on_loop = sum(1 for c in commits if c[3]) / max(1, len(commits))
    print(f"  commits per round trip: {per:.2f}, {on_loop:.0%} of them on the loop's thread; "
          f"median {statistics.median([c[1] for c in commits]) / 1000 if commits else 0:.1f} µs each, "
          f"{statistics.median([c[2] for c in commits]) if commits else 0} units")
    after = [(c[0] - t["stamps"][("out", "result")]) / 1000 for t in counted for c in t["commits"]
             if c[0] >= t["stamps"][("out", "result")]]
    before = len(commits) - len(after)
    print(f"  commits begun before the host's result was written: {before}; after it: {len(after)}"
          + (f" (median {statistics.median(after):.1f} µs after)" if after else ""))
    if marks:
        print_marks(counted, marks)


def print_marks(counted: list[dict[str, Any]], marks: str) -> None:
    """--marks: each function's first entry and return in a round trip, as the loop thread's CPU since the step it
    falls in began (medians over the round trips that reached it), and what it took itself."""
    print("  marks (loop CPU since its step began, µs: at entry, at return; its own median)")
    for spec in filter(None, marks.split(",")):
        name = spec.partition(":")[2]
        rows = []
        for t in counted:
            enter, leave = t["marks"].get(("enter", name)), t["marks"].get(("exit", name))
            if enter is None or leave is None:
                continue
            begun = max((t["cpu"][s] for s in t["cpu"] if s[0] == "in" and t["cpu"][s] <= enter), default=None)
            if begun is not None:
                rows.append(((enter - begun) / 1000, (leave - begun) / 1000, (leave - enter) / 1000))
        if rows:
            med = [statistics.median(r[i] for r in rows) for i in range(3)]
            print(f"    {name:44} {med[0]:7.1f} {med[1]:7.1f}   own {med[2]:7.1f}   ({len(rows)} trips)")


async def one(label: str, sidecar: dict[str, Path], warm: int, n: int, scratch: Path, profile: str,
              marks: str = "") -> list[list[Any]]:
    py = sys.executable
    config = {"servers": {"asker": {"command": py, "args": [str(PEER), "--legacy"]}}}
    out = scratch / f"{label}.steps"
    d = scratch_daemon("mcpx-steps-", config, python_args=["-c", STEPS, str(out), profile, marks], **sidecar)
    d.start()
    try:
        await round_trips(d.env, d.home, warm, n)
    finally:
        d.stop()
        d.cleanup()
    if profile:
        if SAVE:
            shutil.copy(str(out) + ".prof", SAVE[0])
        stats = pstats.Stats(str(out) + ".prof")
        stats.sort_stats("tottime").print_stats(TOP)
        stats.sort_stats("cumulative").print_stats(TOP)
    return [json.loads(line) for line in out.read_text().splitlines()]


async def main_async(args: argparse.Namespace) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="mcpx-steps-"))
    try:
        sides: list[tuple[str, dict[str, Path]]] = [("this tree", {})]
        if args.against:
            sides.append((args.against, {"sidecar": checkout(args.against, scratch)}))
        for label, sidecar in sides:
            rows = await one(label.replace("/", "_"), sidecar, args.warm, args.n, scratch, args.profile or "",
                             args.marks or "")
            report(label, rows, args.warm, args.marks or "")
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(scratch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--warm", type=int, default=50)
    parser.add_argument("--against", metavar="REF", help="the same of another revision's daemon, after this one's")
    parser.add_argument("--profile", metavar="FROM,TO", help="cProfile the loop between two stamps, e.g. "
                        "'in elicitation/create,out elicitation/create' (the step's own figures are then slower)")
    parser.add_argument("--marks", metavar="MODULE:NAME,...", help="stamp the loop's CPU as each of these functions "
                        "is entered and returns, e.g. 'mcpx.broker.rules:question_of,mcpx.call.record:Call.ask_first'")
    parser.add_argument("--save", metavar="FILE", help="keep --profile's profile there (pstats)")
    args = parser.parse_args()
    SAVE[:] = [args.save] if args.save else []
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
