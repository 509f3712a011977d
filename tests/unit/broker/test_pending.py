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


def listed(index: PendingIndex, now: float, limit: int = 1000, **where: str) -> list[dict[str, object]]:
    pieces, count = index.listing(QuestionFilter(state="pending", **where), limit, now)
    out: list[dict[str, object]] = json.loads(b"[" + b"".join(pieces) + b"]")
    assert count == len(out)
    return out


def test_the_listing_is_each_document_with_its_seconds_left() -> None:
    index = PendingIndex()
    index.apply([row("a", NOW, expires=NOW + 10.2), row("b", NOW + 1, expires=NOW - 5)])
    assert listed(index, NOW) == [{"id": "a", "session": "s", "audience": "human", "state": "pending",
                                   "secondsLeft": 11},
                                  {"id": "b", "session": "s", "audience": "human", "state": "pending",
                                   "secondsLeft": 0}]
    assert listed(index, NOW, session="nobody") == [] and listed(index, NOW, limit=0) == []


def test_a_long_listing_gives_each_question_its_own_seconds_left() -> None:
    """Deadlines that never go down along the listing are given their secondsLeft a run at a time: every question's
    is still its own, through questions that are added, end and move while the listing is kept."""
    index = PendingIndex()
    # 400 questions, deadlines rising over ~4 s, some already past: runs of ~100 a second
    index.apply([row(f"q{i:03}", NOW + i, session="s" if i % 3 else "t", expires=NOW - 1.5 + i / 100)
                 for i in range(400)])

    def check(now: float, limit: int = 1000, **where: str) -> None:
        got = listed(index, now, limit, **where)
        want = index.select(QuestionFilter(state="pending", **where), limit)
        assert [q["id"] for q in got] == [p.id for p in want]
        # seconds_left's rule as a listing has always inlined it (its rounding may differ from it by one ulp)
        assert [q["secondsLeft"] for q in got] == [max(0, int(p.expires - (now - 0.999))) for p in want]

    for now in (NOW, NOW + 0.0049, NOW + 0.5, NOW + 1.999, NOW + 2.5, NOW + 9):
        check(now)
        check(now, limit=150)
        check(now, session="t")
        check(now, 20, session="s", audience="human")
    index.apply([row("q050", NOW + 50, state="answered"), row("q051", NOW + 51, audience="agent"),
                 row("z", NOW + 500, expires=NOW + 3.2)])  # one ends, one moves in its place, one joins at the end
    check(NOW + 0.3)
    index.apply([row("early", NOW - 1, expires=NOW + 99)])  # created before all of them: first, and out of order
    check(NOW + 0.3)
    assert listed(index, NOW + 0.3)[0]["id"] == "early"
    index.apply([row("q100", NOW + 100, state="expired"), row("q200", NOW + 200, expires=NOW + 1.01),
                 row("z2", NOW + 501, expires=NOW + 3.3)])  # and again, once the listing's places are numbered anew
    check(NOW + 0.3)
    index.apply([row(f"q{i:03}", NOW + i, state="answered") for i in range(0, 400, 2)])  # half of them leave at once
    check(NOW + 1.5)
    assert len(listed(index, NOW)) == len(index) == 203


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


def test_a_question_opened_and_ended_in_one_batch_is_never_listed_and_the_others_keep_their_places() -> None:
    index = PendingIndex()
    index.apply([row("a", NOW)])
    # a round trip's question and its answer commit together; another question opens, is moved and stays pending
    index.apply([row("q", NOW + 1), row("b", NOW + 2), row("q", NOW + 1, state="answered"),
                 row("b", NOW + 2, audience="agent")])
    assert ids(index) == ["a", "b"] and ids(index, audience="agent") == ["b"] and index.get("q") is None
    assert [p["id"] for p in listed(index, NOW)] == ["a", "b"]
    index.apply([row("c", NOW + 3), row("a", NOW, state="expired")])
    assert ids(index) == ["b", "c"] and [p["id"] for p in listed(index, NOW)] == ["b", "c"]
