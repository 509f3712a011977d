"""Answering without a person, only where that is honest (SPEC section 6).

`elicit.mode` decides what happens when no rule matches; rules match on what a question
carries and answer it with their `action` and `content`. A rule never accepts a question
for the person unless it names that exact server and field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from mcpx.broker.models import Action, Answerer, Elicitation
from mcpx.config.models import Config, ElicitMode, ElicitSettings, Rule, RuleMatch

# the modes from the loosest to the strictest: each leaves fewer questions to be answered as they would have been
# (ask: a person or an agent answers what no rule does; auto: rules, else cancel; decline: every question refused,
# rules too; error: the call fails)
STRICTNESS: tuple[ElicitMode, ...] = ("ask", "auto", "decline", "error")


@dataclass(frozen=True)
class Decision:
    """What policy does with a question: answer it (`action`), or fail the call (`fail`)."""

    source: str  # rule id, or the mode ("auto", "decline", "error")
    action: Action | None
    content: dict[str, Any] | None
    because: str
    fail: bool = False

    @property
    def by(self) -> str:
        return str(Answerer(kind="policy", detail=self.source))


@dataclass(frozen=True)
class RuleCheck:
    rule: str
    fires: bool
    why: str


def matches(m: RuleMatch, q: Elicitation) -> str | None:
    """None when a rule's match (a policy rule's, an approval rule's) fits the question, else why not."""
    # mcpx's own confirmation of a call is matched by the call's server, tool and method as well as its own
    about = q.confirms
    if m.server is not None and m.server != q.server and (about is None or m.server != about.server):
        return f"server is {q.server!r}, not {m.server!r}"
    if m.tool is not None and m.tool != q.tool and (about is None or m.tool != about.tool):
        return f"tool is {q.tool!r}, not {m.tool!r}"
    if m.method is not None and (about is None or (about.method or "").upper() != m.method.upper()):
        return f"it confirms no {m.method.upper()} request" if about else "it is not mcpx's confirmation of a request"
    if m.mode is not None and m.mode != q.mode:
        return f"mode is {q.mode!r}, not {m.mode!r}"
    if m.audience is not None and m.audience != q.audience:
        return f"audience is {q.audience!r}, not {m.audience!r}"
    if m.field is not None and q.form.get(m.field) is None:
        return f"the question has no field {m.field!r}"
    if m.message is not None and not re.search(m.message, q.message or ""):
        return f"message does not match /{m.message}/"
    return None


def check_rule(rule: Rule, q: Elicitation, environ: Any = os.environ) -> RuleCheck:
    rid = rule.id or "?"
    miss = matches(rule.match, q)
    if miss:
        return RuleCheck(rid, False, miss)
    if rule.when is not None and not rule.when.holds(environ):
        return RuleCheck(rid, False, f"needs {rule.when.env} in the daemon's environment")
    if rule.action == "accept" and q.audience == "human" and (rule.match.server != q.server
                                                                or rule.match.field is None):
        return RuleCheck(
            rid, False,
            "the question is for the person; a rule may accept it only when it names this server and field",
        )
    if rule.action == "accept" and q.mode == "form":
        _, problems = q.form.check_content(rule.content or {})
        if problems:
            listed = "; ".join(f"{k} {v}" for k, v in problems.items())
            return RuleCheck(rid, False, f"its content does not fit the question: {listed}")
    return RuleCheck(rid, True, rule.because or f"rule {rid} matched")


def call_mode(configured: ElicitMode, asked: ElicitMode | None) -> tuple[ElicitMode, str]:
    """The mode a call's questions are decided under, and how to name it: a caller's own for its call (`mcpx call
    --elicit=…`, a script client without a handler: `auto`) where it is stricter than elicit.mode, else elicit.mode.
    A caller may refuse more than the config does, never less: a config that declines or fails every question is
    not overridden by a call that would let rules answer."""
    if asked is not None and STRICTNESS.index(asked) > STRICTNESS.index(configured):
        return asked, f"the call's elicit mode is {asked!r}"
    return configured, f"elicit.mode is {configured!r}"


def evaluate(settings: ElicitSettings, q: Elicitation, environ: Any = os.environ,
             mode: ElicitMode | None = None) -> tuple[Decision | None, list[RuleCheck]]:
    """The decision for a question, and how each rule fared (for `mcpx policy test`).

    `mode` is a caller's own choice for its call (`mcpx call --elicit=…`), which applies where it is stricter than
    elicit.mode (call_mode).
    """
    checks: list[RuleCheck] = []
    mode, named = call_mode(settings.mode, mode)
    if mode == "decline":
        return Decision("decline", "decline", None, f"{named}: mcpx refuses every question here"), checks
    if mode == "error":
        return Decision("error", None, None, f"{named}: a call that asks a question fails", fail=True), checks
    for rule in settings.rules:
        check = check_rule(rule, q, environ)
        checks.append(check)
        if check.fires:
            content = (rule.content or {}) if rule.action == "accept" and q.mode == "form" else None
            return Decision(rule.id or "?", rule.action, content, check.why), checks
    if mode == "auto":
        return Decision("auto", "cancel", None, f"{named} and no rule matched: nobody chose"), checks
    return None, checks


def needs_presence(config: Config, q: Elicitation) -> bool:
    """Whether only a person's passkey accepts `q` by the config (docs/presence.md): an elicit.presence rule matches
    it, or it is mcpx's confirmation of a call to a server whose entry says `confirmPresence`."""
    if q.confirms is not None and (entry := config.servers.get(q.confirms.server)) is not None \
            and entry.confirm_presence:
        return True
    presence = config.elicit.presence
    return bool(presence) and any(matches(rule.match, q) is None for rule in presence)
