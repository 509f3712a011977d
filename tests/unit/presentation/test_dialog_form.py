"""A question as its own dialog draws it (mcpx.presentation.dialog_form: render.form), what a dialog sends back (`form`
entries, typed and judged by the daemon), and what a client says of it: that the person was shown it (elicit.shown)
and said yes to opening its page (elicit.consent). The pure rendering on questions routed as the broker routes them;
the routes on a real daemon. The opencode TUI plugin draws render.form as given
(plugin/opencode/test/dialog_keys.test.mjs, and end to end in tests/hosts/test_opencode_tui.py)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from test_rendering import CONFIRM, EID, ISSUE, TOKEN, question, schema

from conftest import ask, audited
from mcpx.presentation.dialog_form import EntriesProblem, content_of_entries, dialog_form

EVERY_KIND = schema(
    ("title", "count"),
    title={"type": "string", "title": "Title", "description": "a short summary", "minLength": 3},
    email={"type": "string", "format": "email"},
    count={"type": "integer", "minimum": 1, "maximum": 10, "default": 2},
    ratio={"type": "number"},
    urgent={"type": "boolean"},
    color={"type": "string", "enum": ["red", "green"], "enumNames": ["Red", "Green"], "default": "green"},
    size={"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
    level={"type": "integer", "enum": [1, 2, 3]},
    tags={"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
          "default": ["b"]},
    api_key={"type": "string"},
)


def test_every_kind_of_field_is_drawn_with_its_words_hint_choices_and_default() -> None:
    form = dialog_form(question(EVERY_KIND, message="File it"))
    by = {f.name: f for f in form.fields}
    assert [f.name for f in form.fields] == list(EVERY_KIND["properties"])
    assert {n: f.kind for n, f in by.items()} == {
        "title": "text", "email": "text", "count": "integer", "ratio": "number", "urgent": "boolean",
        "color": "choice", "size": "choice", "level": "choice", "tags": "choices", "api_key": "secret"}
    assert by["title"].label == "Title" and by["title"].description == "a short summary" and by["title"].required
    assert by["title"].hint == "string; min length 3; required"
    assert by["email"].placeholder == "name@example.com" and by["email"].label == "email"
    assert by["count"].value == "2" and by["count"].hint == "integer; min 1; max 10; required; default 2"
    assert by["urgent"].value is None  # no default: neither yes nor no until the person says
    assert by["color"].value == "green" and [(o.token, o.label) for o in by["color"].options or []] == [
        ("red", "Red"), ("green", "Green")]
    assert [(o.token, o.label) for o in by["size"].options or []] == [("s", "Small"), ("l", "Large")]
    assert [o.token for o in by["level"].options or []] == ["1", "2", "3"]
    assert by["tags"].value == ["b"] and [o.label for o in by["tags"].options or []] == ["A", "B"]
    assert by["api_key"].value is None and by["api_key"].kind == "secret"
    assert form.confirm is None and form.url is None
    assert form.accept_means == "Accept sends what the form holds; Decline and Cancel send nothing of it."


def test_the_head_says_who_asks_in_their_own_words_why_it_is_the_persons_and_until_when() -> None:
    q = question(CONFIRM, message="Really delete\nbranch main?\n\n", tool="delete_branch")
    form = dialog_form(q)
    assert form.title == "github (via mcpx) asks" and form.asker == "github · delete_branch, via mcpx"
    assert form.message == ["Really delete", "branch main?"]  # line by line, the trailing blank lines gone
    assert form.why == f"It is yours to answer: {q.reason}."
    assert form.clock == q.expires_at.astimezone().strftime("%H:%M") and form.expires_at == q.expires_at
    assert form.toast == "github asks: “Really delete ⏎ branch main? ⏎  ⏎ ”"
    # a lone yes/no: Accept answers yes, no field to fill
    assert form.confirm == {"confirm": True} and form.fields == []
    assert form.accept_means == "Accept answers yes (confirm: true); Decline answers no."
    assert dialog_form(question(None, message="Go on?")).confirm == {}
    escalated = dialog_form(question(ISSUE, escalated=True, audience="human"))
    assert escalated.why == "The agent declined it, and it asks for free input, so it is yours."


def test_a_servers_words_are_text_in_the_dialog_never_terminal_markup() -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07Approve?\u202e"
    q = question(schema(**{"x\x1b[31m": {"type": "string", "title": "\x1b[1mT", "enum": ["\x07a"]}}),
                 message=hostile, server="ev\x1bil", tool="t\x00")
    form = dialog_form(q)
    texts = [form.title, form.asker, *form.message, form.why, form.toast,
             *(t for f in form.fields for t in (f.label, f.hint, *(o.label for o in f.options or [])))]
    assert all("\x1b" not in t and "\x07" not in t and "\u202e" not in t and "\x00" not in t for t in texts), texts
    assert "\\x1b[2J" in form.message[0]
    many = dialog_form(question(CONFIRM, message="\n".join(f"line {i}" for i in range(40))))
    assert len(many.message) == 12 and many.message[-1] == "… (29 more lines)"


def test_a_page_to_open_shows_its_full_address_and_domain_and_flags_punycode() -> None:
    form = dialog_form(question(None, mode="url", url="https://xn--pple-43d.com/login?next=%2F", message="Sign in"))
    assert form.url is not None and form.url.url == "https://xn--pple-43d.com/login?next=%2F"
    assert form.url.domain == "xn--pple-43d.com" and "Punycode" in (form.url.warning or "")
    assert form.fields == [] and form.confirm is None
    assert form.toast == "github asks: “Sign in” (a page on xn--pple-43d.com)"
    plain_domain = dialog_form(question(None, mode="url", url="https://example.com/a", message="Sign in"))
    assert plain_domain.url is not None and plain_domain.url.warning is None


def test_a_dialogs_entries_become_content_of_the_fields_types() -> None:
    q = question(EVERY_KIND)
    content = content_of_entries(q, {"title": "Broken", "email": "", "count": "3", "ratio": "0.5", "urgent": "false",
                                     "color": "red", "size": "l", "level": "2", "tags": ["a", "b"], "api_key": "k"})
    assert content == {"title": "Broken", "count": 3, "ratio": 0.5, "urgent": False, "color": "red", "size": "l",
                       "level": 2, "tags": ["a", "b"], "api_key": "k"}  # an empty text is no value
    # what does not fit is left as typed: the daemon's validation names the field
    assert content_of_entries(q, {"count": "many", "color": "blue"}) == {"count": "many", "color": "blue"}
    assert content_of_entries(q, {"tags": []}) == {"tags": []}  # no choice ticked is an answer too
    for entries, named in (({"nope": "x"}, "nope"), ({"tags": "a"}, "tags"), ({"title": ["a"]}, "title")):
        with pytest.raises(EntriesProblem, match=named):
            content_of_entries(q, entries)
    with pytest.raises(EntriesProblem, match="url-mode"):
        content_of_entries(question(None, mode="url", url="https://x.example"), {})


def test_the_person_is_told_the_dialog_shows_it_and_the_agent_how_it_was_shown() -> None:
    from datetime import UTC, datetime

    from mcpx.presentation.rendering import render

    q = question(TOKEN, message="Paste your token")
    at = datetime(2030, 1, 1, 14, 2, tzinfo=UTC)
    local = at.astimezone().strftime("%H:%M")
    r = render(q, shown_at=at, shown_in="dialog")
    assert r.person is not None and r.person.dialog is not None
    assert r.shown == f"It was shown to the person in opencode's dialog at {local}"
    assert "mcpx's dialog in opencode puts it in front of them; they answer it there" in r.person.dialog
    assert "mcpx_ask_person" not in r.person.dialog
    assert render(q, shown_at=at).shown == f"It was shown to the person in opencode at {local}"
    assert render(q).shown is None
    assert r.line.startswith(f"mcpx: github (via mcpx) asks you: “Paste your token” — answer by "
                             f"{q.expires_at.astimezone().strftime('%H:%M')} ({EID}) from a terminal: mcpx elicit "
                             f"answer {EID}")


# ---- on a real daemon


async def _post(http: aiohttp.ClientSession, path: str, body: Any, **headers: str) -> tuple[int, Any]:
    async with http.post(path, json=body, headers=headers) as r:
        return r.status, await r.json()


async def test_a_dialogs_form_is_answered_typed_and_judged_by_the_daemon(http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Describe the issue", requestedSchema=ISSUE)
    async with http.get(f"/v1/elicit/{q['id']}", params={"render": "true"}) as r:
        form = (await r.json())["elicitation"]["render"]["form"]
    assert [f["name"] for f in form["fields"]] == ["title", "count", "color", "notify"]
    status, body = await _post(http, f"/v1/elicit/{q['id']}/accept", {"form": {"title": "ab", "count": "42"}})
    assert status == 422 and body["error"]["fields"] == {"title": "must be at least 3 characters",
                                                         "count": "must be at most 10"}, body
    for bad, problem in (({"form": {"title": "abc"}, "content": {}}, "in place of content"),
                         ({"form": {"nope": "x"}}, "nope: not a field"),
                         ({"form": {"title": 3}}, "form"),):
        status, body = await _post(http, f"/v1/elicit/{q['id']}/accept", bad)
        assert status == 400 and problem in body["error"]["message"], body
    status, body = await _post(http, f"/v1/elicit/{q['id']}/decline", {"form": {"title": "abc"}})
    assert status == 400 and "form" in body["error"]["fields"], body
    status, body = await _post(http, f"/v1/elicit/{q['id']}/accept",
                               {"form": {"title": "Broken build", "count": "3", "color": "green", "notify": "false"}},
                               **{"X-Mcpx-Answerer": "person:opencode"})
    assert status == 200 and body["answer"]["content"] == {"title": "Broken build", "count": 3, "color": "green",
                                                           "notify": False}
    assert body["answer"]["by"] == "person:opencode"


async def test_a_client_says_the_person_was_shown_it_and_the_log_keeps_it(http: aiohttp.ClientSession) -> None:
    q = await ask(http, session="ses_shown", message="Really?", requestedSchema=CONFIRM)
    status, record = await _post(http, f"/v1/elicit/{q['id']}/shown", {"where": "opencode", "how": "dialog"},
                                 **{"X-Mcpx-Answerer": "person:opencode"})
    assert status == 200 and record["kind"] == "elicit.shown" and record["session"] == "ses_shown"
    assert record["data"] == {"where": "opencode", "how": "dialog", "by": "person:opencode"}
    assert (await audited(http, "elicit.shown", elicit=q["id"]))["seq"] == record["seq"]
    for bad, named in (({"where": "opencode", "how": "popup"}, "how"), ({"how": "dialog"}, "where"),
                       ({"where": "", "how": "dialog"}, "where")):
        status, body = await _post(http, f"/v1/elicit/{q['id']}/shown", bad)
        assert status == 400 and named in body["error"]["fields"], body
    status, _ = await _post(http, f"/v1/elicit/elc-{'0' * 16}/shown", {"where": "opencode", "how": "dialog"})
    assert status == 404
    status, _ = await _post(http, f"/v1/elicit/{q['id']}/decline", {})
    assert status == 200
    status, body = await _post(http, f"/v1/elicit/{q['id']}/shown", {"where": "opencode", "how": "dialog"})
    assert status == 410 and "decline by person:rest" in body["error"]["message"], body


async def test_the_persons_yes_to_opening_a_page_is_audited(http: aiohttp.ClientSession) -> None:
    q = await ask(http, url="https://example.com/login", message="Sign in", mode="url")
    status, record = await _post(http, f"/v1/elicit/{q['id']}/consent", {"open": True},
                                 **{"X-Mcpx-Answerer": "person:opencode"})
    assert status == 200 and record["kind"] == "elicit.consent"
    assert record["data"] == {"consent": True, "by": "person:opencode", "domain": "example.com"}
    form = await ask(http)
    status, body = await _post(http, f"/v1/elicit/{form['id']}/consent", {"open": True})
    assert status == 409 and "no page to open" in body["error"]["message"], body
    status, body = await _post(http, f"/v1/elicit/{q['id']}/consent", {"open": "yes"})
    assert status == 400 and "open" in body["error"]["fields"], body
