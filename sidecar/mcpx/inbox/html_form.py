"""A question's form as HTML, one input per field of its requestedSchema, and what a submitted form answers.

The inputs follow the schema's kinds (broker/schema.py): text and numbers are typed (the input type suits the
string's format, for a phone's keyboard), a boolean is a yes/no pair of radios, a single choice is a select, a
multi-select is a set of checkboxes. Each input is named after its property; defaults are filled in;
credentials (the question's secret_fields, the one rule of broker/credentials.py) are password inputs, never filled
back in, each with a note that its value goes to the asker only and is stored redacted. The form is `novalidate`:
the daemon's own rules (validate_content) judge the answer, once, and their problems are shown beside each field.

Under each field stands what a person reads: the server's description of it, and the limits a control does not
show, in words ("1 to 5", "at least 2 characters"); never the schema's own terms (type, format, minLength) —
the input's kind, its placeholder and "(optional)" say those.

Everything from the server — titles, descriptions, choices, defaults — is escaped: it is text, never markup.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

from multidict import MultiMapping

from mcpx.broker.schema import Field, FlatSchema

INPUT_TYPES = {"email": "email", "uri": "url", "date": "date"}
ALERT = ' role="alert"'  # a field's problem is announced as the page shows it
PLACEHOLDERS = {"email": "name@example.com", "uri": "https://…", "date": "YYYY-MM-DD",
                "date-time": "2026-12-02T15:04:05Z"}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _shown(value: Any) -> str:
    """A value as an input holds it: strings as they are, anything else as JSON reads it."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _between(low: Any, high: Any, unit: str = "") -> str | None:
    """A range in words: "1 to 5", "at least 2 characters", "at most 3"; None when neither end is a number."""
    low = low if isinstance(low, int | float) and not isinstance(low, bool) else None
    high = high if isinstance(high, int | float) and not isinstance(high, bool) else None
    if low is not None and high is not None:
        return f"{low} to {high}{unit}"
    if low is not None:
        return f"at least {low}{unit}"
    if high is not None:
        return f"at most {high}{unit}"
    return None


def limits(f: Field) -> str | None:
    """The limits a field's control does not show, in words a person reads; None when there are none."""
    if f.kind == "multi-enum":
        said = _between(f.min_items, f.max_items)
        return f"choose {said}" if said else None
    if f.kind in ("number", "integer"):
        return _between(f.minimum, f.maximum)
    if f.kind == "string":
        return _between(f.min_length, f.max_length, " characters")
    return None


def _field(index: int, f: Field, value: Any, problem: str | None, secret: bool, asker: str) -> str:
    fid = f"f{index}"  # property names may hold anything; ids may not
    notes = []  # (id, class, text): what is said under the input, each named by aria-describedby
    if f.description and f.description != f.title:
        notes.append((f"{fid}-hint", "hint", f.description))
    if said := limits(f):
        notes.append((f"{fid}-limits", "hint", said))
    if secret:
        notes.append((f"{fid}-secret", "credential",
                      f"A credential: it goes to the asker ({asker}) only; mcpx stores it as [redacted]."))
    if problem:
        notes.append((f"{fid}-problem", "problem", problem))
    described = f'aria-describedby="{" ".join(i for i, _, _ in notes)}"' if notes else ""
    n = _e(f.name)
    if f.kind == "multi-enum":
        chosen = value if isinstance(value, list) else []
        boxes = "".join(
            f'<label class="choice"><input type="checkbox" name="{n}" value="{_e(_shown(v))}"'
            f'{" checked" if v in chosen else ""}> {_e(title)}</label>'
            for v, title in f.options)
        control = f'<div class="choices" role="group" {described}>{boxes}</div>'
    elif f.kind == "enum":
        picked = value if any(v == value for v, _ in f.options) else None
        blank = "" if picked is not None and f.required else '<option value="">— choose —</option>'
        control = (f'<select id="{fid}" name="{n}" {described}>{blank}'
                   + "".join(f'<option value="{_e(_shown(v))}"'
                             f'{" selected" if picked is not None and v == picked else ""}>'
                             f"{_e(title)}</option>" for v, title in f.options)
                   + "</select>")
    elif f.kind == "boolean":
        control = (f'<div class="choices" role="radiogroup" {described}>'
                   + "".join(f'<label class="choice"><input type="radio" name="{n}" value="{word}"'
                             f'{" checked" if value is flag else ""}> {label}</label>'
                             for word, flag, label in (("true", True, "Yes"), ("false", False, "No")))
                   + "</div>")
    else:
        attrs = [f'id="{fid}"', f'name="{n}"', *([described] if described else [])]
        if f.kind in ("number", "integer"):
            attrs += ['type="number"', f'step="{1 if f.kind == "integer" else "any"}"']
            attrs += [f'{attr}="{_e(bound)}"' for attr, bound in (("min", f.minimum), ("max", f.maximum))
                      if bound is not None]
        else:
            attrs.append(f'type="{"password" if secret else INPUT_TYPES.get(f.format or "", "text")}"')
            if f.format in PLACEHOLDERS:
                attrs.append(f'placeholder="{_e(PLACEHOLDERS[f.format])}"')
            if secret:
                attrs.append('autocomplete="off"')
        if value is not None and not secret:
            attrs.append(f'value="{_e(_shown(value))}"')
        control = f"<input {' '.join(attrs)}>"
    label_for = "" if f.kind in ("multi-enum", "boolean") else f' for="{fid}"'
    return (f'<div class="field{" invalid" if problem else ""}" data-field="{n}">'
            f'<label class="name"{label_for}>{_e(f.title or f.name)}'
            f'{"" if f.required else " <small>(optional)</small>"}</label>'
            f"{control}"
            + "".join(f'<div class="{cls}" id="{i}"{ALERT if cls == "problem" else ""}>{_e(text)}</div>'
                      for i, cls, text in notes)
            + "</div>")


def form_fields(schema: dict[str, Any] | None, secret: set[str], values: Mapping[str, Any] | None = None,
                problems: Mapping[str, str] | None = None, *, asker: str = "the server") -> str:
    """The fields' HTML: `values` as typed (after a refused answer), else the schema's defaults; `asker`: who a
    credential goes to (the question's server)."""
    form = FlatSchema.of(schema)
    problems = problems or {}
    out = []
    for index, f in enumerate(form.fields):
        value = values.get(f.name) if values is not None else (f.default if f.has_default else None)
        out.append(_field(index, f, value, problems.get(f.name), f.name in secret, asker))
    out += [f'<div class="problem" role="alert">{_e(k)}: {_e(v)}</div>' for k, v in problems.items()
            if form.get(k) is None]
    return "".join(out)


def content_of_form(schema: dict[str, Any] | None, form: MultiMapping[object]) -> dict[str, Any]:
    """The content a submitted form gives, typed by the schema. An empty input is no value (its default
    applies, or it is reported missing); what does not fit the type is left as typed, so that validation names
    the field. A multi-select is always sent: unticking every box is an answer too. Only text answers: a file
    a hand-made multipart post puts under a field's name is no value for it (validation then names the field)."""
    content: dict[str, Any] = {}
    for f in FlatSchema.of(schema).fields:
        if f.kind == "multi-enum":
            content[f.name] = [f.pick(v) for v in form.getall(f.name, []) if isinstance(v, str)]
            continue
        text = form.get(f.name)
        if not isinstance(text, str) or text == "":
            continue
        content[f.name] = f.parse(text)
    return content
