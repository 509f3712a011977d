"""A question's form as HTML, one input per field of its requestedSchema, and what a submitted form answers.

The inputs follow the schema's kinds (broker/schema.py): text and numbers are typed (the input type suits the
string's format, for a phone's keyboard), a boolean is a yes/no pair of radios, a single choice is a select, a
multi-select is a set of checkboxes. Each input is named after its property; defaults are filled in;
credentials are password inputs, never filled back in. The form is `novalidate`: the daemon's own rules
(validate_content) judge the answer, once, and their problems are shown beside each field.

Everything from the server — titles, descriptions, choices, defaults — is escaped: it is text, never markup.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

from multidict import MultiMapping

from mcpx.broker.schema import describe_field, enum_options, kind_of, multi_options, properties, required, type_value

INPUT_TYPES = {"email": "email", "uri": "url", "date": "date"}
PLACEHOLDERS = {"email": "name@example.com", "uri": "https://…", "date": "YYYY-MM-DD",
                "date-time": "2026-12-02T15:04:05Z"}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _shown(value: Any) -> str:
    """A value as an input holds it: strings as they are, anything else as JSON reads it."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _field(index: int, name: str, prop: dict[str, Any], is_required: bool, value: Any, problem: str | None,
           secret: bool) -> str:
    kind = kind_of(prop)
    fid = f"f{index}"  # property names may hold anything; ids may not
    label_text = str(prop.get("title") or name)
    hint = describe_field(name, prop, is_required)
    described = f'aria-describedby="{fid}-hint{f" {fid}-problem" if problem else ""}"'
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
        attrs = [f'id="{fid}"', f'name="{n}"', described]
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
            f'<div class="hint" id="{fid}-hint">{_e(hint)}</div>'
            + (f'<div class="problem" id="{fid}-problem" role="alert">{_e(problem)}</div>' if problem else "")
            + "</div>")


def form_fields(schema: dict[str, Any] | None, secret: set[str], values: Mapping[str, Any] | None = None,
                problems: Mapping[str, str] | None = None) -> str:
    """The fields' HTML: `values` as typed (after a refused answer), else the schema's defaults."""
    req = set(required(schema))
    problems = problems or {}
    out = []
    for index, (name, prop) in enumerate(properties(schema).items()):
        value = (values.get(name) if values is not None else prop.get("default"))
        out.append(_field(index, name, prop, name in req, value, problems.get(name), name in secret))
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
