"""Which dialog a question suits, what each dialog shows, and how a person's reply in one becomes content.

Written for opencode's two dialogs (the plugin shows them, it does not compose them): the permission
dialog — allow or reject, with a line of text — and the question dialog, one prompt per field with
labelled options (or the person's own words). Credentials get no dialog: a dialog's text and the
person's reply pass through the model's context.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from mcpx.broker.models import Elicitation, WireModel
from mcpx.broker.schema import Field as SchemaField
from mcpx.presentation.text import plain, quoted

DialogKind = Literal["confirm", "url", "question", "terminal"]
SKIP = "(leave empty)"  # the option of an optional field that gives it no value


def dialog_of(q: Elicitation) -> DialogKind:
    """confirm: a lone yes/no or no fields; url: a page to open; question: choices and free input;
    terminal: a credential, which must reach the daemon without passing through a model."""
    if q.mode == "url":
        return "url"
    if q.secret_fields:
        return "terminal"
    fields = q.form.fields
    if not fields or (len(fields) == 1 and fields[0].kind == "boolean"):
        return "confirm"
    return "question"


class PermissionDialog(WireModel):
    """opencode's permission dialog for a confirmation or a url-mode question."""

    title: str = Field(description="the title the person sees on the tool that asks")
    pattern: str = Field(description="the one line the dialog shows: who asks, their words, the page")
    message: str = Field(description="the server's words, as one safe line")
    fields: list[str] = Field(description="the question's field names")
    content: dict[str, Any] | None = Field(default=None, description="what 'allow' answers with: true for a lone "
                                           "yes/no field; none for a url-mode question or one without fields")


class PromptOption(WireModel):
    label: str
    description: str


class QuestionPrompt(WireModel):
    """One prompt of opencode's question tool: exactly its arguments, one per field, each carrying the id."""

    question: str
    header: str = Field(description="at most 30 characters; ends with the question's id")
    options: list[PromptOption]
    multiple: bool | None = None


def permission_dialog(q: Elicitation) -> PermissionDialog:
    server, asks = plain(q.server, 100), quoted(q.message, 500)
    title = f"{server} (via mcpx) asks: {asks}" + (f" — open {plain(q.url or '', 500)}" if q.mode == "url" else "")
    pattern = f"{server}: {plain(q.message, 300)}" + (f" ({plain(q.url or '', 300)})" if q.mode == "url" else "")
    form = q.form
    content = None
    if q.mode == "form" and len(form.fields) == 1 and form.fields[0].kind == "boolean":
        content = {form.fields[0].name: True}
    return PermissionDialog(title=title, pattern=pattern, message=plain(q.message), fields=form.names,
                            content=content)


def _as_read(value: Any) -> Any:
    """A whole float as the whole number JSON reads it as: 1.0 is 1."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_as_read(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_read(v) for k, v in value.items()}
    return value


def _js(value: Any) -> str:
    """A value as the question dialog has always shown it: compact JSON, the characters as they are."""
    return json.dumps(_as_read(value), ensure_ascii=False, separators=(",", ":"))


def _options(f: SchemaField) -> list[tuple[Any, str]]:
    """(value, label) of each choice a field offers in the dialog."""
    if f.choices:
        return [(value, plain(title, 80)) for value, title in f.options]
    if f.kind == "boolean":
        return [(True, "Yes"), (False, "No")]
    return []


def _prompt(q: Elicitation, f: SchemaField, many: bool) -> QuestionPrompt:
    label = " — ".join(plain(x, 200) for x in f.words)
    hints: list[str] = []
    if f.format is not None:
        hints.append(f"format {plain(f.format, 100)}")
    for bound, text in ((f.min_length, "at least {} characters"), (f.max_length, "at most {} characters"),
                        (f.minimum, "at least {}"), (f.maximum, "at most {}")):
        if bound is not None:
            hints.append(text.format(plain(_js(bound), 100)))
    if f.kind == "integer":
        hints.append("a whole number")
    elif f.kind == "number":
        hints.append("a number")
    if f.has_default:
        hints.append(f"default {plain(_js(f.default), 300)}")
    if not f.required:
        hints.append("optional")
    text = (f"{plain(q.server, 100)} (via mcpx) asks: {quoted(q.message, 1500)}"
            + (f" — {plain(f.name, 100)}" + (f": {label}" if label else "") if many or label else "")
            + (f" ({'; '.join(hints)})" if hints else "") + f" [{q.id}]")
    options: list[PromptOption] = []
    if f.choices:
        default = _js(f.default) if f.has_default else None
        for (value, title), (_, shown) in zip(f.options, _options(f), strict=True):
            bits = [f"value {plain(_js(value), 200)}"] if title != str(value) else []
            if default is not None and default == _js(value):
                bits.append("the default")
            options.append(PromptOption(label=shown, description="; ".join(bits) or shown))
    elif f.kind == "boolean":
        options = [PromptOption(label="Yes", description="true"), PromptOption(label="No", description="false")]
    if not f.required and f.kind != "multi-enum":
        options.append(PromptOption(label=SKIP, description="no value: the server's default applies"))
    # the header is at most 30 characters in opencode's schema; the id in it is how the plugin knows the dialog
    header = f"{plain(f.name, 9)} {q.id}" if many else q.id
    return QuestionPrompt(question=text, header=header, options=options,
                          multiple=True if f.kind == "multi-enum" else None)


def question_prompts(q: Elicitation) -> list[QuestionPrompt]:
    """The exact arguments of opencode's question tool: one prompt per field, each carrying the question's id."""
    fields = q.form.fields
    return [_prompt(q, f, len(fields) > 1) for f in fields]


class RepliesProblem(ValueError):
    """The replies cannot belong to this question's dialog."""


def content_of_replies(q: Elicitation, replies: list[list[str]]) -> dict[str, Any]:
    """The content a person gave in the question dialog: per prompt (in order), the labels they picked or the
    words they typed. A label becomes its option's value; typed words are typed by the field, and what does not
    fit is left as typed, so that validation names the field."""
    fields = q.form.fields
    if q.mode != "form" or len(replies) > len(fields):
        raise RepliesProblem(f"{len(replies)} replies for {q.id}, whose dialog has {len(fields)} prompt(s)")
    content: dict[str, Any] = {}
    for f, reply in zip(fields, replies, strict=False):  # fewer replies: the rest unanswered
        picked = [r for r in reply if r != ""]
        chosen: dict[str, Any] = {}
        for value, label in _options(f):
            chosen.setdefault(label, value)  # two choices cut to one label: the first, as the dialog lists them
        if f.kind == "multi-enum":
            if picked:
                content[f.name] = [chosen[p] if p in chosen else f.pick(p) for p in picked]
            continue
        if not picked or picked[0] == SKIP:
            continue
        content[f.name] = chosen[picked[0]] if picked[0] in chosen else f.parse(picked[0])
    return content
