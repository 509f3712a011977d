"""A modern client's answers to what a call asked of it, given where they belong: one place for both ways a
modern client answers, the retry of its tools/call (`inputResponses` with mcpx's `requestState`) and
`tasks/update` (the Tasks extension).

A question's answer goes through the broker as `person:mcp-client`: the client shows what it is given to its
user, as it would a standalone `elicitation/create` (the Tasks extension says so of `inputRequests` too), and
nothing on the wire says an answer is the agent's instead. A reply to a request for the client itself (roots,
sampling: a `Slot`) is handed to it verbatim. An unattended host's replies are nobody's answers (they are not
recorded; the question is passed over for this client), content that does not fit leaves the question open, and
a question answered elsewhere first keeps that answer: the client is told its own was not used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpx.broker.broker import Broker
from mcpx.broker.models import Elicitation
from mcpx.broker.refusals import AlreadyAnswered, Gone, InvalidContent
from mcpx.call.record import Call

SLOT = "slot:"  # a target that is a request for the client itself, by its key in Call.slots
SETTLING = 5.0  # how long the answers may take to reach the call before the reply goes anyway


@dataclass
class Given:
    answered: set[str] = field(default_factory=set)  # targets settled: answered here, or elsewhere first
    late: list[str] = field(default_factory=list)  # for the client: answers of its that came after another won
    refused: dict[str, InvalidContent] = field(default_factory=dict)  # question id -> why its content did not fit


async def give(broker: Broker, call: Call, replies: dict[str, Any], session: str, unattended: bool) -> Given:
    """`replies`: a question id (or SLOT and a slot's key) -> the client's response to it. Once given, waits (a
    moment, at most SETTLING) for the call to wake on them, so whoever reads the call next sees it moved on."""
    given = Given()
    for target, reply in replies.items():
        if not isinstance(reply, dict):
            continue  # not a response: as if missing
        if target.startswith(SLOT):
            slot = call.slots.get(target[len(SLOT):])
            if slot is not None and not slot.future.done():
                slot.future.set_result(reply)  # the client's own result, verbatim
                given.answered.add(target[len(SLOT):])
            continue
        if reply.get("action") not in ("accept", "decline", "cancel"):
            continue
        q = call.open.get(target)
        if unattended:  # not an answer (surface/driver.py, _ask_client): while it waits, not given to it again
            if q is not None:
                call.pass_over(target)
            continue
        try:
            await broker.answer(target, reply["action"], client_content(q, reply),
                                by="person:mcp-client", session=session)
            given.answered.add(target)
        except InvalidContent as exc:
            given.refused[target] = exc  # not valid: it stays open
        except (AlreadyAnswered, Gone) as exc:
            given.answered.add(target)
            given.late.append(f"mcpx: {exc}; the answer given here was not used.")
    # the call wakes on the answers a moment later; until then they still look open
    answered = given.answered
    await call.wait_for(lambda: call.done or not (answered & (set(call.open) | set(call.slots))), SETTLING)
    return given


def client_content(q: Elicitation | None, reply: dict[str, Any]) -> Any:
    """The content of an MCP client's accept of a form, as the server asked it: a key its schema does not name is
    left out, not refused. The client built its form from the schema, so such a key is its own addition, not a
    person's typo (mcpx's other doors refuse those); JSON Schema allows it, and a server answered directly takes
    it: mcpx takes it too, and hands the server only what it asked for."""
    if reply.get("action") != "accept" or q is None or q.mode != "form":
        return None
    content = reply.get("content")
    if not isinstance(content, dict):
        return content  # not an object: refused as it is, naming the problem
    return q.form.asked_only(content)  # the reply's own dict when it holds nothing else (the broker copies it)


def problems(refused: InvalidContent) -> str:
    """Each field's problem, in a line."""
    return "; ".join(f"{k} {v}" for k, v in refused.fields.items())
