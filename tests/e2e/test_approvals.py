"""Approvals by named people (issue 30), against the real daemon with real local receivers: a webhook that checks
every signature, and an ntfy-compatible server that takes ntfy's JSON publish format at its root.

N of M accepted through each approver's own link (performed as the webhook's and the ntfy message's actions
describe), a link used twice, the asker refused, any decline declining, `mcpx elicit ask --approvers`;
reminders and escalation on time, across a restart, and once each on two daemons sharing PostgreSQL.

Every wait is for a receiver's request or a state seen through the API, bounded; never a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import hmac
import json
import os
import re
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp import web

from browser import chromium, page_of
from conftest import ask, wait_for
from harness import PATIENCE, SUITE_STORE, make_daemon, receiving, running
from mcpx.inbox.signing import InboxKeys
from mcpx.system.paths import load_key

YES_NO = {"type": "object", "properties": {}}


class Receiver:
    """A local HTTP server that keeps every POST (path, headers, JSON body) and checks each signature: a path in
    `secrets` must come signed with its key, X-Mcpx-Signature: sha256=<hex HMAC-SHA256 of the raw body>."""

    def __init__(self, secrets: dict[str, str] | None = None) -> None:
        self.secrets = secrets or {}
        self.got: list[tuple[str, dict[str, Any]]] = []
        self.bad: list[str] = []  # a signature that did not verify: a test fails on any
        self.changed = asyncio.Event()
        self.base = ""

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        key = self.secrets.get(request.path)
        if key is not None:
            want = "sha256=" + hmac.new(key.encode(), raw, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(request.headers.get("X-Mcpx-Signature", ""), want):
                self.bad.append(request.path)
                return web.Response(status=401, text="bad signature")
        self.got.append((request.path, json.loads(raw) if raw.startswith(b"{") else {"text": raw.decode()}))
        self.changed.set()
        return web.Response(text="ok")

    async def until(self, test: Callable[[str, dict[str, Any]], bool], count: int = 1) -> list[dict[str, Any]]:
        """The first `count` requests that pass `test`, waiting for them (bounded)."""
        async with asyncio.timeout(PATIENCE):
            while len(found := [body for path, body in self.got if test(path, body)]) < count:
                self.changed.clear()
                await self.changed.wait()
        return found[:count]

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Receiver]:
        async with receiving(self.handle) as self.base:
            yield self


async def perform(action: dict[str, Any]) -> tuple[int, str]:
    """An action exactly as a notification describes it (url, method, body): what a phone or a bot does."""
    async with aiohttp.ClientSession() as client, client.request(action["method"], action["url"],
                                                                 data=action["body"]) as r:
        return r.status, await r.text()


async def question(http: aiohttp.ClientSession, eid: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    async with http.get(f"/v1/elicit/{eid}") as r:
        body = await r.json()
        return body["elicitation"], body.get("answer")


async def audit(http: aiohttp.ClientSession, eid: str, kinds: str) -> list[dict[str, Any]]:
    async with http.get("/v1/audit", params={"elicit": eid, "kinds": kinds}) as r:
        return list((await r.json())["records"])


def people(hook: Receiver, ntfy: Receiver) -> dict[str, Any]:
    return {
        "alice": {"notify": [{"webhook": f"{hook.base}/alice", "secret": "alice-key"}]},
        "bob": {"notify": [{"ntfy": f"{ntfy.base}/mcpx-bob"}]},
        "carol": {"notify": [{"webhook": f"{hook.base}/carol", "secret": "${CAROL_KEY}"}]},
        "dave": {"notify": [{"webhook": f"{hook.base}/dave", "secret": "dave-key"}]},
    }


SECRETS = {"/alice": "alice-key", "/carol": "carol-key", "/dave": "dave-key", "/all": "all-key"}


async def test_two_of_three_through_their_own_links_the_asker_refused_and_a_link_counting_once(home: Path) -> None:
    hook, ntfy = Receiver(SECRETS), Receiver()
    async with hook.serving(), ntfy.serving():
        config = {"servers": {}, "people": people(hook, ntfy),
                  "elicit": {"notify": [{"webhook": f"{hook.base}/all", "secret": "all-key"}]}}
        with make_daemon(home, config, extra_env={"CAROL_KEY": "carol-key"}) as d:
            async with d.session() as http:
                q = await ask(http, message="Deploy v2 to production?", requestedSchema=YES_NO, ttl="10m",
                              approvers=["alice", "bob", "carol"], need=2, **{"from": "carol"})
                assert q["approvals"]["waiting"] == ["alice", "bob"] and q["approvals"]["asker"] == "carol"
                # each approver is notified at once through their own targets, with their own link and actions
                [to_alice] = await hook.until(lambda path, b: path == "/alice")
                [to_bob] = await ntfy.until(lambda path, b: True)
                [news] = await hook.until(lambda path, b: path == "/all")  # elicit.notify, signed too
                assert news["id"] == q["id"] and "actions" not in news
                assert to_alice["person"] == "alice" and to_alice["approvals"] == {
                    "need": 2, "by": [], "waiting": ["alice", "bob"]}
                assert [a["label"] for a in to_alice["actions"]] == ["Approve", "Decline"]
                assert "loopback" in to_alice["reach"] and "--listen" in to_alice["reach"]
                # ntfy's JSON publish: at the server's root, the topic in the body, http actions bound to bob
                assert ntfy.got[0][0] == "/" and to_bob["topic"] == "mcpx-bob"
                approve_bob = to_bob["actions"][0]
                assert (approve_bob["action"], approve_bob["label"], approve_bob["method"]) == ("http", "Approve",
                                                                                               "POST")
                assert "docs/inbox.md" in to_bob["message"]
                assert not any(path == "/carol" for path, _ in hook.got)  # the asker is not asked

                # the inbox token's way (and any other) does not approve: only an approver's own link does
                async with http.post(f"/v1/elicit/{q['id']}/accept", json={}) as r:
                    assert r.status == 403 and "own link" in (await r.json())["error"]["message"]
                # no link is made for the asker, as none is for someone who is no approver: it could only be refused
                asker = d.cli("elicit", "link", q["id"], "--as", "carol")
                assert asker.returncode != 0 and "carol asked this question" in asker.stderr, asker
                assert f"mcpx elicit cancel {q['id']}" in asker.stderr and asker.stdout == ""
                outsider = d.cli("elicit", "link", q["id"], "--as", "dave")
                assert outsider.returncode != 0 and "dave is not an approver" in outsider.stderr, outsider
                # one made before mcpx refused to make it still opens the page: its accept is refused, saying why,
                # and recorded as refused
                carol = InboxKeys(load_key(home / "inbox.key")).approver_link(q["id"], "carol")
                carol_page = re.sub(r"link=[^&]+", "link=" + quote(carol), to_bob["click"])
                status, page = await perform({"method": "POST", "url": carol_page.replace(
                    f"/inbox/q/{q['id']}", f"/inbox/q/{q['id']}/accept"), "body": ""})
                assert status == 403 and "nobody approves their own request" in page

                status, _ = await perform(to_alice["actions"][0])  # alice taps Approve in her chat bot
                assert status == 200
                shown, answer = await question(http, q["id"])
                assert answer is None and shown["approvals"]["by"] == ["alice"]
                assert shown["approvals"]["waiting"] == ["bob"]
                assert shown["approvals"]["status"] == "1 of 2 approved (alice)"
                show = d.cli("elicit", "show", q["id"])
                assert "1 of 2 approved (alice); waiting for bob" in show.stdout, show.stdout + show.stderr
                # the commands it offers are the ones that work: bob's own link, and cancel; no answer it would refuse
                assert f"mcpx elicit link {q['id']} --as bob" in show.stdout and "elicit answer" not in show.stdout
                assert "--as alice" not in show.stdout and f"mcpx elicit cancel {q['id']}" in show.stdout
                async with http.get(f"/v1/elicit/{q['id']}", params={"render": "true"}) as r:
                    rendering = (await r.json())["elicitation"]["render"]  # what opencode shows, as given
                assert rendering["approvals"].startswith("1 of 2 approved (alice); waiting for bob.")
                assert "1 of 2 approved (alice)" in rendering["toast"]["message"]
                async with aiohttp.ClientSession() as phone, phone.get(to_bob["click"]) as page:
                    text = await page.text()  # bob's own page: where it stands, and that he answers as himself
                    assert page.status == 200 and "1 of 2 approved (alice)" in text and "person:bob" in text
                # in a browser: alice's page, her vote in, shows it and where the approvals stand, and no button
                # (pressed, it would be refused); the asker's shows why it is not theirs; bob's still asks him
                async with chromium() as browser, page_of(browser) as tab:
                    await tab.goto(to_alice["link"])
                    assert await tab.locator("#vote").inner_text() == "You approved this, as alice."
                    assert "1 of 2 approved (alice). Waiting for bob." in await tab.locator("#standing").inner_text()
                    assert await tab.locator("button").count() == 0 and await tab.locator("form").count() == 0
                    await tab.goto(carol_page)
                    assert "You asked this question, as carol" in await tab.locator("#vote").inner_text()
                    assert await tab.locator("button").count() == 0
                    await tab.goto(to_bob["click"])
                    assert await tab.locator("#accept").is_visible() and await tab.locator("#vote").count() == 0
                status, page = await perform(to_alice["actions"][0])  # the same action again: counts once
                assert status == 409 and "counts once" in page

                status, _ = await perform({"method": approve_bob["method"], "url": approve_bob["url"],
                                           "body": approve_bob["body"]})  # bob, from the lock screen
                assert status == 200
                shown, answer = await question(http, q["id"])
                assert shown["state"] == "answered" and answer is not None
                assert (answer["action"], answer["by"], answer["approvers"]) == ("accept", "person:alice,bob",
                                                                                 ["alice", "bob"])
                status, page = await perform(approve_bob)  # replayed after the end: refused like a used link
                assert status == 409 and "already answered" in page
                records = await audit(http, q["id"], "elicit.approval,elicit.answered")
                assert [(r["kind"], r["data"].get("person"), r["data"].get("counted"), "refused" in r["data"])
                        for r in records] == [("elicit.approval", "carol", None, True),
                                              ("elicit.approval", "alice", True, False),
                                              ("elicit.approval", "bob", True, False),
                                              ("elicit.answered", None, None, False)]
                assert records[-1]["data"]["approvers"] == ["alice", "bob"]
                said = d.cli("audit", "--elicit", q["id"]).stdout
                assert "carol accept: refused — carol asked this question" in said, said
                assert "alice accept: counted (1 of 2)" in said and "bob accept: counted (2 of 2)" in said
                assert shown["approvals"]["refused"] == ["carol"]
            assert hook.bad == []


async def test_any_approvers_decline_declines_and_elicit_ask_exits_by_it(home: Path) -> None:
    hook, ntfy = Receiver(SECRETS), Receiver()
    async with hook.serving(), ntfy.serving():
        with make_daemon(home, {"servers": {}, "people": people(hook, ntfy)},
                         extra_env={"CAROL_KEY": "carol-key"}) as d:
            asking = d.cli_bg("elicit", "ask", "-m", "Drop the staging database?", "--schema", json.dumps(YES_NO),
                              "--approvers", "alice,dave", "--need", "2", "--ttl", "10m", "--escalate", "5m:bob",
                              env={"MCPX_PERSON": "carol"})
            try:
                [to_dave] = await hook.until(lambda path, b: path == "/dave")
                await hook.until(lambda path, b: path == "/alice")
                async with d.session() as http:
                    shown, _ = await question(http, to_dave["id"])
                a = shown["approvals"]
                assert (a["asker"], a["need"], [s["to"] for s in a["escalate"]]) == ("carol", 2, [["bob"]])
                status, _ = await perform(to_dave["actions"][1])  # dave declines: it is declined at once
                assert status == 200
                out, err = await asyncio.wait_for(asyncio.to_thread(asking.communicate), PATIENCE)
                assert asking.returncode == 1, out + err
                assert "decline by person:dave" in err
            finally:
                if asking.poll() is None:
                    asking.kill()
                    asking.wait()
            assert hook.bad == []


async def test_reminders_and_escalation_arrive_on_time_and_go_on_after_a_restart(home: Path) -> None:
    hook, ntfy = Receiver(SECRETS), Receiver()
    async with hook.serving(), ntfy.serving():
        rule = {"id": "deploys", "match": {"server": "mcpx", "message": "^Deploy"}, "approvers": ["alice"],
                "need": 1, "remind": "1s", "escalate": [{"after": "3s", "to": ["dave"]}]}
        config = {"servers": {}, "people": people(hook, ntfy), "elicit": {"approvals": [rule]}}
        d = make_daemon(home, config, extra_env={"CAROL_KEY": "carol-key"})
        with d:
            async with d.session() as http:
                q = await ask(http, message="Deploy v3?", requestedSchema=YES_NO, ttl="10m")
                opened = time.time()
                assert q["approvals"]["rule"] == "deploys"
                [first, reminder] = await hook.until(lambda path, b: path == "/alice", 2)
                assert first["why"] == "asked" and reminder["why"] == "reminder"
                assert time.time() - opened >= 0.9  # not before its time
        # stopped (the schedule is in the store), started again: the escalation still comes, on time, once
        with d:
            [to_dave] = await hook.until(lambda path, b: path == "/dave")
            assert to_dave["why"] == "escalation" and time.time() - opened >= 2.9
            async with d.session() as http:
                shown, _ = await question(http, q["id"])
                assert shown["approvals"]["waiting"] == ["alice", "dave"]
                status, _ = await perform(to_dave["actions"][0])  # an escalated approver's approval counts
                assert status == 200
                shown, answer = await question(http, q["id"])
                assert answer is not None and answer["by"] == "person:dave"
                reminded = await audit(http, q["id"], "elicit.reminded")
            # every reminder the log holds reached alice once, and each came from one record (the last one's send may
            # still be on its way as dave approved; none is ever sent twice, across the restart too)
            sent = len([b for p, b in hook.got if p == "/alice" and b["why"] == "reminder"])
            logged = len([r for r in reminded if "alice" in r["data"]["remind"]])
            assert logged - 1 <= sent <= logged and sent >= 1
            assert len([r for r in reminded if r["data"]["escalate"]]) == 1
        assert hook.bad == []


def on_the_store(home: Path, *statements: str) -> list[tuple[Any, ...]]:
    """Run `statements` on the store of the (stopped) daemon of `home`: its mcpx.db, or (a suite test on PostgreSQL)
    the mcpx schema of its database; the last one's rows."""
    url = os.environ.get(SUITE_STORE)
    rows: list[tuple[Any, ...]] = []
    if not url:
        with contextlib.closing(sqlite3.connect(home / "mcpx.db", isolation_level=None)) as db:
            for statement in statements:
                rows = db.execute(statement).fetchall()
        return rows
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO mcpx")
        for statement in statements:
            cur = conn.execute(statement)
            rows = cur.fetchall() if cur.description else []
    return rows


