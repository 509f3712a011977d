"""Legacy-era upstreams (mid-call elicitation/create) written with the mcp SDK and FastMCP, behind a real daemon.

Every question is answered from one surface or another, and the upstream must receive exactly that answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import EventStream, audited, daemon_of, events, loud_skip, past
from gateway_helpers import (
    EVERYTHING,
    HttpPeer,
    answer,
    call,
    node_available,
    result,
    stdio,
    tool_text,
    until_health,
    until_pending,
)
from harness import PATIENCE, Daemon, make_daemon, read_log


@pytest.fixture
def gw(request: pytest.FixtureRequest, home: Path) -> Iterator[Daemon]:
    """The daemon with four legacy servers: the module's, for the tests marked `shared_daemon` (each looks only at
    its own calls and questions, and leaves no server changed)."""
    with daemon_of(request, home, {"servers": {
        "sdk": stdio("sdk_server.py"),
        "fm": stdio("fastmcp_server.py"),
        "short": stdio("sdk_server.py", elicit={"ttl": "1s"}),
        "tight": stdio("sdk_server.py", timeout=2),
    }}) as d:
        yield d


@pytest.fixture
async def http(gw: Daemon) -> AsyncIterator[aiohttp.ClientSession]:
    async with gw.session() as s:
        yield s


@pytest.mark.shared_daemon
async def test_a_question_carries_server_tool_session_trace_and_task(http: aiohttp.ClientSession) -> None:
    status, body, headers = await call(http, "sdk", "need_repo", session="s-1")
    assert status == 202, body
    q = body["elicitation"]
    assert (q["server"], q["tool"], q["session"], q["sessionSource"]) == ("sdk", "need_repo", "s-1", "argument")
    assert q["trace"] == body["trace"] and q["task"] == body["task"] and q["trace"].startswith("cal-")
    assert q["respondWith"].startswith(f"mcpx elicit answer {q['id']} ")
    assert headers["Location"] == f"/v1/elicit/{q['id']}" and 100 <= int(headers["Retry-After"]) <= 120
    assert len(body["elicitations"]) == 1
    status, _ = await answer(http, q["id"], "accept", {"repo": "octo/hello"})
    assert status == 200
    done = await result(http, body["task"])
    assert done["state"] == "completed" and done["era"] == "legacy"
    assert tool_text(done) == {"action": "accept", "data": {"repo": "octo/hello"}}
    await audited(http, "task.done", trace=body["trace"])  # it commits just behind the result
    async with http.get("/v1/audit", params={"trace": body["trace"]}) as r:
        kinds = [rec["kind"] for rec in (await r.json())["records"]]
    assert kinds == ["elicit.open", "elicit.answered", "elicit.resumed", "task.done"]


async def test_the_server_has_the_answer_before_it_commits_and_the_answerer_after(
        http: aiohttp.ClientSession, home: Path) -> None:
    """Issue 14: no commit sits between an answer and a legacy server. Another process holds the database's write
    lock, so the answer cannot commit: the server gets it all the same and the call completes, while whoever
    answered hears back only once the lock is let go and the answer is stored."""
    _, body, _ = await call(http, "sdk", "need_repo")
    q = body["elicitation"]
    db = sqlite3.connect(home / "mcpx.db", isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")  # the daemon's batches wait for it on the store's thread (5 s at most)
        answering = asyncio.ensure_future(answer(http, q["id"], "accept", {"repo": "octo/hello"}))
        done = await result(http, body["task"], timeout=4)
        assert tool_text(done) == {"action": "accept", "data": {"repo": "octo/hello"}}
        assert not answering.done()
        assert db.execute("SELECT state FROM elicitations WHERE id=?", (q["id"],)).fetchone() == ("pending",)
    finally:
        db.execute("COMMIT")
        db.close()
    status, _ = await asyncio.wait_for(answering, PATIENCE)
    assert status == 200
    await audited(http, "task.done", trace=body["trace"])
    async with http.get("/v1/audit", params={"trace": body["trace"]}) as r:
        kinds = [rec["kind"] for rec in (await r.json())["records"]]
    assert kinds == ["elicit.open", "elicit.answered", "elicit.resumed", "task.done"]


@pytest.mark.shared_daemon
async def test_decline_cancel_and_expiry_reach_the_server_as_they_are(http: aiohttp.ClientSession) -> None:
    outcomes = {}
    for action in ("decline", "cancel"):
        _, body, _ = await call(http, "sdk", "need_repo")
        await answer(http, body["elicitation"]["id"], action)
        outcomes[action] = tool_text(await result(http, body["task"]))["action"]
    _, body, _ = await call(http, "short", "need_repo")
    expired = tool_text(await result(http, body["task"]))
    assert outcomes == {"decline": "decline", "cancel": "cancel"}
    assert expired["action"] == "cancel"  # expiry is "nobody chose", never "no"
    async with http.get(f"/v1/elicit/{body['elicitation']['id']}") as r:
        q = await r.json()
    assert q["elicitation"]["state"] == "expired" and q["answer"]["by"] == "expiry"


@pytest.mark.shared_daemon
async def test_multi_field_form_answered_from_the_cli_with_typed_values(gw: Daemon,
                                                                      http: aiohttp.ClientSession) -> None:
    _, body, _ = await call(http, "sdk", "file_issue")
    q = body["elicitation"]
    assert set(q["requestedSchema"]["properties"]) == {"title", "count", "color", "notify"}
    bad = await asyncio.to_thread(gw.cli, "elicit", "answer", q["id"], "title=ab", "count=11")
    assert bad.returncode == 65 and "title" in bad.stderr and "count" in bad.stderr  # 65: it does not fit
    ok = await asyncio.to_thread(gw.cli, "elicit", "answer", q["id"], "title=Broken build", "count=3", "color=green")
    assert ok.returncode == 0, ok.stderr
    got = tool_text(await result(http, body["task"]))
    assert got == {"action": "accept", "data": {"title": "Broken build", "count": 3, "color": "green", "notify": True}}


@pytest.mark.shared_daemon
async def test_a_server_that_asks_twice_gets_both_answers(http: aiohttp.ClientSession) -> None:
    _, body, _ = await call(http, "sdk", "ask_twice")
    await answer(http, body["elicitation"]["id"], "accept", {"repo": "a/b"})
    second = (await until_pending(http, 1, trace=body["trace"]))[0]
    assert second["message"] == "Second: really delete?" and second["trace"] == body["trace"]
    await answer(http, second["id"], "decline")
    got = tool_text(await result(http, body["task"]))
    assert got == [{"action": "accept", "data": {"repo": "a/b"}}, {"action": "decline", "data": None}]


@pytest.mark.shared_daemon
async def test_url_mode_is_for_the_person_and_completion_answers_it_as_upstream(http: aiohttp.ClientSession) -> None:
    _, body, _ = await call(http, "sdk", "login")
    q = body["elicitation"]
    assert q["mode"] == "url" and q["url"] == "https://example.com/login?x=1" and q["upstreamId"] == "login-42"
    assert q["audience"] == "human" and "requestedSchema" not in q
    await answer(http, q["id"], "accept")
    assert tool_text(await result(http, body["task"])) == {"action": "accept"}

    # the server reports completion by itself: later, or right behind its request, before mcpx has even
    # finished opening the question (the completion must not be lost then: the call would wait for nothing)
    for after in (0.3, 0, 0, 0):
        status, body, _ = await call(http, "sdk", "login", {"complete_after": after})
        assert status in (200, 202)
        done = await result(http, body["task"])
        assert tool_text(done) == {"action": "accept"}
        async with http.get("/v1/elicit", params={"task": body["task"], "state": "all"}) as r:
            (q,) = (await r.json())["elicitations"]
        async with http.get(f"/v1/elicit/{q['id']}") as r:
            ans = (await r.json())["answer"]
        assert ans["by"] == "upstream" and ans["action"] == "accept"


@pytest.mark.shared_daemon
async def test_fastmcp_questions_answered_by_whichever_surface_comes_first(gw: Daemon,
                                                                         http: aiohttp.ClientSession) -> None:
    """CLI, REST and SSE-driven code race for each question; exactly one wins and the server gets that one."""
    async def sse_answerer(stream: EventStream, values: dict[str, object]) -> None:
        while True:
            rec = (await stream.frames(1, timeout=PATIENCE * 2))[0]["data"]
            if rec["data"]["tool"] in values:
                await answer(http, rec["elicit"], "accept", values[rec["data"]["tool"]])

    values: dict[str, object] = {"ask_name": {"value": "sse-ann"}, "pick_color": {"value": "blue"},
                                 "ask_person": {"name": "sse-bo", "age": 7}, "really": {"value": True}}
    async with events(http, kinds="elicit.open") as stream:  # listening before the first call
        listener = asyncio.create_task(sse_answerer(stream, values))
        try:
            received = {}
            for tool in values:
                status, body, _ = await call(http, "fm", tool)
                if status == 202:
                    q = body["elicitation"]
                    assert q is not None, body
                    rest = await answer(http, q["id"], "accept", values[tool])
                    cli = await asyncio.to_thread(gw.cli, "elicit", "answer", q["id"], json.dumps(values[tool]))
                    wins = [rest[0] == 200, cli.returncode == 0]
                    assert wins.count(True) <= 1
                else:
                    assert status == 200  # the SSE answerer won before the call returned
                    body = {"task": body["task"]}
                done = await result(http, body["task"])
                received[tool] = tool_text(done)
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
    assert received["ask_name"] == {"action": "accept", "data": "sse-ann"}
    assert received["pick_color"] == {"action": "accept", "data": "blue"}
    assert received["ask_person"] == {"action": "accept", "data": {"name": "sse-bo", "age": 7}}
    assert received["really"] == {"action": "accept", "data": True}


@pytest.mark.shared_daemon
async def test_the_call_timeout_stands_still_while_a_question_waits(http: aiohttp.ClientSession) -> None:
    # warm up: the era is learned and a legacy instance is running, so only the tool's own time counts below
    status, body, _ = await call(http, "tight", "slow_ask")
    assert status == 202, body
    await answer(http, body["elicitation"]["id"], "accept", {"repo": "warm/up"})
    await result(http, body["task"])

    status, body, _ = await call(http, "tight", "slow_ask")
    assert status == 202, body
    # a person thinks well past the 2 s call timeout, counted from when the question opened
    await past(datetime.fromisoformat(body["elicitation"]["created"]).timestamp() + 3.5)
    await answer(http, body["elicitation"]["id"], "accept", {"repo": "slow/thinker"})
    assert tool_text(await result(http, body["task"]))["data"] == {"repo": "slow/thinker"}
    status, body, _ = await call(http, "tight", "sleepy", {"seconds": 4})
    assert status == 502 and "timeout of 2s" in body["error"]["message"]


async def test_upstream_death_abandons_the_question_and_names_it(http: aiohttp.ClientSession, home: Path) -> None:
    status, body, _ = await call(http, "sdk", "die_while_asking")
    assert status == 202
    eid = body["elicitation"]["id"]
    opened = await audited(http, "elicit.open", elicit=eid)  # its pid is the upstream's
    os.kill(opened["pid"], signal.SIGUSR1)  # the server dies while its question is open
    done = await result(http, body["task"])
    assert done["state"] == "failed"
    assert "'sdk'" in done["error"] and eid in done["error"] and "code 3" in done["error"]
    status, gone = await answer(http, eid, "accept", {"repo": "too/late"})
    assert status == 410 and "abandoned" in gone["error"]["message"] and "'sdk'" in gone["error"]["message"]
    # the next call gets a fresh instance
    status, body, _ = await call(http, "sdk", "echo", {"text": "again"})
    assert status == 200 and body["result"]["content"][0]["text"] == "echo: again"


@pytest.mark.shared_daemon
async def test_each_session_gets_its_own_instance_so_questions_are_never_misattributed(
        http: aiohttp.ClientSession) -> None:
    (sa, a, _), (sb, b, _) = await asyncio.gather(call(http, "sdk", "need_repo", session="alice"),
                                                  call(http, "sdk", "need_repo", session="bob"))
    assert sa == sb == 202
    assert a["elicitation"]["session"] == "alice" and b["elicitation"]["session"] == "bob"
    assert a["elicitation"]["task"] == a["task"] and b["elicitation"]["task"] == b["task"]
    await answer(http, b["elicitation"]["id"], "accept", {"repo": "bob/repo"})
    await answer(http, a["elicitation"]["id"], "accept", {"repo": "alice/repo"})
    assert tool_text(await result(http, a["task"]))["data"] == {"repo": "alice/repo"}
    assert tool_text(await result(http, b["task"]))["data"] == {"repo": "bob/repo"}
    pids = set()
    for session in ("alice", "bob"):
        _, body, _ = await call(http, "sdk", "pid", session=session)
        pids.add(body["result"]["content"][0]["text"])
    assert len(pids) == 2


@pytest.mark.shared_daemon
async def test_roots_are_the_callers_directory(http: aiohttp.ClientSession, tmp_path: Path) -> None:
    async with http.post("/v1/call/sdk/roots", json={"arguments": {}}, headers={"X-Mcpx-Cwd": str(tmp_path)}) as r:
        body = await r.json()
    assert json.loads(body["result"]["content"][0]["text"]) == [tmp_path.as_uri()]


async def test_a_servers_roots_are_its_callers_a_fixed_list_or_none_and_only_the_callers_split_instances(
        home: Path, tmp_path: Path) -> None:
    notes, here, there = (tmp_path / name for name in ("notes", "here", "there"))
    for directory in (notes, here, there):
        directory.mkdir()
    servers = {"mine": stdio("sdk_legacy.py"), "notes": stdio("sdk_legacy.py", roots=[str(notes)]),
               "none": stdio("sdk_legacy.py", roots=False)}
    with make_daemon(home, {"servers": servers}) as d:
        async with d.session() as http:
            async def roots(server: str, cwd: Path, session: str, tool: str = "roots") -> Any:
                async with http.post(f"/v1/call/{server}/{tool}", json={"arguments": {}, "session": session},
                                     headers={"X-Mcpx-Cwd": str(cwd)}) as r:
                    body = await r.json()
                    assert r.status == 200, body
                return body["result"]

            for cwd, session in ((here, "in-here"), (there, "in-there")):  # two sessions in two directories
                assert json.loads((await roots("mine", cwd, session))["content"][0]["text"]) == [cwd.as_uri()]
                assert json.loads((await roots("notes", cwd, session))["content"][0]["text"]) == [notes.as_uri()]
                # none: roots are not declared to it (and a server that asks anyway hears of none)
                assert json.loads((await roots("none", cwd, session))["content"][0]["text"]) == []
                declared = [json.loads((await roots(server, cwd, session, "declared"))["content"][0]["text"])
                            for server in ("mine", "none")]
                assert "roots" in declared[0] and "roots" not in declared[1] and "elicitation" in declared[1], declared
            async with http.get("/v1/upstreams") as r:
                running = (await r.json())["instances"]
        by_server = {name: [i for i in running if i["server"] == name] for name in servers}
        # the caller's roots: each session has its own; a fixed list or none: one instance every session shares
        assert len(by_server["mine"]) == 2 and not any(i["shared"] for i in by_server["mine"]), running
        assert [i["shared"] for i in by_server["notes"] + by_server["none"]] == [True, True], running
        d.write_config({"servers": {**servers, "notes": {**servers["notes"], "roots": "cwd"},
                                    "none": {**servers["none"], "roots": ["relative/dir"]}}})
        checked = d.cli("config", "check")
        assert checked.returncode != 0, checked
        assert 'servers.notes.roots: must be "caller"' in checked.stdout + checked.stderr, checked
        assert "servers.none.roots: 'relative/dir' is not an absolute directory" in checked.stdout + checked.stderr


async def test_legacy_over_streamable_http(home: Path) -> None:
    with HttpPeer("sdk_server.py") as peer, make_daemon(home, {"servers": {"web": {"url": peer.url}}}) as d:
        async with d.session() as http:
            status, body, _ = await call(http, "web", "need_repo")
            assert status == 202, body
            await answer(http, body["elicitation"]["id"], "accept", {"repo": "over/http"})
            done = await result(http, body["task"])
            assert done["era"] == "legacy" and tool_text(done)["data"] == {"repo": "over/http"}


async def test_a_server_that_cannot_start_is_reported_with_command_and_stderr(home: Path) -> None:
    d = make_daemon(home, {"servers": {
        "missing": {"command": "/nonexistent/mcp-server", "args": ["--x"]},
        "crashy": {"command": "python3",
                   "args": ["-c", "import sys; print('boom: no config', file=sys.stderr); sys.exit(4)"]},
    }})
    d.start()
    try:
        async with d.session() as http:
            status, body, _ = await call(http, "missing", "anything")
            assert status == 502 and "/nonexistent/mcp-server --x" in body["error"]["message"]
            status, body, _ = await call(http, "crashy", "anything")
            msg = body["error"]["message"]
            assert status == 502 and "code 4" in msg and "boom: no config" in msg and "python3 -c" in msg
            status, body, _ = await call(http, "nope", "anything")
            assert status == 404 and "no server 'nope'" in body["error"]["message"]
            async with http.get("/v1/tools") as r:
                tools = (await r.json())["servers"]
            assert "boom: no config" in tools["crashy"]
    finally:
        d.stop()


async def test_servers_are_added_and_removed_when_the_config_changes(home: Path) -> None:
    d = make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}})
    d.start()
    try:
        async with d.session() as http:
            d.write_config({"servers": {"sdk": stdio("sdk_server.py"), "extra": stdio("sdk_resolver.py")}})
            await until_health(http, lambda h: "extra" in h["servers"])
            status, body, _ = await call(http, "extra", "echo", {"text": "hi"})
            assert status == 200 and body["result"]["content"][0]["text"] == "echo: hi"
            d.write_config({"servers": {"extra": stdio("sdk_resolver.py")}})
            await until_health(http, lambda h: "sdk" not in h["servers"])
            status, body, _ = await call(http, "sdk", "echo")
            assert status == 404
            d.write_config({"servers": {"extra": {"comand": "typo"}}})
            health = await until_health(http, lambda h: bool(h.get("configError")))
            assert "servers.extra" in health["configError"] and health["servers"] == ["extra"]
    finally:
        d.stop()
    assert "config reload refused" in read_log(home)


async def test_server_everything_over_stdio_with_node(home: Path) -> None:
    if not node_available():
        loud_skip(f"{EVERYTHING} or node is missing; run ./dev test")
    d = make_daemon(home, {"servers": {"everything": {"command": "node", "args": [str(EVERYTHING), "stdio"]}}})
    d.start()
    try:
        async with d.session() as http:
            async with http.get("/v1/tools/everything") as r:
                names = [t["name"] for t in (await r.json())["servers"]["everything"]]
            assert "trigger-elicitation-request" in names  # listed only for a client that declared elicitation
            status, body, _ = await call(http, "everything", "trigger-elicitation-request")
            assert status == 202, body
            q = body["elicitation"]
            props = q["requestedSchema"]["properties"]
            assert len(props) >= 10
            status, opened = await answer(http, q["id"], "accept", {})
            assert status in (200, 422)
            content = {}
            if status == 422:
                from mcpx.broker.schema import example_content

                content = example_content(q["requestedSchema"])
                for name, prop in props.items():
                    if prop.get("format") == "email":
                        content[name] = "ann@example.com"
                    elif prop.get("format") == "uri":
                        content[name] = "https://example.com"
                    elif prop.get("format") == "date":
                        content[name] = "2026-12-02"
                    elif prop.get("format") == "date-time":
                        content[name] = "2026-12-02T10:00:00Z"
                    elif (prop.get("type") == "string" and "enum" not in prop and "oneOf" not in prop
                          and name in content):
                        content[name] = "x" * max(1, prop.get("minLength", 1))
                status, opened = await answer(http, q["id"], "accept", content)
                assert status == 200, opened
            done = await result(http, body["task"])
            text = " ".join(c.get("text", "") for c in done["result"]["content"])
            assert "accept" in text.lower()
    finally:
        d.stop()
