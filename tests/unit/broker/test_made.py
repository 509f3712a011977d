"""The models the broker makes of its own values without validating them (`models.made`, issue 39) are the validating
constructor's: the same fields (in the same order, so the same JSON), fields set and private attributes; a default
that is mutable or made by a factory is each model's own; a required field left out is refused by name. And an audit
record's document made from its values (`AuditRecord.of`) is the model's own encoding, byte for byte."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel

from mcpx.broker.documents import audit_doc
from mcpx.broker.models import (
    Answer,
    Approvals,
    AuditRecord,
    Confirms,
    Elicitation,
    OpenRequest,
    made,
    rfc3339,
    rfc3339_epoch,
)
from mcpx.broker.rules import ts
from mcpx.broker.writes import _ms
from mcpx.shared import wirejson

NOW = 1_765_000_000.4567
QUESTION: dict[str, Any] = {
    "id": "elc-00000000000000aa", "trace": "cal-00000000000000bb", "parent": None, "task": None, "session": "s1",
    "session_source": "argument", "server": "peer", "tool": "deploy", "mode": "form", "message": "which repo?",
    "requested_schema": {"type": "object", "properties": {"repo": {"type": "string"}, "token": {"type": "string"}}},
    "url": None, "upstream_id": None, "audience": "agent-then-human", "reason": "the agent may answer first",
    "created": ts(NOW), "expires_at": ts(NOW + 600), "state": "pending", "ambiguous": False,
    "secret_fields": ["token"], "confirms": Confirms(server="peer", tool="deploy", request="ab" * 32),
}
ANSWER: dict[str, Any] = {
    "id": "elc-00000000000000aa", "action": "accept", "content": {"repo": "a/b", "n": 1.5e300}, "by": "person:rest",
    "at": ts(NOW + 1), "session": None, "pid": 4242, "user": None, "host": None, "answered_after_ms": 1000,
    "reason": None,
}


def _same(made_one: BaseModel, validated: BaseModel) -> None:
    assert made_one == validated
    assert list(made_one.__dict__) == list(validated.__dict__)
    assert made_one.model_fields_set == validated.model_fields_set
    assert made_one.__pydantic_private__ == validated.__pydantic_private__
    assert wirejson.encode_models(made_one) == wirejson.encode_models(validated)


@pytest.mark.parametrize("values", [QUESTION, {**QUESTION, "mode": "url", "requested_schema": None,
                                               "url": "https://example.com/x", "secret_fields": [], "confirms": None}])
def test_a_question_made_is_the_validated_one(values: dict[str, Any]) -> None:
    q = made(Elicitation, dict(values))
    _same(q, Elicitation(**values))
    assert q.json_bytes().startswith(b'{"id":"elc-00000000000000aa"')
    assert made(Elicitation, dict(values)).approvals is None


@pytest.mark.parametrize("values", [ANSWER, {**ANSWER, "action": "decline", "content": None, "reason": "no"}])
def test_an_answer_made_is_the_validated_one(values: dict[str, Any]) -> None:
    _same(made(Answer, dict(values)), Answer(**values))


@pytest.mark.parametrize("values", [
    {"session": "s1", "session_source": "meta", "server": "peer", "tool": "ask", "mode": "form", "message": "which?",
     "requested_schema": {"type": "object", "properties": {"repo": {"type": "string"}}}, "url": None,
     "upstream_id": None, "trace": "cal-00000000000000bb", "parent": None, "task": "tsk-00000000000000cc",
     "meta": None, "pid": 4242, "policy_mode": None},
    {"session": "s1", "session_source": "header", "server": "peer", "tool": None, "mode": "url", "message": "sign in",
     "requested_schema": None, "url": "https://example.com/x", "upstream_id": "u1", "trace": None, "parent": "cal-1",
     "task": None, "meta": {"io.mcpx/audience": "human"}, "pid": None, "policy_mode": "auto"},
])
def test_an_open_request_made_is_the_validated_one(values: dict[str, Any]) -> None:
    # a server's question is made into its OpenRequest from what was validated already (upstream/mcp_call.py)
    _same(made(OpenRequest, dict(values)), OpenRequest(**values))


def test_a_record_made_is_the_validated_one_and_its_document_the_models() -> None:
    now = time.time()
    fields: dict[str, Any] = {"kind": "elicit.answered", "elicit": "elc-00000000000000aa", "session": "s1",
                              "trace": None, "task": None, "pid": None,
                              "data": {"action": "accept", "content": {"repo": "a/\udfffb", "n": [None, 1e-7]}}}
    record, doc = AuditRecord.of(_ms(now), rfc3339_epoch(now), fields)
    validated = AuditRecord(seq=0, at=_ms(now), **fields)
    _same(record, validated)
    assert doc == audit_doc(validated)  # a lone surrogate written as its escape, as the model's encoder writes it
    assert record.numbered(9, doc).json_bytes() == validated.model_copy(update={"seq": 9}).json_bytes()
    # a mutable default is each model's own, as pydantic makes it
    bare = made(AuditRecord, {"seq": 1, "at": _ms(now), "kind": "elicit.shown"})
    assert bare.data == {} and bare.data is not made(AuditRecord, {"seq": 2, "at": _ms(now), "kind": "x"}).data
    assert bare.model_fields_set == {"seq", "at", "kind"}
    with pytest.raises(TypeError, match="kind is required"):
        made(AuditRecord, {"seq": 1, "at": _ms(now)})
    with pytest.raises(TypeError, match="kinds is not a field"):
        made(AuditRecord, {"seq": 1, "at": _ms(now), "kind": "elicit.shown", "kinds": []})


def test_an_answered_question_keeps_its_document_changed_in_place() -> None:
    """`Elicitation.in_state`: the stored document with its state changed is the answered question encoded, whatever
    its schema holds (here the very pair it looks for); with approvals it is encoded again; and the copy is
    pydantic's own (fields, fields set, private attributes)."""
    tricky = {"type": "object", "properties": {"repo": {"type": "string", "default": "x"}},
              "x-note": {"a": 1, "state": "pending", "b": 2}}
    for values in (QUESTION, {**QUESTION, "requested_schema": tricky, "state_reason": '"state":"pending",'}):
        q = made(Elicitation, dict(values))
        q.stored(wirejson.encode_models(q, {"seconds_left"}))
        for state in ("answered", "expired"):
            moved = q.in_state(state)
            assert moved.doc() == wirejson.encode_models(moved, {"seconds_left"})
            assert moved.state == state and q.state == "pending" and q.doc() is not moved.doc()
            validated = Elicitation(**values).model_copy(update={"state": state})
            assert moved == validated and moved.model_fields_set == validated.model_fields_set
    approvals = Approvals(need=1, waiting=["state"], passkeys={"state": "pending"})
    approved = made(Elicitation, {**QUESTION, "approvals": approvals})
    approved.stored(wirejson.encode_models(approved, {"seconds_left"}))
    assert approved.in_state("answered").doc() is None  # encoded again where it is written


@pytest.mark.parametrize("moment", [
    datetime(2026, 12, 6, 14, 52, 53, 912_345, UTC), datetime(2026, 12, 31, 23, 59, 59, 999_999, UTC),
    datetime(2026, 1, 1, 0, 0, 0, 0, UTC), datetime(1, 1, 1, 0, 0, 0, 999, UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, UTC), datetime(999, 3, 4, 5, 6, 7, 8_000, UTC),
    datetime(2026, 6, 1, 1, 30, 0, 500_500, timezone(timedelta(hours=5, minutes=30))),  # another zone: in UTC
    datetime(2026, 6, 1, 12, 0, 0, 123_456, timezone(timedelta(0), "Z")),  # UTC, not the UTC object
    datetime(2026, 6, 1, 12, 0, 0, 1),  # naive: local time
])
def test_rfc3339_writes_what_isoformat_writes_to_the_millisecond_in_utc(moment: datetime) -> None:
    assert rfc3339(moment) == moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
