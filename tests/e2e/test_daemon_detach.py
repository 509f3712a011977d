"""The daemon outlives its host: the one `mcpx serve` (or `mcpx daemon start`) starts is nobody's descendant,
and a client that goes away is not a client that cancels (only notifications/cancelled is)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from gateway_helpers import stdio
from harness import (
    PATIENCE,
    free_port,
    make_daemon,
    read_log,
    stop_pid,
    stop_process,
    wait_for_sync,
)
from mcpx.system import agentshell, processes

pytestmark = pytest.mark.direct_daemon  # the daemon's own process: each started as `python -m mcpx daemon`

PY = sys.executable
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}


def send(proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()


def next_message(stream: IO[bytes], timeout: float = PATIENCE) -> dict[str, Any]:
    """The next line `mcpx serve` writes, read on a thread so that the wait for it is bounded."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert got, f"mcpx serve said nothing within {timeout:.0f}s"
    assert got[0], "mcpx serve ended its output"
    return json.loads(got[0])


def ancestors(pid: int) -> list[int]:
    """pid's parent, its parent, … up to init, from /proc/PID/stat."""
    chain = []
    while pid > 1:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        pid = int(fields[1])
        chain.append(pid)
    return chain


def descendants(pid: int) -> list[int]:
    """What opencode finds when it stops an MCP server: `pgrep -P`, recursively (MCP.state's finalizer)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def recorded_pid(home: Path) -> int | None:
    try:
        return int(json.loads((home / "daemon.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def test_the_daemon_mcpx_serve_starts_is_nobodys_descendant_and_outlives_its_host(home: Path) -> None:
    d = make_daemon(home)  # not started: `mcpx serve` starts one, as it does under opencode
    # started as opencode and Claude Code start it: marked as an agent's (issue 35 item 11)
    marked = {**d.env, "OPENCODE": "1", "CLAUDECODE": "1", "AGENT": "1"}
    serve = subprocess.Popen([PY, "-m", "mcpx", "serve"], env=marked, cwd=home, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        send(serve, INITIALIZE)
        assert next_message(serve.stdout)["result"]["serverInfo"]["name"] == "mcpx"  # the daemon serves
        pid = recorded_pid(home)
        assert pid is not None
        lineage = ancestors(pid)
        assert lineage[0] != serve.pid, "the launcher is the daemon's parent"
        assert serve.pid not in lineage and os.getpid() not in lineage, lineage
        assert os.getsid(pid) not in (os.getsid(serve.pid), os.getsid(0))
        origin = json.loads((home / "daemon.json").read_text())["origin"]
        assert origin["kind"] == "serve"
        assert origin["launcher"] == {"pid": serve.pid, "command": "mcpx serve"}
        assert origin["host"]["pid"] == os.getpid()
        # the daemon carries none of its launcher's marks, so what its servers start (a child running `mcpx elicit
        # answer`) descends from no agent's process and is not refused as one
        started_with = agentshell.environment(pid)
        assert started_with is not None and not set(agentshell.MARKS) & set(started_with), started_with
        assert agentshell.marked_lineage(pid) is None
        # what opencode does as `opencode run` ends: SIGTERM to its MCP server's descendants, then the server
        for child in descendants(serve.pid):
            os.kill(child, signal.SIGTERM)
        stop_process(serve)
        status = d.cli("status")
        assert status.returncode == 0, status.stderr
        assert f"pid {pid}" in status.stdout and "in the background by mcpx serve" in status.stdout
    finally:
        stop_process(serve)
        if (pid := recorded_pid(home)) is not None:
            stop_pid(pid)


def test_a_client_that_goes_away_does_not_cancel_its_call(home: Path) -> None:
    """`mcpx serve` is stopped with its host while a call runs: the call goes on in the daemon, and its result is
    kept. (A client that withdraws its request with notifications/cancelled does cancel it: test_surface.)"""
    with make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}}) as d:
        serve = subprocess.Popen([PY, "-m", "mcpx", "serve"], env=d.env, cwd=home, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            send(serve, INITIALIZE)
            next_message(serve.stdout)
            send(serve, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            send(serve, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "sdk_hold", "arguments": {}, "_meta": {"progressToken": "p"}}})
            progress = next_message(serve.stdout)
            assert progress["method"] == "notifications/progress", progress
            upstream = int(re.search(r"pid (\d+)", progress["params"]["message"]).group(1))
            stop_process(serve)  # the host goes away, mid-call, without cancelling anything
            gone = wait_for_sync(lambda: re.search(r"went away; the call goes on: mcpx task result (tsk-\w+)",
                                                   read_log(home)), what="the daemon seeing its client go")
            os.kill(upstream, signal.SIGUSR2)  # only now may the call end
            done = d.cli("task", "result", gone.group(1), "--json", "--timeout", str(PATIENCE))
            assert done.returncode == 0, done.stdout + done.stderr
            doc = json.loads(done.stdout)
            assert doc["state"] == "completed" and doc["result"]["content"][0]["text"] == "released"
        finally:
            stop_process(serve)


def test_daemon_start_stop_and_restart_from_the_command_line(home: Path) -> None:
    d = make_daemon(home)
    port = free_port()
    try:
        none = d.cli("daemon", "stop")
        assert none.returncode == 69 and f"no mcpx daemon runs for {home}" in none.stderr
        started = d.cli("daemon", "start", "--listen", f"127.0.0.1:{port}", "--json")
        assert started.returncode == 0, started.stderr
        first = json.loads(started.stdout)
        assert first["started"] and first["pid"] == recorded_pid(home)
        assert os.getpid() not in ancestors(first["pid"])  # detached, as mcpx serve's is
        again = d.cli("daemon", "start")
        assert again.returncode == 0 and f"already runs for {home} (pid {first['pid']})" in again.stdout
        assert "in the background by `mcpx daemon start`" in d.cli("status").stdout

        restarted = d.cli("daemon", "restart", "--json")
        assert restarted.returncode == 0, restarted.stderr
        second = json.loads(restarted.stdout)
        assert second["pid"] != first["pid"] and second["pid"] == recorded_pid(home)
        assert not processes.alive(first["pid"])
        status = json.loads(d.cli("status", "--json").stdout)
        assert status["listen"] == f"127.0.0.1:{port}"  # kept across the restart
        assert status["origin"]["kind"] == "command"
        assert status["origin"]["launcher"]["command"] == "mcpx daemon restart"

        stopped = d.cli("daemon", "stop")
        assert stopped.returncode == 0 and f"daemon stopped (pid {second['pid']}" in stopped.stdout
        assert not processes.alive(second["pid"])
        assert not (home / "daemon.json").exists() and not (home / "daemon.sock").exists()
    finally:
        if (pid := recorded_pid(home)) is not None:
            stop_pid(pid)
