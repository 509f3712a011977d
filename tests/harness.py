"""The one harness that runs a real `mcpx daemon` in a home of its own, and the process handling around it.

Used by the test suite (tests/conftest.py's fixtures and the tests), the conformance runners (tests/conformance/),
the benchmarks (bench/, which put tests/ on sys.path) and the plugin's node tests, through this file's command:

    python tests/harness.py daemon [--config JSON] [--listen HOST:PORT]

starts a daemon in a temporary home, prints one JSON line {home, config, socket, pid} once it serves, and stops
it and removes the home when its stdin closes or it is sent SIGTERM/SIGINT.

It imports neither pytest nor anything of the suite but tests/forks.py (the standard library's alone), so a benchmark
or a runner the conformance suite starts can use it as it is. Every wait here is for an event (a process's exit, a
file naming our pid, a socket that answers), bounded; every process started here is stopped by whoever started it,
in a `finally`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from forks import ForkedProcess, Unfit, fork_server
from mcpx.system.paths import StatePaths
from mcpx.system.sockets import socket_alive

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SIDECAR = ROOT / "sidecar"
PEERS = TESTS / "peers"
# how long something waits that takes a second on a quiet machine: the bound of a wait for an event, which
# returns as soon as the event comes, so it costs nothing when all is well and only a loaded machine nears it
PATIENCE = 60.0
# the store the suite gives daemons that do not name their own (a postgresql:// url; unset: SQLite)
SUITE_STORE = "MCPX_TEST_STORE"
# a unix socket's path is at most this many bytes (sun_path holds 108, with the NUL)
SOCKET_PATH_MAX = 107
# Daemon.start forks its daemon from this process's daemons' fork server (tests/forks.py: mcpx's daemon imported
# once) instead of starting `python -m mcpx daemon`: the suite turns it on (tests/conftest.py), unless
# MCPX_TEST_DAEMONS=direct. A benchmark, a conformance runner and this file's command start theirs directly, so what
# they measure and serve is the daemon as a person starts it.
FORK_DAEMONS = False
DAEMONS_SWITCH = "MCPX_TEST_DAEMONS"
# and the `mcpx …` commands a test runs (mcpx_command) go through this worker's CLI fork server (mcpx's commands
# imported once): set with FORK_DAEMONS by the suite, off for a test marked `direct_daemon`
FORK_CLI = False
# a forked daemon's name (ps -o comm, process accounting): tools/suite_cpu.py's for `python -m mcpx daemon`
FORKED_DAEMON_NAME = "mx-daemon"
# what the kernel reports in /proc/<pid>/stat is in clock ticks
_CLK_TCK = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")


# ---------------------------------------------------------------- processes


def stop_process(proc: subprocess.Popen[Any] | ForkedProcess, timeout: float = 10.0) -> int:
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


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until a process that need not be our child has exited (a zombie counts as gone); False on timeout."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:  # no pidfd here (an old kernel): look at it every 20 ms instead
        deadline = time.monotonic() + timeout
        while not _gone(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])  # readable once it has exited
    finally:
        os.close(fd)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return False


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """Stop a process that is not our child (a daemon `mcpx serve` started), waiting until it is gone."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_gone(pid, wait):
            return


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


def run_stoppable(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main), where SIGTERM cancels it as Ctrl-C does: either way every `finally` in it runs, so the
    daemon and the processes it started are stopped, not left behind by a benchmark someone stopped."""

    async def guarded() -> T:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await main

    return asyncio.run(guarded())


def wait_started(proc: subprocess.Popen[Any] | ForkedProcess, ready: Callable[[], bool], what: str,
                 timeout: float = PATIENCE, evidence: Callable[[], str] = lambda: "", interval: float = 0.02) -> None:
    """Return once `ready()` holds (a process we started is serving). If the process exits first, or the time runs
    out, it is stopped (one that did not start is not left running) and a RuntimeError says so, with `evidence()`
    (the end of its log)."""
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited {proc.returncode}:\n{evidence()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start within {timeout:.0f}s:\n{evidence()}")
            time.sleep(interval)
    except BaseException:
        stop_process(proc)
        raise


def wait_for_sync(predicate: Callable[[], Any], timeout: float = PATIENCE, interval: float = 0.1,
                  what: str = "condition") -> Any:
    """Poll `predicate` (a state seen through an API) until it is true, bounded; its value. For code that is not
    async (a thread of a test's fake model, a harness); the suite's async tests have conftest.wait_for."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:.0f}s")
        time.sleep(interval)


