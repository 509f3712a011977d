"""The suite's daemons are forks of a per-worker fork server that has mcpx's daemon imported (tests/forks.py,
tests/peers/fork_server.py; harness.Daemon): the process a test holds is the real daemon — its pid is daemon.json's
and the API's, it lives in the test's environment, cwd and descriptors and in nothing of the server's, a kill -9 is
the daemon's own and takes what it started with it, and its exit code is its own. A fork server that is not running
is a loud error at once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import harness
from forks import ForkServer, fork_server
from gateway_helpers import call, result, stdio, tool_text
from harness import FORKED_DAEMON_NAME, PATIENCE, child_pids, home_pid, make_daemon, mcpx_env, wait_gone


def seen(pid: int) -> tuple[int, str, str]:
    """A process's parent, name and cwd, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return (int(stat.rsplit(")", 1)[1].split()[1]), Path(f"/proc/{pid}/comm").read_text().strip(),
            os.readlink(f"/proc/{pid}/cwd"))


def descriptors(pid: int) -> dict[int, str]:
    """What each of a process's descriptors is (readlink of /proc/PID/fd/N)."""
    found = {}
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found[int(entry.name)] = os.readlink(entry)
        except FileNotFoundError:  # the listing's own, closed by now
            continue
    return found


async def test_a_forked_daemon_is_the_real_one_in_the_tests_world(home: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "FORK_DAEMONS", True)  # as the suite has it, even under MCPX_TEST_DAEMONS=direct
    d = make_daemon(home, {"servers": {"env": stdio("env_server.py")}}, extra_env={"TMPDIR": str(home)})
    d.env["HOME"] = str(tmp_path / "person")  # not the fork server's, nor the worker's
    assert d.forked
    d.start()
    try:
        pid = d.pid
        server = fork_server("daemons")
        # the real daemon: the pid the test holds is the one it writes and serves as, a child of the fork server
        assert home_pid(home) == pid == d.api().json("GET", "/v1/health")["pid"]
        # named as ps and process accounting name a direct one; its cwd, stdin and output are what the harness gave
        # it, and it holds nothing of the server's
        assert seen(pid) == (server.proc.pid, FORKED_DAEMON_NAME, str(home))
        fds = descriptors(pid)
        assert fds[0] == os.devnull and fds[1] == fds[2] == str(d.log), fds
        servers = {link for link in descriptors(server.proc.pid).values() if not link.startswith("anon_inode:")}
        assert not servers & set(fds.values()), servers & set(fds.values())
        # the environment it runs in is the test's (what it hands its servers of it: as test_upstream_env's)
        async with d.session() as http:
            status, body, _ = await call(http, "env", "environment")
            assert status == 200, body
            env = tool_text(body if "result" in body else await result(http, body["task"]))
        assert env["TMPDIR"] == str(home) and env["HOME"] == d.env["HOME"] and env["PATH"] == d.env["PATH"], env
        # a kill -9 is the daemon's own, and nothing it started outlives it (its server's stand-in, its watcher)
        started = child_pids(pid)
        assert started, "the daemon started no process (its server, its children's watcher)"
        d.kill9()
        assert d.proc is not None and d.proc.returncode == -signal.SIGKILL
        assert wait_gone(pid, PATIENCE)
        for child in started:
            assert wait_gone(child, PATIENCE), f"{child} outlived its daemon's kill -9"
        # started again: another fork, the home's daemon; SIGTERM drains it and its exit code 0 comes back
        d.start()
        assert d.pid != pid and home_pid(home) == d.pid
        assert d.stop() == 0
    finally:
        d.stop()


def test_a_daemons_fork_server_that_is_not_running_is_an_error_at_once(tmp_path: Path) -> None:
    server = ForkServer("daemons", mcpx_env())
    server.proc.kill()
    server.proc.wait(PATIENCE)
    try:
        with pytest.raises(RuntimeError, match="the daemons' fork server is not running"):
            server.fork("mcpx", ["daemon"], {}, tmp_path, (0, 1, 2), FORKED_DAEMON_NAME)
    finally:
        server.stop()
