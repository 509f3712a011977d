"""Several calls of one session on one legacy instance, with a real SDK server (handshake era) that asks mid-call.

Its `gate` tool runs until a file the test creates exists, so the test decides which calls are in flight
and in what order they end; with `ask` it first asks a question over the legacy back-channel, whose
request names no call on the stdio wire. The question must reach the call that asked, or nobody.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from gateway_helpers import HttpPeer, answer, call, result, stdio, tool_text, until_pending
from harness import PATIENCE, make_daemon, read_log
from mcpx.upstream.attribution import HOLD_LIMIT
from mcpx.upstream.pool import CROWDED

SERVER = "old"


async def start(http: aiohttp.ClientSession, arguments: dict[str, Any], session: str = "s") -> str:
    """Start a call of `gate` and return its task at once (it runs on)."""
    async with http.post(f"/v1/call/{SERVER}/gate", params={"wait": "0"},
                         json={"arguments": arguments, "session": session}) as r:
        body = await r.json()
        assert r.status == 202, body
        return str(body["task"])


async def instances(http: aiohttp.ClientSession) -> list[dict[str, Any]]:
    async with http.get("/v1/upstreams") as r:
        return [i for i in (await r.json())["instances"] if i["server"] == SERVER]


async def until_instances(http: aiohttp.ClientSession, holds: Callable[[list[dict[str, Any]]], bool]
                          ) -> list[dict[str, Any]]:
    deadline = time.monotonic() + PATIENCE
    while True:
        found = await instances(http)
        if holds(found):
            return found
        assert time.monotonic() < deadline, f"the instances never came to the expected shape: {found}"
        await asyncio.sleep(0.05)


def calls_of(found: list[dict[str, Any]], session: str) -> list[int]:
    return sorted(i["calls"] for i in found if i["sessions"] == [session])


async def until_logged(home: Path, text: str, times: int = 1) -> None:
    deadline = time.monotonic() + PATIENCE
    while read_log(home).count(text) < times:
        assert time.monotonic() < deadline, f"the daemon never logged {text!r} {times} time(s)"
        await asyncio.sleep(0.05)


async def refused(http: aiohttp.ClientSession, tasks: list[str], why: str) -> None:
    """Each call failed with mcpx's refusal of its question, saying `why`, and no question was ever opened."""
    for task in tasks:
        doc = await result(http, task)  # the SDK hands mcpx's refusal on as the call's error
        assert doc["state"] == "failed" and doc["questions"] == [], doc
        assert "mcpx cannot tell which of the calls in flight on this instance (gate) sent this " \
               "elicitation/create" in doc["error"], doc
        assert why in doc["error"] and "calling again works" in doc["error"], doc
    async with http.get("/v1/elicit", params={"state": "all"}) as r:
        body = await r.json()
        assert r.status == 200 and body["elicitations"] == [], body


async def learn_quiet(http: aiohttp.ClientSession, tmp_path: Path, session: str = "s") -> int:
    """One call of `gate` that finishes without asking: its calls may share an instance from now on."""
    (tmp_path / "open").touch()
    status, body, _ = await call(http, SERVER, "gate", {"path": str(tmp_path / "open")}, session=session)
    assert status == 200, body
    return int(tool_text(body)["pid"])


async def test_quiet_calls_share_the_sessions_instance_and_a_held_question_reaches_the_call_that_asked(
        home: Path, tmp_path: Path) -> None:
    with make_daemon(home, {"servers": {SERVER: stdio("sdk_legacy.py", direct=True)}}) as d:
        async with d.session() as http:
            pid = await learn_quiet(http, tmp_path)
            gates = {name: tmp_path / name for name in ("a", "b", "c", "t", "d", "e")}
            a = await start(http, {"path": str(gates["a"])})
            b = await start(http, {"path": str(gates["b"])})
            t = await start(http, {"path": str(gates["t"])}, session="t")  # another session: never on s's instance
            found = await until_instances(http, lambda f: calls_of(f, "s") == [2] and calls_of(f, "t") == [1])
            assert [i["pid"] for i in found if i["sessions"] == ["s"]] == [pid]
            # c asks while a and b are in flight beside it: nothing on the wire says whose the question is
            c = await start(http, {"path": str(gates["c"]), "ask": True})
            await until_logged(d.home, "while 3 calls were in flight on one instance")
            async with http.get("/v1/elicit") as r:
                assert (await r.json())["elicitations"] == []  # held, not guessed
            gates["a"].touch()
            assert tool_text(await result(http, a)) == {"pid": pid, "gate": "a", "answer": None}
            async with http.get("/v1/elicit") as r:
                assert (await r.json())["elicitations"] == []  # b or c: still not told apart
            gates["b"].touch()
            assert tool_text(await result(http, b))["answer"] is None
            # b had its answer without one: the question is c's, the one call left
            [question] = await until_pending(http)
            assert question["task"] == c and question["tool"] == "gate" and question["session"] == "s"
            assert question["message"] == "Which repository for c?"
            status, _ = await answer(http, question["id"], "accept", {"repo": "o/c"})
            assert status == 200
            gates["c"].touch()
            assert tool_text(await result(http, c)) == {"pid": pid, "gate": "c", "answer": {
                "action": "accept", "data": {"repo": "o/c"}}}
            gates["t"].touch()
            assert tool_text(await result(http, t))["pid"] != pid
            # gate asks, so its calls run one at a time on an instance from now on
            d_task = await start(http, {"path": str(gates["d"])})
            e_task = await start(http, {"path": str(gates["e"])})
            await until_instances(http, lambda f: calls_of(f, "s") == [1, 1])
            gates["d"].touch()
            gates["e"].touch()
            pids = {tool_text(await result(http, task))["pid"] for task in (d_task, e_task)}
            assert len(pids) == 2 and pid in pids


