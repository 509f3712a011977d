"""The answer rules, on their own: pure functions of a question and the answer offered (broker/rules.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from mcpx.broker import rules
from mcpx.broker.models import REDACTED, Action, Answer, Audience, Elicitation, OpenRequest
from mcpx.broker.passkeys import CHALLENGE_TTL, Nonces, challenge_for
from mcpx.broker.refusals import AlreadyAnswered, Forbidden, Gone, InvalidContent, InvalidQuestion, PresenceNeeded

NOW = 1_700_000_000.0
REPO = {"type": "object", "properties": {"repo": {"type": "string"}, "depth": {"type": "integer", "default": 3}},
        "required": ["repo"]}
TOKEN = {"type": "object", "properties": {"api_token": {"type": "string"}}}


def opened(schema: dict[str, Any] | None = REPO, **over: Any) -> Elicitation:
    req = OpenRequest(session="s", session_source="argument", server="srv", message="which repository?",
                      requested_schema=schema)
    q, _ = rules.question_of(req, NOW, 60)
    return q.model_copy(update=over)


def answer(q: Elicitation, by: str = "person:cli", action: str = "accept") -> Answer:
    return Answer(id=q.id, action=action, by=by, at=rules.ts(NOW + 1), answered_after_ms=1000)  # type: ignore[arg-type]


def test_a_question_is_opened_pending_for_its_ttl_with_its_credentials_named() -> None:
    q = opened(TOKEN)
    assert (q.state, q.expires_at - q.created) == ("pending", timedelta(seconds=60))
    assert q.secret_fields == ["api_token"] and q.audience == "human"


@pytest.mark.parametrize(("over", "says"), [
    ({"mode": "url", "requested_schema": None}, "needs an http"),
    ({"mode": "url", "url": "https://example.com", "requested_schema": REPO}, "takes url, not"),
    ({"url": "https://example.com"}, "takes requestedSchema, not url"),
    ({"message": "  "}, "message is required"),
    ({"message": "bad \ud800"}, "message"),
    ({"requested_schema": {"type": "object", "properties": {"a": {"type": "object"}}}}, "flat schema"),
])
def test_a_question_that_cannot_be_asked_as_given_is_refused(over: dict[str, Any], says: str) -> None:
    req = OpenRequest(session="s", session_source="argument", server="srv", message="which?", requested_schema=REPO)
    with pytest.raises(InvalidQuestion, match=says):
        rules.question_of(req.model_copy(update=over), NOW, 60)


def test_an_answer_from_another_session_is_refused() -> None:
    refused = rules.refusal(opened(), "person:cli", "other", "accept")
    assert isinstance(refused, Forbidden) and "belongs to session s" in refused.message


@pytest.mark.parametrize(("audience", "by", "refused"), [
    ("human", "agent:mcp", True), ("human", "person:web", False), ("agent", "agent:mcp", False),
    ("human", "human", False),  # a string that names no agent is not refused as one
])
def test_an_agent_may_not_answer_the_persons_question(audience: Audience, by: str, refused: bool) -> None:
    assert (rules.refusal(opened(audience=audience), by, "s", "accept") is not None) == refused


@pytest.mark.parametrize(("audience", "action", "refused"), [
    ("human", "accept", True), ("human", "decline", False), ("human", "cancel", False),
    ("agent-then-human", "accept", False), ("agent", "accept", False),
])
def test_a_script_may_refuse_for_the_person_but_never_consent(audience: Audience, action: Action,
                                                              refused: bool) -> None:
    """A script is the person's delegate like a rule: it answers the agent's questions and the agent-then-person's,
    and of the person's own it may decline or cancel, never accept."""
    found = rules.refusal(opened(audience=audience), "script:deploy", "s", action)
    assert (found is not None) == refused
    if refused:
        assert isinstance(found, Forbidden) and "script:deploy" in found.message and "client.ask" in found.message


