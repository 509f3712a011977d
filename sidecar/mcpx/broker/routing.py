"""Who a question is for: the agent, the person, or the agent first and the person if it declines.

Computed once, when a question opens, from what the question itself carries (SPEC section 6).
The rule of thumb: anything a model cannot know or must not be handed goes to the person.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcpx.broker.credentials import secret_fields, words
from mcpx.broker.models import Audience, Mode
from mcpx.broker.schema import FlatSchema

AUDIENCE_HINT_KEY = "io.mcpx/audience"
_ORDER: dict[str, int] = {"agent": 0, "agent-then-human": 1, "human": 2}

_CONSENT_NAMES = {"confirm", "confirmed", "confirmation", "approve", "approved", "approval", "consent", "proceed",
                  "agree", "allow", "authorize", "authorise", "continue"}
_CONSENT_MESSAGE = re.compile(
    r"\b(confirm|approve|consent|proceed|allow|authori[sz]e|are you sure|really|permanently|irreversibl\w*|delete"
    r"|remove|"
    r"destroy|drop|overwrite|force[- ]push|wipe|erase|purge|deploy|publish|pay|charge|transfer)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Route:
    audience: Audience
    reason: str
    hint_ignored: str | None = None


def route(
    mode: Mode,
    schema: dict[str, Any] | FlatSchema | None,
    message: str,
    meta: dict[str, Any] | None = None,
    floor: Audience | None = None,
    secrets: Sequence[str] | None = None,
    by_content: Route | None = None,
) -> Route:
    """`secrets`: the schema's credential fields, when the caller has them already (credentials.secret_fields).
    `by_content`: the form's `form_route`, when the caller has it already (it is decided once per form)."""
    base = by_content or _route_by_content(mode, schema, message,
                                           sorted(secret_fields(schema)) if secrets is None else secrets)
    hint = meta.get(AUDIENCE_HINT_KEY) if meta else None
    ignored: str | None = None
    if hint in ("user", "human") and base.audience != "human":
        base = Route("human", f"the server asked for the person (_meta {AUDIENCE_HINT_KEY}={hint!r}); "
                              f"routing alone said: {base.reason}")
    elif hint is not None and hint not in ("user", "human"):
        ignored = (f"the server's hint {AUDIENCE_HINT_KEY}={hint!r} was ignored: a server may send a question toward "
                   "the person, never past them")
    if floor is not None and _ORDER[floor] > _ORDER[base.audience]:
        base = Route(floor, f"the asker required audience {floor!r}; routing alone said: {base.reason}")
    # a Route is frozen: the one decided by content alone is every such question's
    return base if ignored is None and base.hint_ignored is None else Route(base.audience, base.reason, ignored)


def form_route(flat: FlatSchema, secrets: Sequence[str]) -> Route | None:
    """The route a form takes by its fields alone, whatever message asks it (routing's rules read the message only for
    a lone yes/no): None for such a form."""
    fields = flat.fields
    if not secrets and len(fields) == 1 and fields[0].kind == "boolean":
        return None
    return _route_by_content("form", flat, "", secrets)


def _route_by_content(
    mode: Mode, schema: dict[str, Any] | FlatSchema | None, message: str, secrets: Sequence[str]
) -> Route:
    if mode == "url":
        return Route("human", "url mode: it opens a page in the person's browser, which must not pass through a model")
    fields = FlatSchema.of(schema).fields
    if secrets:
        which = ", ".join(repr(s) for s in secrets)
        return Route("human", f"field {which} is a credential: a model cannot know it and must not be handed it")
    if not fields:
        return Route("human", "it has no fields: accepting it is a yes/no only the person can give")
    if len(fields) == 1 and fields[0].kind == "boolean":
        name = fields[0].name
        # a lone yes/no is a confirmation whatever it is called (ok, yes, deploy_now): the person's to give.
        # A fixed choice between two answers is spelt as one (an enum, oneOf consts), and goes to the agent.
        if any(w in _CONSENT_NAMES for w in words(name)):
            return Route("human", f"a lone yes/no named {name!r}: consent is the whole content of the question")
        if _CONSENT_MESSAGE.search(message or ""):
            return Route("human", "a lone yes/no whose message asks for consent: consent is the person's to give")
        return Route("human", f"a lone yes/no ({name!r}) is a confirmation: the person's to give")
    free = sorted(f.name for f in fields if not f.choices and f.kind != "boolean")
    if not free:
        return Route("agent", "only fixed choices: the agent can pick from what it has seen, and may decline")
    return Route(
        "agent-then-human",
        f"free input ({', '.join(free)}): the agent may answer if it truly knows; if it declines, the person is asked",
    )
