"""The suite's fixtures: a real daemon (tests/harness.py) on a real socket in a temporary MCPX_HOME, and the waits a
test makes of it: every one for an event (an SSE frame, a state change seen through the API), each bounded, none a
sleep."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import itertools
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest
from _pytest.nodeid import coerce_node_id

import harness
from harness import DAEMONS_SWITCH, PATIENCE, SUITE_STORE, Daemon, free_port, make_daemon
from mcpx.broker.broker import Broker
from mcpx.broker.sqlite import SqliteStore
from mcpx.config.models import Config

STORES = ("sqlite", "postgresql")
ON_A_FREE_PORT = "127.0.0.1:<free>"  # daemon_of's listen: a loopback port picked for the daemon when it is made
LONG_FIRST = ("tests/hosts/", "tests/opencode/", "tests/conformance/")  # their tests take minutes each
_databases = itertools.count()
# the suite's daemons and `mcpx …` commands are forked from fork servers per worker that have mcpx's daemon and its
# commands imported (tests/forks.py; docs/choices.md, "The tests' daemons are forked too", "The tests' CLI commands
# are forked too"); MCPX_TEST_DAEMONS=direct starts every one as `python -m mcpx …`, and a test marked
# `direct_daemon` (one of the daemon's own start or process) has its own so
if os.environ.get(DAEMONS_SWITCH, "forked") not in ("forked", "direct"):
    raise pytest.UsageError(f"{DAEMONS_SWITCH} is 'forked' (the default) or 'direct', not "
                            f"{os.environ[DAEMONS_SWITCH]!r}")
harness.FORK_DAEMONS = harness.FORK_CLI = os.environ.get(DAEMONS_SWITCH, "forked") == "forked"


def in_ci() -> bool:
    """CI is set (to anything but an empty, 0, false or no), as CI runners and .ci/run set it."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def loud_skip(reason: str) -> NoReturn:
    """A part the suite needs is missing here. Skipped, loudly, on a developer's machine; under CI (the CI
    variable set, as .ci/run sets it) a failure, so a CI run never goes green with a part of it unrun."""
    if in_ci():
        pytest.fail(f"LOUD SKIP under CI, so a failure: {reason}", pytrace=False)
    pytest.skip(f"LOUD SKIP: {reason}")


@dataclass
class FixedConfig:
    """A config source that never changes, for a part built in the test's own process."""

    config: Config


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A real broker on a real SQLite file, in the test's own process (no daemon)."""
    store = SqliteStore(tmp_path / "mcpx.db")
    await store.open()
    b = Broker(store, FixedConfig(Config()))
    await b.start()
    try:
        yield b
    finally:
        await b.stop()
        await store.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def daemon(request: pytest.FixtureRequest, home: Path) -> Iterator[Daemon]:
    with daemon_of(request, home) as d:
        yield d


@contextlib.contextmanager
def daemon_of(request: pytest.FixtureRequest, home: Path, config: dict[str, Any] | None = None,
              **kw: Any) -> Iterator[Daemon]:
    """The test's daemon with `config` (make_daemon's; `listen=ON_A_FREE_PORT`: TCP on a loopback port it alone
    has): one of its own in `home`, started and stopped here; for a test marked `shared_daemon`, its module's for
    the test's store (`SharedDaemons`)."""
    if request.node.get_closest_marker("shared_daemon") is not None:
        pool: SharedDaemons = request.getfixturevalue("shared_daemons")
        yield pool.get(request, config, **kw)
        return
    with make_daemon(home, config, **on_its_port(kw)) as d:
        yield d


def on_its_port(kw: dict[str, Any]) -> dict[str, Any]:
    """make_daemon's options, with `listen=ON_A_FREE_PORT` made a port of the daemon's own."""
    return {**kw, "listen": f"127.0.0.1:{free_port()}"} if kw.get("listen") == ON_A_FREE_PORT else kw


