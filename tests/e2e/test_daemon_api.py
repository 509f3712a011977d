"""The /v1 API of a real daemon over its real unix socket: every status code the route table names."""

from __future__ import annotations

import asyncio
import json
import stat
from typing import Any

import aiohttp
import pytest

from conftest import ask, request_in_flight
from harness import PATIENCE, Daemon

pytestmark = pytest.mark.stores  # the store and broker suite: on SQLite and on PostgreSQL


@pytest.mark.shared_daemon
async def test_health_and_socket_mode(daemon: Daemon, http: aiohttp.ClientSession, store: str) -> None:
    async with http.get("/v1/health") as r:
        body = await r.json()
    assert r.status == 200 and body["ok"] is True and body["pid"] == daemon.proc.pid
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    if store == "sqlite":
        assert stat.S_IMODE((daemon.home / "mcpx.db").stat().st_mode) == 0o600
    else:
        assert not (daemon.home / "mcpx.db").exists()  # the questions live in PostgreSQL alone
    info = json.loads((daemon.home / "daemon.json").read_text())
    assert info["pid"] == daemon.proc.pid and info["socket"] == str(daemon.socket)


@pytest.mark.shared_daemon
async def test_open_get_answer_and_the_first_answer_stands(http: aiohttp.ClientSession) -> None:
    q = await ask(http, session="s1")
    assert q["id"].startswith("elc-") and len(q["id"]) == 20
    assert q["state"] == "pending" and q["session"] == "s1" and q["sessionSource"] == "argument"
    assert 118 <= q["secondsLeft"] <= 120
    async with http.get(f"/v1/elicit/{q['id']}") as r:
        got = await r.json()
    assert r.status == 200 and got["answer"] is None
    # the 201 is the stored document with its secondsLeft: the question as any later read shows it
    assert [k for k in q if k != "secondsLeft"] == [k for k in got["elicitation"] if k != "secondsLeft"]
    assert {**q, "secondsLeft": 0} == {**got["elicitation"], "secondsLeft": 0} and list(q)[-1] == "secondsLeft"
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "me/x"}}) as r:
        body = await r.json()
    assert r.status == 200 and body["answer"]["content"] == {"repo": "me/x"}
    assert body["answer"]["by"] == "person:rest" and body["elicitation"]["state"] == "answered"
    async with http.post(f"/v1/elicit/{q['id']}/decline", json={}) as r:
        body = await r.json()
    assert r.status == 409 and "already answered" in body["error"]["message"]
    assert "person:rest" in body["error"]["message"] and "accept" in body["error"]["message"]


@pytest.mark.shared_daemon
async def test_invalid_content_names_each_field_and_leaves_it_pending(http: aiohttp.ClientSession) -> None:
    q = await ask(http, requestedSchema={"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "maximum": 3}, "e": {"type": "string", "format": "email"}}})
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"n": 9, "e": "x"}}) as r:
        body = await r.json()
    assert r.status == 422
    assert set(body["error"]["fields"]) == {"n", "e"}
    async with http.get(f"/v1/elicit/{q['id']}") as r:
        assert (await r.json())["elicitation"]["state"] == "pending"


@pytest.mark.shared_daemon
async def test_unknown_question_is_404_and_path_like_ids_are_400(http: aiohttp.ClientSession) -> None:
    async with http.get("/v1/elicit/elc-0000000000000000") as r:
        assert r.status == 404 and "no question" in (await r.json())["error"]["message"]
    for bad in ("..%2F..%2Fetc%2Fpasswd", "elc-XYZ", "tsk-0123456789abcdef", "elc-0123456789abcdef0"):
        async with http.post(f"/v1/elicit/{bad}/accept", json={}) as r:
            body = await r.json()
            assert r.status == 400, bad
            assert "not a question id" in body["error"]["message"]


