"""A modern call's rounds (mcp/input_required.py), driven without a wire: what each round sends, which rounds count,
how state-only rounds back off, and how the loop ends. The pauses are recorded, not slept."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.mcp.input_required import Backoff, InputRequired, Retry, RoundsError, TooManyRounds, drive

CALL = {"name": "deploy", "arguments": {"env": "prod"}}
DONE = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}


def asking(key: str, state: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"resultType": "input_required",
                           "inputRequests": {key: {"method": "elicitation/create", "params": {"message": key}}}}
    if state is not None:
        out["requestState"] = state
    return out


class Script:
    """A server that answers each tools/call with the next of `results`, and notes what it was sent."""

    def __init__(self, *results: dict[str, Any]) -> None:
        self.results = list(results)
        self.sent: list[dict[str, Any]] = []
        self.paused: list[float] = []
        self.asked: list[tuple[InputRequired, int]] = []

    async def send(self, params: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(params)
        return self.results.pop(0)

    async def answer(self, asked: InputRequired, round_no: int) -> dict[str, Any]:
        self.asked.append((asked, round_no))
        return {key: {"action": "accept", "content": {"round": round_no}} for key in asked.input_requests or {}}

    async def sleep(self, seconds: float) -> None:
        self.paused.append(seconds)

    async def run(self, max_rounds: int = 8, round_no: int = 0, params: dict[str, Any] = CALL) -> dict[str, Any]:
        return await drive("srv", params, self.send, self.answer, max_rounds, round_no, sleep=self.sleep)


async def test_a_complete_first_answer_is_the_result() -> None:
    script = Script(DONE)
    assert await script.run() is DONE
    assert script.sent == [CALL]


async def test_each_round_answers_under_the_servers_keys_and_echoes_its_state_verbatim() -> None:
    state = {"opaque": [1, "two"]}  # any JSON value, sent back as it came
    script = Script(asking("first", "s1"), asking("second", state), DONE)
    assert await script.run() is DONE
    assert script.sent[1] == {**CALL, "inputResponses": {"first": {"action": "accept", "content": {"round": 1}}},
                              "requestState": "s1"}
    assert list(script.sent[2]) == ["name", "arguments", "inputResponses", "requestState"]  # the wire's order
    assert script.sent[2]["requestState"] is state
    assert [n for _, n in script.asked] == [1, 2]
    assert script.paused == []


async def test_a_round_without_state_sends_none_back() -> None:
    script = Script(asking("only"), DONE)
    await script.run()
    assert "requestState" not in script.sent[1]


async def test_one_round_past_max_rounds_ends_the_call() -> None:
    script = Script(*(asking(f"q{i}", f"s{i}") for i in range(4)))
    with pytest.raises(TooManyRounds, match=r"'srv' kept asking for input: 3 rounds of input_required on deploy"):
        await script.run(max_rounds=3)
    assert len(script.asked) == 3


async def test_a_re_driven_call_counts_the_rounds_it_had_before() -> None:
    retry = {**CALL, "inputResponses": {"a": {"action": "decline"}}, "requestState": "s2"}
    script = Script(asking("b"), DONE)
    await script.run(max_rounds=3, round_no=2, params=retry)
    assert script.sent[0] is retry
    assert [n for _, n in script.asked] == [3]
    with pytest.raises(TooManyRounds):
        await Script(asking("c")).run(max_rounds=3, round_no=3, params=retry)


async def test_state_only_rounds_back_off_and_are_not_counted() -> None:
    still = {"resultType": "input_required", "requestState": "busy"}
    empty = {"resultType": "input_required", "inputRequests": {}, "requestState": "busy"}
    script = Script(*[still] * 5, empty, asking("q"), still, still, DONE)
    assert await script.run(max_rounds=1) is DONE
    assert script.paused == [0.05, 0.1, 0.2, 0.25, 0.25, 0.25, 0.05, 0.1]  # back to the start once a round asks
    assert all(sent.get("requestState") == "busy" for sent in script.sent[1:7])
    assert "inputResponses" not in script.sent[1]


async def test_what_the_loop_cannot_read_ends_it_naming_the_server() -> None:
    with pytest.raises(RoundsError, match=r"resultType 'later', which mcpx does not know"):
        await Script({"resultType": "later"}).run()
    handle = {"resultType": "task", "taskId": "T", "status": "working"}
    assert await Script(handle).run() == handle  # a task handle ends the rounds: mcp/tasks.py follows it
    with pytest.raises(RoundsError, match="sent inputRequests that is not an object"):
        await Script({"resultType": "input_required", "inputRequests": ["x"]}).run()


def test_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = Backoff(first=1, cap=5)
    assert [backoff.pause() for _ in range(5)] == [1, 2, 4, 5, 5]
    backoff.reset()
    assert backoff.pause() == 1


def test_the_models_keep_the_wire_as_it_came() -> None:
    sent = {"resultType": "input_required", "inputRequests": {"k": {"method": "roots/list"}}, "requestState": "x"}
    assert InputRequired.model_validate(sent).wire() == sent
    assert list(InputRequired(inputRequests={"k": {}}, requestState="x").wire()) == list(sent)
    assert InputRequired.model_validate({"resultType": "input_required"}).wire() == {"resultType": "input_required"}
    retry = Retry.model_validate({"name": "t", "arguments": {}, "inputResponses": {"k": {}}, "requestState": "x"})
    assert (retry.input_responses, retry.request_state) == ({"k": {}}, "x")
