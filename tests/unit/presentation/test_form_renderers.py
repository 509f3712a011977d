"""What each renderer draws of one form, exactly: the web inbox's HTML and the content a submitted page gives, the
terminal prompt's lines, the CLI's field lines, and the hints of opencode's question dialog. The pure renderers on
the same schema; the browser (tests/e2e/test_inbox_web.py) and the terminals (tests/e2e/test_cli_elicit.py,
tests/e2e/test_tui.py) drive them end to end."""

from __future__ import annotations

from typing import Any

from multidict import MultiDict
from test_rendering import question, schema

from mcpx.cli.render import field_lines
from mcpx.client.prompt import TerminalForm
from mcpx.inbox.html_form import content_of_form, form_fields
from mcpx.presentation.dialogs import question_prompts

FORM = schema(
    ("title", "count"),
    title={"type": "string", "title": "Title", "description": "a <short> summary", "minLength": 3, "maxLength": 40},
    email={"type": "string", "format": "email"},
    count={"type": "integer", "minimum": 1, "maximum": 10, "default": 2},
    ratio={"type": "number", "minimum": 0.5},
    urgent={"type": "boolean"},
    color={"type": "string", "enum": ["red", "green"], "enumNames": ["Red", "Green"], "default": "green"},
    level={"type": "integer", "oneOf": [{"const": 1, "title": "Low"}, {"const": 2, "title": "High"}]},
    tags={"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
          "default": ["b"], "maxItems": 2},
    api_key={"type": "string"},
)


def test_the_inbox_draws_one_input_per_field_with_its_words_limits_and_default() -> None:
    html = form_fields(FORM, {"api_key"}, asker="github")
    assert html == "".join([
        '<div class="field" data-field="title"><label class="name" for="f0">Title</label>'
        '<input id="f0" name="title" aria-describedby="f0-hint f0-limits" type="text">'
        '<div class="hint" id="f0-hint">a &lt;short&gt; summary</div>'
        '<div class="hint" id="f0-limits">3 to 40 characters</div></div>',
        '<div class="field" data-field="email"><label class="name" for="f1">email <small>(optional)</small></label>'
        '<input id="f1" name="email" type="email" placeholder="name@example.com"></div>',
        '<div class="field" data-field="count"><label class="name" for="f2">count</label>'
        '<input id="f2" name="count" aria-describedby="f2-limits" type="number" step="1" min="1" max="10" value="2">'
        '<div class="hint" id="f2-limits">1 to 10</div></div>',
        '<div class="field" data-field="ratio"><label class="name" for="f3">ratio <small>(optional)</small></label>'
        '<input id="f3" name="ratio" aria-describedby="f3-limits" type="number" step="any" min="0.5">'
        '<div class="hint" id="f3-limits">at least 0.5</div></div>',
        '<div class="field" data-field="urgent"><label class="name">urgent <small>(optional)</small></label>'
        '<div class="choices" role="radiogroup" ><label class="choice"><input type="radio" name="urgent" '
        'value="true"> Yes</label><label class="choice"><input type="radio" name="urgent" value="false"> No</label>'
        '</div></div>',
        '<div class="field" data-field="color"><label class="name" for="f5">color <small>(optional)</small></label>'
        '<select id="f5" name="color" ><option value="">— choose —</option><option value="red">Red</option>'
        '<option value="green" selected>Green</option></select></div>',
        '<div class="field" data-field="level"><label class="name" for="f6">level <small>(optional)</small></label>'
        '<select id="f6" name="level" ><option value="">— choose —</option><option value="1">Low</option>'
        '<option value="2">High</option></select></div>',
        '<div class="field" data-field="tags"><label class="name">tags <small>(optional)</small></label>'
        '<div class="choices" role="group" aria-describedby="f7-limits"><label class="choice"><input type="checkbox" '
        'name="tags" value="a"> A</label><label class="choice"><input type="checkbox" name="tags" value="b" checked>'
        ' B</label></div><div class="hint" id="f7-limits">choose at most 2</div></div>',
        '<div class="field" data-field="api_key"><label class="name" for="f8">api_key <small>(optional)</small>'
        '</label><input id="f8" name="api_key" aria-describedby="f8-secret" type="password" autocomplete="off">'
        '<div class="credential" id="f8-secret">A credential: it goes to the asker (github) only; mcpx stores it as '
        '[redacted].</div></div>',
    ])


