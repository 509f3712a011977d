"""The answer rules: what a question may be opened as, who may answer it how, and what a late answer is told.

Pure functions of the question and the answer offered: no store, no loop, no clock but the `now` they are given.
The broker applies them inside a write (where the question is as the store holds it) and, for an eager asker,
before it (broker.Broker._deliver_first); tests/unit/broker/test_rules.py holds them to their words.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from mcpx.broker import routing
from mcpx.broker.credentials import secret_fields
from mcpx.broker.models import REDACTED, Action, Answer, Answerer, Elicitation, OpenRequest, made, rfc3339
from mcpx.broker.refusals import (
    AlreadyAnswered,
    BrokerError,
    Forbidden,
    Gone,
    InvalidContent,
    InvalidQuestion,
    PresenceNeeded,
)
from mcpx.broker.schema import FlatSchema, SchemaProblem, checked_key, schema_key
from mcpx.shared import wirejson
from mcpx.shared.ids import new_id


def ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def redact(content: dict[str, Any] | None, secret: Collection[str]) -> dict[str, Any] | None:
    if content is None or not secret:
        return content
    return {k: (REDACTED if k in secret else v) for k, v in content.items()}


def as_stored(answer: Answer, secret: Collection[str]) -> Answer:
    """An answer as the store keeps it and every reader but its asker sees it: a credential's value [redacted]. The
    answer itself when it has none to hide (answers are never changed in place), not a copy."""
    if not answer.content or not secret:
        return answer
    return answer.model_copy(update={"content": redact(answer.content, secret)})


class _Form:
    """What a form decides of the question that asks it, whatever else the question holds: its fields, its credential
    fields (sorted) and its route by content, None where its message has a say (a lone yes/no)."""

    __slots__ = ("flat", "route", "secrets")

    def __init__(self, flat: FlatSchema) -> None:
        self.flat = flat
        self.secrets = tuple(sorted(secret_fields(flat)))
        self.route = routing.form_route(flat, self.secrets)


@lru_cache(maxsize=512)
def _form_of(key: bytes) -> _Form | SchemaProblem:
    """A form's `_Form`, or what is wrong with it, by its schema's JSON text (`schema_key`): decided once per text (a
    server asks the same few forms again and again), never per dict, which its holder may change after."""
    flat = checked_key(key)
    return flat if isinstance(flat, SchemaProblem) else _Form(flat)


EMPTY_FORM = b'{"type":"object","properties":{}}'  # a form-mode question without a schema asks for nothing


def question_of(req: OpenRequest, now: float, ttl: float) -> tuple[Elicitation, routing.Route]:
    """The question `req` asks, pending from `now` for `ttl` seconds, and its route; InvalidQuestion if it cannot
    be asked as given."""
    schema = req.requested_schema
    # the schema's key is its text: what no text can hold (a lone surrogate) leaves it none
    key = schema_key(schema) if schema is not None else None
    # what is stored and shown must be text: a lone surrogate could be neither written nor typed back. ASCII holds
    # none, and a schema with a key none: only what may (the rare question) is looked into, naming where
    if (schema is not None and key is None) or not (req.message + req.session + req.server + (req.tool or "")
                                                    + (req.url or "") + (req.upstream_id or "")).isascii():
        where = wirejson.lone_surrogate({"message": req.message, "requestedSchema": schema, "url": req.url,
                                         "session": req.session, "server": req.server, "tool": req.tool,
                                         "elicitationId": req.upstream_id})
        if where is not None:
            raise InvalidQuestion(f"{where} {wirejson.SURROGATE_PROBLEM}",
                                  fields={where: wirejson.SURROGATE_PROBLEM})
    if req.mode == "form":
        if schema is None:
            schema, key = {"type": "object", "properties": {}}, EMPTY_FORM
        try:
            if key is None:  # no JSON, from within the process: decided afresh
                form = _Form(FlatSchema.checked(schema))
            elif isinstance(found := _form_of(key), SchemaProblem):
                raise SchemaProblem(str(found))
            else:
                form = found
        except SchemaProblem as exc:
            raise InvalidQuestion(f"requestedSchema is not the flat schema form mode allows: {exc}") from None
        if req.url is not None:
            raise InvalidQuestion("a form-mode question takes requestedSchema, not url")
        flat: FlatSchema | None = form.flat
        secrets: tuple[str, ...] = form.secrets
        by_content = form.route
    else:
        flat, secrets, by_content = None, (), None
        if not req.url or not req.url.startswith(("https://", "http://")):
            raise InvalidQuestion("a url-mode question needs an http(s) url")
        if schema is not None:
            raise InvalidQuestion("a url-mode question takes url, not requestedSchema")
    if not req.message or not req.message.strip():
        raise InvalidQuestion("message is required: the words the person or agent will read")
    decided = routing.route(req.mode, flat, req.message, req.meta, req.audience, secrets, by_content)
    # made, not validated again: `req` was (OpenRequest), and the rest is the broker's own
    q = made(Elicitation, {
        "id": new_id("elc"), "trace": req.trace, "parent": req.parent, "task": req.task, "session": req.session,
        "session_source": req.session_source, "server": req.server, "tool": req.tool, "mode": req.mode,
        "message": req.message, "requested_schema": schema, "url": req.url, "upstream_id": req.upstream_id,
        "audience": decided.audience, "reason": decided.reason, "created": datetime.fromtimestamp(now, UTC),
        "expires_at": datetime.fromtimestamp(now + ttl, UTC), "state": "pending", "ambiguous": req.ambiguous,
        "secret_fields": list(secrets),  # decided once: the question carries them from here on (a list its own)
        "confirms": req.confirms,
    }).read_as(flat)
    return q, decided


def ended_error(q: Elicitation, answer: Answer | None) -> BrokerError:
    """What an answer to a question that has ended is told: who answered it first, when it expired, or why it was
    abandoned."""
    if q.state == "answered":
        prior = answer.wire() if answer is not None else {}
        return AlreadyAnswered(
            f"{q.id} is already answered ({prior.get('by')}, {prior.get('at')}, {prior.get('action')}); "
            "the first answer stands", answer=prior)
    if q.state == "expired":
        return Gone(f"{q.id} expired at {rfc3339(q.expires_at)}; nobody answered in time, so it was answered "
                    "cancel", state="expired", expiresAt=rfc3339(q.expires_at))
    return abandoned(q, reason=q.state_reason)


def abandoned(q: Elicitation, **details: object) -> Gone:
    """An abandoned question's 410."""
    return Gone(f"{q.id} was abandoned: {q.state_reason or 'its asker went away'}", state="abandoned", **details)