class SharedDaemons:
    """The daemons a module's tests marked `shared_daemon` share (their `daemon`), one per store kind, each started
    when a test first asks for it and all stopped when the module ends. For tests that each work on questions (or
    calls) of their own and look only at those: a daemon's start is most of such a test's cost. A test that counts
    everything a daemon holds, restarts or stops it, or changes its config keeps a daemon of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.daemons: dict[str, tuple[Daemon, Any]] = {}

    def get(self, request: pytest.FixtureRequest, config: dict[str, Any] | None, **kw: Any) -> Daemon:
        """The daemon for the test's store (its `store` fixture), started on first use with `config`, which every
        test of the module that shares it must ask for alike."""
        kind: str = request.getfixturevalue("store")
        asked = (config, kw)
        if kind in self.daemons:
            d, made_with = self.daemons[kind]
            assert made_with == asked, f"the module's shared daemon was started with {made_with}, not {asked}"
            return d
        kw = dict(kw)
        env = dict(kw.pop("extra_env", None) or {})
        if kind == "postgresql":  # a database of the module's own, as a daemon of a test's own has one
            pg = request.getfixturevalue("postgres")
            env["MCPX_STORE"] = pg.create_database(f"shared_{os.getpid()}_{next(_databases)}")
        home = self.root / kind
        home.mkdir()
        d = make_daemon(home, config, extra_env=env, **on_its_port(kw))
        d.start()
        self.daemons[kind] = (d, asked)
        return d

    def stop(self) -> None:
        for d, _ in self.daemons.values():
            d.stop()


@pytest.fixture(scope="module")
def shared_daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedDaemons]:
    pool = SharedDaemons(tmp_path_factory.mktemp("shared"))
    try:
        yield pool
    finally:
        pool.stop()


def this_process_talks_to(monkeypatch: pytest.MonkeyPatch, d: Daemon) -> None:
    """An mcpx client in the test's own process (mcpx.Client) reaches `d` and nothing else: none of the caller's own
    MCPX_* (a daemon url, a session) is seen, and MCPX_HOME is d's."""
    for key in [k for k in os.environ if k.startswith("MCPX_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("MCPX_HOME", str(d.home))


@pytest.fixture
async def http(daemon: Daemon) -> AsyncIterator[aiohttp.ClientSession]:
    async with daemon.session() as s:
        yield s


async def ask(http: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    body.setdefault("message", "Which repository?")
    if "url" not in body:
        body.setdefault("requestedSchema", {"type": "object", "properties": {"repo": {"type": "string"}},
                                            "required": ["repo"]})
    async with http.post("/v1/elicit", json=body) as r:
        data = await r.json()
        assert r.status == 201, data
        return data["elicitation"]


async def wait_for(predicate: Any, timeout: float = PATIENCE, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll `predicate` (a state seen through the API) until it holds, bounded. Where the daemon sends an event for
    the change, wait for the event instead (`events`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:.0f}s")
        await asyncio.sleep(interval)


async def past(instant: float | str) -> None:
    """Wait until the wall clock has passed `instant` (epoch seconds or RFC 3339): for a test whose event is time
    itself (a question's deadline gone by while the daemon was down, a person thinking longer than a timeout)."""
    when = datetime.fromisoformat(instant).timestamp() if isinstance(instant, str) else instant
    while (left := when - time.time()) >= 0:  # noqa: ASYNC110 -- the event is the clock; the loop only outlasts a short sleep
        await asyncio.sleep(left + 0.01)


class EventStream:
    """An open GET /v1/events. The daemon subscribes before it sends the stream's opening `id:` frame, so once
    that frame is read every record committed afterwards reaches this stream, in order."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp

    async def frame(self, timeout: float = PATIENCE) -> dict[str, Any]:
        """The next frame: a record {id, event, data}, the opening {retry, id} or a {comment}."""
        frame: dict[str, Any] = {}
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.resp.content.readline()
                if not raw:
                    raise AssertionError(f"the event stream ended; the frame so far: {frame}")
                line = raw.decode().rstrip("\n")
                if not line:
                    if frame:
                        if "data" in frame:
                            frame["data"] = json.loads(frame["data"])
                        return frame
                    continue
                if line.startswith(":"):
                    frame["comment"] = line[1:].strip()
                    continue
                key, _, value = line.partition(": ")
                frame[key] = value

    async def frames(self, count: int, timeout: float = PATIENCE, keep_comments: bool = False) -> list[dict[str, Any]]:
        """The next `count` records (and heartbeats, with keep_comments)."""
        out: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while len(out) < count:
                f = await self.frame()
                if "data" in f or (keep_comments and "comment" in f):
                    out.append(f)
        return out

    async def until(self, holds: Callable[[dict[str, Any]], bool], timeout: float = PATIENCE,
                    what: str = "event") -> dict[str, Any]:
        """The first record (its data: elicit, session, trace, task, kind, data, seq) for which `holds` is true."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    f = await self.frame()
                    if "data" in f and holds(f["data"]):
                        return f["data"]
        except TimeoutError:
            raise AssertionError(f"no {what} on the event stream within {timeout:.0f}s") from None


@contextlib.asynccontextmanager
async def events(http: aiohttp.ClientSession, after: int | None = None, **params: str) -> AsyncIterator[EventStream]:
    """GET /v1/events (filters: kinds, session), yielded once its opening frame is in: from then on nothing is
    missed. `after`: replay the log from after this id first (Last-Event-ID), e.g. 0 for all of it."""
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    async with http.get("/v1/events", params=params, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        stream = EventStream(resp)
        opening = await stream.frame()
        assert "id" in opening and "data" not in opening, opening
        yield stream


async def audited(http: aiohttp.ClientSession, kind: str, timeout: float = PATIENCE, **match: str) -> dict[str, Any]:
    """The first audit record of `kind` whose fields equal `match` (e.g. trace=...), once it has committed:
    the log is replayed from its start, then followed live, so one committed before or after the call is seen."""
    async with events(http, after=0, kinds=kind) as stream:
        return await stream.until(lambda rec: all(rec.get(k) == v for k, v in match.items()), timeout,
                                  f"{kind} record with {match}")


async def request_in_flight(daemon: Daemon, method: str, path: str, **kw: Any
                            ) -> asyncio.Task[tuple[int, Any, float]]:
    """Send a request from a task of its own, and return once it has gone out on the daemon's socket (there is no
    later event to wait for: the daemon answers it only when it is done): the task gives (status, JSON body or
    None, the loop time it ended)."""
    loop = asyncio.get_running_loop()
    sent = asyncio.Event()
    trace = aiohttp.TraceConfig()

    async def on_sent(*_: Any) -> None:
        sent.set()

    trace.on_request_headers_sent.append(on_sent)

    async def send() -> tuple[int, Any, float]:
        async with daemon.session(trace_configs=[trace]) as http, http.request(method, path, **kw) as r:
            body = await r.json() if r.content_type == "application/json" else None
            return r.status, body, loop.time()

    task = asyncio.create_task(send())
    signalled = asyncio.create_task(sent.wait())
    try:
        await asyncio.wait({task, signalled}, timeout=PATIENCE, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signalled.cancel()
    if not sent.is_set():
        task.cancel()
        raise AssertionError(f"{method} {path} was not sent within {PATIENCE:.0f}s")
    return task


def pytest_configure(config: pytest.Config) -> None:
    """Under `--dist loadgroup` xdist's controller hands the work out in the order the workers collected it, which is
    pytest_collection_modifyitems's. Left to itself it sorts every group and test by how many tests it holds, the
    most first: a module of tests sharing a daemon (daemon_api's 26, of seconds each) went out before the host groups
    of 8 that take minutes each, and the order below was not kept."""
    if getattr(config.option, "dist", None) == "loadgroup":
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: xdist's loadgroup, with the real hosts' tests kept to lanes of their own
    (tests/scheduling.py), so that the workers in none run the rest of the suite beside them."""
    if getattr(config.option, "dist", None) != "loadgroup":
        return None
    from scheduling import HostLanes

    return HostLanes(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--dist loadgroup` (./dev test): the tests of one `xdist_group` run on one worker, one after another, so a
    module's opencode, Claude Code or wheel is set up once, and two of them never run at once. pytest-xdist 3.8 marks
    a test's group by a suffix it writes to `item._nodeid`, which pytest 9 no longer reads (a node's id is `_id`):
    without this every group was spread over the workers, each setting the module up again. Written here where
    pytest 9 reads it, in xdist's own form (`nodeid@group`), once xdist's hook has run. A module's tests marked
    `shared_daemon` are a group of their own, so the daemons they share start once. A group is for tests that share
    what is dear to set up (a TUI, a wheel, a host server started once); a host test that needs only a daemon and a
    scripted model, cheap to start on each worker, is a unit of its own, so that the hosts' lanes share them out.

    xdist hands the work out in this order (pytest_configure; tests/scheduling.py keeps the host tests to their
    lanes): the longest first, so that none of it is started last, alone, while the other workers have finished.
    First the groups of the tests that take minutes each (real hosts, the largest group first; one worker runs each
    group's tests one after another), then the other such tests (the plugin's own, the conformance suites, the
    hosts' installers), then the groups of tests that share a daemon (the largest first), then the rest."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers, for --dist loadgroup
        return
    groups: dict[str, str] = {}
    for item in items:
        named = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if not named and item.get_closest_marker("shared_daemon") is not None:
            named = [item.nodeid.split("::")[0]]  # the module's shared daemons start once, on one worker
        if named:
            groups[item.nodeid] = "_".join(named)

    sizes = collections.Counter(groups.values())

    def order(item: pytest.Item) -> tuple[bool, bool, int]:
        group = groups.get(item.nodeid)
        return not item.nodeid.startswith(LONG_FIRST), group is None, -sizes[group] if group else 0

    items.sort(key=order)  # stable: a module's tests stay together, in their order
    for item in items:
        if item.nodeid in groups and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{groups[item.nodeid]}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked `stores` is the store and broker suite: each of its tests runs on SQLite and on PostgreSQL."""
    if metafunc.definition.get_closest_marker("stores") is not None:
        metafunc.parametrize("store", STORES, indirect=True)


@pytest.fixture(autouse=True)
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store of the daemons a test starts: SQLite, or (`stores` modules) a fresh PostgreSQL database each."""
    kind: str = getattr(request, "param", "sqlite")
    if kind == "postgresql":
        pg = request.getfixturevalue("postgres")
        monkeypatch.setenv(SUITE_STORE, pg.create_database(f"suite_{os.getpid()}_{next(_databases)}"))
    else:
        monkeypatch.delenv(SUITE_STORE, raising=False)
    return kind


def store_contents(home: Path) -> bytes:
    """Everything the store of the daemon of `home` holds, as bytes to search: mcpx.db and its WAL, or (a suite
    test on PostgreSQL) every row of every mcpx table, as PostgreSQL gives them back."""
    url = os.environ.get(SUITE_STORE)
    if not url:
        return b"".join(p.read_bytes() for p in (home / "mcpx.db", home / "mcpx.db-wal") if p.exists())
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='mcpx'").fetchall()]
        assert "answers" in tables, tables
        return b"\n".join(str(row).encode() for t in tables for row in conn.execute(f"SELECT * FROM mcpx.{t}"))


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real PostgreSQL for this test worker (tests/postgres.py): a cluster of its own on a loopback port."""
    from postgres import Postgres, server_binaries

    if server_binaries() is None:
        loud_skip("PostgreSQL's server binaries are not installed (Debian: postgresql; ./dev test installs them)")
    with Postgres.start() as pg:
        yield pg


@pytest.fixture(scope="session", autouse=True)
def _fork_servers() -> Iterator[None]:
    """Stops this worker's fork servers, the stdio peers', the daemons' and the CLI's (tests/forks.py, each started by
    its first use, the peers' often at collection), as the session ends, their children with them."""
    from forks import stop_fork_servers

    try:
        yield
    finally:
        stop_fork_servers()


@pytest.fixture(autouse=True)
def _direct_daemons(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked `direct_daemon` starts its daemons as `python -m mcpx daemon`, not forked (harness.Daemon),
    and its `mcpx …` commands as `python -m mcpx` (harness.mcpx_command): a daemon they start in the background
    is held to its launcher's pid and parent."""
    if request.node.get_closest_marker("direct_daemon") is not None:
        monkeypatch.setattr(harness, "FORK_DAEMONS", False)
        monkeypatch.setattr(harness, "FORK_CLI", False)
