"""The broker's index of pending questions (broker/pending.py) on its own: the store's order, rows that come
back in a later state, a fill at start that another daemon's writes overtake, the listing's bytes."""

from __future__ import annotations

import json

from mcpx.broker.models import State
from mcpx.broker.pending import PendingIndex
from mcpx.broker.store import QuestionFilter, QuestionRow

NOW = 1_800_000_000.0


def row(eid: str, created: float, state: State = "pending", session: str = "s", audience: str = "human",
        expires: float = NOW + 60) -> QuestionRow:
    doc = json.dumps({"id": eid, "session": session, "audience": audience, "state": state}, separators=(",", ":"))
    return QuestionRow(eid, session, "srv", audience, state, created, expires, None, None, doc, False)


def ids(index: PendingIndex, **where: str) -> list[str]:
    return [p.id for p in index.select(QuestionFilter(state="pending", **where), 100)]


def test_oldest_first_as_the_store_orders_them_whatever_order_they_come_in() -> None:
    index = PendingIndex()
    index.apply([row("a", NOW + 2), row("b", NOW + 1), row("c", NOW + 2)])  # b was created first; a, c tie
    assert ids(index) == ["b", "a", "c"]
    index.apply([row("a", NOW + 2, audience="agent")])  # a row put again keeps its place
    assert ids(index) == ["b", "a", "c"] and ids(index, audience="agent") == ["a"]
    index.apply([row("b", NOW + 1, state="answered")])
    assert ids(index) == ["a", "c"] and len(index) == 2


def test_a_fill_does_not_bring_back_what_another_daemon_ended_while_it_was_read() -> None:
    index = PendingIndex()
    index.begin_fill()
    index.apply([row("x", NOW, state="answered")])  # handed on while the fill's read was under way
    index.fill([row("x", NOW), row("y", NOW + 1)])  # the read saw x before its answer
    assert ids(index) == ["y"]
    index.apply([row("x", NOW, state="answered")])  # and after the fill, rows apply as ever
    assert ids(index) == ["y"]


def test_the_listing_is_each_document_with_its_seconds_left() -> None:
    index = PendingIndex()
    index.apply([row("a", NOW, expires=NOW + 10.2), row("b", NOW + 1, expires=NOW - 5)])
    listed = json.loads(b"[" + b"".join(index.json_pieces(index.select(QuestionFilter(state="pending"), 10), NOW))
                        + b"]")
    assert listed == [{"id": "a", "session": "s", "audience": "human", "state": "pending", "secondsLeft": 11},
                      {"id": "b", "session": "s", "audience": "human", "state": "pending", "secondsLeft": 0}]
    assert index.json_pieces([], NOW) == []


def test_a_question_kept_parsed_is_read_back_only_while_its_row_stands() -> None:
    from datetime import UTC, datetime

    from mcpx.broker.documents import row_of
    from mcpx.broker.models import Elicitation
    from mcpx.broker.pending import KEPT

    def question(eid: str, audience: str = "agent-then-human") -> Elicitation:
        return Elicitation.model_validate({
            "id": eid, "session": "s", "sessionSource": "argument", "server": "srv", "mode": "form",
            "message": "Which repository?", "requestedSchema": {"type": "object", "properties": {}},
            "audience": audience, "reason": "r", "created": datetime.fromtimestamp(NOW, UTC),
            "expiresAt": datetime.fromtimestamp(NOW + 60, UTC), "state": "pending"})

    index = PendingIndex()
    first = question("elc-0000000000000001")
    index.keep(first)  # not in the index yet (its commit has not come): nothing is kept
    assert index.question(first.id) is None
    index.apply([row_of(first)])
    index.keep(first)
    assert index.question(first.id) is first  # no parse of its document while its row is the one kept
    escalated = question(first.id, audience="human")
    index.apply([row_of(escalated)])  # its row moved on (an escalation): the kept copy is not the question now
    again = index.question(first.id)
    assert again is not first and again is not None and again.audience == "human"
    index.apply([row_of(escalated.model_copy(update={"state": "answered"}))])
    assert index.question(first.id) is None
    many = [question(f"elc-{n:016x}") for n in range(2, KEPT + 3)]
    index.apply([row_of(q) for q in many])
    for q in many:
        index.keep(q)
    assert index.question(many[0].id) is not many[0] and index.question(many[-1].id) is many[-1]  # the latest KEPT