def refusal(q: Elicitation, by: str, session: str | None, action: Action) -> BrokerError | None:
    """Why `by` may not give `q` this answer from `session`, or None."""
    if session is not None and session != q.session:
        return Forbidden(f"{q.id} belongs to session {q.session}, not {session}; a question is answered only "
                         "from the session that raised it")
    if q.audience != "human":
        return None
    kind = Answerer.kind_of(by)
    if kind == "agent":
        return Forbidden(
            f"{q.id} is for the person, not the agent ({q.reason}). The person has been asked; do not answer "
            "it. Wait for the call's result instead.", audience=q.audience)
    if kind == "script" and action == "accept":
        # a script is the person's delegate as a rule is, not the person: it may refuse for them, never consent
        return Forbidden(
            f"{q.id} is for the person ({q.reason}); a script ({by}) may decline or cancel it but not accept it. "
            "It waits for the person: the inbox, the TUI, or client.ask(q) on this terminal.", audience=q.audience)
    return None


def approvers_only(q: Elicitation, action: Action) -> BrokerError | None:
    """A question that needs named people's approvals is accepted or declined only through their own links (the
    link is the person); anyone may still cancel it, as its asker would."""
    if q.approvals is None or action == "cancel":
        return None
    a = q.approvals
    return Forbidden(f"{q.id} needs {a.need} approvals from named people ({len(a.by)} of {a.need} so far), each "
                     "through their own link: it is not accepted or declined any other way (cancel still works)")


def unproven(q: Elicitation, action: Action, proven: bool) -> BrokerError | None:
    """A question that needs presence is accepted only with a passkey's assertion (`proven`); declining and
    cancelling it stay open to every door of the person's: refusing is never harder than agreeing."""
    if not q.presence or action != "accept" or proven:
        return None
    return PresenceNeeded(f"{q.id} is accepted only with the person's passkey: open its page in a browser and "
                          "accept it there (decline and cancel work from here)", presence=True)


def elsewhere(q: Elicitation, action: Action, shared: bool, asked_here: bool) -> BrokerError | None:
    """A credential accepted on another daemon than the asker's could reach the asker only as [redacted]: on a
    `shared` store, a credential question is accepted only where it was asked (`asked_here`)."""
    if not shared or not q.secret_fields or action != "accept" or asked_here:
        return None
    return Forbidden(
        f"{q.id} asks for a credential ({', '.join(q.secret_fields)}), which mcpx never stores nor sends between "
        "daemons: accept it through the daemon whose call raised it (decline and cancel work from anywhere)",
        audience=q.audience)


def checked_content(q: Elicitation, action: Action, content: dict[str, Any] | None) -> dict[str, Any] | None:
    """The content the answer carries, its schema's defaults filled in; InvalidContent, field by field, if it does
    not fit."""
    if action != "accept":
        if content:
            raise InvalidContent(f"content goes only with accept, not {action}",
                                 {"content": f"not allowed with {action}"})
        return None
    if q.mode == "url":
        if content:
            raise InvalidContent("a url-mode question is accepted without content",
                                 {"content": "not allowed in url mode"})
        return None
    filled, problems = q.form.check_content(content)
    if problems:
        listed = "; ".join(f"{k}: {v}" for k, v in problems.items())
        raise InvalidContent(f"the answer does not fit the question: {listed}", problems)
    return filled


def escalates(q: Elicitation, action: Action, by: str) -> bool:
    """An agent's decline of a question it may answer first: the person is asked instead."""
    return action == "decline" and q.audience == "agent-then-human" and Answerer.kind_of(by) == "agent"


def escalated(q: Elicitation, reason: str | None) -> tuple[Elicitation, str]:
    """`q` put to the person after the agent declined it for `reason`, and that reason as recorded."""
    why = reason or "the agent gave no reason"
    return q.model_copy(update={
        "audience": "human", "escalated": True,
        "state_reason": f"the agent declined: {why}",
        "reason": f"the agent declined ({why}), so the person is asked",
    }), why
