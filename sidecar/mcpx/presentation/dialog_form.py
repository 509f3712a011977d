"""A question as a dialog draws it: who asks, the server's words, why it is the person's, the deadline, and one
field per property of its requestedSchema — the fields' kinds, labels, hints, choices and defaults decided here,
once, so that a dialog (the opencode TUI plugin's first) draws what it is given and holds no rule of its own.

A dialog sends back what the person entered as `entries` (POST /v1/elicit/{id}/accept with `{"form": …}`): per
field the text they typed, or the tokens of the choices they picked, or "true"/"false"; `content_of_entries` types
them by the schema, and the daemon's own validation (schema.validate_content) judges the result, naming each
field's problem. Everything from the server is text, made safe for a terminal (mcpx.presentation.text), never markup.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from mcpx.broker.models import Elicitation, Moment, WireModel
from mcpx.broker.schema import Field as SchemaField
from mcpx.broker.schema import same
from mcpx.presentation.text import clock, plain, quoted
from mcpx.presentation.urlfacts import url_facts

FieldKind = Literal["text", "number", "integer", "boolean", "choice", "choices", "secret"]
Entry = str | list[str]

# what an empty input of a format suggests, for a person typing it
PLACEHOLDERS = {"email": "name@example.com", "uri": "https://…", "date": "YYYY-MM-DD",
                "date-time": "2026-12-02T15:04:05Z"}
MESSAGE_LINES = 12  # the server's words, at most this many lines in a dialog


class FormOption(WireModel):
    token: str = Field(description="what the dialog sends back for this choice")
    label: str = Field(description="what the person sees: the option's title, as safe text")


class FormField(WireModel):
    name: str = Field(description="the property's name, as sent back (not shown raw: see label)")
    label: str = Field(description="the field's title, else its name, as safe text")
    description: str | None = Field(default=None, description="the server's description of the field, as safe text")
    kind: FieldKind = Field(description="text, number and integer are typed; boolean is a yes/no; choice picks one "
                            "option, choices any number; secret is typed masked and never shown or echoed")
    required: bool
    hint: str = Field(description="one line: the type, the constraints, the default")
    placeholder: str | None = Field(default=None, description="for an empty text input: the shape its format wants")
    value: Entry | None = Field(default=None, description="what the field starts with: its default (a text, the "
                                "tokens of the chosen options, or true/false); never for a secret")
    options: list[FormOption] | None = Field(default=None, description="choice and choices: the options, in order")


class UrlBlock(WireModel):
    url: str = Field(description="the full URL, as safe text")
    domain: str
    warning: str | None = Field(default=None, description="Punycode or look-alike letters in the domain")


class DialogForm(WireModel):
    """Everything a dialog shows of a question, in the order it shows it."""

    title: str = Field(description="who asks: 'SERVER (via mcpx) asks'")
    asker: str = Field(description="the server and the tool whose call asks")
    message: list[str] = Field(description="the server's words, line by line, as safe text")
    why: str = Field(description="why it is the person's to answer")
    expires_at: Moment
    clock: str = Field(description="the deadline on the person's clock: 14:02")
    url: UrlBlock | None = Field(default=None, description="url mode: the page the person may open")
    fields: list[FormField]
    confirm: dict[str, Any] | None = Field(default=None, description="a lone yes/no, or no fields at all: what "
                                           "Accept answers with")
    accept_means: str = Field(description="one line saying what Accept answers")
    passkey: str | None = Field(default=None, description="a question only the person's passkey accepts "
                                "(docs/presence.md): what the dialog says of it. Its page is the question's link "
                                "(GET /v1/elicit/{id}/link), which the dialog shows and opens in the person's browser "
                                "(Open passkey page)")
    toast: str = Field(description="the question in a few words, for a notification: who asks what")


def token(value: Any) -> str:
    """A choice's value as the dialog sends it back: a string as it is, anything else as JSON reads it."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _kind(f: SchemaField, secret: bool) -> FieldKind:
    if f.kind == "multi-enum":
        return "choices"
    if f.kind == "enum":
        return "choice"
    if f.kind == "string":
        return "secret" if secret else "text"
    return f.kind  # boolean, number and integer are FieldKinds of their own


def _start(f: SchemaField, kind: FieldKind) -> Entry | None:
    if not f.has_default or kind == "secret":
        return None
    default = f.default
    if kind == "choices":
        chosen = default if isinstance(default, list) else []
        return [token(v) for v, _ in f.options if any(same(v, c) for c in chosen)]
    if kind == "choice":
        return next((token(v) for v, _ in f.options if same(v, default)), None)
    if kind == "boolean":
        return ("true" if default else "false") if isinstance(default, bool) else None
    return default if isinstance(default, str) else json.dumps(default, ensure_ascii=False)


