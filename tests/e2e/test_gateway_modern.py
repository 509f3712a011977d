"""Modern-era (2026-07-28) upstreams: input_required, retries with inputResponses and requestState, restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import audited, daemon_of, events
from gateway_helpers import HttpPeer, answer, call, result, stdio, tool_text, until_pending
from harness import Daemon, make_daemon

pytestmark = pytest.mark.stores  # the store and broker suite: on SQLite and on PostgreSQL


@pytest.fixture
def gw(request: pytest.FixtureRequest, home: Path) -> Iterator[Daemon]:
    with daemon_of(request, home, {"servers": {
        "res": stdio("sdk_resolver.py"),
        "sdk": stdio("sdk_server.py"),
        "endless": stdio("endless_asker.py"),
    }, "elicit": {"maxRounds": 3}}) as d:
        yield d


@pytest.fixture
async def http(gw: Daemon) -> AsyncIterator[aiohttp.ClientSession]:
    async with gw.session() as s:
        yield s


@pytest.mark.shared_daemon
async def test_input_required_becomes_a_question_and_the_retry_completes(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(http, "res", "need_repo", session="m1")
    assert status == 202, body
    q = body["elicitation"]
    assert q["server"] == "res" and q["session"] == "m1" and q["trace"] == body["trace"]
    assert q["requestedSchema"]["properties"]["repo"]["type"] == "string"
    await answer(http, q["id"], "accept", {"repo": "modern/repo"})
    done = await result(http, body["task"])
    assert done["state"] == "completed" and done["era"] == "modern"
    assert tool_text(done) == {"action": "accept", "data": {"repo": "modern/repo"}}
    await audited(http, "task.done", trace=body["trace"])  # it commits just behind the result
    async with http.get("/v1/audit", params={"trace": body["trace"]}) as r:
        kinds = [rec["kind"] for rec in (await r.json())["records"]]
    assert kinds == ["elicit.open", "elicit.answered", "elicit.resumed", "task.done"]


@pytest.mark.shared_daemon
async def test_decline_and_cancel_reach_a_modern_server_unchanged(http: aiohttp.ClientSession) -> None:
    for action in ("decline", "cancel"):
        _, body, _ = await call(http, "res", "need_repo")
        await answer(http, body["elicitation"]["id"], action)
        assert tool_text(await result(http, body["task"]))["action"] == action


async def answer_each_question(http: aiohttp.ClientSession, server: str, tool: str, session: str,
                               content: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Call the tool and answer each question it opens as it opens, until the call ends: (how many, its end)."""
    answered = 0
    async with events(http, session=session, kinds="elicit.open,task.done") as stream:
        status, body, _ = await call(http, server, tool, session=session)
        assert status == 202, body
        while True:
            rec = await stream.until(lambda r: r["task"] == body["task"])
            if rec["kind"] == "task.done":
                return answered, await result(http, body["task"])
            async with http.get(f"/v1/elicit/{rec['elicit']}") as r:
                q = (await r.json())["elicitation"]
            status, _ = await answer(http, q["id"], "accept", content(q))
            assert status == 200
            answered += 1


@pytest.mark.shared_daemon
async def test_several_questions_of_one_call_are_all_answered(http: aiohttp.ClientSession) -> None:
    answered, done = await answer_each_question(
        http, "res", "two_questions", "two-q",
        lambda q: {"repo": "x/y"} if "repo" in q["requestedSchema"]["properties"] else {"region": "eu-west"})
    assert answered == 2
    assert tool_text(done) == [{"action": "accept", "data": {"repo": "x/y"}},
                               {"action": "accept", "data": {"region": "eu-west"}}]


@pytest.mark.shared_daemon
async def test_a_server_that_keeps_asking_is_stopped_after_max_rounds(http: aiohttp.ClientSession) -> None:
    answered, done = await answer_each_question(http, "endless", "forever", "endless", lambda q: {"c": "r"})
    assert answered == 3 and done["state"] == "failed"
    assert "kept asking" in done["error"] and "3 rounds" in done["error"] and "maxRounds" in done["error"]


async def test_modern_over_streamable_http(home: Path) -> None:
    with HttpPeer("sdk_resolver.py") as peer, make_daemon(home, {"servers": {"web": {"url": peer.url}}}) as d:
        async with d.session() as http:
            status, body, _ = await call(http, "web", "need_repo")
            assert status == 202, body
            await answer(http, body["elicitation"]["id"], "accept", {"repo": "modern/http"})
            done = await result(http, body["task"])
            assert done["era"] == "modern" and tool_text(done)["data"] == {"repo": "modern/http"}