async def test_past_crowded_quiet_calls_a_second_instance_takes_a_share_and_none_waits_for_it(
        home: Path, tmp_path: Path) -> None:
    """Quiet calls gather on one instance up to CROWDED in flight; the next joins it still (no call waits for a
    process to start) while another instance starts beside it, and the calls after that go to the new one."""
    with make_daemon(home, {"servers": {SERVER: stdio("sdk_legacy.py", direct=True)}}) as d:
        async with d.session() as http:
            pid = await learn_quiet(http, tmp_path)
            gate = tmp_path / "gate"
            gathered = [await start(http, {"path": str(gate)}) for _ in range(CROWDED + 1)]
            await until_instances(http, lambda f: calls_of(f, "s") == [0, CROWDED + 1])
            await until_logged(d.home, f"{CROWDED} or more calls in flight on one instance; another")
            spread = await start(http, {"path": str(gate)})
            found = await until_instances(http, lambda f: calls_of(f, "s") == [1, CROWDED + 1])
            assert {i["pid"] for i in found if i["calls"] == CROWDED + 1} == {pid}
            gate.touch()
            assert {tool_text(await result(http, task))["pid"] for task in gathered} == {pid}
            assert tool_text(await result(http, spread))["pid"] != pid


async def test_questions_that_cannot_be_told_apart_are_refused_never_misattributed(
        home: Path, tmp_path: Path) -> None:
    with make_daemon(home, {"servers": {SERVER: stdio("sdk_legacy.py", direct=True)}}) as d:
        async with d.session() as http:
            pid = await learn_quiet(http, tmp_path)
            # both ask while both are in flight: each waits for its answer, so neither can ever be ruled out
            go = tmp_path / "go"
            tasks = [await start(http, {"path": str(tmp_path / name), "ask": True, "ask_when": str(go)})
                     for name in ("x", "y")]
            await until_instances(http, lambda f: calls_of(f, "s") == [2])
            go.touch()
            await refused(http, tasks, "each of those 2 calls may be waiting for a request like it")
            # and calling again works: the calls of gate now run alone, so a question is always its call's
            (tmp_path / "z").touch()
            again = await start(http, {"path": str(tmp_path / "z"), "ask": True})
            [question] = await until_pending(http)
            assert question["task"] == again
            await answer(http, question["id"], "accept", {"repo": "o/z"})
            assert tool_text(await result(http, again)) == {"pid": pid, "gate": "z", "answer": {
                "action": "accept", "data": {"repo": "o/z"}}}


async def test_a_held_question_waits_a_bounded_time_for_the_calls_beside_it_then_is_refused(
        home: Path, tmp_path: Path) -> None:
    with make_daemon(home, {"servers": {SERVER: stdio("sdk_legacy.py", direct=True)}}) as d:
        async with d.session() as http:
            pid = await learn_quiet(http, tmp_path)
            go = tmp_path / "go"
            slow = await start(http, {"path": str(tmp_path / "slow")})  # a quiet call that ends when the test says
            asker = await start(http, {"path": str(tmp_path / "asker"), "ask": True, "ask_when": str(go)})
            await until_instances(http, lambda f: calls_of(f, "s") == [2])
            go.touch()
            await until_logged(d.home, "while 2 calls were in flight on one instance")
            # the slow call does not finish while the question is held: refused, not kept
            await refused(http, [asker], f"the calls it may be from did not all finish within {HOLD_LIMIT:g} s")
            (tmp_path / "slow").touch()
            assert tool_text(await result(http, slow)) == {"pid": pid, "gate": "slow", "answer": None}


async def test_over_streamable_http_each_question_comes_on_its_calls_stream_and_goes_to_that_call(
        home: Path, tmp_path: Path) -> None:
    with HttpPeer("sdk_server.py") as peer, make_daemon(home, {"servers": {SERVER: {"url": peer.url}}}) as d:
        async with d.session() as http:
            # this server answers server/discover, then asks over the legacy back-channel: once a call of it
            # has asked, mcpx calls it in the legacy era
            status, body, _ = await call(http, SERVER, "need_repo", session="s")
            assert status == 202, body
            await answer(http, body["elicitation"]["id"], "accept", {"repo": "o/first"})
            assert (await result(http, body["task"]))["era"] == "legacy"
            await learn_quiet(http, tmp_path)
            go = tmp_path / "go"
            tasks = {name: await start(http, {"path": str(tmp_path / name), "ask": True, "ask_when": str(go)})
                     for name in ("x", "y")}
            await until_instances(http, lambda f: calls_of(f, "s") == [2])
            go.touch()
            questions = await until_pending(http, 2)  # both told apart at once: nothing is held
            assert {q["task"]: q["message"] for q in questions} == {
                tasks["x"]: "Which repository for x?", tasks["y"]: "Which repository for y?"}
            assert "held until it is known whose it is" not in read_log(d.home)
            for q in questions:
                await answer(http, q["id"], "accept", {"repo": f"o/{q['message'][-2]}"})
            for name, task in tasks.items():
                (tmp_path / name).touch()
                assert tool_text(await result(http, task))["answer"] == {"action": "accept",
                                                                        "data": {"repo": f"o/{name}"}}