@pytest.mark.shared_daemon
async def test_bad_input_is_a_named_4xx_and_never_touches_questions(http: aiohttp.ClientSession) -> None:
    q = await ask(http)
    cases = [
        ("POST", f"/v1/elicit/{q['id']}/frobnicate", b"{}", 400, "unknown action 'frobnicate'"),
        ("POST", f"/v1/elicit/{q['id']}/accept", b"not json", 400, "not JSON"),
        ("POST", f"/v1/elicit/{q['id']}/accept", b"[1,2]", 400, "JSON object"),
        ("POST", f"/v1/elicit/{q['id']}/accept", b'{"content": "x"}', 400, "content"),
        ("POST", f"/v1/elicit/{q['id']}/accept", b'{"contnet": {}}', 400, "contnet"),
        ("POST", "/v1/elicit", b'{"message": 5}', 400, "message"),
        ("POST", "/v1/elicit", b'{"message": "m", "ttl": "soon"}', 400, "ttl"),
        ("POST", "/v1/elicit", b'{"message": "m", "requestedSchema": {"type": "object", "properties": '
                               b'{"x": {"type": "object"}}}}', 400, "requestedSchema"),
        ("POST", "/v1/elicit", b'{"message": "m", "url": "ftp://x"}', 400, "http(s) url"),
        ("GET", "/v1/elicit?state=bogus", None, 400, "state"),
        ("GET", "/v1/elicit?limit=-1", None, 400, "limit"),
        ("GET", f"/v1/elicit/{q['id']}/wait?timeout=abc", None, 400, "timeout"),
        ("GET", "/v1/nope", None, 404, "no route"),
        ("DELETE", "/v1/elicit", None, 405, "not allowed"),
    ]
    for method, path, data, status, words in cases:
        async with http.request(method, path, data=data, headers={"Content-Type": "application/json"}) as r:
            body = await r.json()
            assert r.status == status, (path, data, body)
            assert words in body["error"]["message"], (path, body)
    async with http.post(f"/v1/elicit/{q['id']}/accept", data=b"{" + b" " * (2 * 1024 * 1024) + b"}",
                         headers={"Content-Type": "application/json"}) as r:
        assert r.status == 413 and "limit" in (await r.json())["error"]["message"]
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={}, headers={"X-Mcpx-Answerer": "policy:x"}) as r:
        assert r.status == 400 and "not one of" in (await r.json())["error"]["message"]
    async with http.get(f"/v1/elicit/{q['id']}") as r:
        body = await r.json()
    assert body["elicitation"]["state"] == "pending" and body["answer"] is None


@pytest.mark.shared_daemon
async def test_wrong_session_is_403(http: aiohttp.ClientSession) -> None:
    q = await ask(http, session="alice")
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "a/b"}},
                         headers={"X-Mcpx-Session": "bob"}) as r:
        body = await r.json()
    assert r.status == 403 and "belongs to session alice" in body["error"]["message"]
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "a/b"}},
                         headers={"X-Mcpx-Session": "alice"}) as r:
        assert r.status == 200


@pytest.mark.shared_daemon
async def test_expired_is_410_and_expiry_answers_cancel(http: aiohttp.ClientSession) -> None:
    q = await ask(http, ttl=0.3)
    async with http.get(f"/v1/elicit/{q['id']}/wait", params={"timeout": str(PATIENCE)}) as r:
        assert r.status == 200 and (await r.json())["by"] == "expiry"  # the expiry has committed
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "a/b"}}) as r:
        body = await r.json()
    assert r.status == 410 and "expired at" in body["error"]["message"]
    async with http.get(f"/v1/elicit/{q['id']}") as r:
        body = await r.json()
    assert body["elicitation"]["state"] == "expired" and body["elicitation"]["secondsLeft"] == 0
    assert body["answer"]["action"] == "cancel" and body["answer"]["by"] == "expiry"


async def test_listing_filters_exactly_by_session_and_state(http: aiohttp.ClientSession) -> None:
    a = await ask(http, session="alpha")
    await ask(http, session="alphabet")
    await ask(http, session="beta")
    async with http.get("/v1/elicit", params={"session": "alpha"}) as r:
        body = await r.json()
    assert [q["id"] for q in body["elicitations"]] == [a["id"]] and body["count"] == 1
    async with http.post(f"/v1/elicit/{a['id']}/cancel", json={"reason": "later"}) as r:
        assert r.status == 200
    async with http.get("/v1/elicit", params={"session": "alpha"}) as r:
        assert (await r.json())["count"] == 0
    async with http.get("/v1/elicit", params={"session": "alpha", "state": "answered"}) as r:
        assert (await r.json())["count"] == 1
    async with http.get("/v1/elicit", params={"state": "all"}) as r:
        body = await r.json()
    created = [q["created"] for q in body["elicitations"]]
    assert created == sorted(created) and body["count"] == 3


Docs = list[dict[str, Any]]


async def listed_pending(http: aiohttp.ClientSession, **where: str) -> tuple[Docs, Docs]:
    """The pending questions `where` names, as listed (from the daemon's memory) and as the store has them (every
    state listed, the pending ones picked here), each without its secondsLeft, which is of the moment."""
    async with http.get("/v1/elicit", params={**where, "limit": "10000"}) as r:
        body = await r.json()
    assert r.status == 200 and body["count"] == len(body["elicitations"]), body
    async with http.get("/v1/elicit", params={**where, "state": "all", "limit": "10000"}) as r:
        every = (await r.json())["elicitations"]
    assert all(0 <= q["secondsLeft"] <= 3600 for q in body["elicitations"])

    def bare(docs: Docs) -> Docs:
        return [{k: v for k, v in q.items() if k != "secondsLeft"} for q in docs]
    return bare(body["elicitations"]), bare([q for q in every if q["state"] == "pending"])


