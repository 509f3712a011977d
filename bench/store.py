"""Benchmark of the two stores side by side, through real daemons on their unix sockets (issue 15).

In one run, three set-ups, each measured the same way:

    sqlite          one daemon on its own mcpx.db (A and B are the same daemon: a file has one daemon)
    postgresql      one daemon on a PostgreSQL database (A and B the same daemon)
    postgresql A→B  two daemons on one PostgreSQL database: opened and waited on A, seen and answered on B

1. lifecycles/s: open on A -> long-poll /wait on A -> accept on B -> the waiter holds the 200, 16 in flight.
2. opened on A -> seen on B's SSE (`elicit.open` frame), p50/p99, one at a time.
3. answered on B -> A's waiter (/wait) wakes, p50/p99, one at a time.

PostgreSQL is a real server from Debian's packages, started by tests/postgres.py in a temporary directory
(fsync off: a throwaway cluster, as the suite's). The ratios to sqlite, printed beside the figures, are the
numbers to compare between runs on these noisy shared machines. It exits 0 whatever the figures are.

    .venv/bin/python bench/store.py [--lifecycles 400] [--samples 200]

`--ends` measures instead what a plain call's end costs the store's thread (issue 39), in this process: the ends
of N calls (each its row and its task.done) through a real broker on a real SQLite file, `--batch` of them per
commit as a stream of plain calls rides one horizon, on a store that already holds `--preload` ends (its indexes
have depth, as a daemon's that has run a while); the writer thread's CPU per end (/proc), and the loop's; with
`--postgresql` on a PostgreSQL database instead (the server's own CPU is not counted).
`--hot` commits each batch at once rather than at its horizon (back to back: the caches stay warm, which a daemon's
commits 50 ms apart never find), `--split` (SQLite) prints where a commit's CPU on the store's thread goes, by
statement (its time inside each `execute`; the rest is the Python that built the rows and the records).
`--against REF` runs the same on that revision's sidecar first, for a side by side in one run:

    .venv/bin/python bench/store.py --ends [-n 6000] [--batch 16] [--preload 20000] [--hot] [--split] [--against main]
                                           [--postgresql]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the harnesses, however this is run
from harness import Daemon, make_daemon, run_stoppable, running
from postgres import Postgres

if TYPE_CHECKING:
    from mcpx.broker.store import Store

SCHEMA = {"type": "object", "properties": {"repo": {"type": "string"}}}
IN_FLIGHT = 16


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def daemons(root: Path, count: int, store: str | None) -> Iterator[list[Daemon]]:
    env = {"MCPX_STORE": store} if store else {}
    with running([make_daemon(root / f"d{i}", extra_env=env) for i in range(count)]) as made:
        yield made


async def open_question(http: aiohttp.ClientSession, session: str) -> str:
    async with http.post("/v1/elicit", json={"message": "Which repository?", "requestedSchema": SCHEMA,
                                             "session": session, "ttl": 600}) as r:
        body = await r.json()
        assert r.status == 201, body
        return str(body["elicitation"]["id"])


async def accept(http: aiohttp.ClientSession, eid: str) -> None:
    async with http.post(f"/v1/elicit/{eid}/accept", json={"content": {"repo": "a/b"}}) as r:
        assert r.status == 200, await r.text()


async def lifecycles(a: aiohttp.ClientSession, b: aiohttp.ClientSession, total: int) -> float:
    todo = iter(range(total))

    async def worker() -> None:
        for _ in todo:
            eid = await open_question(a, "bench-life")
            waiting = asyncio.create_task(_wait(a, eid))
            await accept(b, eid)
            await waiting

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return total / (time.perf_counter() - start)


async def _wait(http: aiohttp.ClientSession, eid: str) -> float:
    async with http.get(f"/v1/elicit/{eid}/wait", params={"timeout": "60"}) as r:
        await r.read()
        assert r.status == 200, r.status
    return time.perf_counter()


@contextlib.asynccontextmanager
async def stream(http: aiohttp.ClientSession, kinds: str) -> AsyncIterator[aiohttp.ClientResponse]:
    async with http.get("/v1/events", params={"kinds": kinds, "session": "bench-push"}) as resp:
        await resp.content.readuntil(b"\n\n")  # the opening id frame: subscribed
        yield resp


async def next_record(resp: aiohttp.ClientResponse) -> dict[str, Any]:
    while True:
        frame = (await resp.content.readuntil(b"\n\n")).decode()
        for line in frame.splitlines():
            if line.startswith("data: "):
                return dict(json.loads(line[6:]))


async def seen_on_b(a: aiohttp.ClientSession, b: aiohttp.ClientSession, samples: int) -> list[float]:
    out = []
    async with stream(b, "elicit.open") as resp:
        for _ in range(samples):
            start = time.perf_counter()
            opening = asyncio.create_task(open_question(a, "bench-push"))
            record = await next_record(resp)
            out.append(time.perf_counter() - start)
            assert record["elicit"] == await opening
    return out


async def wakes_on_a(a: aiohttp.ClientSession, b: aiohttp.ClientSession, samples: int) -> list[float]:
    out = []
    async with stream(a, "elicit.answered") as answered_on_a:
        for _ in range(samples):
            eid = await open_question(a, "bench-push")
            waiting = asyncio.create_task(_wait(a, eid))
            # the waiter is in: its request has reached A (a few ms on a quiet machine; this is a bench, not a test)
            await asyncio.sleep(0.02)
            start = time.perf_counter()
            await accept(b, eid)
            woke = await waiting
            await next_record(answered_on_a)
            out.append(woke - start)
    return out


async def measure(name: str, a: Daemon, b: Daemon, total: int, samples: int) -> dict[str, Any]:
    async with a.session() as ha, b.session() as hb:
        for _ in range(20):  # warm-up: connections, first-use caches
            eid = await open_question(ha, "bench-warm")
            await accept(hb, eid)
        rate = await lifecycles(ha, hb, total)
        seen = await seen_on_b(ha, hb, samples)
        woke = await wakes_on_a(ha, hb, samples)
    return {"name": name, "rate": rate, "seen": seen, "woke": woke}


def report(rows: list[dict[str, Any]]) -> None:
    base = rows[0]
    ms = 1000.0
    print(f"{'':22}{'lifecycles/s':>14}{'open A→SSE B p50':>18}{'p99':>9}{'answer B→A wakes p50':>22}{'p99':>9}")
    for row in rows:
        seen = f"{pct(row['seen'], .5) * ms:16.1f}ms{pct(row['seen'], .99) * ms:7.1f}ms"
        print(f"{row['name']:22}{row['rate']:14.0f}{seen}"
              f"{pct(row['woke'], .5) * ms:20.1f}ms{pct(row['woke'], .99) * ms:7.1f}ms")
    print("\nratios to sqlite (same run):")
    for row in rows[1:]:
        print(f"  {row['name']:20} lifecycles/s x{row['rate'] / base['rate']:.2f}   "
              f"seen p50 x{statistics.median(row['seen']) / statistics.median(base['seen']):.2f}   "
              f"wakes p50 x{statistics.median(row['woke']) / statistics.median(base['woke']):.2f}")
    for row in rows:
        within = sum(1 for v in row["seen"] if v < 0.1) / len(row["seen"])
        woke = sum(1 for v in row["woke"] if v < 0.1) / len(row["woke"])
        flag = "" if within == 1 and woke == 1 else "   MISSED 100 ms for some"
        print(f"  {row['name']:20} within 100 ms: seen {within:.0%}, woken {woke:.0%}{flag}")


async def main(total: int, samples: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="mcpx-bs-") as tmp, Postgres.start() as pg:
        root = Path(tmp)
        with daemons(root / "s", 1, None) as (one,):
            rows.append(await measure("sqlite", one, one, total, samples))
        with daemons(root / "p", 1, pg.create_database("bench_one")) as (one,):
            rows.append(await measure("postgresql", one, one, total, samples))
        with daemons(root / "t", 2, pg.create_database("bench_two")) as (a, b):
            rows.append(await measure("postgresql A→B", a, b, total, samples))
    report(rows)


def thread_cpu() -> tuple[float, float]:
    """CPU seconds this process's main thread (the loop) and all its other threads (the store's) have used: the
    scheduler's own count, to the nanosecond (/proc's schedstat; stat's ticks are 10 ms, a few hundred ends')."""
    main_cpu = others = 0.0
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            used = int((task / "schedstat").read_text().split()[0]) / 1e9
            if task.name == str(os.getpid()):
                main_cpu += used
            else:
                others += used
    return main_cpu, others


class TimedDb:
    """SQLite's writer connection, each statement's CPU on the calling thread added up by its first words (--split)."""

    def __init__(self, db: Any, spent: dict[str, float]) -> None:
        self._db = db
        self.spent = spent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def _timed(self, what: str, run: Any, *args: Any) -> Any:
        began = time.thread_time()
        try:
            return run(*args)
        finally:
            self.spent[what] = self.spent.get(what, 0.0) + time.thread_time() - began

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed(" ".join(sql.split()[:2]), self._db.execute, sql, *args)

    def executemany(self, sql: str, rows: Any) -> Any:
        return self._timed("executemany " + sql.split()[2], self._db.executemany, sql, rows)

    def cursor(self) -> Any:
        return self  # put_tasks's cursor().executemany: timed the same


async def ends(n: int, batch: int, preload: int, postgresql: bool, hot: bool = False, split: bool = False) -> None:
    """Plain calls' ends through Broker.finish_task(behind=True), `batch` per commit: the CPU per end, by thread."""
    with tempfile.TemporaryDirectory(prefix="mcpx-ends-") as tmp:
        if not postgresql:
            from mcpx.broker.sqlite import SqliteStore

            await ends_on(SqliteStore(Path(tmp) / "mcpx.db"), n, batch, preload, hot, split)
            return
        from mcpx.broker.postgres import PgStore
        from mcpx.broker.store import Identity

        with Postgres.start() as pg:
            me = Identity(id="dmn-00000000000000aa", user="bench", host="bench", pid=os.getpid(), version="0")
            await ends_on(PgStore(pg.create_database("bench_ends"), me), n, batch, preload, hot)