@pytest.mark.stores
async def test_a_store_of_the_previous_schema_is_migrated_and_its_approvals_go_on(home: Path) -> None:
    """A start finds the pending questions that have approvals by the row's own column, not in their documents' bytes.
    A store of the previous schema (the column dropped and the version set back, as an mcpx before it left one) is
    migrated at start: the column filled from each document — a form that merely has a field named "approvals" has
    none — and the pending approvals' reminders go on."""
    hook = Receiver(SECRETS)
    async with hook.serving():
        d = make_daemon(home, {"servers": {}, "people": {"alice": {"notify": [
            {"webhook": f"{hook.base}/alice", "secret": "alice-key"}]}}})
        with d:
            async with d.session() as http:
                q = await ask(http, message="Rotate the keys?", requestedSchema=YES_NO, ttl="10m",
                              approvers=["alice"], remind="1s")
                decoy = await ask(http, message="Which approvals?", ttl="10m", requestedSchema={
                    "type": "object", "properties": {"approvals": {"type": "string"}}})
        sqlite = not os.environ.get(SUITE_STORE)
        on_the_store(home, "ALTER TABLE elicitations DROP COLUMN approvals",
                     "PRAGMA user_version=0" if sqlite else "UPDATE schema_version SET version=1")
        reminded = len([b for p, b in hook.got if p == "/alice" and b["why"] == "reminder"])
        with d:  # its reminders go on: the start found the question's approvals in the migrated store
            await hook.until(lambda path, b: path == "/alice" and b["why"] == "reminder", reminded + 1)
        version = on_the_store(home, "PRAGMA user_version" if sqlite else "SELECT version FROM schema_version")
        assert version == [(3,)]  # and on to the passkeys table (docs/presence.md), which it already had
        marked = dict(on_the_store(home, "SELECT id, approvals FROM elicitations"))
        assert {eid: bool(v) for eid, v in marked.items()} == {q["id"]: True, decoy["id"]: False}
    assert hook.bad == []