def test_a_credential_is_accepted_only_where_it_was_asked_on_a_shared_store() -> None:
    q = opened(TOKEN)
    assert isinstance(rules.elsewhere(q, "accept", shared=True, asked_here=False), Forbidden)
    assert rules.elsewhere(q, "accept", shared=True, asked_here=True) is None
    assert rules.elsewhere(q, "decline", shared=True, asked_here=False) is None
    assert rules.elsewhere(q, "accept", shared=False, asked_here=False) is None
    assert rules.elsewhere(opened(), "accept", shared=True, asked_here=False) is None


def test_content_is_checked_against_the_schema_and_its_defaults_filled() -> None:
    assert rules.checked_content(opened(), "accept", {"repo": "a/b"}) == {"repo": "a/b", "depth": 3}
    with pytest.raises(InvalidContent) as missing:
        rules.checked_content(opened(), "accept", {})
    assert set(missing.value.fields) == {"repo"}
    with pytest.raises(InvalidContent, match="only with accept"):
        rules.checked_content(opened(), "decline", {"repo": "a/b"})
    url = opened(None, mode="url", url="https://example.com", requested_schema=None)
    with pytest.raises(InvalidContent, match="without content"):
        rules.checked_content(url, "accept", {"x": 1})
    assert rules.checked_content(url, "accept", None) is None


@pytest.mark.parametrize(("audience", "by", "action", "escalates"), [
    ("agent-then-human", "agent:mcp", "decline", True),
    ("agent-then-human", "agent:mcp", "cancel", False),
    ("agent-then-human", "person:cli", "decline", False),
    ("agent", "agent:mcp", "decline", False),
])
def test_only_an_agents_decline_of_a_question_it_answers_first_escalates(
        audience: Audience, by: str, action: Any, escalates: bool) -> None:
    assert rules.escalates(opened(audience=audience), action, by) == escalates


def test_an_escalated_question_is_the_persons_and_says_why() -> None:
    q, why = rules.escalated(opened(audience="agent-then-human"), None)
    assert (q.audience, q.escalated, why) == ("human", True, "the agent gave no reason")
    assert q.state_reason == "the agent declined: the agent gave no reason"


def test_an_ended_question_tells_a_late_answer_how_it_ended() -> None:
    q = opened()
    first = rules.ended_error(q.model_copy(update={"state": "answered"}), answer(q, "person:web", "decline"))
    assert isinstance(first, AlreadyAnswered) and "(person:web, " in first.message and "decline)" in first.message
    expired = rules.ended_error(q.model_copy(update={"state": "expired"}), None)
    assert isinstance(expired, Gone) and expired.details["state"] == "expired" and "expired at" in expired.message
    gone = rules.ended_error(q.model_copy(update={"state": "abandoned", "state_reason": "the call went away"}), None)
    assert isinstance(gone, Gone) and gone.details == {"state": "abandoned", "reason": "the call went away"}
    assert gone.message == f"{q.id} was abandoned: the call went away"


def test_a_stored_answer_keeps_credentials_redacted_and_is_the_answer_itself_when_it_has_none() -> None:
    q = opened(TOKEN)
    given = answer(q).model_copy(update={"content": {"api_token": "s3cret"}})
    assert rules.as_stored(given, q.secret_fields).content == {"api_token": REDACTED}
    assert given.content == {"api_token": "s3cret"}
    assert rules.as_stored(given, []) is given
    assert rules.redact(None, ["api_token"]) is None


def test_presence_takes_an_accept_only_with_a_passkey_and_each_challenge_once_for_its_own_question() -> None:
    q, other = opened(presence=True), opened(presence=True)
    assert isinstance(rules.unproven(q, "accept", False), PresenceNeeded)
    assert rules.unproven(q, "accept", True) is None
    assert rules.unproven(q, "decline", False) is None and rules.unproven(q, "cancel", False) is None
    assert rules.unproven(opened(), "accept", False) is None  # a question without presence is unchanged
    # the challenge binds the question, what is accepted and the nonce
    base = challenge_for(q, {"repo": "a"}, "n")
    assert len({base, challenge_for(other, {"repo": "a"}, "n"), challenge_for(q, {"repo": "b"}, "n"),
                challenge_for(q, {"repo": "a"}, "m")}) == 4
    assert challenge_for(q, {"repo": "a"}, "n") == base
    nonces = Nonces()
    first = nonces.issue(q.id, now=NOW)
    refused = nonces.take(other.id, first, now=NOW)
    assert refused is not None and f"another question ({q.id})" in str(refused)
    assert nonces.take(q.id, first, now=NOW) is None  # the other question's try did not spend it
    assert "used before" in str(nonces.take(q.id, first, now=NOW))
    late = nonces.issue(q.id, now=NOW)
    assert "expired" in str(nonces.take(q.id, late, now=NOW + CHALLENGE_TTL + 1))