# Ports handed out for a process to listen on later. They are taken below the kernel's ephemeral range
# (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 on Linux), which every outgoing connection draws its source
# port from: a port learned by binding to 0 and let go is one such a connection (of any test, on any worker) may take
# before the process it was meant for binds it, and a slow starter (opencode takes a second or more) then dies of
# EADDRINUSE. Each xdist worker has a slice of its own, so two workers never hand out the same port; a process
# outside pytest (a bench, a runner the conformance suite starts) takes the last slice.
class _PortSlice:
    """This process's slice of ports, walked from a random place (a subprocess of a worker, inheriting its
    PYTEST_XDIST_WORKER, walks the same slice from elsewhere)."""

    FROM, SIZE, COUNT = 20000, 1000, 12

    def __init__(self) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "")
        n = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else self.COUNT - 1
        self.base = self.FROM + (n % self.COUNT) * self.SIZE
        self.at = int.from_bytes(os.urandom(2), "big") % self.SIZE

    def take(self) -> int:
        for _ in range(self.SIZE):
            port = self.base + self.at
            self.at = (self.at + 1) % self.SIZE
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
        raise RuntimeError(f"no free loopback port in {self.base}-{self.base + self.SIZE - 1}")


_ports: _PortSlice | None = None


def free_port() -> int:
    """A loopback port nothing listens on now, for a process about to listen on it; the next one handed out is
    another (a port handed out is bound soon after, or the process it was for failed)."""
    global _ports
    if _ports is None:
        _ports = _PortSlice()
    return _ports.take()


