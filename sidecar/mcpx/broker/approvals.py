"""Approvals by named people, counted here and nowhere else (docs/approvals.md).

A question that needs approvals carries them (`Elicitation.approvals`), so where they stand is stored with the
question, in the same row and the same transaction as every change to it, on either store. Pure functions of
that state, an approver's vote and the clock they are given: who may vote, what a vote does, when the next
reminder or escalation is due and what it does. The broker applies them inside its writes (broker/writes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from mcpx.broker.models import Action, ApprovalRequest, Approvals, Elicitation, EscalationStep, rfc3339
from mcpx.broker.policy import matches
from mcpx.broker.refusals import AlreadyAnswered, BrokerError, Forbidden, InvalidQuestion
from mcpx.broker.rules import ts
from mcpx.broker.schema import Field
from mcpx.config.models import ElicitSettings


def _fixed(f: Field) -> bool:
    """A field with one possible value (an enum of one: a confirmation's request digest): it asks nobody anything."""
    return f.kind == "enum" and len(f.options) == 1


def yes_no(q: Elicitation) -> bool:
    """Whether approvals can apply: url consent, or a yes/no confirmation (a form with no fields, or one yes/no,
    beside fields that have one possible value). A form with other fields is answered by what someone types,
    which N people cannot each give once."""
    if q.mode == "url":
        return True
    asked = [f for f in q.form.fields if not _fixed(f)]
    return not asked or (len(asked) == 1 and asked[0].kind == "boolean")


def content_of(q: Elicitation) -> dict[str, Any] | None:
    """What an approval accepts the question with: url consent carries none, a confirmation says yes (and its
    fixed fields their one value)."""
    if q.mode == "url":
        return None
    return {f.name: f.options[0][0] if _fixed(f) else True for f in q.form.fields}  # an option: (value, title)


def rule_for(settings: ElicitSettings, q: Elicitation, asker: str | None) -> ApprovalRequest | None:
    """The first elicit.approvals rule that matches `q`, as a request; None when none does or it cannot apply."""
    if not settings.approvals or not yes_no(q):
        return None
    for rule in settings.approvals:
        if matches(rule.match, q) is None:
            return ApprovalRequest(approvers=rule.approvers, need=rule.need, remind=rule.remind,
                                   escalate=[(step.after, step.to) for step in rule.escalate], asker=asker,
                                   rule=rule.id, presence=rule.presence)
    return None


def start(q: Elicitation, req: ApprovalRequest) -> Approvals:
    """The approvals `q` needs as it opens; InvalidQuestion if they could never be given."""
    if not yes_no(q):
        raise InvalidQuestion("approvals apply to yes/no confirmations (a form with no fields or one yes/no) and url "
                              "consent; this question has other fields")
    if len(set(req.approvers)) != len(req.approvers):
        raise InvalidQuestion("approvers names someone twice")
    everyone = {*req.approvers, *(p for _, to in req.escalate for p in to)} - {req.asker}
    if req.need > len(everyone):
        asker = f" (not counting {req.asker}, who asked)" if req.asker in req.approvers else ""
        raise InvalidQuestion(f"need is {req.need}, but only {len(everyone)} people could approve{asker}")
    opened = q.created.timestamp()
    steps = [EscalationStep(at=ts(opened + after), to=list(to)) for after, to in req.escalate]
    return Approvals(need=req.need, waiting=[p for p in req.approvers if p != req.asker], asker=req.asker,
                     remind=req.remind, escalate=steps, rule=req.rule,
                     remind_at=ts(opened + req.remind) if req.remind else None,
                     next_at=_next(opened + req.remind if req.remind else None, steps))


def _next(remind_at: float | None, steps: list[EscalationStep]) -> datetime | None:
    times = [t for t in [remind_at, *(s.at.timestamp() for s in steps if not s.done)] if t is not None]
    return ts(min(times)) if times else None


def due_at(a: Approvals | None) -> float | None:
    return a.next_at.timestamp() if a is not None and a.next_at is not None else None


@dataclass(frozen=True)
class Vote:
    """What an approver's answer does: the approvals after it, the question's final action if it decides it, or
    why it is refused (`recorded`: the refusal itself is audited and kept, as a self-approval is)."""

    approvals: Approvals
    final: Action | None = None
    refusal: BrokerError | None = None
    recorded: bool = False


# where a person stands on a question's approvals: waited on (their vote is asked for), approved already, the asker
# (whose approval never counts), or none of these (not an approver)
Standing = Literal["waiting", "approved", "asker", "outsider"]


def standing(a: Approvals, person: str) -> Standing:
    """Where `person` stands: what a vote of theirs would meet (`vote`), whether a link is made for them (the asker's
    and an outsider's are refused), and whether their page offers buttons (only while they are waited on)."""
    if person in a.by:
        return "approved"
    if person == a.asker:
        return "asker"
    return "waiting" if person in a.waiting else "outsider"


def own_request(a: Approvals, person: str) -> str:
    """Why the asker's approval is refused, in the words each door says it."""
    return (f"{person} asked this question, and nobody approves their own request: it needs {a.need} approvals "
            "from others")


def not_an_approver(q: Elicitation, a: Approvals, person: str) -> str:
    return f"{person} is not an approver of {q.id} (approvers waited on: {', '.join(a.waiting) or 'none'})"


def vote(q: Elicitation, a: Approvals, person: str, action: Action) -> Vote:
    if action == "cancel":
        return Vote(a, refusal=Forbidden("an approver accepts or declines; cancel is the asker's (mcpx elicit cancel)"))
    where = standing(a, person)
    if where == "approved":
        return Vote(a, refusal=AlreadyAnswered(f"{person} already approved {q.id}; each approver's link counts once"))
    if where == "asker" and action == "accept":  # a link minted for the asker before mcpx refused to mint one
        refused = a.refused if person in a.refused else [*a.refused, person]
        return Vote(a.model_copy(update={"refused": refused}), refusal=Forbidden(own_request(a, person)),
                    recorded=True)
    if where == "outsider":
        return Vote(a, refusal=Forbidden(not_an_approver(q, a, person)))
    waiting = [p for p in a.waiting if p != person]
    if action == "decline":
        return Vote(a.model_copy(update={"waiting": waiting, "next_at": None}), final="decline")
    by = [*a.by, person]
    done = len(by) >= a.need
    return Vote(a.model_copy(update={"by": by, "waiting": waiting, "next_at": None if done else a.next_at}),
                final="accept" if done else None)


@dataclass
class ApprovalsDue:
    """What came due: who is reminded, who the question escalated to, the approvals after it."""

    approvals: Approvals
    remind: list[str] = field(default_factory=list)
    escalate: list[str] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"remind": self.remind, "escalate": self.escalate}
        if self.approvals.next_at is not None:
            out["nextAt"] = rfc3339(self.approvals.next_at)
        return out


def nudge(a: Approvals, now: float) -> ApprovalsDue | None:
    """The reminder and escalations due at `now`, or None if nothing is (another daemon did it already: the
    stored next time moved on). Missed reminders (a daemon down meanwhile) come as one, not a burst."""
    if a.next_at is None or now < a.next_at.timestamp():
        return None
    steps, escalate = [], []
    waiting = list(a.waiting)
    for step in a.escalate:
        if not step.done and step.at.timestamp() <= now:
            step = step.model_copy(update={"done": True})
            for person in step.to:
                if person not in waiting and person not in a.by and person != a.asker:
                    waiting.append(person)
                    escalate.append(person)
        steps.append(step)
    remind: list[str] = []
    remind_at = a.remind_at.timestamp() if a.remind_at is not None else None
    if a.remind and remind_at is not None and remind_at <= now:
        remind = [p for p in a.waiting if p not in escalate]
        remind_at += a.remind * (1 + int((now - remind_at) // a.remind))
    at = None if remind_at is None else ts(remind_at)
    out = a.model_copy(update={"waiting": waiting, "escalate": steps, "remind_at": at,
                               "next_at": _next(remind_at, steps)})
    return ApprovalsDue(out, remind, escalate)