async def test_two_daemons_on_one_store_send_each_reminder_once(postgres: Any, tmp_path: Path) -> None:
    hook, ntfy = Receiver(SECRETS), Receiver()
    async with hook.serving(), ntfy.serving():
        url = postgres.create_database("approvals_team")
        me = f"{getpass.getuser()}@{socket.gethostname()}"  # the daemons' user@host: erin's, on this team
        config = {"servers": {}, "people": {**people(hook, ntfy), "erin": {"users": [me]}}}
        env = {"MCPX_STORE": url, "CAROL_KEY": "carol-key"}
        with running([make_daemon(tmp_path / f"d{i}", config, extra_env=env) for i in range(2)]) as (a, b):
            async with a.session() as ha, b.session() as hb:
                q = await ask(ha, message="Rotate the keys?", requestedSchema=YES_NO, ttl="10m",
                              approvers=["alice"], remind="700ms")
                reminders = await hook.until(lambda path, body: path == "/alice" and body["why"] == "reminder", 3)
                async with hb.get(f"/v1/elicit/{q['id']}") as r:  # B follows the question's approvals too
                    assert (await r.json())["elicitation"]["approvals"]["waiting"] == ["alice"]
                status, _ = await perform(reminders[-1]["actions"][0])
                assert status == 200
                records = await audit(ha, q["id"], "elicit.reminded")
                # a question erin's daemon raises is erin's: her approval is not waited on, and never counts
                mine = await ask(hb, message="Erin's change?", requestedSchema=YES_NO, ttl="10m",
                                 approvers=["erin", "alice"])
                assert mine["approvals"]["asker"] == "erin" and mine["approvals"]["waiting"] == ["alice"]
            # one record per reminder, each sent once: the two daemons' sweeps never both sent one (the last record
            # may have been written as alice approved, its notification then left unsent: the question had ended)
            sent = [body for path, body in hook.got if path == "/alice" and body["why"] == "reminder"]
            assert len(records) >= 3 and len(records) - 1 <= len(sent) <= len(records)
            times = [r["at"] for r in records]
            assert len(set(times)) == len(times)
        assert hook.bad == []


