"""The real `mcpx` CLI against the real daemon: show, answer (k=v and JSON), ask's exit codes, no daemon."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import EventStream, ask, events
from harness import PATIENCE, Daemon, make_daemon, stop_process

FORM = {"type": "object", "required": ["repo", "count"], "properties": {
    "repo": {"type": "string", "description": "owner/name"},
    "count": {"type": "integer", "minimum": 1},
    "private": {"type": "boolean", "default": False},
    "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
}}


@pytest.mark.shared_daemon
async def test_show_renders_fields_and_the_commands_that_answer(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Which repository?\x1b[31m", requestedSchema=FORM)
    out = daemon.cli("elicit", "show", q["id"])
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "repo (string; required): owner/name" in text
    assert "count (integer; min 1; required)" in text
    assert "private (boolean; optional; default false)" in text
    assert '"l" (Large)' in text
    assert f"mcpx elicit answer {q['id']} " in text and f"mcpx elicit decline {q['id']}" in text
    assert "\x1b" not in text and "\\x1b" in text  # the server's words never drive the terminal
    inbox = json.loads((daemon.home / "daemon.json").read_text())["inbox"]
    assert f"page      {inbox}/q/{q['id']}" in text  # its page in the web inbox, as mcpx call shows it
    js = daemon.cli("elicit", "show", q["id"], "--json")
    assert json.loads(js.stdout)["elicitation"]["id"] == q["id"]


@pytest.mark.shared_daemon
async def test_answer_types_key_values_by_the_schema(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, requestedSchema=FORM)
    bad = daemon.cli("elicit", "answer", q["id"], "repo=a/b", "count=zero")
    assert bad.returncode == 65 and "count" in bad.stderr and "integer" in bad.stderr  # not 1: no decline
    ok = daemon.cli("elicit", "answer", q["id"], "repo=a/b", "count=3", "size=Large")
    assert ok.returncode == 0, ok.stderr
    async with http.get(f"/v1/elicit/{q['id']}") as r:
        answer = (await r.json())["answer"]
    assert answer["content"] == {"repo": "a/b", "count": 3, "size": "l", "private": False}
    assert answer["by"] == "person:cli" and answer["pid"] is not None

    q2 = await ask(http, requestedSchema=FORM)
    ok = daemon.cli("elicit", "answer", q2["id"], '{"repo": "c/d", "count": 2, "private": true}', "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["answer"]["content"]["private"] is True


@pytest.mark.shared_daemon
async def test_decline_and_cancel_stay_distinct(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    a = await ask(http)
    b = await ask(http)
    assert daemon.cli("elicit", "decline", a["id"], "--reason", "wrong repo").returncode == 0
    assert daemon.cli("elicit", "cancel", b["id"]).returncode == 0
    async with http.get(f"/v1/elicit/{a['id']}") as r:
        da = (await r.json())["answer"]
    async with http.get(f"/v1/elicit/{b['id']}") as r:
        db = (await r.json())["answer"]
    assert (da["action"], da["reason"]) == ("decline", "wrong repo")
    assert db["action"] == "cancel"


async def asked(http: aiohttp.ClientSession, stream: EventStream, message: str) -> dict[str, Any]:
    """The question `message` once it has opened (an elicit.open on the stream, opened before the asker ran)."""
    while True:
        rec = await stream.until(lambda r: r["kind"] == "elicit.open", what=f"question {message!r}")
        async with http.get(f"/v1/elicit/{rec['elicit']}") as r:
            q = (await r.json())["elicitation"]
        if q["message"] == message:
            return q


@pytest.mark.shared_daemon
async def test_ask_exits_0_on_accept_1_on_decline_75_on_cancel_and_expiry(daemon: Daemon,
                                                                         http: aiohttp.ClientSession) -> None:
    schema = json.dumps({"approver": {"type": "string"}})
    outcomes = {}
    for action, message in (("accept", "Ship 1.2?"), ("decline", "Ship 1.3?"), ("cancel", "Ship 1.4?")):
        async with events(http, kinds="elicit.open") as stream:
            proc = daemon.cli_bg("elicit", "ask", "--message", message, "--schema", schema)
            try:
                eid = (await asked(http, stream, message))["id"]
                body = {"content": {"approver": "ann"}} if action == "accept" else {}
                async with http.post(f"/v1/elicit/{eid}/{action}", json=body) as r:
                    assert r.status == 200
                out, err = await asyncio.to_thread(proc.communicate, timeout=PATIENCE)
            finally:
                stop_process(proc)
        outcomes[action] = (proc.returncode, out, err)
    assert outcomes["accept"][0] == 0 and json.loads(outcomes["accept"][1]) == {"approver": "ann"}
    assert outcomes["decline"][0] == 1
    assert outcomes["cancel"][0] == 75
    assert "mcpx elicit answer elc-" in outcomes["accept"][2]  # the person is told how to answer
    expired = await asyncio.to_thread(daemon.cli, "elicit", "ask", "-m", "Anyone?", "--ttl", "1s")
    assert expired.returncode == 75 and "expiry" in expired.stderr


def test_no_daemon_is_said_clearly(home: Path) -> None:
    d = make_daemon(home)
    for args in (["status"], ["elicit", "answer", "elc-0123456789abcdef", "x=1"]):  # `elicit list` starts one
        out = d.cli(*args)
        assert out.returncode == 69, out
        assert "no mcpx daemon answers" in out.stderr and "mcpx daemon" in out.stderr


async def test_status_list_and_audit(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    assert daemon.cli("elicit", "list").stdout.startswith("no pending questions")
    status = json.loads(daemon.cli("status", "--json").stdout)
    assert status["ok"] and status["pending"] == 0
    async with events(http, kinds="elicit.open") as stream:
        opened = daemon.cli_bg("elicit", "ask", "-m", "Which region?", "--schema",  # the asker's pid: its own
                               json.dumps({"region": {"type": "string", "enum": ["eu", "us"]}}), "--ttl", "30s",
                               direct=True)
        try:
            await asked(http, stream, "Which region?")
            listing = json.loads(daemon.cli("elicit", "list", "--json").stdout)
            q = listing["elicitations"][0]
            assert listing["count"] == 1 and q["audience"] == "agent"
            assert q["id"] in daemon.cli("elicit", "list").stdout
            assert daemon.cli("elicit", "answer", q["id"], "region=eu").returncode == 0
            opened.wait(PATIENCE)
            audit = json.loads(daemon.cli("audit", "--elicit", q["id"], "--json").stdout)["records"]
            assert [r["kind"] for r in audit] == ["elicit.open", "elicit.answered"]
            assert audit[0]["pid"] == opened.pid and audit[1]["pid"] != opened.pid
            assert audit[1]["data"]["answeredAfterMs"] > 0
            text = daemon.cli("audit").stdout
            assert "elicit.answered" in text
            # every moment in one form, RFC 3339 in UTC to the millisecond: the records' own and those in their data
            moments = re.findall(r"\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)", json.dumps(audit) + text
                                 + daemon.cli("elicit", "show", q["id"], "--json").stdout)
            assert len(moments) > 4 and all(re.fullmatch(r"[\dT:-]{19}\.\d{3}Z", m) for m in moments), moments
        finally:
            stop_process(opened)
