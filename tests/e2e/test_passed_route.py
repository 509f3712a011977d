"""POST /v1/elicit/passed: a host's hook, handed a question without its id (Claude Code's Elicitation hook), finds
which of its session's questions it was passed — by the exact message, mode and schema or url mcpx passed."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from conftest import ask

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


async def passed(http: aiohttp.ClientSession, **body: Any) -> tuple[int, dict[str, Any]]:
    async with http.post("/v1/elicit/passed", json=body) as r:
        return r.status, await r.json()


@pytest.mark.shared_daemon
async def test_each_hook_takes_its_own_of_two_alike_and_no_other_sessions(http: aiohttp.ClientSession) -> None:
    one = await ask(http, session="claude-a", message="Deploy?", requestedSchema=SCHEMA)
    two = await ask(http, session="claude-a", message="Deploy?", requestedSchema=SCHEMA)
    other = await ask(http, session="claude-b", message="Deploy?", requestedSchema=SCHEMA)
    body = {"session": "claude-a", "message": "mcpx (via mcpx) asks: Deploy?", "mode": "form",
            "requestedSchema": SCHEMA}
    status, first = await passed(http, **body)
    assert status == 200, first
    status, second = await passed(http, **body)
    assert status == 200, second
    # oldest first, one each; the other session's is never given
    assert [first["elicitation"]["id"], second["elicitation"]["id"]] == [one["id"], two["id"]]
    assert first["elicitation"]["render"]["line"].startswith("mcpx: mcpx (via mcpx) asks you: “Deploy?”")
    status, b = await passed(http, **{**body, "session": "claude-b"})
    assert status == 200 and b["elicitation"]["id"] == other["id"]


@pytest.mark.shared_daemon
async def test_what_was_not_passed_is_not_found(http: aiohttp.ClientSession) -> None:
    q = await ask(http, session="claude-c", message="Deploy now?", requestedSchema=SCHEMA)
    body = {"session": "claude-c", "message": "mcpx (via mcpx) asks: Deploy now?", "mode": "form",
            "requestedSchema": SCHEMA}
    for wrong in ({"message": "Deploy now?"}, {"mode": "url"}, {"session": "claude-d"},
                  {"requestedSchema": {"type": "object", "properties": {}}}):
        status, err = await passed(http, **{**body, **wrong})
        assert status == 404 and err["error"]["code"] == "not_passed", (wrong, err)
    async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"ok": True}}) as r:
        assert r.status == 200
    # answered before the hook asked: the hook is given that answer, to hand on instead of waiting
    status, late = await passed(http, **body)
    assert status == 200 and late["elicitation"]["id"] == q["id"], late
    assert late["elicitation"]["state"] == "answered" and late["answer"]["action"] == "accept", late


@pytest.mark.shared_daemon
async def test_a_malformed_body_is_named(http: aiohttp.ClientSession) -> None:
    status, err = await passed(http, session="", message="x")
    assert status == 400 and "session" in err["error"]["message"], err
