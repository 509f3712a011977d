"""The suite's daemons are forks of a per-worker fork server that has mcpx's daemon imported (tests/forks.py,
tests/peers/fork_server.py; harness.Daemon): the process a test holds is the real daemon — its pid is daemon.json's
and the API's, it lives in the test's environment, cwd and descriptors and in nothing of the server's, a kill -9 is
the daemon's own and takes what it started with it, and its exit code is its own. A fork server that is not running
is a loud error at once. So are the `mcpx …` commands the tests run (harness.mcpx_command), from the CLI's fork
server: each is the command a direct run is, and one whose environment does not fit the server's runs directly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import harness
from forks import ForkServer, Unfit, fork_server
from gateway_helpers import call, result, stdio, tool_text
from harness import (
    FORKED_DAEMON_NAME,
    PATIENCE,
    child_pids,
    home_pid,
    make_daemon,
    mcpx_command,
    mcpx_env,
    wait_for_sync,
    wait_gone,
)


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


def test_a_forked_cli_command_is_the_real_one(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "FORK_CLI", True)  # as the suite has it, even under MCPX_TEST_DAEMONS=direct
    d = make_daemon(home)
    project = tmp_path / "project"
    (project / ".mcpx").mkdir(parents=True)
    (project / ".mcpx" / "config.json").write_text(json.dumps({"servers": {}, "elicit": {"ttl": "7m"}}))
    person = {name: value for name, value in d.env.items() if name != "MCPX_CONFIG"}  # the config found from cwd
    d.start()
    started: list[subprocess.Popen[str]] = []
    try:
        # what it says, where and how it ends, as a direct run: the config its cwd and environment find; what it
        # reads on stdin (not a hook's input: said on stderr); an exit code of its own; usage on stderr, exit 2
        said = {}
        for args, cwd, env, stdin in ((("config", "check"), project, person, None),
                                      (("claude", "hook"), home, d.env, '{"hook_event_name": "Elicitation"}'),
                                      (("elicit", "answer", "elc-0123456789abcdef", "x=1"), home, d.env, None),
                                      ((), home, d.env, None)):
            direct, forked = (subprocess.run(mcpx_command(*args, direct=direct), cwd=cwd, env=env, input=stdin,
                                             capture_output=True, text=True, timeout=PATIENCE)
                              for direct in (True, False))
            said[args] = (forked.returncode, forked.stdout, forked.stderr)
            assert said[args] == (direct.returncode, direct.stdout, direct.stderr), args
        assert said["config", "check"][:2] == (0, f"{project}/.mcpx/config.json: ok — servers (none); elicit.mode "
                                                  "ask; 0 rule(s); ttl 420s\n")
        assert said["claude", "hook"][2].startswith("mcpx claude hook: what Claude Code sent is not an elicitation")
        assert said["elicit", "answer", "elc-0123456789abcdef", "x=1"][0] == 1
        assert said[()][0] == 2 and said[()][2].startswith("usage: mcpx")
        # one that waits: the process that asks is a fork of the CLI's server, named as process accounting names
        # `mcpx elicit`, in the home, on the test's own stdin and pipes; Ctrl-C (SIGINT, to the command the test
        # holds) reaches it and it ends as it does (130)
        server = fork_server("cli", mcpx_env())
        forked, pid = asking(d, started)
        stat = Path(f"/proc/{pid}/stat").read_text()
        assert pid != forked.pid and int(stat.rsplit(")", 1)[1].split()[1]) == server.proc.pid
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "mx-elicit"
        assert os.readlink(f"/proc/{pid}/cwd") == str(home)
        assert forked.stdout is not None and forked.stderr is not None
        ours = [os.readlink(f"/proc/self/fd/{fd}") for fd in (0, forked.stdout.fileno(), forked.stderr.fileno())]
        assert [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1, 2)] == ours
        forked.send_signal(signal.SIGINT)
        assert forked.wait(PATIENCE) == 130 and wait_gone(pid, PATIENCE)
        # an agent's mark in its environment (which the daemon reads from /proc, where a fork has the server's):
        # run directly, by the stand-in itself, the same pid
        marked, pid = asking(d, started, AGENT="1")
        assert pid == marked.pid and Path(f"/proc/{pid}/comm").read_text().strip() != "mx-elicit"
        marked.send_signal(signal.SIGINT)
        assert marked.wait(PATIENCE) == 130
        # nor is a daemon of another locale (harness.Daemon starts it directly)
        with pytest.raises(Unfit, match="LC_ALL is not the fork server's"):
            fork_server("daemons", mcpx_env()).fork("mcpx", ["--version"], {**d.env, "LC_ALL": "C"}, home,
                                                    (0, 1, 2), FORKED_DAEMON_NAME)
    finally:
        for proc in started:
            harness.stop_process(proc)
        d.stop()


def asking(d: harness.Daemon, started: list[subprocess.Popen[str]], **env: str) -> tuple[subprocess.Popen[str], int]:
    """`mcpx elicit ask` started (harness.Daemon.cli_bg; put in `started`, the caller's to stop), and the pid of the
    process that asked (its question's audit), once its question is pending."""
    message = f"Which region? {env}"
    started.append(proc := d.cli_bg("elicit", "ask", "-m", message, "--ttl", "5m", env=env))
    [q] = wait_for_sync(lambda: [q for q in d.api().pending() if q["message"] == message])
    return proc, int(d.api().audit(q["id"])[0]["pid"])