@pytest.mark.parametrize("how", ["kill9", "sigterm"])
async def test_a_modern_question_survives_a_daemon_restart(home: Path, how: str) -> None:
    forgetful = stdio("sdk_resolver.py", env={"RESOLVER_KEY": "ephemeral"})  # its key is drawn at each start
    with make_daemon(home, {"servers": {"res": stdio("sdk_resolver.py"), "sdk": stdio("sdk_server.py"),
                                        "forgetful": forgetful}}) as d:
        async with d.session() as http:
            status, modern, _ = await call(http, "res", "need_repo", session="r1")
            assert status == 202
            status, legacy, _ = await call(http, "sdk", "need_repo", session="r1")
            assert status == 202
            status, forgotten, _ = await call(http, "forgetful", "need_repo", session="r1")
            assert status == 202
        if how == "kill9":
            d.kill9()
        else:
            assert d.stop() == 0
        d.restart()
        async with d.session() as http:
            async with http.get(f"/v1/elicit/{modern['elicitation']['id']}") as r:
                assert (await r.json())["elicitation"]["state"] == "pending"
            status, _ = await answer(http, modern["elicitation"]["id"], "accept", {"repo": "after/restart"})
            assert status == 200
            done = await result(http, modern["task"])
            assert done["state"] == "completed", done
            assert tool_text(done) == {"action": "accept", "data": {"repo": "after/restart"}}
            # a legacy call lived in its server process: it is honestly lost, and says why
            async with http.get(f"/v1/tasks/{legacy['task']}") as r:
                lost = await r.json()
            assert lost["state"] == "failed" and ("restarted" in lost["error"] or "stopped" in lost["error"])
            status, _ = await answer(http, legacy["elicitation"]["id"], "accept", {"repo": "x/y"})
            assert status == 410
            # a server that forgot the call across the restart refuses its re-driven requestState: the task says
            # so in words, and what to do, not as a bare -32602 (issue 35, 1)
            status, _ = await answer(http, forgotten["elicitation"]["id"], "accept", {"repo": "x/y"})
            assert status == 200
            refused = await result(http, forgotten["task"])
            assert refused["state"] == "failed", refused
            error = refused["error"]
            assert error.startswith("server 'forgetful' no longer knows this call of need_repo"), error
            assert "Run the call again" in error and forgotten["elicitation"]["id"] in error, error


async def test_calls_that_never_ask_are_recorded_behind_their_results_and_a_stop_keeps_every_record(
        home: Path) -> None:
    with make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}}) as d:
        async with d.session() as http:
            async with events(http, session="plain", kinds="task.done") as stream:
                tasks = []
                for i in range(12):
                    status, body, _ = await call(http, "sdk", "echo", {"text": f"t{i}"}, session="plain")
                    assert status == 200 and body["result"]["content"][0]["text"] == f"echo: t{i}", body
                    tasks.append(body["task"])
                    async with http.get(f"/v1/tasks/{body['task']}") as r:  # in memory, whether written yet or not
                        assert r.status == 200 and (await r.json())["state"] == "completed"
                # each call's end is in the log, in the order the calls ended, though they share commits
                seen = [(await stream.until(lambda rec: rec["task"] in tasks))["task"] for _ in tasks]
            assert seen == tasks
            status, last, _ = await call(http, "sdk", "echo", {"text": "last"}, session="plain")
            assert status == 200
        assert d.stop() == 0  # at once: its end may still be waiting for company; a clean stop commits it
        d.restart()
        async with d.session() as http:
            async with http.get(f"/v1/tasks/{last['task']}") as r:  # from the store: the new daemon never ran it
                stored = await r.json()
            assert r.status == 200 and stored["state"] == "completed", stored
            assert stored["result"]["content"][0]["text"] == "echo: last"
            await audited(http, "task.done", task=last["task"])


async def test_the_demo_server_asks_in_both_eras(home: Path) -> None:
    import sys
    d = make_daemon(home, {"servers": {"demo": {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"]}}})
    d.start()
    try:
        async with d.session() as http:
            async with http.get("/v1/tools/demo") as r:
                names = {t["name"] for t in (await r.json())["servers"]["demo"]}
            assert names == {"choose_repository", "delete_branch", "login", "create_issue", "deploy"}
            status, body, _ = await call(http, "demo", "deploy")
            assert status == 202 and body["elicitation"]["requestedSchema"]["properties"]["environment"]["enum"]
            await answer(http, body["elicitation"]["id"], "accept", {"environment": "staging"})
            second = await until_pending(http, 1, trace=body["trace"])
            assert second[0]["audience"] == "human" and "staging" in second[0]["message"]
            await answer(http, second[0]["id"], "accept", {"confirm": True})
            done = await result(http, body["task"])
            assert "deploying to staging" in done["result"]["content"][0]["text"] and done["era"] == "modern"
            status, body, _ = await call(http, "demo", "login")
            assert body["elicitation"]["mode"] == "url" and body["elicitation"]["audience"] == "human"
            await answer(http, body["elicitation"]["id"], "decline")
            assert "said no" in (await result(http, body["task"]))["result"]["content"][0]["text"]
    finally:
        d.stop()


@pytest.mark.shared_daemon
async def test_a_policy_error_fails_a_modern_call_naming_its_question(http: aiohttp.ClientSession) -> None:
    """elicit mode error on a modern call: the call fails loudly, its question named, the question abandoned."""
    status, body, _ = await call(http, "res", "need_repo", elicit="error")
    assert status == 502, body
    message = body["error"]["message"]
    assert "res.need_repo needed an answer to elc-" in message and "none may be given" in message, message
    eid = message.split("needed an answer to ")[1].split(" ")[0]
    async with http.get(f"/v1/elicit/{eid}") as r:
        assert (await r.json())["elicitation"]["state"] == "abandoned"