async def ends_on(store: Store, n: int, batch: int, preload: int, hot: bool = False, split: bool = False) -> None:
    from mcpx.broker.broker import Broker
    from mcpx.call.record import Call
    from mcpx.call.request import CallRequest
    from mcpx.config.models import Config
    from mcpx.shared.ids import new_id

    @dataclass
    class Settings:
        config: Config

    def ended() -> Call:
        call = Call(new_id("tsk"), new_id("cal"), CallRequest("peer", "echo", {"text": "hello"}, "bench-ends",
                                                              "fallback", surface="mcp", cwd="/work"))
        call.connected("legacy")
        call.ended("completed", {"content": [{"type": "text", "text": "hello"}], "isError": False})
        return call

    await store.open()
    broker = Broker(store, Settings(Config()))  # a config source that never changes
    await broker.start()
    data = {"state": "completed", "server": "peer", "tool": "echo"}

    async def commit(calls: list[Call]) -> None:
        """Their ends, committed as a stream of plain calls' are: at the horizon, on the store's thread."""
        committed = [broker.finish_task(call.stored_row, dict(data), tid=call.id, session="bench-ends",
                                        trace=call.trace, behind=True) for call in calls]
        if hot:
            store._commits._go()  # type: ignore[attr-defined]  # at once, not at the horizon (--hot)
        await committed[-1]

    try:
        for _ in range(0, preload, 500):
            await commit([ended() for _ in range(500)])
        calls = [ended() for _ in range(n)]
        spent: dict[str, float] = {}
        if split:
            # --split: the writer's statements timed from here on (the store's thread runs one batch at a time)
            timed = TimedDb(store._writer, spent)  # type: ignore[attr-defined]
            store._writer = timed  # type: ignore[attr-defined]
            store._run_batch = functools.partial(timed._timed, "batch", store._run_batch)  # type: ignore[attr-defined]
        loop_before, store_before = thread_cpu()
        for i in range(0, n, batch):
            await commit(calls[i:i + batch])
        loop_after, store_after = thread_cpu()
    finally:
        await broker.stop()
        await store.close()
    print(f"  {store.info.kind}: the store's thread {(store_after - store_before) / n * 1e6:6.1f} us per end, the "
          f"loop {(loop_after - loop_before) / n * 1e6:6.1f} us (n={n}, {batch} per commit, {preload} ends before"
          f"{', back to back' if hot else ''})")
    if split:
        commits = -(-n // batch)
        batches = spent.pop("batch")
        python = batches - sum(spent.values())
        print(f"    a commit's CPU, us: {(store_after - store_before) / commits * 1e6:.0f} on the store's threads, "
              f"{batches / commits * 1e6:.0f} in the batch: " +
              ", ".join(f"{what} {used / commits * 1e6:.0f}" for what, used in sorted(spent.items(),
                                                                                   key=lambda kv: -kv[1])) +
              f", Python (the rows, the records) {python / commits * 1e6:.0f}; the rest is outside the batch "
              f"(checkpoints, hand-offs, the threads' waking)")


def ends_against(ref: str, args: list[str]) -> None:
    """This bench's --ends on revision `ref`'s sidecar, in a process of its own."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from upstreams import checkout  # bench/upstreams.py

    with tempfile.TemporaryDirectory(prefix="mcpx-ends-ref-") as tmp:
        sidecar = checkout(ref, Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(sidecar)}
        print(f"{ref}:", flush=True)
        subprocess.run([sys.executable, __file__, "--ends", *args], env=env, check=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--lifecycles", type=int, default=400)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--ends", action="store_true", help="a plain call's end on the store's thread, in process")
    ap.add_argument("-n", type=int, default=6000, help="--ends: how many ends are counted")
    ap.add_argument("--batch", type=int, default=16, help="--ends: ends per commit")
    ap.add_argument("--preload", type=int, default=20000, help="--ends: ends the store holds before")
    ap.add_argument("--against", metavar="REF", help="--ends: that revision's first, then this tree's")
    ap.add_argument("--postgresql", action="store_true", help="--ends: on a PostgreSQL store (its writer's thread)")
    ap.add_argument("--hot", action="store_true", help="--ends: each batch committed at once, back to back")
    ap.add_argument("--split", action="store_true", help="--ends: a commit's CPU by statement (SQLite)")
    opts = ap.parse_args()
    if opts.ends:
        same = ["-n", str(opts.n), "--batch", str(opts.batch), "--preload", str(opts.preload),
                *(["--hot"] if opts.hot else []), *(["--split"] if opts.split else [])]
        if opts.against:
            ends_against(opts.against, same + (["--postgresql"] if opts.postgresql else []))
            print("this tree:", flush=True)
        asyncio.run(ends(opts.n, opts.batch, opts.preload, opts.postgresql, opts.hot, opts.split))
    else:
        run_stoppable(main(opts.lifecycles, opts.samples))
