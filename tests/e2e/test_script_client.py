"""`mcpx.Client` and `mcpx.connect()` (docs/scripts.md): a script's calls through the real daemon to real peer servers
of both eras, its handler answering their questions as `script:<name>`."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mcpx
from conftest import ask, events, request_in_flight, this_process_talks_to, wait_for
from gateway_helpers import answer, call, stdio
from harness import PATIENCE, ROOT, Daemon, scratch_daemon
from terminal import Terminal, end_elsewhere

DEMO = {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"]}


@pytest.fixture(scope="module")
def d() -> Iterator[Daemon]:
    """One daemon for the module (each test has sessions of its own): a legacy and a modern peer, and the legacy
    one again under another name, where a rule answers the repository (the config's policy)."""
    with scratch_daemon("mcpx-script-", {"servers": {
        "legacy": stdio("sdk_server.py"),
        "modern": stdio("sdk_resolver.py"),
        "ruled": stdio("sdk_server.py"),
        "demo": DEMO,
    }, "elicit": {"rules": [
        {"id": "our-repo", "match": {"server": "ruled", "field": "repo"}, "answer": "acme/notes"},
    ]}}) as daemon:
        yield daemon


@pytest.fixture(autouse=True)
def _only_ours(monkeypatch: pytest.MonkeyPatch, d: Daemon) -> None:
    this_process_talks_to(monkeypatch, d)


def texts(result: dict[str, Any]) -> Any:
    return json.loads(result["content"][0]["text"])


async def answers(d: Daemon, trace: str) -> list[dict[str, Any]]:
    async with d.session() as http, http.get("/v1/audit", params={"trace": trace, "kinds": "elicit.answered"}) as r:
        return [rec["data"] for rec in (await r.json())["records"]]


async def trace_of(d: Daemon, session: str) -> str:
    async with d.session() as http, http.get("/v1/tasks", params={"state": "all", "session": session}) as r:
        tasks = (await r.json())["tasks"]
    assert len(tasks) == 1, tasks
    return str(tasks[0]["trace"])


@pytest.mark.parametrize(("server", "tool", "replies", "expected"), [
    ("legacy", "repo_then_issue", {"repo": {"repo": "me/thing"}, "title": {"title": "Broken build", "count": 2}},
     [{"action": "accept", "data": {"repo": "me/thing"}},
      {"action": "accept", "data": {"title": "Broken build", "count": 2, "color": "red", "notify": True}}]),
    ("modern", "two_questions", {"repo": {"repo": "me/thing"}, "region": {"region": "eu-west"}},
     [{"action": "accept", "data": {"repo": "me/thing"}}, {"action": "accept", "data": {"region": "eu-west"}}]),
])
async def test_the_handler_answers_every_question_of_a_call(d: Daemon, server: str, tool: str,
                                                            replies: dict[str, dict[str, Any]],
                                                            expected: list[dict[str, Any]]) -> None:
    session = f"two-{server}"
    seen: list[mcpx.Question] = []
    async with mcpx.Client(name="nightly", session=session) as client:
        @client.on_elicit
        async def answer(q: mcpx.Question) -> mcpx.Reply:
            seen.append(q)
            return mcpx.Accept(next(replies[f] for f in q.fields if f in replies))

        result = await client.call(f"{server}.{tool}")
    assert texts(result) == expected
    assert [q.server for q in seen] == [server, server] and all(q.tool == tool for q in seen)
    assert len({q.id for q in seen}) == 2 and all(q.mode == "form" and q.schema for q in seen)
    trace = await trace_of(d, session)
    recorded = await answers(d, trace)
    assert [(a["by"], a["action"]) for a in recorded] == [("script:nightly", "accept")] * 2


async def test_a_question_the_script_did_not_expect_is_answered_as_it_says(d: Daemon) -> None:
    """The handler knows the repository only; the region it did not expect, and cancels."""
    async with mcpx.Client(name="nightly", session="unexpected") as client:
        client.on_elicit(lambda q: mcpx.Accept({"repo": "me/thing"}) if "repo" in q.fields else mcpx.Cancel())
        result = await client.call("modern.two_questions")
    assert texts(result) == [{"action": "accept", "data": {"repo": "me/thing"}}, {"action": "cancel", "data": None}]


async def test_without_a_handler_the_policy_answers_then_cancel(d: Daemon) -> None:
    async with mcpx.Client(name="nightly", session="no-handler") as client:
        result = await client.call("ruled.repo_then_issue")
    assert texts(result) == [{"action": "accept", "data": {"repo": "acme/notes"}}, {"action": "cancel", "data": None}]
    recorded = await answers(d, await trace_of(d, "no-handler"))
    assert [a["by"] for a in recorded] == ["policy:our-repo", "policy:auto"]


async def test_a_refused_answer_is_raised_naming_each_field_and_the_call_ends(d: Daemon) -> None:
    async with mcpx.Client(name="nightly", session="refused") as client:
        client.on_elicit(lambda q: mcpx.Accept({"title": "x", "count": 99}))
        with pytest.raises(mcpx.AnswerRefused) as refused:
            await client.call("legacy.file_issue")
    assert set(refused.value.fields) == {"title", "count"}
    assert "title:" in str(refused.value) and "count:" in str(refused.value)
    async with d.session() as http, http.get("/v1/tasks", params={"state": "all", "session": "refused"}) as r:
        [task] = (await r.json())["tasks"]
    assert task["state"] == "cancelled" and task["open"] == []  # nobody is left waiting on it


async def test_the_persons_question_is_not_the_scripts_to_accept(d: Daemon, caplog: pytest.LogCaptureFixture,
                                                                 ) -> None:
    """The second question (a lone yes/no) is the person's: the script's accept is refused, the question waits, and
    the person's answer ends the call."""
    caplog.set_level(logging.WARNING, logger="mcpx.client")
    handed: list[mcpx.Question] = []
    async with mcpx.Client(name="nightly", session="persons") as client:
        @client.on_elicit
        def answer(q: mcpx.Question) -> mcpx.Reply:
            handed.append(q)
            return mcpx.Accept({"repo": "me/thing"} if "repo" in q.fields else {"confirm": True})

        running = asyncio.create_task(client.call("legacy.ask_twice"))
        try:
            await wait_for(lambda: any("not accept it" in r.getMessage() for r in caplog.records),
                           what="the script's accept refused")
            persons = handed[-1]
            assert persons.audience == "human" and persons.fields == ("confirm",)
            async with d.session() as http:
                async with http.get(f"/v1/elicit/{persons.id}") as r:
                    assert (await r.json())["elicitation"]["state"] == "pending"
                assert not running.done()
                async with http.post(f"/v1/elicit/{persons.id}/accept", json={"content": {"confirm": False}},
                                     headers={"X-Mcpx-Answerer": "person:rest"}) as r:
                    assert r.status == 200, await r.text()
            result = await asyncio.wait_for(running, PATIENCE)
        finally:
            running.cancel()
    assert texts(result) == [{"action": "accept", "data": {"repo": "me/thing"}},
                             {"action": "accept", "data": {"confirm": False}}]
    assert len(handed) == 2  # handed over once, not again while it waited
    recorded = await answers(d, await trace_of(d, "persons"))
    assert [a["by"] for a in recorded] == ["script:nightly", "person:rest"]


ASKS_THE_PERSON = """
import asyncio

import mcpx


async def main():
    async with mcpx.Client() as client:
        @client.on_elicit
        async def answer(q):
            if q.audience == "human":
                print("answered as", (await client.ask(q))["by"])
                return None
            return mcpx.Cancel()

        print((await client.call("demo.delete_branch"))["content"][0]["text"])


asyncio.run(main())
"""


def test_client_ask_puts_the_question_to_the_person_at_this_terminal(d: Daemon, tmp_path: Path) -> None:
    script = tmp_path / "cleanup.py"
    script.write_text(ASKS_THE_PERSON)
    with Terminal(d, argv=[sys.executable, str(script)]) as term:
        term.expect("confirm")
        term.type("y")
        assert term.finish() == 0, term.out.decode(errors="replace")
    shown = term.out.decode(errors="replace")
    assert "answered as person:cli" in shown and "Branch main would be deleted now" in shown


ASKS_WHILE_IT_ENDS_ELSEWHERE = """
import asyncio
import sys

import mcpx


async def main():
    async with mcpx.Client(session=sys.argv[1]) as client:
        @client.on_elicit
        async def answer(q):
            try:
                got = await client.ask(q)
                print("ask returned", got["action"], "by", got["by"])
            except mcpx.EndedMeanwhile as ended:
                print("ask raised:", ended)
            return None

        try:
            print("result:", (await client.call("demo.create_issue"))["content"][0]["text"])
        except mcpx.CallFailed as failed:
            print("call failed:", failed)
            sys.exit(3)


asyncio.run(main())
"""


async def test_client_ask_stops_as_soon_as_its_question_ends_elsewhere(d: Daemon, tmp_path: Path) -> None:
    """`client.ask` watches its question as `mcpx call`'s prompt does: answered from another door (REST here) while
    the person is at its first field, the prompt stops there, says how it ended, and ask returns that answer (the
    call goes on to its result); abandoned (its call cancelled elsewhere), it says so and raises EndedMeanwhile."""
    script = tmp_path / "filer.py"
    script.write_text(ASKS_WHILE_IT_ENDS_ELSEWHERE)
    async with d.session() as http, events(http, kinds="elicit.open") as stream:
        with Terminal(d, argv=[sys.executable, str(script), "ask-answered"]) as term:
            opened = await stream.until(lambda r: r["session"] == "ask-answered", what="create_issue's question")
            await end_elsewhere(term, http, opened, "answered")
            assert await asyncio.to_thread(term.finish) == 0, term.out.decode(errors="replace")
        shown = term.out.decode(errors="replace")
        assert "ask returned accept by person:rest" in shown and "'title': 'Filed from elsewhere'" in shown, shown
        assert "Priority" not in shown  # the next field was never asked

        with Terminal(d, argv=[sys.executable, str(script), "ask-abandoned"]) as term:
            opened = await stream.until(lambda r: r["session"] == "ask-abandoned", what="the second call's question")
            await end_elsewhere(term, http, opened, "abandoned")
            assert await asyncio.to_thread(term.finish) == 3, term.out.decode(errors="replace")
        shown = term.out.decode(errors="replace")
        assert f"ask raised: {opened['elicit']} was abandoned" in shown and "call failed:" in shown, shown
        assert "Priority" not in shown


async def test_a_question_the_caller_knows_does_not_end_its_wait_for_the_next(d: Daemon) -> None:
    """GET /v1/tasks/{id}/result?wake=question&known=…: the client waits on a call whose question it left to the
    person without looking again and again; the wait ends with the result (or a question it does not know)."""
    async with d.session() as http:
        status, body, _ = await call(http, "legacy", "need_repo", session="known")
        assert status == 202, body
        eid = body["elicitation"]["id"]
        path = f"/v1/tasks/{body['task']}/result"
        # without `known`, the question that waits ends the wait at once
        async with http.get(path, params={"wake": "question", "timeout": str(PATIENCE)}) as r:
            assert r.status == 202 and (await r.json())["elicitation"]["id"] == eid
        waiting = await request_in_flight(d, "GET", path, params={"wake": "question", "known": eid,
                                                                  "timeout": str(PATIENCE)})
        assert (await answer(http, eid, "accept", {"repo": "me/thing"}))[0] == 200
        status, doc, _ = await asyncio.wait_for(waiting, PATIENCE)
        assert status == 200 and doc["state"] == "completed", doc
        async with http.get(path, params={"wake": "question", "known": "elc-nonsense"}) as r:
            assert r.status == 400 and "known" in (await r.text())


async def test_a_name_that_is_none_is_refused_at_once(d: Daemon) -> None:
    with pytest.raises(ValueError, match="not a script's name"):
        mcpx.Client(name="two words")
    # and by the daemon, whoever sends it: the question is untouched
    async with d.session() as http:
        q = await ask(http, session="names")
        for claimed in ("script:", "script:two words", "script:" + "x" * 65, "scripts:deploy"):
            status, body = await answer(http, q["id"], "accept", {"repo": "me/thing"},
                                        **{"X-Mcpx-Answerer": claimed})
            assert status == 400 and body["error"]["code"] == "bad_answerer", (claimed, body)
        status, body = await answer(http, q["id"], "accept", {"repo": "me/thing"},
                                    **{"X-Mcpx-Answerer": "script:ci.v2"})
        assert status == 200 and body["answer"]["by"] == "script:ci.v2"


DOC = ROOT / "docs" / "scripts.md"


def doc_examples() -> list[str]:
    """The doc's runnable examples: its python code blocks that import mcpx."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return [b for b in blocks if b.startswith("import mcpx") or "\nimport mcpx" in b]


def test_the_docs_examples_run_and_start_the_daemon(tmp_path: Path) -> None:
    """Each example of docs/scripts.md, as a script file of its own, against the bundled demo server; the first
    finds no daemon running and starts one, as `mcpx serve` does."""
    examples = doc_examples()
    assert len(examples) == 2, "docs/scripts.md: an async example and a blocking one"
    d = scratch_daemon("mcpx-doc-", {"servers": {"demo": DEMO}})
    try:
        outputs = []
        for name, code in zip(("nightly", "weekly"), examples, strict=True):
            script = tmp_path / f"{name}.py"
            script.write_text(code)
            done = subprocess.run([sys.executable, str(script)], env=d.env, capture_output=True, text=True,
                                  timeout=2 * PATIENCE, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout)
        # the package is typed: a script's use of it is checked by mypy, strictly
        typed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
                                "nightly.py", "weekly.py"], env=d.env, capture_output=True, text=True,
                               timeout=2 * PATIENCE, cwd=tmp_path)
        assert typed.returncode == 0, typed.stdout + typed.stderr
        assert "Notes would be saved to me/thing" in outputs[0]
        assert "Notes would be saved to me/thing" in outputs[1]
        audit = json.loads(d.cli("audit", "--kinds", "elicit.answered", "--json").stdout)["records"]
        assert {rec["data"]["by"] for rec in audit} == {"script:nightly", "script:weekly"}
    finally:
        d.cleanup()  # stops the daemon the first example started