def test_the_inbox_redraws_a_refused_answer_as_typed_with_each_problem() -> None:
    html = form_fields(FORM, {"api_key"}, {"title": "ab", "count": "x", "api_key": "s3cret", "level": 2},
                       {"title": "must be at least 3 characters", "other": "is not a field"}, asker="github")
    assert ('<div class="field invalid" data-field="title"><label class="name" for="f0">Title</label>'
            '<input id="f0" name="title" aria-describedby="f0-hint f0-limits f0-problem" type="text" '
            'value="ab">') in html
    assert '<div class="problem" id="f0-problem" role="alert">must be at least 3 characters</div>' in html
    assert 'step="1" min="1" max="10" value="x">' in html
    assert "s3cret" not in html  # a credential is never filled back in
    assert '<option value="2" selected>High</option>' in html
    assert '<input type="checkbox" name="tags" value="b">' in html  # the values given, not the defaults
    assert html.endswith('<div class="problem" role="alert">other: is not a field</div>')


def test_a_submitted_page_gives_content_typed_by_the_fields() -> None:
    posted = MultiDict([("title", "Broken"), ("email", ""), ("count", "3"), ("ratio", "0.75"), ("urgent", "true"),
                        ("color", "Red"), ("level", "2"), ("tags", "a"), ("tags", "B"), ("api_key", "k")])
    assert content_of_form(FORM, posted) == {"title": "Broken", "count": 3, "ratio": 0.75, "urgent": True,
                                             "color": "red", "level": 2, "tags": ["a", "b"], "api_key": "k"}
    assert content_of_form(FORM, MultiDict([("count", "many")])) == {"count": "many", "tags": []}


def test_the_terminal_prompt_asks_field_by_field_and_re_asks_what_does_not_fit() -> None:
    typed = iter(["ab", "Broken build", "", "0", "3", "", "yes", "2", "Low", "1,b", "k"])
    said: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            said.append(text)

        def flush(self) -> None:
            pass

    def read(label: str) -> str:
        said.append(label)
        return next(typed)

    q: dict[str, Any] = question(FORM, tool=None).wire()
    content = TerminalForm(read=read, out=Out(), read_hidden=read).form(q)  # type: ignore[arg-type]
    assert content == {"title": "Broken build", "count": 3, "urgent": True, "color": "green", "level": 1,
                       "tags": ["a", "b"], "api_key": "k"}
    assert "".join(said).splitlines() == [
        "",
        "github (via mcpx) asks: “Describe the issue”",
        f"  ({q['id']}; type 'decline' to say no, Ctrl-C to cancel)",
        "  title (string; min length 3; max length 40; required): Title — a <short> summary",
        "  title:   ! title must be at least 3 characters",
        "  title:   email (string; format email; optional)",
        "  email:   count (integer; min 1; max 10; required; default 2)",
        "  count [2]:   ! count must be at least 1",
        "  count [2]:   ratio (number; min 0.5; optional)",
        "  ratio:   urgent (boolean; optional)",
        '  urgent:   color (one of "red" (Red), "green" (Green); optional; default "green")',
        "    1) Red  2) Green",
        '  color [green]:   level (one of 1 (Low), 2 (High); optional)',
        "    1) Low  2) High",
        '  level:   tags (any of "a" (A), "b" (B); at most 2; optional; default ["b"])',
        "    1) A  2) B",
        "  tags [b]:   api_key (string; optional) — a credential: what you type is not shown",
        "  api_key: ",
    ]


def test_the_cli_lists_each_field_in_one_line() -> None:
    assert field_lines(FORM) == [
        "title (string; min length 3; max length 40; required): Title — a <short> summary",
        "email (string; format email; optional)",
        "count (integer; min 1; max 10; required; default 2)",
        "ratio (number; min 0.5; optional)",
        "urgent (boolean; optional)",
        'color (one of "red" (Red), "green" (Green); optional; default "green")',
        "level (one of 1 (Low), 2 (High); optional)",
        'tags (any of "a" (A), "b" (B); at most 2; optional; default ["b"])',
        "api_key (string; optional)",
    ]


def test_opencodes_question_dialog_hints_each_fields_limits_and_default() -> None:
    q = question(schema(("title",), **{k: FORM["properties"][k] for k in ("title", "count", "ratio", "color")}))
    prompts = question_prompts(q)
    assert [p.question.split(" — ", 1)[1] for p in prompts] == [
        f"title: Title — a <short> summary (at least 3 characters; at most 40 characters) [{q.id}]",
        f"count (at least 1; at most 10; a whole number; default 2; optional) [{q.id}]",
        f"ratio (at least 0.5; a number; optional) [{q.id}]",
        f'color (default "green"; optional) [{q.id}]',
    ]
    assert [(o.label, o.description) for o in prompts[3].options] == [
        ("Red", "value \"red\""), ("Green", "value \"green\"; the default"),
        ("(leave empty)", "no value: the server's default applies")]