def form_field(f: SchemaField, secret: bool) -> FormField:
    kind = _kind(f, secret)
    return FormField(
        name=f.name, label=plain(f.title if f.title else f.name, 100),
        description=plain(f.description, 300) if f.description and f.description != f.title else None,
        kind=kind, required=f.required, hint=plain(f.constraints(), 400),
        placeholder=PLACEHOLDERS.get(f.format or "") if kind == "text" else None,
        value=_start(f, kind),
        options=[FormOption(token=token(v), label=plain(t, 80)) for v, t in f.options] or None,
    )


def _message(text: str) -> list[str]:
    lines = [plain(line, 500) for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) > MESSAGE_LINES:
        lines = [*lines[: MESSAGE_LINES - 1], f"… ({len(lines) - MESSAGE_LINES + 1} more lines)"]
    return lines or [""]


def why(q: Elicitation) -> str:
    """Why the question is the person's to answer, in their words: the dialog's and the web inbox's line."""
    if q.escalated:
        return "The agent declined it, and it asks for free input, so it is yours."
    if q.audience == "human":
        return f"It is yours to answer: {plain(q.reason, 300)}."
    return f"The agent may answer it; it was put to you. ({plain(q.reason, 300)})"


def dialog_form(q: Elicitation) -> DialogForm:
    """The question `q` as a dialog draws it."""
    secret = set(q.secret_fields)
    fields = [form_field(f, f.name in secret) for f in q.form.fields] \
        if q.mode == "form" else []
    confirm: dict[str, Any] | None = None
    if q.mode == "url":
        facts = url_facts(q.url or "")
        url: UrlBlock | None = UrlBlock(url=plain(facts.url, 2000), domain=plain(facts.domain, 300),
                                        warning=facts.warning)
        means = "Accept says you have opened the page and done what it asks; the page itself answers the server."
    else:
        url = None
        if not fields:
            confirm, means = {}, "Accept answers yes; Decline answers no."
        elif len(fields) == 1 and fields[0].kind == "boolean":
            confirm = {fields[0].name: True}
            means = f"Accept answers yes ({fields[0].label}: true); Decline answers no."
        else:
            means = "Accept sends what the form holds; Decline and Cancel send nothing of it."
    passkey = None
    if q.presence:
        passkey = ("Accepting it needs your passkey, on its page in your browser: Open passkey page opens it there, "
                   "where you accept it. Decline and Cancel work from here.")
        means = "Accept here is refused: only your passkey accepts it, on its page."
    who = plain(q.server, 100)
    return DialogForm(
        title=f"{who} (via mcpx) asks", asker=who + (f" · {plain(q.tool, 100)}" if q.tool else "") + ", via mcpx",
        message=_message(q.message), why=why(q), expires_at=q.expires_at, clock=clock(q.expires_at), url=url,
        fields=[] if confirm is not None else fields, confirm=confirm, accept_means=means, passkey=passkey,
        toast=f"{who} asks: {quoted(q.message, 200)}" + (f" (a page on {plain(url.domain, 100)})" if url else ""),
    )


class EntriesProblem(ValueError):
    """What a dialog sent back cannot belong to this question's form; the message names the field."""


def content_of_entries(q: Elicitation, entries: Mapping[str, Entry]) -> dict[str, Any]:
    """The content a dialog's entries give, typed by the question's schema. An empty text is no value (its default
    applies, or validation says it is required); a choice's token is its option's value; what does not fit the
    field is left as typed, so that validation names the field."""
    form = q.form
    if q.mode != "form":
        raise EntriesProblem(f"{q.id} is a url-mode question: it takes no form")
    unknown = sorted(set(entries) - set(form.names))
    if unknown:
        raise EntriesProblem(f"{', '.join(plain(u, 100) for u in unknown)}: not a field of {q.id} "
                             f"(fields: {', '.join(form.names) or 'none'})")
    content: dict[str, Any] = {}
    for name, entry in entries.items():
        f = form.get(name)
        assert f is not None  # the unknown ones are refused above
        by_token = {token(v): v for v, _ in f.options}
        if f.kind == "multi-enum":
            if not isinstance(entry, list):
                raise EntriesProblem(f"{plain(name, 100)}: a multi-select takes a list of choices")
            content[name] = [by_token[t] if t in by_token else f.pick(t) for t in entry]
            continue
        if not isinstance(entry, str):
            raise EntriesProblem(f"{plain(name, 100)}: takes one text, not a list")
        if entry == "":
            continue
        content[name] = by_token[entry] if entry in by_token else f.parse(entry)
    return content