async def test_a_secret_whose_variable_is_not_set_fails_the_send_and_never_posts_unsigned(home: Path) -> None:
    hook = Receiver()
    async with hook.serving():
        notify = [{"webhook": f"{hook.base}/unsigned", "secret": "${MCPX_TEST_UNSET_KEY}"},
                  {"webhook": f"{hook.base}/plain"}]
        with make_daemon(home, {"servers": {}, "elicit": {"notify": notify}}) as d:
            async with d.session() as http:
                await ask(http, ttl="10m")
                await hook.until(lambda path, b: path == "/plain")  # the other target is sent as usual

                async def failed() -> dict[str, Any] | None:
                    async with http.get("/v1/health") as r:
                        stats = [s for s in (await r.json())["notify"] if s["failed"]]
                    return stats[0] if stats else None
                stat = await wait_for(failed, what="the failed send, after its retries")
                assert "MCPX_TEST_UNSET_KEY" in stat["lastError"]
                assert "is not set" in stat["lastError"]
            assert not any(path == "/unsigned" for path, _ in hook.got)


def test_people_approvals_and_secrets_are_checked_at_load(home: Path) -> None:
    cases = [
        ({"elicit": {"approvals": [{"match": {"server": "ci"}, "approvers": ["zed"]}]}},
         "names 'zed', not in people"),
        ({"people": {"ann": {}}, "elicit": {"approvals": [{"match": {"server": "ci"}, "approvers": ["ann"],
                                                            "need": 2}]}},
         "need is 2, but only 1 people could approve"),
        ({"people": {"ann": {"notify": [{"ntfy": "http://127.0.0.1:9/t", "secret": "k"}]}}},
         "secret signs a webhook's POSTs"),
        ({"people": {"ann": {"notify": [{"webhook": "http://127.0.0.1:9/h", "secret": "${NOT A NAME}"}]}}},
         "secret must be"),
        ({"people": {"ann": {"pager": "x"}}}, "pager"),
    ]
    for config, said in cases:
        d = make_daemon(home, {"servers": {}, **config})
        done = d.cli("config", "check")
        assert done.returncode != 0 and said in done.stdout + done.stderr, (config, done.stdout + done.stderr)
    fine = {"servers": {}, "people": {"ann": {}, "ben": {}},
            "elicit": {"approvals": [{"match": {"server": "ci"}, "approvers": ["ann", "ben"], "need": 2}]}}
    done = make_daemon(home, fine).cli("config", "check")
    assert done.returncode == 0 and "keeps the one-answer rule" in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_counting_rules_count_each_person_once_and_a_schedule_once() -> None:
    from mcpx.broker import approvals as rules
    from mcpx.broker.models import ApprovalRequest, OpenRequest
    from mcpx.broker.refusals import AlreadyAnswered, Forbidden, InvalidQuestion
    from mcpx.broker.rules import question_of

    q, _ = question_of(OpenRequest(session="s", session_source="fallback", server="mcpx", message="Ship?",
                                   requested_schema=YES_NO), 1000.0, 3600)
    req = ApprovalRequest(approvers=["ann", "ben", "cy"], need=2, remind=60, escalate=[(300, ["dee"])], asker="cy")
    a = rules.start(q, req)
    assert (a.waiting, a.next_at and a.next_at.timestamp()) == (["ann", "ben"], 1060.0)
    first = rules.vote(q, a, "ann", "accept")
    assert first.final is None and first.approvals.by == ["ann"] and first.approvals.status == "1 of 2 approved (ann)"
    assert isinstance(rules.vote(q, first.approvals, "ann", "accept").refusal, AlreadyAnswered)
    own = rules.vote(q, first.approvals, "cy", "accept")
    assert isinstance(own.refusal, Forbidden) and own.recorded and own.approvals.refused == ["cy"]
    assert isinstance(rules.vote(q, a, "zed", "accept").refusal, Forbidden)
    assert rules.vote(q, first.approvals, "ben", "accept").final == "accept"
    assert rules.vote(q, first.approvals, "ben", "decline").final == "decline"
    # a daemon down from 1050 to 1500: one reminder, not seven; the escalation once; the next reminder ahead
    step = rules.nudge(a, 1500.0)
    assert step is not None and step.remind == ["ann", "ben"] and step.escalate == ["dee"]
    assert step.approvals.waiting == ["ann", "ben", "dee"]
    assert step.approvals.next_at is not None and step.approvals.next_at.timestamp() == 1540.0
    assert rules.nudge(step.approvals, 1500.0) is None  # the stored schedule moved on: a second sweep does nothing
    with pytest.raises(InvalidQuestion, match="not counting cy, who asked"):  # could never be approved
        rules.start(q, ApprovalRequest(approvers=["cy"], need=1, asker="cy"))
    form, _ = question_of(OpenRequest(session="s", session_source="fallback", server="mcpx", message="Which?",
                                      requested_schema={"type": "object", "properties": {"repo": {"type": "string"}}}),
                          1000.0, 60)
    assert not rules.yes_no(form)