def _asked(schema: dict[str, Any], message: str = "which one?") -> Elicitation:
    req = OpenRequest(session="s", session_source="argument", server="srv", message=message, requested_schema=schema)
    return rules.question_of(req, NOW, 60)[0]


def test_each_form_is_decided_by_its_own_text_never_by_another_or_a_stale_one() -> None:
    # what a form decides (its fields, credentials, route) is kept per schema's text: two forms never share it, and a
    # schema changed after a question asked it is decided again, not served what its old text decided
    plain = {"type": "object", "properties": {"repo": {"type": "string"}}}
    secret = {"type": "object", "properties": {"repo": {"type": "string"}, "api_key": {"type": "string"}}}
    first, other = _asked(plain), _asked(secret)
    assert (first.secret_fields, first.audience, first.form.names) == ([], "agent-then-human", ["repo"])
    assert (other.secret_fields, other.audience, other.form.names) == (["api_key"], "human", ["repo", "api_key"])
    schema = {"type": "object", "properties": {"repo": {"type": "string"}}}
    assert _asked(schema).secret_fields == []
    schema["properties"]["password"] = {"type": "string"}  # the same dict, changed in place
    changed = _asked(schema)
    assert (changed.secret_fields, changed.audience, changed.form.names) == (["password"], "human",
                                                                              ["repo", "password"])
    schema["properties"]["password"] = {"type": "object"}  # now no flat form at all
    with pytest.raises(InvalidQuestion, match="flat schema"):
        _asked(schema)
    # the same fields in another order are another form: a form's order is the server's
    swapped = {"type": "object", "properties": {"api_key": {"type": "string"}, "repo": {"type": "string"}}}
    assert _asked(swapped).form.names == ["api_key", "repo"]
    # one JSON type is not another: a default of true is not a default of 1
    ones = _asked({"type": "object", "properties": {"n": {"type": "integer", "default": 1}}})
    trues = _asked({"type": "object", "properties": {"n": {"type": "integer", "default": True}}})
    assert type(ones.form.fields[0].default) is int and trues.form.fields[0].default is True
    # each question's credential fields are its own list: one changed is not the next question's
    first_again = _asked(secret)
    first_again.secret_fields.append("repo")
    assert _asked(secret).secret_fields == ["api_key"]


def test_a_lone_yes_no_is_routed_by_its_own_message_whatever_asked_the_same_form_before() -> None:
    lone = {"type": "object", "properties": {"go": {"type": "boolean"}}}
    assert "message asks for consent" in _asked(lone, "really delete it?").reason
    assert "is a confirmation" in _asked(lone, "ok?").reason


@pytest.mark.parametrize(("schema", "message", "where"), [
    ({"type": "object", "properties": {"a\udfff": {"type": "string"}}}, "which?",
     "requestedSchema.properties.a\\udfff"),
    ({"type": "object", "properties": {"a": {"type": "string", "title": "\ud800"}}}, "which?",
     "requestedSchema.properties.a.title"),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, "déjà \udfff", "message"),
])
def test_a_lone_surrogate_anywhere_in_a_question_is_named_where_it_is(schema: dict[str, Any], message: str,
                                                                      where: str) -> None:
    with pytest.raises(InvalidQuestion) as refused:
        _asked(schema, message)
    assert refused.value.details == {"fields": {where: rules.wirejson.SURROGATE_PROBLEM}}


def test_a_question_in_any_script_is_asked() -> None:
    q = _asked({"type": "object", "properties": {"città": {"type": "string", "title": "Città 🏙"}}}, "Quale città? 🏙")
    assert (q.message, q.form.names) == ("Quale città? 🏙", ["città"])