def listening(port: int) -> bool:
    """Does something accept TCP connections on 127.0.0.1:`port`?"""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def process_serving(args: Sequence[str], port: int, what: str, **popen: Any) -> Iterator[str]:
    """A loopback service started as `args` (it listens on 127.0.0.1:`port`), for the block: its base URL once it
    accepts connections. It is stopped in the finally; `popen`: Popen's own options (its output goes nowhere by
    default)."""
    proc = subprocess.Popen(list(args), **{"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, **popen})
    try:
        wait_started(proc, lambda: listening(port), what)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def _stat_fields(pid: int) -> list[str]:
    # the command name in field 2 may hold spaces and ')': everything after the last ')' is fixed fields
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process so far (all its threads), from /proc/<pid>/stat."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def process_rss_kib(pid: int) -> int:
    """VmRSS of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def child_pids(pid: int) -> set[int]:
    """The live children of a process (its direct children only), from /proc."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):  # gone meanwhile
                if int(_stat_fields(int(entry.name))[1]) == pid:
                    found.add(int(entry.name))
    return found


# ---------------------------------------------------------------- the daemon


def mcpx_env(sidecar: Path = SIDECAR) -> dict[str, str]:
    """The environment of an mcpx process of no home: none of the caller's own MCPX_* (so nothing here ever talks
    to the caller's daemon), nor the marks of an agent or of the conformance suite; mcpx from `sidecar` (another
    revision's copy, say) before the installed one, and tests/ importable (the peers). The daemons' fork server's:
    what an import read of it would find is no test's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MCPX_", "MCP_CONFORMANCE_")) and k not in ("AGENT", "OPENCODE", "CLAUDECODE")}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(sidecar), str(TESTS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                                       else []))
    return env


def mcpx_command(*args: str, direct: bool = False) -> list[str]:
    """The command of `mcpx ARGS…` as a test runs it (with its own env, cwd, stdin/stdout/stderr): `python -m mcpx
    ARGS…`, or in the suite (FORK_CLI) its stand-in, `python -S -E fork_client.py SOCKET -m mcpx ARGS…`, which has
    it forked from this worker's CLI fork server (mcpx's commands imported once), or started directly by the
    stand-in itself where its environment does not fit the server's (tests/peers/fork_server.py's `unfit`).
    Either way the same command, argv, environment, cwd, descriptors, exit code and signals (docs/choices.md, "The
    tests' CLI commands are forked too"). `direct`, and a command on a terminal (a pty, tmux) or one whose own
    process a test looks at (its pid: a forked command's process is not the stand-in the test started; its parent,
    command line or sys.modules): `python -m mcpx ARGS…` itself."""
    if direct or not FORK_CLI:
        return [sys.executable, "-m", "mcpx", *args]
    return fork_server("cli", mcpx_env()).module_command("mcpx", args)


def python_env() -> dict[str, str]:
    """The PYTHON* variables of an mcpx process the suite runs (mcpx_env's: this checkout's mcpx first), for a test
    that makes an environment of its own (a person's shell): `mcpx …` run in it fits the CLI's fork server."""
    return {name: value for name, value in mcpx_env().items() if name.startswith("PYTHON")}


def base_env(home: Path, config: Path, sidecar: Path = SIDECAR) -> dict[str, str]:
    """The environment of an mcpx process for `home` (mcpx_env's, with its home and config)."""
    env = mcpx_env(sidecar)
    env.update(MCPX_HOME=str(home), MCPX_CONFIG=str(config))
    if os.environ.get(SUITE_STORE):  # the suite runs this test on PostgreSQL (conftest's `store`)
        env["MCPX_STORE"] = os.environ[SUITE_STORE]
    return env


def read_log(home: Path) -> str:
    """All a daemon of `home` has logged: daemon.log and what its process wrote (daemon.stderr)."""
    return "\n".join(p.read_text(errors="replace") for p in (StatePaths(home).log, home / "daemon.stderr")
                     if p.exists())


def home_pid(home: Path, wait: float = 5.0) -> int | None:
    """The pid of the daemon serving `home` now, from its daemon.json; None when none does. A daemon writes that
    file just after its socket starts to answer, so a socket that answers with no file yet is waited on."""
    paths = StatePaths(home)
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return int(json.loads(paths.daemon_json.read_text())["pid"])
        if not socket_alive(paths.socket, timeout=0.2) or time.monotonic() > deadline:
            return None
        time.sleep(0.01)


def unix_session(path: Path | str, limit: int = 100, timeout: float | None = 2 * PATIENCE,
                 trace_configs: list[aiohttp.TraceConfig] | None = None, **headers: str) -> aiohttp.ClientSession:
    """An HTTP client of the daemon on its unix socket `path` (`timeout`: the bound of one request, None: none)."""
    return aiohttp.ClientSession("http://mcpx", connector=aiohttp.UnixConnector(path=str(path), limit=limit),
                                 headers=headers, trace_configs=trace_configs,
                                 timeout=aiohttp.ClientTimeout(total=timeout))


class ApiProbe:
    """The daemon's /v1 on its unix socket, from a test's own thread (a host's tests are not async): one request a
    call, bounded, as the test process (a person's terminal: no agent's mark in its ancestry). A wait that looks at
    the daemon again and again looks this way, not through the CLI: a request costs a millisecond, `mcpx …` the start
    of a Python process each time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        conn = _UnixConnection(self.path)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            reply = conn.getresponse()
            raw = reply.read()
            return reply.status, json.loads(raw) if raw else None
        finally:
            conn.close()

    def json(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        status, data = self.request(method, path, body)
        assert 200 <= status < 300, f"{method} {path}: {status} {data}"
        return data

    def pending(self) -> list[dict[str, Any]]:
        """The pending questions, as `mcpx elicit list --json` lists them (the same GET)."""
        return list(self.json("GET", "/v1/elicit")["elicitations"])

    def audit(self, eid: str) -> list[dict[str, Any]]:
        """The audit records of question `eid`, as `mcpx audit --elicit EID --json` gives them (the same GET)."""
        return list(self.json("GET", f"/v1/audit?elicit={eid}&limit=200")["records"])


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("mcpx", timeout=PATIENCE)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(str(self.unix_path))
        self.sock = sock


class Daemon:
    """One real `mcpx daemon` process for a home, and the ways a test or a benchmark talks to it.

    As a context manager it starts the daemon and, however the block ends, stops it (and whatever daemon took
    the home since) and removes a scratch home (see `scratch_daemon`) unless `keep` is set.

    In the suite (FORK_DAEMONS) it is forked from this worker's daemons' fork server, mcpx's daemon imported there
    once: the same `mcpx daemon` (its main, argv, environment, cwd, stdin/stdout/stderr), and `proc` is the real
    process (a ForkedProcess: its pid, kill -9, exit code). `direct`, or `python_args`, start `python -m mcpx
    daemon` itself: a test of the daemon's own start, whose imports, collections or parent are what it checks. So
    does an environment the server will not fork (forks.Unfit: another locale, an agent's mark)."""

    def __init__(self, home: Path, config: Path, env: dict[str, str], listen: str | None = None, *,
                 python_args: Sequence[str] = (), scratch: Path | None = None, direct: bool = False) -> None:
        self.home = home
        self.paths = StatePaths(home)  # the daemon's own names for what it keeps there
        self.config = config
        self.env = env
        self.listen = listen
        self.python_args = list(python_args)  # before `-m mcpx`: e.g. -m cProfile -o FILE
        self.scratch = scratch  # a directory of ours that holds the home, removed by cleanup()
        self.direct = direct
        self.keep = False
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.log = home / "daemon.stderr"

    @property
    def socket(self) -> Path:
        return self.paths.socket

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the daemon was not started"
        return self.proc.pid

    @property
    def forked(self) -> bool:
        """Is it started as a fork of the daemons' fork server (see the class)?"""
        return FORK_DAEMONS and not self.direct and not self.python_args

    # ---- its life

    def start(self, timeout: float = PATIENCE) -> None:
        # a daemon cannot bind a longer path (it exits, saying so), so say so at once, before starting one
        if (size := len(os.fsencode(self.socket))) > SOCKET_PATH_MAX:
            raise RuntimeError(f"the daemon's socket {self.socket} would be {size} bytes long, and a unix socket's "
                               f"path may be {SOCKET_PATH_MAX} at most: give it a home with a shorter path")
        argv = ["daemon"] + (["--listen", self.listen] if self.listen else [])
        with open(self.log, "ab") as out:
            self.proc = None
            if self.forked:
                with open(os.devnull, "rb") as null, contextlib.suppress(Unfit):  # Unfit: started directly
                    self.proc = fork_server("daemons", mcpx_env()).fork(
                        "mcpx", argv, self.env, self.home, (null.fileno(), out.fileno(), out.fileno()),
                        FORKED_DAEMON_NAME)
            if self.proc is None:
                self.proc = subprocess.Popen([sys.executable, *self.python_args, "-m", "mcpx", *argv], env=self.env,
                                             stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=self.home)
        wait_started(self.proc, self.ready, "the daemon", timeout, self.tail)

    def ready(self) -> bool:
        """Our process wrote daemon.json (which it does once it serves) and its socket answers (not a stale one)."""
        try:
            info = json.loads(self.paths.daemon_json.read_text())
        except (OSError, ValueError):
            return False
        return self.proc is not None and info.get("pid") == self.proc.pid and socket_alive(self.socket)

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop our daemon (its exit code; None if it was never started), and any other daemon that took this
        home since (`mcpx serve` starts one when ours is gone): nothing is left running."""
        code = stop_process(self.proc, timeout) if self.proc is not None else None
        pid = home_pid(self.home)
        if pid is not None and (self.proc is None or pid != self.proc.pid):
            stop_pid(pid, timeout)
        return code

    def restart(self) -> None:
        self.start()

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def cleanup(self) -> None:
        """Stop it and remove the scratch home, unless `keep`."""
        self.stop()
        if self.scratch is not None and not self.keep:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Daemon:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()

    def tail(self, chars: int = 4000) -> str:
        """The end of what the process wrote: its log lines, and anything from before its logging started."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no daemon.stderr)"

    # ---- talking to it

    def api(self) -> ApiProbe:
        """Its /v1 from a thread that is not async (`ApiProbe`)."""
        return ApiProbe(self.socket)

    def session(self, trace_configs: list[aiohttp.TraceConfig] | None = None, limit: int = 100,
                **headers: str) -> aiohttp.ClientSession:
        return unix_session(self.socket, limit, trace_configs=trace_configs, **headers)

    def cli(self, *args: str, input: str | None = None, timeout: float = PATIENCE, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        """`mcpx ARGS…` in its home, to its end (mcpx_command)."""
        return subprocess.run(mcpx_command(*args), env={**self.env, **(env or {})}, capture_output=True, text=True,
                              input=input, timeout=timeout, cwd=self.home)

    def cli_bg(self, *args: str, env: dict[str, str] | None = None, direct: bool = False) -> subprocess.Popen[str]:
        """`mcpx ARGS…` in its home, started (mcpx_command): the caller waits for it or stops it. `direct`: `python
        -m mcpx` itself, whose pid is the command's own (a forked one's is its stand-in's)."""
        return subprocess.Popen(mcpx_command(*args, direct=direct), env={**self.env, **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.home)

    def write_config(self, data: dict[str, Any]) -> None:
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.config)

    # ---- what the kernel says about it

    def rss_kib(self) -> int:
        return process_rss_kib(self.pid)

    def cpu_seconds(self) -> float:
        """user + system CPU time of the daemon so far (all its threads, the store's included)."""
        return process_cpu_seconds(self.pid)


@contextlib.asynccontextmanager
async def serving(app: web.Application, shutdown_timeout: float = 60.0) -> AsyncIterator[int]:
    """Serve `app` on a free loopback port for the block (a webhook receiver, a page a question links to); its
    port. Stopped when the block ends, however it ends."""
    runner = web.AppRunner(app, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # aiohttp keeps the bound asyncio server here; only it knows an ephemeral port
        assert server is not None and server.sockets
        yield int(server.sockets[0].getsockname()[1])
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def receiving(handle: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> AsyncIterator[str]:
    """A local receiver of POSTs to any path (a webhook, an ntfy server) for the block: its base address."""
    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    async with serving(app, shutdown_timeout=0.5) as port:
        yield f"http://127.0.0.1:{port}"


def make_daemon(home: Path, config: dict[str, Any] | None = None, listen: str | None = None,
                extra_env: dict[str, str] | None = None, *, config_path: Path | None = None,
                python_args: Sequence[str] = (), sidecar: Path = SIDECAR, scratch: Path | None = None,
                direct: bool = False) -> Daemon:
    """A daemon (not started) for `home`, with `config` (no servers by default) written to `config_path`
    (home/config.json by default). `direct`: started as `python -m mcpx daemon` even in the suite (see Daemon); a
    daemon of another copy of mcpx (`sidecar`) always is, the fork server having this one's imported."""
    cfg = config_path or home / "config.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps(config if config is not None else {"servers": {}}))
    env = base_env(home, cfg, sidecar)
    env.update(extra_env or {})
    return Daemon(home, cfg, env, listen, python_args=python_args, scratch=scratch,
                  direct=direct or sidecar.resolve() != SIDECAR)


@contextlib.contextmanager
def running(daemons: list[Daemon]) -> Iterator[list[Daemon]]:
    """Start each daemon in turn; stop every one however the block ends (a team of them on one store)."""
    try:
        for d in daemons:
            d.start()
        yield daemons
    finally:
        for d in daemons:
            d.stop()


def scratch_daemon(prefix: str, config: dict[str, Any] | None = None, listen: str | None = None, **kw: Any) -> Daemon:
    """make_daemon in a new temporary directory, which cleanup() (or the end of a `with`) removes unless `keep`.
    The config sits beside the home, not in it, as a person's does (~/.config beside ~/.local/state): the daemon
    watches the config's directory, which mcpx.db's writes would otherwise wake."""
    # a short prefix under the temp dir: a unix socket's path must stay under ~108 bytes
    root = Path(tempfile.mkdtemp(prefix=prefix))
    home = root / "home"
    home.mkdir(mode=0o700)
    return make_daemon(home, config, listen, config_path=root / "config" / "config.json", scratch=root, **kw)


# ---------------------------------------------------------------- the command, for the node tests


class _Stop(Exception):
    pass


def _stop_on_signal(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(f"signal {signum}")


def serve_until_stdin_closes(config: dict[str, Any], listen: str | None) -> int:
    """Start a scratch daemon, say where it is (one JSON line on stdout), and stop it and remove its home when
    stdin closes (the caller is done, or gone) or on SIGTERM/SIGINT."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop_on_signal)
    daemon = scratch_daemon("mcpx-harness-", config, listen)
    try:
        daemon.start()
        print(json.dumps({"home": str(daemon.home), "config": str(daemon.config), "socket": str(daemon.socket),
                          "pid": daemon.pid}), flush=True)
        sys.stdin.buffer.read()
    except _Stop:
        pass
    except RuntimeError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):  # a second signal must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        daemon.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("daemon", help="a scratch daemon until stdin closes; one JSON line once it serves")
    run.add_argument("--config", type=json.loads, default={"servers": {}}, help="the config, as JSON")
    run.add_argument("--listen", help="also serve on HOST:PORT (TCP, with the token)")
    opts = ap.parse_args(argv)
    return serve_until_stdin_closes(opts.config, opts.listen)


if __name__ == "__main__":
    sys.exit(main())
