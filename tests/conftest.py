"""Fixtures that run the real daemon on a real socket in a temporary MCPX_HOME, and the waits a test makes
of it: every one for an event (an SSE frame, a state change seen through the API), each bounded, none a sleep."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"
# how long a test waits for something that takes a second on a quiet machine: the bound of a wait for an event,
# which returns as soon as the event comes, so it costs nothing when all is well and only a loaded machine nears it
PATIENCE = 60.0


def in_ci() -> bool:
    """CI is set (to anything but an empty, 0, false or no), as CI runners and .ci/run set it."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def loud_skip(reason: str) -> NoReturn:
    """A part the suite needs is missing here. Skipped, loudly, on a developer's machine; under CI (the CI
    variable set, as .ci/run sets it) a failure, so a CI run never goes green with a part of it unrun."""
    if in_ci():
        pytest.fail(f"LOUD SKIP under CI, so a failure: {reason}", pytrace=False)
    pytest.skip(f"LOUD SKIP: {reason}")


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> int:
    """SIGTERM, then SIGKILL if it is still there after `timeout`; its exit code either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    return proc.returncode


def run_group(args: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    """subprocess.run for a program that starts processes of its own (node's test runner starting daemons, the
    conformance suite starting mcpx_client.py starting a daemon): it runs in a process group of its own, and what
    is left of the group when it ends, or overruns `timeout`, is killed, so nothing it started outlives the test."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(args, timeout, out, err) from exc
    finally:
        _kill_group(proc.pid)
        stop_process(proc)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """Stop a process that is not our child (a daemon `mcpx serve` started), waiting until it is gone."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


class Daemon:
    """One real `mcpx daemon` process, and the ways a test talks to it."""

    def __init__(self, home: Path, config: Path, env: dict[str, str], listen: str | None = None) -> None:
        self.home = home
        self.config = config
        self.env = env
        self.listen = listen
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / "daemon.stderr"

    @property
    def socket(self) -> Path:
        return self.home / "daemon.sock"

    def start(self, timeout: float = PATIENCE) -> None:
        args = [sys.executable, "-m", "mcpx", "daemon"] + (["--listen", self.listen] if self.listen else [])
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(args, env=self.env, stdout=out, stderr=out, cwd=self.home)
        out.close()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
                if self._ready():
                    return
                time.sleep(0.02)
            raise RuntimeError(f"daemon did not start within {timeout:.0f}s: {self.log.read_text()[-2000:]}")
        except BaseException:
            stop_process(self.proc)  # a daemon that did not start is not left running
            raise

    def _ready(self) -> bool:
        """Our process wrote daemon.json and its socket accepts connections (not a stale one)."""
        try:
            info = json.loads((self.home / "daemon.json").read_text())
        except (OSError, ValueError):
            return False
        if self.proc is None or info.get("pid") != self.proc.pid:
            return False
        import socket as _socket

        probe = _socket.socket(_socket.AF_UNIX)
        try:
            probe.connect(str(self.socket))
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def stop(self, timeout: float = 10.0) -> int:
        """Stop our daemon (its exit code), and any other daemon that took this home since (`mcpx serve`
        starts one when ours is gone): no test leaves a daemon behind."""
        assert self.proc is not None
        code = stop_process(self.proc, timeout)
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            pid = int(json.loads((self.home / "daemon.json").read_text())["pid"])
            if pid != self.proc.pid:
                stop_pid(pid, timeout)
        return code

    def __enter__(self) -> "Daemon":
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def restart(self) -> None:
        self.start()

    def session(self, trace_configs: list[aiohttp.TraceConfig] | None = None, **headers: str) -> aiohttp.ClientSession:
        connector = aiohttp.UnixConnector(path=str(self.socket))
        return aiohttp.ClientSession("http://mcpx", connector=connector, headers=headers, trace_configs=trace_configs,
                                     timeout=aiohttp.ClientTimeout(total=2 * PATIENCE))

    def cli(self, *args: str, input: str | None = None, timeout: float = PATIENCE, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mcpx", *args], env={**self.env, **(env or {})},
                              capture_output=True, text=True, input=input, timeout=timeout, cwd=self.home)

    def cli_bg(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "mcpx", *args], env={**self.env, **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.home)

    def write_config(self, data: dict[str, Any]) -> None:
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.config)


def base_env(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_") and k not in ("AGENT", "OPENCODE")}
    env.update(MCPX_HOME=str(home), MCPX_CONFIG=str(config), PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "sidecar"), str(ROOT / "tests")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def make_daemon(home: Path, config: dict[str, Any] | None = None, listen: str | None = None,
                extra_env: dict[str, str] | None = None) -> Daemon:
    cfg = home / "config.json"
    cfg.write_text(json.dumps(config if config is not None else {"servers": {}}))
    env = base_env(home, cfg)
    env.update(extra_env or {})
    return Daemon(home, cfg, env, listen)


@pytest.fixture
def daemon(home: Path) -> Iterator[Daemon]:
    with make_daemon(home) as d:
        yield d


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


def wait_for_sync(predicate: Callable[[], Any], timeout: float = PATIENCE, interval: float = 0.1,
                  what: str = "condition") -> Any:
    """wait_for for code that is not async (a thread of a test's fake model, a harness)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:.0f}s")
        time.sleep(interval)


async def past(instant: float | str) -> None:
    """Wait until the wall clock has passed `instant` (epoch seconds or RFC 3339): for a test whose event is time
    itself (a question's deadline gone by while the daemon was down, a person thinking longer than a timeout)."""
    when = datetime.fromisoformat(instant).timestamp() if isinstance(instant, str) else instant
    while (left := when - time.time()) >= 0:
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
