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

from mcpx.broker.schema import enum_options, kind_of, multi_options, properties, required, type_value

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


def limits(prop: dict[str, Any]) -> str | None:
    """The limits a field's control does not show, in words a person reads; None when there are none."""
    kind = kind_of(prop)
    if kind == "multi-enum":
        said = _between(prop.get("minItems"), prop.get("maxItems"))
        return f"choose {said}" if said else None
    if kind in ("number", "integer"):
        return _between(prop.get("minimum"), prop.get("maximum"))
    if kind == "string":
        return _between(prop.get("minLength"), prop.get("maxLength"), " characters")
    return None


def _field(index: int, name: str, prop: dict[str, Any], is_required: bool, value: Any, problem: str | None,
           secret: bool, asker: str) -> str:
    kind = kind_of(prop)
    fid = f"f{index}"  # property names may hold anything; ids may not
    title, desc = prop.get("title"), prop.get("description")
    label_text = str(title or name)
    notes = []  # (id, class, text): what is said under the input, each named by aria-describedby
    if desc and str(desc) != str(title):
        notes.append((f"{fid}-hint", "hint", str(desc)))
    if said := limits(prop):
        notes.append((f"{fid}-limits", "hint", said))
    if secret:
        notes.append((f"{fid}-secret", "credential",
                      f"A credential: it goes to the asker ({asker}) only; mcpx stores it as [redacted]."))
    if problem:
        notes.append((f"{fid}-problem", "problem", problem))
    described = f'aria-describedby="{" ".join(i for i, _, _ in notes)}"' if notes else ""
    n = _e(name)
    if kind == "multi-enum":
        chosen = value if isinstance(value, list) else []
        boxes = "".join(
            f'<label class="choice"><input type="checkbox" name="{n}" value="{_e(_shown(v))}"'
            f'{" checked" if v in chosen else ""}> {_e(title)}</label>'
            for v, title in multi_options(prop) or [])
        control = f'<div class="choices" role="group" {described}>{boxes}</div>'
    elif kind == "enum":
        options = enum_options(prop) or []
        picked = value if any(v == value for v, _ in options) else None
        blank = "" if picked is not None and is_required else '<option value="">— choose —</option>'
        control = (f'<select id="{fid}" name="{n}" {described}>{blank}'
                   + "".join(f'<option value="{_e(_shown(v))}"'
                             f'{" selected" if picked is not None and v == picked else ""}>'
                             f"{_e(title)}</option>" for v, title in options)
                   + "</select>")
    elif kind == "boolean":
        control = (f'<div class="choices" role="radiogroup" {described}>'
                   + "".join(f'<label class="choice"><input type="radio" name="{n}" value="{word}"'
                             f'{" checked" if value is flag else ""}> {label}</label>'
                             for word, flag, label in (("true", True, "Yes"), ("false", False, "No")))
                   + "</div>")
    else:
        attrs = [f'id="{fid}"', f'name="{n}"', *([described] if described else [])]
        if kind in ("number", "integer"):
            attrs += ['type="number"', f'step="{1 if kind == "integer" else "any"}"']
            attrs += [f'{k[:3]}="{_e(prop[k])}"' for k in ("minimum", "maximum")
                      if isinstance(prop.get(k), int | float)]
        else:
            fmt = prop.get("format") if isinstance(prop.get("format"), str) else None
            attrs.append(f'type="{"password" if secret else INPUT_TYPES.get(fmt or "", "text")}"')
            if fmt in PLACEHOLDERS:
                attrs.append(f'placeholder="{_e(PLACEHOLDERS[fmt])}"')
            if secret:
                attrs.append('autocomplete="off"')
        if value is not None and not secret:
            attrs.append(f'value="{_e(_shown(value))}"')
        control = f"<input {' '.join(attrs)}>"
    label_for = "" if kind in ("multi-enum", "boolean") else f' for="{fid}"'
    return (f'<div class="field{" invalid" if problem else ""}" data-field="{n}">'
            f'<label class="name"{label_for}>{_e(label_text)}'
            f'{"" if is_required else " <small>(optional)</small>"}</label>'
            f"{control}"
            + "".join(f'<div class="{cls}" id="{i}"{ALERT if cls == "problem" else ""}>{_e(text)}</div>'
                      for i, cls, text in notes)
            + "</div>")


def form_fields(schema: dict[str, Any] | None, secret: set[str], values: Mapping[str, Any] | None = None,
                problems: Mapping[str, str] | None = None, *, asker: str = "the server") -> str:
    """The fields' HTML: `values` as typed (after a refused answer), else the schema's defaults; `asker`: who a
    credential goes to (the question's server)."""
    req = set(required(schema))
    problems = problems or {}
    out = []
    for index, (name, prop) in enumerate(properties(schema).items()):
        value = (values.get(name) if values is not None else prop.get("default"))
        out.append(_field(index, name, prop, name in req, value, problems.get(name), name in secret, asker))
    others = {k: v for k, v in problems.items() if k not in properties(schema)}
    out += [f'<div class="problem" role="alert">{_e(k)}: {_e(v)}</div>' for k, v in others.items()]
    return "".join(out)


def content_of_form(schema: dict[str, Any] | None, form: MultiMapping[object]) -> dict[str, Any]:
    """The content a submitted form gives, typed by the schema. An empty input is no value (its default
    applies, or it is reported missing); what does not fit the type is left as typed, so that validation names
    the field. A multi-select is always sent: unticking every box is an answer too. Only text answers: a file
    a hand-made multipart post puts under a field's name is no value for it (validation then names the field)."""
    content: dict[str, Any] = {}
    for name, prop in properties(schema).items():
        kind = kind_of(prop)
        if kind == "multi-enum":
            content[name] = [type_value(prop["items"], v) for v in form.getall(name, []) if isinstance(v, str)]
            continue
        text = form.get(name)
        if not isinstance(text, str) or text == "":
            continue
        content[name] = type_value(prop, text)
    return content
