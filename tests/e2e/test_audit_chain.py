"""`mcpx audit --chain ID`: a call and everything that followed from it, after a two-question call of each era."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime

import pytest

import mcpx
from conftest import ask, this_process_talks_to
from gateway_helpers import stdio
from harness import Daemon, scratch_daemon


@pytest.fixture(scope="module")
def d() -> Iterator[Daemon]:
    with scratch_daemon("mcpx-chain-", {"servers": {"legacy": stdio("sdk_server.py"),
                                                    "modern": stdio("sdk_resolver.py")}}) as daemon:
        yield daemon


@pytest.fixture(autouse=True)
def _only_ours(monkeypatch: pytest.MonkeyPatch, d: Daemon) -> None:
    this_process_talks_to(monkeypatch, d)


REPLIES = {"repo": {"repo": "me/thing"}, "title": {"title": "Broken build", "count": 2},
           "region": {"region": "eu-west"}}


@pytest.mark.parametrize(("server", "tool"), [("legacy", "repo_then_issue"), ("modern", "two_questions")])
async def test_the_chain_of_a_two_question_call(d: Daemon, server: str, tool: str) -> None:
    seen: list[mcpx.Question] = []
    async with mcpx.Client(name="nightly") as client:
        @client.on_elicit
        def answer(q: mcpx.Question) -> mcpx.Reply:
            seen.append(q)
            return mcpx.Accept(next(REPLIES[f] for f in q.fields if f in REPLIES))

        await client.call(f"{server}.{tool}")
    task = seen[0].task
    assert task is not None and len(seen) == 2

    out = d.cli("audit", "--chain", task)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # the call first, then one line each: both questions opened and answered (who, pid, after how long), the
    # server resumed with each answer, the call's end
    assert lines[0].split()[0] == "call" and f"{server}.{tool}" in lines[0] and "now completed" in lines[0]
    kinds = [line.split()[2] for line in lines[1:]]
    assert sorted(kinds) == sorted(["elicit.open"] * 2 + ["elicit.answered"] * 2 + ["elicit.resumed"] * 2
                                   + ["task.done"])
    assert kinds[-1] == "task.done"
    for q in seen:
        mine = [k for line, k in zip(lines[1:], kinds, strict=True) if q.id in line]
        assert mine == ["elicit.open", "elicit.answered", "elicit.resumed"]
    answered = [line for line in lines if "elicit.answered" in line]
    assert all(re.search(r"accept by script:nightly after \d+ ms  pid \d+$", line) for line in answered), answered

    js = json.loads(d.cli("audit", "--chain", task, "--json").stdout)
    assert isinstance(js, list) and js[0]["kind"] == "call" and js[0]["task"] == task
    assert (js[0]["server"], js[0]["tool"], js[0]["state"]) == (server, tool, "completed")
    assert [e["kind"] for e in js[1:]] == kinds
    moments = [datetime.fromisoformat(e["at"].replace("Z", "+00:00")) for e in js]
    assert moments == sorted(moments)  # in time order, the call first
    for e in js:
        if e["kind"] == "elicit.answered":
            assert e["pid"] > 0 and e["data"]["answeredAfterMs"] >= 0 and e["data"]["by"] == "script:nightly"
    # the same chain, named by its trace or by either of its questions
    for other in (js[0]["trace"], seen[0].id, seen[1].id):
        assert json.loads(d.cli("audit", "--chain", other, "--json").stdout) == js


async def test_an_id_that_names_no_call_is_refused_in_words(d: Daemon) -> None:
    bad = d.cli("audit", "--chain", "nonsense")
    assert bad.returncode == 2 and "tsk-, cal- or elc-" in bad.stderr, bad.stderr
    missing = d.cli("audit", "--chain", "tsk-0123456789abcdef")
    assert missing.returncode == 1 and "no task tsk-0123456789abcdef" in missing.stderr, missing.stderr
    # a question asked through POST /v1/elicit: no call raised it
    async with d.session() as http:
        q = await ask(http, ttl="1m")
    alone = d.cli("audit", "--chain", q["id"])
    assert alone.returncode == 1 and "was not raised by a call" in alone.stderr and "--elicit" in alone.stderr