async def test_pending_listings_match_the_store_through_answers_escalations_and_a_restart(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    opened = [await ask(http, session=f"s{i % 3}", audience=("agent", "human", "agent-then-human")[i % 3], ttl=3600)
              for i in range(12)]
    async with http.post(f"/v1/elicit/{opened[0]['id']}/cancel", json={}) as r:
        assert r.status == 200
    # an agent declining an agent-then-human question hands it to the person: still pending, its document changed
    async with http.post(f"/v1/elicit/{opened[2]['id']}/decline", json={"reason": "not mine"},
                         headers={"X-Mcpx-Answerer": "agent:mcp"}) as r:
        assert r.status == 200 and (await r.json())["elicitation"]["audience"] == "human"
    wheres: list[dict[str, str]] = [{}, {"session": "s2"}, {"audience": "human"}, {"server": "mcpx"},
                                    {"session": "s1", "audience": "agent"}, {"session": "nobody"}]
    for where in wheres:
        listed, stored = await listed_pending(http, **where)
        assert listed == stored, where
    listed, _ = await listed_pending(http)
    assert [q["id"] for q in listed] == [q["id"] for q in opened[1:]]
    assert next(q for q in listed if q["id"] == opened[2]["id"])["escalated"] is True
    async with http.get("/v1/elicit", params={"limit": "3"}) as r:
        assert [q["id"] for q in (await r.json())["elicitations"]] == [q["id"] for q in opened[1:4]]
    async with http.get("/v1/health") as r:
        assert (await r.json())["pending"] == 11

    await http.close()
    daemon.stop()
    daemon.restart()  # the pending questions are read back from the store
    async with daemon.session() as again:
        for where in wheres:
            listed, stored = await listed_pending(again, **where)
            assert listed == stored, where
        assert [q["id"] for q in (await listed_pending(again))[0]] == [q["id"] for q in opened[1:]]


@pytest.mark.shared_daemon
async def test_fifty_concurrent_answers_have_exactly_one_winner(http: aiohttp.ClientSession) -> None:
    q = await ask(http)

    async def one(i: int) -> tuple[int, str]:
        action = ("accept", "decline", "cancel")[i % 3]
        body = {"content": {"repo": f"r/{i}"}} if action == "accept" else {}
        async with http.post(f"/v1/elicit/{q['id']}/{action}", json=body) as r:
            return r.status, json.dumps(await r.json())

    results = await asyncio.gather(*(one(i) for i in range(50)))
    statuses = sorted(s for s, _ in results)
    assert statuses.count(200) == 1 and statuses.count(409) == 49, statuses
    async with http.get("/v1/audit", params={"elicit": q["id"]}) as r:
        kinds = [rec["kind"] for rec in (await r.json())["records"]]
    assert kinds == ["elicit.open", "elicit.answered"]


@pytest.mark.shared_daemon
async def test_wait_long_polls_and_is_woken_by_an_answer(http: aiohttp.ClientSession, daemon: Daemon) -> None:
    q = await ask(http)
    async with http.get(f"/v1/elicit/{q['id']}/wait", params={"timeout": "0.2"}) as r:
        assert r.status == 204
    # the long poll is on the daemon's socket before the CLI (a process that takes a while to start) answers
    waiter = await request_in_flight(daemon, "GET", f"/v1/elicit/{q['id']}/wait", params={"timeout": "100"})
    answered_at = asyncio.get_running_loop().time()
    result = await asyncio.to_thread(daemon.cli, "elicit", "answer", q["id"], "repo=me/thing")
    assert result.returncode == 0, result.stderr
    status, body, woke = await waiter
    assert status == 200 and body["content"] == {"repo": "me/thing"} and body["by"] == "person:cli"
    assert woke - answered_at < 50  # woken by the answer, not by the 100 s timeout


@pytest.mark.shared_daemon
async def test_openapi_is_generated_from_the_routes(http: aiohttp.ClientSession) -> None:
    async with http.get("/v1/openapi.json") as r:
        doc = await r.json()
    assert doc["openapi"].startswith("3.")
    assert "Elicitation" in doc["components"]["schemas"]
    assert set(doc["components"]["schemas"]["Elicitation"]["properties"]) >= {
        "id", "session", "sessionSource", "audience", "reason", "expiresAt", "secondsLeft", "state"}
    answer_op = doc["paths"]["/v1/elicit/{id}/{action}"]["post"]
    assert set(answer_op["responses"]) >= {"200", "400", "403", "404", "409", "410", "422"}
    assert doc["paths"]["/v1/elicit"]["post"]["responses"]["201"]
    assert "/v1/events" in doc["paths"] and "/v1/audit" in doc["paths"]


@pytest.mark.shared_daemon
async def test_fallback_session_is_marked_and_depends_on_the_callers_directory(http: aiohttp.ClientSession) -> None:
    a = await ask(http)
    b = await ask(http)
    async with http.post("/v1/elicit", json={"message": "m", "requestedSchema": {"type": "object", "properties": {}}},
                         headers={"X-Mcpx-Cwd": "/somewhere/else"}) as r:
        c = (await r.json())["elicitation"]
    assert a["sessionSource"] == "fallback" and a["session"].startswith("fb-")
    assert a["session"] == b["session"] != c["session"]
    async with http.post("/v1/elicit", json={"message": "m"}, headers={"X-Mcpx-Session": "h1"}) as r:
        d = (await r.json())["elicitation"]
    assert d["session"] == "h1" and d["sessionSource"] == "header"
