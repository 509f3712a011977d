"""No one poses as the person by saying so: on the unix socket the daemon asks the kernel who is asking.

Real processes answer over the real socket: one started with opencode's mark (AGENT=1), one whose
parent carries it while its own environment is clean, and one with no mark at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import ask
from harness import Daemon, free_port, make_daemon

CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}

# A process that answers as the person over the unix socket with nothing but the standard library,
# claiming a pid of its own choosing; it prints its real pid, the status and the body.
ANSWER = r"""
import json, os, socket, sys
sock_path, eid = sys.argv[1], sys.argv[2]
body = json.dumps({"content": {"confirm": True}}).encode()
head = (f"POST /v1/elicit/{eid}/accept HTTP/1.1\r\nHost: mcpx\r\nContent-Type: application/json\r\n"
        f"X-Mcpx-Answerer: person:opencode\r\nX-Mcpx-Pid: 1\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n").encode()
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sock_path)
s.sendall(head + body)
data = b""
while chunk := s.recv(65536):
    data += chunk
status = int(data.split(b" ", 2)[1])
print(json.dumps({"pid": os.getpid(), "status": status, "body": json.loads(data.split(b"\r\n\r\n", 1)[1])}))
"""

# The same answer from a grandchild: this process (which carries whatever mark it was given)
# starts the answering one with a clean environment and waits for it.
VIA_CHILD = r"""
import subprocess, sys
done = subprocess.run([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], env={"PATH": "/usr/bin:/bin"},
                      capture_output=True, text=True, timeout=30)
sys.stdout.write(done.stdout); sys.stderr.write(done.stderr)
print(__import__("json").dumps({"parent": __import__("os").getpid()}))
"""


def clean_env(daemon: Daemon, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in daemon.env.items() if k not in ("AGENT", "OPENCODE", "CLAUDECODE")}
    return {**env, **extra}


def answer_from_child(daemon: Daemon, eid: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", ANSWER, str(daemon.socket), eid], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def answer_from_grandchild(daemon: Daemon, eid: str, env: dict[str, str]) -> tuple[dict[str, Any], int]:
    done = subprocess.run([sys.executable, "-c", VIA_CHILD, ANSWER, str(daemon.socket), eid], env=env,
                          capture_output=True, text=True, timeout=40)
    assert done.returncode == 0, done.stderr
    reply, parent = done.stdout.strip().splitlines()
    return json.loads(reply), json.loads(parent)["parent"]


async def pending(http: aiohttp.ClientSession, eid: str) -> bool:
    async with http.get(f"/v1/elicit/{eid}") as r:
        return (await r.json())["elicitation"]["state"] == "pending"


@pytest.mark.shared_daemon
async def test_an_agents_shell_cannot_answer_as_the_person(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Really delete branch main?", requestedSchema=CONFIRM)
    assert q["audience"] == "human"

    marked = answer_from_child(daemon, q["id"], clean_env(daemon, AGENT="1"))
    assert marked["status"] == 403, marked
    error = marked["body"]["error"]
    assert error["code"] == "agent_not_person" and "AGENT=1" in error["message"]
    assert error["markedPid"] == marked["pid"] == error["pid"]  # the kernel's pid, not the claimed 1
    assert await pending(http, q["id"])

    # a clean environment does not help while a parent carries the mark
    reply, parent = answer_from_grandchild(daemon, q["id"], clean_env(daemon, AGENT="1"))
    assert reply["status"] == 403, reply
    error = reply["body"]["error"]
    assert error["code"] == "agent_not_person" and "descends from" in error["message"]
    assert error["pid"] == reply["pid"] and error["markedPid"] == parent
    opencode = answer_from_child(daemon, q["id"], clean_env(daemon, OPENCODE="1"))
    assert opencode["status"] == 403 and "OPENCODE=1" in opencode["body"]["error"]["message"]
    claude = answer_from_child(daemon, q["id"], clean_env(daemon, CLAUDECODE="1"))  # Claude Code's Bash tool
    assert claude["status"] == 403 and "CLAUDECODE=1" in claude["body"]["error"]["message"]
    assert await pending(http, q["id"])

    unmarked = answer_from_child(daemon, q["id"], clean_env(daemon))
    assert unmarked["status"] == 200, unmarked
    answer = unmarked["body"]["answer"]
    assert answer["by"] == "person:opencode" and answer["pid"] == unmarked["pid"] != 1
    async with http.get("/v1/audit", params={"elicit": q["id"], "kinds": "elicit.answered"}) as r:
        (record,) = (await r.json())["records"]
    assert record["pid"] == unmarked["pid"]


@pytest.mark.shared_daemon
async def test_a_grandchild_of_an_unmarked_process_answers(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Really delete branch main?", requestedSchema=CONFIRM)
    reply, _parent = answer_from_grandchild(daemon, q["id"], clean_env(daemon))
    assert reply["status"] == 200 and reply["body"]["answer"]["pid"] == reply["pid"]


@pytest.mark.shared_daemon
async def test_the_cli_in_an_agents_shell_answers_as_the_agent(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    """The CLI sees the same marks, its parents' included, and says agent:cli rather than be refused."""
    q = await ask(http, message="Which region?",
                  requestedSchema={"type": "object",
                                   "properties": {"region": {"type": "string", "enum": ["eu", "us"]}}})
    assert q["audience"] == "agent"
    # the answering CLI's own environment is clean; the process that starts it carries AGENT=1
    shell = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", "import os, subprocess, sys; sys.exit(subprocess.run(sys.argv[1:], env="
         "{k: v for k, v in os.environ.items() if k != 'AGENT'}, timeout=50).returncode)",
         sys.executable, "-m", "mcpx", "elicit", "answer", q["id"], "region=eu", "--json"],
        env={**daemon.env, "AGENT": "1"}, capture_output=True, text=True, timeout=60, cwd=daemon.home)
    assert shell.returncode == 0, shell.stderr
    assert json.loads(shell.stdout)["answer"]["by"] == "agent:cli"


async def test_over_tcp_a_claimed_pid_is_not_recorded(home: Path) -> None:
    port = free_port()
    d = make_daemon(home, listen=f"127.0.0.1:{port}")
    d.start()
    try:
        auth = {"Authorization": f"Bearer {(home / 'token').read_text().strip()}"}
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", headers=auth) as http:
            q = await ask(http, message="Really delete branch main?", requestedSchema=CONFIRM)
            async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"confirm": True}},
                                 headers={"X-Mcpx-Pid": str(os.getpid())}) as r:
                body = await r.json()
                assert r.status == 200, body
            assert body["answer"]["by"] == "person:rest" and body["answer"].get("pid") is None
            async with http.get("/v1/audit", params={"elicit": q["id"], "kinds": "elicit.answered"}) as r:
                (record,) = (await r.json())["records"]
            assert "pid" not in record
    finally:
        d.stop()
