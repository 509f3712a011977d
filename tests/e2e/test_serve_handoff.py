"""`mcpx serve` hands its stdin and stdout to the daemon (SCM_RIGHTS) and only waits: the host talks to the daemon.

Real daemon, real `mcpx serve` processes on real pipes; whether the daemon holds the host's pipes is read
from /proc. The websocket pump stays for a daemon over TCP and one that takes no hand-off; a daemon that
stops hands its client back, and one killed mid-call leaves no request that serve was told of unanswered.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import pytest

from gateway_helpers import stdio
from harness import PATIENCE, Daemon, free_port, make_daemon, read_log
from mcpx.shared.handoff import WAITING_AFTER
from mcpx.surface.pipe_endpoint import DRAIN_LIMIT

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(rid: int, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": arguments,
                                                                            **params}}


@pytest.fixture
def sdk(home: Path) -> Iterator[Daemon]:
    with make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}}, listen=f"127.0.0.1:{free_port()}") as d:
        yield d


class Serve:
    """A `mcpx serve` on pipes, as a host runs it; every read bounded."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout = proc, proc.stdin, proc.stdout
        self.seen: dict[Any, dict[str, Any]] = {}

    async def write(self, data: bytes) -> None:
        self.stdin.write(data)
        await self.stdin.drain()

    async def send(self, msg: dict[str, Any]) -> None:
        await self.write(json.dumps(msg).encode() + b"\n")

    async def next(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.stdout.readline(), PATIENCE)
        assert line, "mcpx serve ended its output"
        msg: dict[str, Any] = json.loads(line)
        return msg

    async def reply(self, rid: Any) -> dict[str, Any]:
        """The answer to request `rid` (notifications and other answers on the way are kept)."""
        while rid not in self.seen:
            msg = await self.next()
            if "method" not in msg:
                self.seen[msg.get("id")] = msg
        return self.seen.pop(rid)

    async def start(self) -> None:
        await self.send(INIT)
        assert (await self.reply(1))["result"]["serverInfo"]["name"] == "mcpx"
        await self.send(INITIALIZED)

    async def end(self) -> int:
        """Close its input, as a host does: it exits, with its status."""
        self.stdin.close()
        return await asyncio.wait_for(self.proc.wait(), PATIENCE)

    def pipes(self) -> set[str]:
        return {os.readlink(f"/proc/{self.proc.pid}/fd/{fd}") for fd in (0, 1)}


@asynccontextmanager
async def serve(d: Daemon, env: dict[str, str] | None = None) -> AsyncIterator[Serve]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mcpx", "serve", stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                                env={**d.env, **(env or {})}, cwd=d.home, limit=1 << 24)
    try:
        yield Serve(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def held_by(pid: int) -> set[str]:
    """What the process's descriptors point at ("pipe:[123]", …)."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue  # one closed while we looked
    return out


def read_line(stream: IO[bytes]) -> bytes:
    """The next line, read on a thread so that the wait for it is bounded."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(PATIENCE)
    assert got and got[0], "mcpx serve said nothing"
    return got[0]


def daemon_pid(d: Daemon) -> int:
    return int(json.loads((d.home / "daemon.json").read_text())["pid"])


async def test_serve_hands_its_stdin_and_stdout_to_the_daemon_and_exits_0_at_their_end(sdk: Daemon) -> None:
    async with serve(sdk) as s:
        await s.start()
        assert s.pipes() <= held_by(sdk.pid)  # the host's own pipes, in the daemon
        await s.send(call(2, "sdk_echo", {"text": "direct"}))
        assert (await s.reply(2))["result"]["content"][0]["text"] == "echo: direct"
        await s.send(call(3, "sdk_echo", {"text": "last"}))  # still unanswered as the input ends: answered first
        assert await s.end() == 0
        assert (await s.reply(3))["result"]["content"][0]["text"] == "echo: last"


@pytest.mark.parametrize("why", ["tcp", "no hand-off socket"])
async def test_serve_pumps_through_the_websocket_to_a_daemon_over_tcp_or_one_without_hand_off(
        sdk: Daemon, why: str) -> None:
    env: dict[str, str] = {}
    if why == "tcp":
        env["MCPX_DAEMON_URL"] = f"http://{sdk.listen}"
    else:
        (sdk.home / "serve.sock").unlink()  # what a daemon from before the hand-off looks like
    async with serve(sdk, env) as s:
        await s.start()
        assert not s.pipes() & held_by(sdk.pid)  # serve pumps them itself
        await s.send(call(2, "sdk_echo", {"text": "pumped"}))
        assert (await s.reply(2))["result"]["content"][0]["text"] == "echo: pumped"
        assert await s.end() == 0


async def test_a_daemon_that_stops_hands_its_client_back_with_the_line_it_had_begun(sdk: Daemon) -> None:
    async with serve(sdk) as s:
        await s.start()
        await s.send(call(2, "sdk_hold", {}, _meta={"progressToken": "p"}))
        progress = await s.next()
        assert progress["method"] == "notifications/progress", progress  # the call runs, and will not end by itself
        # one write: a whole request, then the start of the next one. Once the first is answered, the daemon has
        # read the half line too (a pipe write this small is read whole)
        whole = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}).encode() + b"\n"
        half = json.dumps(call(4, "sdk_echo", {"text": "in two halves"})).encode()
        await s.write(whole + half[:40])
        assert (await s.reply(3))["result"] == {}
        old = sdk.pid
        os.kill(old, signal.SIGTERM)  # the daemon stops: what it holds goes back to serve, which starts another
        assert await asyncio.to_thread(sdk.proc.wait, PATIENCE) == 0  # type: ignore[union-attr]
        await s.write(half[40:] + b"\n")
        gone = await s.reply(2)
        assert "send it again" in gone["error"]["message"], gone
        assert (await s.reply(4))["result"]["content"][0]["text"] == "echo: in two halves"
        assert daemon_pid(sdk) != old and s.pipes() <= held_by(daemon_pid(sdk))
        assert await s.end() == 0


