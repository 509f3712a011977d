"""Figure 4 alone, narrower and steadier: 10,000 pending questions listed (`GET /v1/elicit?limit=10000`).

bench/speed.py's figure 4 takes 20 listings of each side at the end of the broker's phases; this takes only the
listing, on this checkout's daemon, on another revision's (`--against REF`) and on the floor (a bare aiohttp
server sending the same bytes, speed.py's `role_bare`), request by request in rotated order, so the machine's load
at any moment falls on all alike. Per side: the p50 of the wall time to the body's last byte (what figure 4
reports), the server's CPU per listing (from /proc: user + system of the whole process over the timed listings),
and the daemon's memory per pending question (its RSS before and after the 10,000 were opened, as figure 4 takes
it). `--steps` times the listing's steps in this process instead (the pending index's walk, the body's build and
the join), on 10,000 questions as the daemon lists them.

    .venv/bin/python bench/listing.py --against main            # ~1 minute: both daemons and the floor
    .venv/bin/python bench/listing.py --against main --churn    # the same, the set moved before each listing
    .venv/bin/python bench/listing.py --steps                   # the steps, in one process
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the daemon harness, however this is run
sys.path.insert(0, str(HERE.parent / "sidecar"))

import broker  # noqa: E402  (bench/broker.py)
from harness import Daemon, process_cpu_seconds, scratch_daemon, unix_session  # noqa: E402

N_PENDING = 10_000
PARAMS = {"limit": str(N_PENDING)}


async def opened(d: Daemon) -> float:
    """N_PENDING questions opened on `d`; its RSS per question, KiB (as speed.py's figure 4 takes it)."""
    async with d.session(limit=2 * broker.OPEN_CONCURRENCY + 8) as http:
        await broker.cancel_all_pending(http)
        before = d.rss_kib()
        await broker.open_many(http, N_PENDING)
        return (d.rss_kib() - before) / N_PENDING


async def listings(sides: dict[str, tuple[Path, int]], rounds: int, churn: set[str],
                   ) -> dict[str, tuple[list[float], float]]:
    """`rounds` listings of each side (socket, pid), rotated; each side's wall times (ms) and CPU per listing (ms).
    Before each listing of a side in `churn`, untimed: a question opened and cancelled (the set moved since the last
    listing, as on a daemon where questions come and go)."""
    sessions = {name: unix_session(socket, timeout=None) for name, (socket, _pid) in sides.items()}
    walls: dict[str, list[float]] = {name: [] for name in sides}
    cpu = dict.fromkeys(sides, 0.0)
    names = list(sides)
    try:
        for i in range(rounds + 2):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                if name in churn:
                    await broker.answer(sessions[name], await broker.open_question(sessions[name], "bench-churn"),
                                        "cancel")
                cpu0 = process_cpu_seconds(sides[name][1])
                elapsed, _size, count = await broker.timed_get(sessions[name], PARAMS)
                if count != N_PENDING:
                    raise RuntimeError(f"{name} listed {count} questions, not {N_PENDING}")
                if i >= 2:  # the first two warm the connection and the page cache
                    walls[name].append(elapsed * 1e3)
                    cpu[name] += process_cpu_seconds(sides[name][1]) - cpu0
    finally:
        for http in sessions.values():
            await http.close()
    return {name: (walls[name], cpu[name] * 1e3 / rounds) for name in sides}


async def against(ref: str | None, rounds: int, churn: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpx-listing-") as tmp:
        daemons = {"this": scratch_daemon("mcpx-bench-")}
        if ref is not None:
            daemons[ref] = scratch_daemon("mcpx-bench-", sidecar=broker.checkout(ref, Path(tmp)))
        bare: broker.Child | None = None
        try:
            for d in daemons.values():
                d.start()
            kib = {name: await opened(d) for name, d in daemons.items()}
            async with daemons["this"].session() as http, http.get("/v1/elicit", params=PARAMS) as r:
                body = await r.read()
            body_file = Path(tmp) / "listing.json"
            body_file.write_bytes(body)
            bare_socket = Path(tmp) / "bare.sock"
            bare = await broker.Child.start("bare", bare_socket, "--body", str(body_file), timeout=60,
                                            script=HERE / "speed.py")
            sides = {name: (d.socket, d.pid) for name, d in daemons.items()}
            sides["bare send"] = (bare_socket, bare.proc.pid)
            results = await listings(sides, rounds, set(daemons) if churn else set())
        finally:
            if bare is not None:
                await bare.finish()
            for d in daemons.values():
                d.cleanup()
    floor = statistics.median(results["bare send"][0])
    print(f"GET /v1/elicit?limit={N_PENDING}, {N_PENDING} pending, {len(body)} bytes, {rounds} listings a side, "
          f"{'a question opened and cancelled before each listing, ' if churn else ''}load {os.getloadavg()[0]:.1f}")
    print(f"{'':12} {'p50 ms':>8} {'min':>7} {'max':>7} {'/ bare':>7} {'CPU ms':>7} {'KiB/question':>13}")
    for name, (walls, cpu_ms) in results.items():
        p50 = statistics.median(walls)
        each = f"{kib[name]:.2f}" if name in kib else ""
        print(f"{name:12} {p50:8.2f} {min(walls):7.2f} {max(walls):7.2f} {p50 / floor:6.2f}x {cpu_ms:7.2f} {each:>13}")


def steps(n: int) -> None:
    """The listing's steps in this process, on N_PENDING questions like the bench's."""
    from mcpx.broker.pending import PendingIndex
    from mcpx.broker.reads import Reads
    from mcpx.broker.store import QuestionFilter, QuestionRow

    now = time.time()
    doc = {"id": "", "session": "bench-many", "sessionSource": "argument", "server": "mcpx", "mode": "form",
           "message": "Which repository?", "requestedSchema": broker.SCHEMA, "audience": "agent-then-human",
           "reason": "free input (repo): the agent may answer if it truly knows; if it declines, the person is "
                     "asked", "created": "2026-12-07T09:18:49.218Z", "expiresAt": "2026-12-07T10:18:49.218Z",
           "state": "pending", "escalated": False, "ambiguous": False, "secretFields": [], "presence": False}
    index = PendingIndex()
    rows = []
    for i in range(N_PENDING):
        eid = f"elc-{i:016x}"
        text = json.dumps({**doc, "id": eid}, separators=(",", ":"))
        rows.append(QuestionRow(eid, "bench-many", "mcpx", "agent-then-human", "pending", now + i * 1e-4,
                                now + 3600 + i * 1e-4, None, None, text, False))
    index.apply(rows)
    reads = Reads(None, index, {})  # type: ignore[arg-type]  # pending questions only: never the store
    everything = QuestionFilter(state="pending")
    one_session = QuestionFilter(state="pending", session="bench-many")

    def timed(what: str, step: object) -> None:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            asyncio.run(step()) if asyncio.iscoroutinefunction(step) else step()  # type: ignore[operator]
            times.append((time.perf_counter() - t0) * 1e3)
        print(f"{what:58} {statistics.median(times):6.2f} ms (min {min(times):.2f})")

    timed("the pending index's walk (select, no filter)", lambda: index.select(everything, N_PENDING))
    timed("the same, filtered by session", lambda: index.select(one_session, N_PENDING))
    timed("the body's pieces (listing, no filter)", lambda: index.listing(everything, N_PENDING, time.time()))
    timed("the same, filtered by session", lambda: index.listing(one_session, N_PENDING, time.time()))
    moved = iter(range(N_PENDING, 10 * N_PENDING))

    def after_an_end() -> None:
        i = next(moved)
        ended = rows[i - N_PENDING]._replace(state="answered")
        index.apply([ended, rows[0]._replace(id=f"elc-{i:016x}", created=now + i * 1e-4,
                                             expires=now + 3600 + i * 1e-4)])
        t0 = time.perf_counter()
        index.listing(everything, N_PENDING, time.time())
        spent.append(time.perf_counter() - t0)

    def built_again() -> None:
        index._view = None  # as a question opened out of turn leaves it
        index.listing(everything, N_PENDING, time.time())

    timed("the same, its view built again (a question out of turn)", built_again)
    spent: list[float] = []
    for _ in range(n):
        after_an_end()
    print(f"{'the same, after a question ended and one was opened':58} {statistics.median(spent) * 1e3:6.2f} ms "
          f"(min {min(spent) * 1e3:.2f})")
    pieces, _count = index.listing(everything, N_PENDING, time.time())
    timed("the pieces joined", lambda: b"".join(pieces))
    timed("all of it: Reads.questions_json and the join", lambda: b"".join(asyncio.run(
        reads.questions_json(everything, N_PENDING))[0]))
    print(f"load {os.getloadavg()[0]:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="REF", help="also list on this git revision's daemon")
    parser.add_argument("--rounds", type=int, default=30, help="timed listings of each side (default 30)")
    parser.add_argument("--churn", action="store_true",
                        help="open and cancel a question (untimed) before each listing of a daemon")
    parser.add_argument("--steps", action="store_true", help="time the listing's steps in this process instead")
    args = parser.parse_args()
    if args.steps:
        steps(max(5, args.rounds))
    else:
        asyncio.run(against(args.against, args.rounds, args.churn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
