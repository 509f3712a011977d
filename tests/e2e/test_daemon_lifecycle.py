"""The daemon as a process: kill -9 loses nothing committed, SIGTERM drains, TCP needs the token."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from conftest import ask, events, past, request_in_flight
from harness import PATIENCE, Daemon, free_port, home_pid, make_daemon, read_log, stop_process, wait_for_sync

pytestmark = pytest.mark.direct_daemon  # the daemon's own process: each started as `python -m mcpx daemon`


async def test_kill9_then_restart_loses_nothing_committed(home: Path) -> None:
    with make_daemon(home) as d:
        async with d.session() as http:
            answered = await ask(http, session="s")
            async with http.post(f"/v1/elicit/{answered['id']}/accept", json={"content": {"repo": "kept/one"}}) as r:
                assert r.status == 200
            pending = [await ask(http, session="s", ttl=600) for _ in range(5)]
        d.kill9()
        assert d.socket.exists()  # a stale socket is left behind; the next daemon must cope
        d.restart()
        async with d.session() as http:
            async with http.get(f"/v1/elicit/{answered['id']}") as r:
                body = await r.json()
            assert body["answer"]["content"] == {"repo": "kept/one"} and body["elicitation"]["state"] == "answered"
            async with http.get("/v1/elicit", params={"session": "s"}) as r:
                ids = [q["id"] for q in (await r.json())["elicitations"]]
            assert ids == [q["id"] for q in pending]
            async with http.post(f"/v1/elicit/{pending[0]['id']}/accept",
                                 json={"content": {"repo": "after/restart"}}) as r:
                assert r.status == 200
            async with http.get("/v1/audit", params={"session": "s"}) as r:
                kinds = [rec["kind"] for rec in (await r.json())["records"]]
            assert kinds.count("elicit.open") == 6 and kinds.count("elicit.answered") == 2


async def test_questions_due_while_the_daemon_was_down_expire_at_start(home: Path) -> None:
    with make_daemon(home) as d:
        async with d.session() as http:
            q = await ask(http, ttl=0.5)
        d.kill9()
        await past(q["expiresAt"])  # its deadline goes by while no daemon runs
        d.restart()
        async with d.session() as http:
            async with http.get(f"/v1/elicit/{q['id']}/wait", params={"timeout": str(PATIENCE)}) as r:
                assert r.status == 200 and (await r.json())["by"] == "expiry"
            async with http.get(f"/v1/elicit/{q['id']}") as r:
                assert (await r.json())["elicitation"]["state"] == "expired"


async def test_sigterm_drains_and_exits_cleanly(home: Path) -> None:
    with make_daemon(home) as d:
        async with d.session() as http:
            q = await ask(http)
            loop = asyncio.get_running_loop()
            waiter = await request_in_flight(d, "GET", f"/v1/elicit/{q['id']}/wait", params={"timeout": "60"})
            async with events(http) as stream:  # open: its opening frame is in
                async def to_the_end() -> tuple[bytes, float]:
                    return await stream.resp.content.read(), loop.time()

                rest = asyncio.create_task(to_the_end())
                signalled = loop.time()
                code = await asyncio.to_thread(d.stop)
                assert code == 0
                status, _, waiter_ended = await waiter
                assert status == 204  # told to come back, not cut off
                tail, stream_ended = await asyncio.wait_for(rest, PATIENCE)
                assert tail == b""  # the stream ended at a frame's end, not cut off mid-frame
            # both were let go at once: the drain allows 3 s, and nothing held it open that long
            assert waiter_ended - signalled < 2.5 and stream_ended - signalled < 2.5
        assert not d.socket.exists() and not (home / "daemon.json").exists()
        d.restart()
        async with d.session() as http, http.get(f"/v1/elicit/{q['id']}") as r:
            assert (await r.json())["elicitation"]["state"] == "pending"


def test_a_second_daemon_for_the_same_state_directory_is_refused(daemon: Daemon) -> None:
    result = subprocess.run([sys.executable, "-m", "mcpx", "daemon"], env=daemon.env, capture_output=True,
                            text=True, timeout=PATIENCE)
    assert result.returncode == 1 and "already running" in result.stderr


async def test_listen_beyond_loopback_is_an_explicit_choice_and_the_log_says_what_it_exposes(home: Path) -> None:
    port = free_port()
    with make_daemon(home, listen=f"0.0.0.0:{port}") as d:
        async with d.session() as http, http.get("/v1/health") as r:
            inbox = (await r.json())["inbox"]
        assert inbox.endswith(f":{port}/inbox") and not inbox.startswith("http://0.0.0.0")
        assert "beyond loopback" in read_log(home)


async def test_without_listen_tcp_serves_the_web_inbox_and_not_the_api(daemon: Daemon) -> None:
    async with daemon.session() as http, http.get("/v1/health") as r:
        inbox = (await r.json())["inbox"]
    assert inbox.startswith("http://127.0.0.1:")
    assert json.loads((daemon.home / "daemon.json").read_text())["inbox"] == inbox
    base = inbox.removesuffix("/inbox")
    async with aiohttp.ClientSession() as http:
        for token in ("", (daemon.home / "token").read_text().strip() if (daemon.home / "token").exists() else "x"):
            async with http.get(f"{base}/v1/health", headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 401 and "--listen" in (await r.json())["error"]["message"]
        async with http.get(inbox) as r:
            assert r.status == 401 and "mcpx inbox" in await r.text()
    # a restarted daemon takes the same port again: an open inbox and the links sent out still work
    daemon.stop()
    daemon.start()
    async with daemon.session() as http, http.get("/v1/health") as r:
        assert (await r.json())["inbox"] == inbox


async def test_tcp_needs_the_bearer_token(home: Path) -> None:
    port = free_port()
    with make_daemon(home, listen=f"127.0.0.1:{port}") as d:
        token_file = home / "token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/v1/health") as r:
                assert r.status == 401 and "Bearer" in (await r.json())["error"]["message"]
            async with http.get(f"http://127.0.0.1:{port}/v1/health", headers={"Authorization": "Bearer nope"}) as r:
                assert r.status == 401
            auth = {"Authorization": f"Bearer {token}"}
            async with http.get(f"http://127.0.0.1:{port}/v1/health", headers=auth) as r:
                assert r.status == 200 and (await r.json())["listen"] == f"127.0.0.1:{port}"
        status = d.cli("status", env={"MCPX_DAEMON_URL": f"http://127.0.0.1:{port}"})
        assert status.returncode == 0 and f"127.0.0.1:{port}" in status.stdout


def test_two_daemons_started_at_once_for_one_home_leave_one_running(home: Path) -> None:
    """Both find no socket answering; the lock on the home lets one through, before either opens mcpx.db."""
    d = make_daemon(home)
    logs = [home.parent / f"racer-{n}.log" for n in range(2)]
    racers = []
    for log in logs:
        with open(log, "w") as out:
            racers.append(subprocess.Popen([sys.executable, "-m", "mcpx", "daemon"], env=d.env, cwd=home, stdout=out,
                                           stderr=out))
    try:
        # the one refused exits on its own, at once: wait for that, bounded, while the other serves
        refused = wait_for_sync(lambda: next((p for p in racers if p.poll() is not None), None),
                                what="a daemon refused")
        err = logs[racers.index(refused)].read_text()
        winner = next(p for p in racers if p is not refused)
        assert refused.returncode == 1, err
        assert "already running" in err and f"pid {winner.pid}" in err, err
        wait_for_sync(lambda: home_pid(home) == winner.pid, what="the other daemon serving")
        assert winner.poll() is None
    finally:
        for p in racers:
            stop_process(p)


def test_a_daemon_that_cannot_listen_exits_and_says_why(home: Path) -> None:
    """It fails after opening mcpx.db (the port is taken): it closes what it opened and exits, it does not hang."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        d = make_daemon(home)
        result = subprocess.run([sys.executable, "-m", "mcpx", "daemon", "--listen", f"127.0.0.1:{port}"], env=d.env,
                                cwd=home, capture_output=True, text=True, timeout=PATIENCE)
    finally:
        taken.close()
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "in use" in result.stderr, result.stderr
    assert (home / "mcpx.db").exists()  # it had got as far as its database
    assert not (home / "daemon.sock").exists() and not (home / "daemon.json").exists()
    with d:  # and the home is free again for the next daemon
        assert home_pid(home) == d.pid


def test_a_daemon_whose_socket_path_is_too_long_exits_and_says_why(tmp_path: Path) -> None:
    home = tmp_path / ("h" * 110)
    home.mkdir()
    d = make_daemon(home)
    result = subprocess.run([sys.executable, "-m", "mcpx", "daemon"], env=d.env, cwd=home, capture_output=True,
                            text=True, timeout=PATIENCE)
    assert result.returncode == 1, result.stderr
    assert "cannot serve on" in result.stderr and "may be 107 at most" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
