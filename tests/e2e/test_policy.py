"""Who answers: rules and modes, the person's questions refused to agents, escalation, mcpx asking for itself,
live settings, and credentials that never touch the disk, the audit, the events or the log."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import mcpx
from conftest import ask, events, store_contents, this_process_talks_to, wait_for
from gateway_helpers import answer, call, result, stdio, tool_text, until_health, until_pending
from harness import make_daemon

pytestmark = pytest.mark.stores  # the store and broker suite: on SQLite and on PostgreSQL

DEMO = {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"]}


async def audit(http: aiohttp.ClientSession, **params: str) -> list[dict[str, Any]]:
    async with http.get("/v1/audit", params=params) as r:
        return (await r.json())["records"]


async def test_a_rule_answers_and_is_audited_with_its_id(home: Path) -> None:
    d = make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"rules": [
        {"id": "our-repo", "match": {"server": "sdk", "field": "repo"}, "answer": "acme/notes",
         "because": "notes always go to acme/notes"},
        {"id": "no-passwords", "match": {"field": "api_token"}, "answer": "guess"},  # may not accept a human question
    ]}})
    d.start()
    try:
        async with d.session() as http:
            status, body, _ = await call(http, "sdk", "need_repo")
            assert status == 200, body  # answered by policy before anyone had to be asked
            assert json.loads(body["result"]["content"][0]["text"])["data"] == {"repo": "acme/notes"}
            records = await audit(http, trace=body["trace"])
            fired = next(r for r in records if r["kind"] == "policy.fired")
            answered = next(r for r in records if r["kind"] == "elicit.answered")
            assert fired["data"] == {"rule": "our-repo", "action": "accept", "because": "notes always go to acme/notes"}
            assert answered["data"]["by"] == "policy:our-repo"
            status, body, _ = await call(http, "sdk", "use_token")
            assert status == 202 and body["elicitation"]["audience"] == "human"  # the rule did not name the server
    finally:
        d.stop()


async def test_modes_auto_decline_and_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """And a call's own mode never loosens elicit.mode: a script client without a handler (which calls with `auto`)
    and `mcpx call --elicit=auto` are declined, then failed, where the config says so, though a rule would have
    answered under `auto`."""
    d = make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"mode": "auto"}})
    d.start()
    this_process_talks_to(monkeypatch, d)
    rule = {"id": "our-repo", "match": {"server": "sdk", "field": "repo"}, "answer": "acme/notes"}
    try:
        async with d.session() as http:
            status, body, _ = await call(http, "sdk", "need_repo")
            assert status == 200 and json.loads(body["result"]["content"][0]["text"])["action"] == "cancel"
            d.write_config({"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"mode": "decline", "rules": [rule]}})
            await until_mode(http, home, "decline")
            status, body, _ = await call(http, "sdk", "need_repo")
            assert json.loads(body["result"]["content"][0]["text"])["action"] == "decline"
            declined = next(r for r in await audit(http, trace=body["trace"]) if r["kind"] == "elicit.answered")
            assert declined["data"]["by"] == "policy:decline" and "refuses every question" in declined["data"]["reason"]
            async with mcpx.Client(name="nightly") as client:
                scripted = await client.call("sdk.need_repo")
            assert json.loads(scripted["content"][0]["text"]) == {"action": "decline", "data": None}
            cli = await asyncio.to_thread(d.cli, "call", "sdk.need_repo", "--elicit=auto")
            assert cli.returncode == 0 and '"action": "decline"' in cli.stdout, cli
            d.write_config({"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"mode": "error", "rules": [rule]}})
            await until_mode(http, home, "error")
            status, body, _ = await call(http, "sdk", "need_repo")
            assert status == 502
            message = body["error"]["message"]
            assert "needed an answer to elc-" in message and "Which repository should this go in?" in message
            async with mcpx.Client(name="nightly") as client:
                with pytest.raises(mcpx.CallFailed, match="needed an answer to elc-"):
                    await client.call("sdk.need_repo")
            cli = await asyncio.to_thread(d.cli, "call", "sdk.need_repo", "--elicit=auto")
            assert cli.returncode == 1 and "needed an answer to elc-" in cli.stderr, cli
            # a call may be stricter than the config, never looser
            status, body, _ = await call(http, "sdk", "need_repo", elicit="decline")
            assert status == 502 and "needed an answer to elc-" in body["error"]["message"]
    finally:
        d.stop()


async def until_mode(http: aiohttp.ClientSession, home: Path, mode: str) -> None:
    """Ask throwaway questions until the daemon answers them the way `mode` does (the reload is seen)."""
    async def taken() -> bool:
        q = await ask(http, ttl=60)
        async with http.get(f"/v1/elicit/{q['id']}") as r:
            body = await r.json()
        by = (body.get("answer") or {}).get("by")
        assert q["state"] == body["elicitation"]["state"]  # a question a rule ended at once: its 201 says so
        return (mode, body["elicitation"]["state"], by) in (("decline", "answered", "policy:decline"),
                                                           ("error", "abandoned", None))
    await wait_for(taken, what=f"the daemon taking elicit.mode {mode!r}")


async def test_agents_are_refused_the_persons_questions_and_their_declines_escalate(home: Path) -> None:
    d = make_daemon(home)
    d.start()
    try:
        async with d.session() as http:
            secret_q = await ask(http, message="API token?", requestedSchema={
                "type": "object", "properties": {"api_token": {"type": "string"}}}, session="s")
            status, body = await answer(http, secret_q["id"], "accept", {"api_token": "x"},
                                        **{"X-Mcpx-Answerer": "agent:mcp", "X-Mcpx-Session": "s"})
            assert status == 403 and "for the person" in body["error"]["message"]
            assert "person has been asked" in body["error"]["message"]
            free = await ask(http, session="s")  # free text: the agent first
            status, body = await answer(http, free["id"], "decline", None,
                                        **{"X-Mcpx-Answerer": "agent:mcp", "X-Mcpx-Session": "s"})
            assert status == 200 and body["escalated"] and body["elicitation"]["audience"] == "human"
            escalated = [r for r in await audit(http, elicit=free["id"]) if r["kind"] == "elicit.escalated"]
            assert escalated and escalated[0]["data"]["by"] == "agent:mcp"
            status, _ = await answer(http, free["id"], "accept", {"repo": "still/agent"},
                                     **{"X-Mcpx-Answerer": "agent:mcp", "X-Mcpx-Session": "s"})
            assert status == 403
            status, body = await answer(http, free["id"], "accept", {"repo": "person/wins"},
                                        **{"X-Mcpx-Answerer": "person:cli"})
            assert status == 200 and body["answer"]["by"] == "person:cli"
            # an agent shelling out to the CLI answers as an agent, not as the person
            cli = d.cli("elicit", "answer", secret_q["id"], "api_token=abcd", env={"AGENT": "1"})
            assert cli.returncode == 1 and "for the person" in cli.stderr
    finally:
        d.stop()


async def test_mcpx_asks_before_a_call_that_may_change_things(home: Path) -> None:
    # askTimeout: long enough for the answers below on a loaded machine, short enough to watch one expire
    d = make_daemon(home, {"servers": {"demo": DEMO}, "elicit": {"confirmDestructive": True, "askTimeout": "5s"}})
    d.start()
    try:
        async with d.session() as http:
            status, body, _ = await call(http, "demo", "delete_branch")
            q = body["elicitation"]
            assert status == 202 and q["server"] == "mcpx" and q["tool"] == "demo.delete_branch"
            assert q["message"] == "demo.delete_branch may change or delete things: let this call proceed?"
            assert q["audience"] == "human" and q["requestedSchema"]["properties"]["confirm"]["default"] is False
            assert q["secondsLeft"] <= 5
            await answer(http, q["id"], "accept", {"confirm": True})
            own = (await until_pending(http, 1, trace=body["trace"]))[0]  # now the tool's own question
            assert own["server"] == "demo"
            await answer(http, own["id"], "accept", {"confirm": True})
            assert "would be deleted" in (await result(http, body["task"]))["result"]["content"][0]["text"]

            status, body, _ = await call(http, "demo", "deploy")
            await answer(http, body["elicitation"]["id"], "decline")
            failed = await result(http, body["task"])
            assert failed["state"] == "failed"
            assert "said decline" in failed["error"] and "was not run" in failed["error"]

            status, body, _ = await call(http, "demo", "choose_repository")  # destructiveHint: false
            assert body["elicitation"]["server"] == "demo"
            status, body, _ = await call(http, "demo", "login")  # readOnlyHint: true
            assert body["elicitation"]["server"] == "demo"

            status, body, _ = await call(http, "demo", "delete_branch")
            late = await result(http, body["task"])
            assert late["state"] == "failed" and "nobody answered within 5s" in late["error"]
    finally:
        d.stop()


async def test_settings_reload_live_and_a_bad_file_keeps_the_previous(home: Path) -> None:
    d = make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"ttl": "90s"}})
    d.start()
    try:
        async with d.session() as http:
            assert 85 <= (await ask(http))["secondsLeft"] <= 90
            d.write_config({"servers": {"sdk": stdio("sdk_server.py", elicit={"ttl": "5s"})}, "elicit": {"ttl": "30s"}})
            await wait_for(lambda: ask_ttl(http, 30), what="the new elicit.ttl")
            assert 25 <= (await ask(http))["secondsLeft"] <= 30
            _, body, _ = await call(http, "sdk", "need_repo")
            assert body["elicitation"]["secondsLeft"] <= 5  # the server's own ttl
            d.write_config({"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"ttl": "30s", "mode": "sometimes"}})
            health = await until_health(http, lambda h: bool(h.get("configError")))
            assert "elicit.mode" in health["configError"] and str(d.config) in health["configError"]
            assert 25 <= (await ask(http))["secondsLeft"] <= 30  # the previous config is in force
    finally:
        d.stop()


async def ask_ttl(http: aiohttp.ClientSession, at_most: int) -> bool:
    return (await ask(http))["secondsLeft"] <= at_most


def test_policy_test_and_config_check_open_nothing(home: Path) -> None:
    d = make_daemon(home, {"elicit": {"rules": [
        {"id": "gh-user", "match": {"server": "github", "field": "username"}, "answer": "octocat"},
        {"id": "assume-yes", "match": {"server": "mcpx", "field": "confirm"}, "answer": True,
         "when": "MCPX_ASSUME_YES=1"}]}})
    out = d.cli("policy", "test", "--server", "github", "--schema", '{"username": {"type": "string"}}', "-m", "Who?")
    assert out.returncode == 0, out.stderr
    assert "agent-then-human" in out.stdout
    assert 'answered accept {"username": "octocat"} by policy:gh-user' in out.stdout
    js = json.loads(d.cli("policy", "test", json.dumps({"server": "mcpx", "message": "proceed?", "requestedSchema": {
        "type": "object", "properties": {"confirm": {"type": "boolean"}}}}), "--json").stdout)
    assert js["audience"] == "human" and js["decision"] is None
    assert js["rules"][1] == {"rule": "assume-yes", "fires": False,
                              "why": "needs MCPX_ASSUME_YES=1 in the daemon's environment"}
    yes = json.loads(d.cli("policy", "test", "--server", "mcpx", "--schema", '{"confirm": {"type": "boolean"}}',
                           "--json", env={"MCPX_ASSUME_YES": "1"}).stdout)
    assert yes["decision"]["by"] == "policy:assume-yes" and yes["decision"]["content"] == {"confirm": True}
    url = json.loads(d.cli("policy", "test", "--url", "https://x.example", "--json").stdout)
    assert url["audience"] == "human" and "url mode" in url["reason"]
    assert not (home / "mcpx.db").exists() and not (home / "daemon.sock").exists()

    bad = home / "bad.json"
    bad.write_text('{"elicit": {"rules": [{"match": {"server": "a"}}, {"match": {}, "action": "accept"}]}}')
    out = d.cli("config", "check", str(bad))
    assert out.returncode == 1 and "elicit.rules[1]: has an empty match" in out.stderr and str(bad) in out.stderr
    ok = d.cli("config", "check", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["rules"] == ["gh-user", "assume-yes"]


async def test_a_credential_reaches_the_server_and_nothing_else(home: Path) -> None:
    secret = "sk-" + secrets.token_hex(12)
    d = make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}})
    d.start()
    frames: list[bytes] = []
    try:
        async with d.session() as http, events(http) as stream:  # listening before the question opens
            async def follow() -> None:
                async for chunk in stream.resp.content.iter_any():
                    frames.append(chunk)
            listener = asyncio.create_task(follow())
            status, body, _ = await call(http, "sdk", "use_token", session="vault")
            q = body["elicitation"]
            assert status == 202 and q["audience"] == "human" and "credential" in q["reason"]
            status, answered = await answer(http, q["id"], "accept", {"api_token": secret})
            assert status == 200 and answered["answer"]["content"] == {"api_token": "[redacted]"}
            done = await result(http, body["task"])
            got = tool_text(done)
            # the server got it whole: its echo is exactly the value, which the caller is given as [redacted]
            assert got["token_length"] == len(secret) and got["token_echo"] == "[redacted]"
            assert secret not in json.dumps(done)
            async with http.get(f"/v1/elicit/{q['id']}") as r:
                assert secret not in await r.text()
            async with http.get("/v1/audit") as r:
                audit_text = await r.text()
            # the stream has carried everything the audit holds, the last record included
            last = json.loads(audit_text)["records"][-1]["seq"]
            await wait_for(lambda: f"id: {last}\n".encode() in b"".join(frames), what=f"event {last} on the stream")
            listener.cancel()
    finally:
        assert d.stop() == 0
    assert secret not in audit_text and "[redacted]" in audit_text
    assert frames and secret.encode() not in b"".join(frames)
    for name in ("mcpx.db", "mcpx.db-wal", "daemon.log", "daemon.stderr"):
        path = home / name
        if path.exists():
            assert secret.encode() not in path.read_bytes(), name
    kept = store_contents(home)  # mcpx.db, or the PostgreSQL database
    assert secret.encode() not in kept and b"[redacted]" in kept