async def test_a_daemon_killed_mid_call_leaves_serve_to_answer_what_it_was_told_of(sdk: Daemon) -> None:
    async with serve(sdk) as s:
        await s.start()
        await s.send(call(2, "sdk_hold", {}, _meta={"progressToken": "p"}))
        assert (await s.next())["method"] == "notifications/progress"
        # a call that takes longer than WAITING_AFTER, read after the held one: once it is answered, the daemon has
        # named the held one to serve (its timer came due first)
        await s.send(call(3, "sdk_sleepy", {"seconds": 2 * WAITING_AFTER}))
        assert (await s.reply(3))["result"]["content"][0]["text"] == f"slept {2 * WAITING_AFTER}"
        sdk.kill9()
        gone = await s.reply(2)
        assert gone["error"]["code"] == -32603 and "send it again" in gone["error"]["message"], gone
        # serve started a daemon, handed the pipes over again with the client's handshake, and goes on
        await s.send(call(5, "sdk_echo", {"text": "after"}))
        assert (await s.reply(5))["result"]["content"][0]["text"] == "echo: after"
        assert s.pipes() <= held_by(daemon_pid(sdk))
        assert await s.end() == 0
    # the fixture stops the daemon mcpx serve started (Daemon.stop stops whichever daemon.json names)


def test_a_host_that_dies_mid_call_ends_its_serve_and_the_call_goes_on(sdk: Daemon) -> None:
    """Its host gone (both pipes closed, serve not signalled): the daemon lets go at once instead of waiting for the
    call to be answered to nobody, serve exits, and the call goes on in the daemon."""
    proc = subprocess.Popen([sys.executable, "-m", "mcpx", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=sdk.env, cwd=sdk.home)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for msg in (INIT, INITIALIZED, call(2, "sdk_hold", {}, _meta={"progressToken": "p"})):
            proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
        lines = [json.loads(read_line(proc.stdout)) for _ in range(2)]
        assert lines[0]["id"] == 1 and lines[1]["method"] == "notifications/progress", lines
        proc.stdin.close()
        proc.stdout.close()
        # well within the 60 s an answer is waited for at the end of input, while someone reads
        assert proc.wait(DRAIN_LIMIT / 3) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "went away; the call goes on" in read_log(sdk.home)


@pytest.mark.parametrize("how", ["hand-off", "tcp", "no hand-off socket"])
async def test_serve_for_a_server_no_daemon_knows_says_so_and_exits_2(sdk: Daemon, how: str) -> None:
    """Whichever way serve reaches the daemon, and with the host's input still open: asking again makes no server."""
    env = dict(sdk.env)
    if how == "tcp":
        env["MCPX_DAEMON_URL"] = f"http://{sdk.listen}"
    elif how == "no hand-off socket":
        (sdk.home / "serve.sock").unlink()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mcpx", "serve", "--server", "nosuch",
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,  # pipes can be handed
                                                stderr=subprocess.PIPE, env=env, cwd=sdk.home)
    assert proc.stderr is not None
    try:
        err = await asyncio.wait_for(proc.stderr.read(), PATIENCE)  # all it says, until it exits
        assert await asyncio.wait_for(proc.wait(), PATIENCE) == 2, err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert b"no server 'nosuch' behind mcpx" in err, err
