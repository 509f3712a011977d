"""`mcpx tui` through Textual's own test pilot, against the real daemon on its real socket.

Every wait is for something the app shows (pilot pauses under a deadline), never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from textual.color import Color
from textual.pilot import Pilot
from textual.widgets import Checkbox, Select, SelectionList
from textual.widgets._select import SelectOverlay

from conftest import ask
from harness import Daemon
from mcpx.cli.tui.inbox_app import InboxApp
from mcpx.cli.tui.screens import OpenUrlScreen, QuestionScreen, ReasonScreen
from mcpx.client.daemon_client import DaemonClient
from mcpx.system.paths import StatePaths

SIZE = (160, 50)


@asynccontextmanager
async def inbox(daemon: Daemon, **kw: Any) -> AsyncIterator[tuple[InboxApp, Pilot[None]]]:
    async with DaemonClient(StatePaths(daemon.home), answerer="person:tui") as client:
        app = InboxApp(client, **kw)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "live" in text_of(app.link_state), "the event stream to connect")
            yield app, pilot


async def until(pilot: Pilot[None], check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout}s for {what}")
        await pilot.pause(0.02)


def text_of(widget: Any) -> str:
    return str(widget.render())


def screen_text(app: InboxApp, widget: Any = None) -> str:
    """What the person sees: the rendered lines of the screen on top, or of one widget's part of it."""
    lines = [strip.text for strip in app.screen._compositor.render_strips()]
    if widget is None:
        return "\n".join(lines)
    r = widget.region
    return "\n".join(line[r.x:r.right] for line in lines[r.y:r.bottom])


async def answer_of(http: aiohttp.ClientSession, eid: str) -> dict[str, Any] | None:
    async with http.get(f"/v1/elicit/{eid}") as r:
        return (await r.json())["answer"]


async def wait_answer(pilot: Pilot[None], http: aiohttp.ClientSession, eid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while (answer := await answer_of(http, eid)) is None:
        assert time.monotonic() < deadline, f"{eid} was not answered in time"
        await pilot.pause(0.05)
    return answer


async def test_badge_is_live_and_d_declines_with_a_reason(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    async with inbox(daemon) as (app, pilot):
        assert text_of(app.badge) == "no questions" and not app.badge.has_class("-loud")
        first = await ask(http, message="Which repository?")
        await until(pilot, lambda: text_of(app.badge) == "● 1 question", "the badge for one question")
        assert app.badge.has_class("-loud")
        accent = Color.parse(app.get_css_variables()["accent"])
        assert app.badge.styles.background == accent  # loud: the theme's accent colour
        second = await ask(http, message="Which branch?")
        await until(pilot, lambda: text_of(app.badge) == "● 2 questions", "the badge for two questions")
        assert [str(k.value) for k in app.table.rows] == [first["id"], second["id"]]  # oldest first
        assert "Which repository?" in screen_text(app)

        await pilot.press("d")
        assert isinstance(app.screen, ReasonScreen) and app.screen.eid == first["id"]
        await pilot.press(*"wrong project", "enter")
        answer = await wait_answer(pilot, http, first["id"])
        assert (answer["action"], answer["by"], answer["reason"]) == ("decline", "person:tui", "wrong project")
        await until(pilot, lambda: text_of(app.badge) == "● 1 question", "the badge to count down")
        assert [str(k.value) for k in app.table.rows] == [second["id"]]
        # the stream's news of it is not taken for someone else's answer
        assert text_of(app.status) == f"{first['id']}: decline by person:tui (wrong project)"

        async with http.get("/v1/audit", params={"elicit": first["id"], "kinds": "elicit.answered"}) as r:
            (record,) = (await r.json())["records"]
        assert record["data"]["by"] == "person:tui" and record["data"]["reason"] == "wrong project"

        await pilot.press("d", "escape")  # Escape backs out: nothing is declined
        assert not isinstance(app.screen, ReasonScreen)
        await pilot.press("c")
        cancelled = await wait_answer(pilot, http, second["id"])
        assert (cancelled["action"], cancelled["by"]) == ("cancel", "person:tui")
        await until(pilot, lambda: text_of(app.badge) == "no questions", "the badge to empty")


FORM = {"type": "object", "required": ["email", "count", "tags"], "properties": {
    "email": {"type": "string", "format": "email", "title": "Your email"},
    "count": {"type": "integer", "minimum": 1, "maximum": 10},
    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
    "notify": {"type": "boolean", "default": True},
    "public": {"type": "boolean"},
    "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"]},
    "tier": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}],
             "default": "pro"},
    "tags": {"type": "array", "items": {"anyOf": [{"const": "bug", "title": "Bug"}, {"const": "api", "title": "API"},
                                                   {"const": "ui", "title": "UI"}]}, "default": ["api"]},
    "apiKey": {"type": "string", "description": "an API key for the deploy"},
}}


async def open_form(app: InboxApp, pilot: Pilot[None], eid: str) -> QuestionScreen:
    await until(pilot, lambda: eid in app.pending, f"{eid} in the list")
    app.table.move_cursor(row=app.table.get_row_index(eid))
    await pilot.press("enter")
    screen = await until(pilot, lambda: isinstance(app.screen, QuestionScreen) and app.screen, "the question's form")
    assert screen.eid == eid
    return screen


def box(screen: QuestionScreen, name: str) -> Any:
    assert screen.form is not None
    return next(b for b in screen.form.boxes if b.field_name == name)


async def test_the_form_accepts_typed_values_typed_by_the_schema(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    async with inbox(daemon) as (app, pilot):
        q = await ask(http, message="Deploy settings?", requestedSchema=FORM)
        screen = await open_form(app, pilot, q["id"])
        # defaults filled in, widgets by kind, the credential hidden
        assert box(screen, "notify").control.value is True and isinstance(box(screen, "notify").control, Checkbox)
        assert isinstance(box(screen, "public").control, Select) and box(screen, "public").control.value is Select.NULL
        assert box(screen, "tier").control.value == 1  # "pro", the default
        assert isinstance(box(screen, "tags").control, SelectionList) and box(screen, "tags").control.selected == [1]
        assert box(screen, "apiKey").control.password is True and "apiKey" in q["secretFields"]
        assert box(screen, "count").control.type == "integer" and box(screen, "ratio").control.type == "number"

        assert app.focused is box(screen, "email").control  # the first field has the cursor
        await pilot.press(*"me@example.com", "enter")  # Enter moves on to the next field
        assert app.focused is box(screen, "count").control
        await pilot.press(*"7", "tab", *"0.25", "tab")
        assert app.focused is box(screen, "notify").control
        await pilot.press("space", "tab")  # notify: off
        await pilot.press("enter", "down", "enter", "tab")  # public: the first choice, yes
        await pilot.press("enter", "down", "down", "down", "enter", "tab")  # size: Large
        await pilot.press("tab")  # tier: stays pro
        await pilot.press("space", "tab")  # tags: bug ticked too (api was the default)
        await pilot.press(*"sk-secret-1", "enter")
        assert app.focused is screen.query_one("#accept")
        assert "sk-secret-1" not in screen_text(app)  # a password input shows no credential
        await pilot.press("enter")

        answer = await wait_answer(pilot, http, q["id"])
        assert answer["by"] == "person:tui" and answer["action"] == "accept"
        assert answer["content"] == {"email": "me@example.com", "count": 7, "ratio": 0.25, "notify": False,
                                     "public": True, "size": "l", "tier": "pro", "tags": ["bug", "api"],
                                     "apiKey": "[redacted]"}
        assert type(answer["content"]["count"]) is int
        await until(pilot, lambda: not isinstance(app.screen, QuestionScreen), "the form to close")


async def test_a_bad_value_shows_the_field_error_and_the_question_stays_pending(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    async with inbox(daemon) as (app, pilot):
        q = await ask(http, requestedSchema=FORM)
        screen = await open_form(app, pilot, q["id"])
        await pilot.press(*"not-an-email", "enter", *"99")
        await pilot.click("#accept")
        shown = screen_text(app)
        assert "✗ email is not an email address" in shown and "✗ count must be at most 10" in shown
        assert box(screen, "email").has_class("-invalid") and not box(screen, "ratio").has_class("-invalid")
        assert app.focused is box(screen, "email").control  # the first field to fix
        assert isinstance(app.screen, QuestionScreen) and await answer_of(http, q["id"]) is None

        # the daemon's own refusal (a 422) is shown per field too: sent past the form's check
        ok = await app.answer(screen.question, "accept", {"email": "a@b.co", "count": 0, "tags": []}, form=screen.form)
        assert ok is False
        await pilot.pause()
        assert "✗ count must be at least 1" in screen_text(app)
        assert "refused" in text_of(app.status)
        async with http.get(f"/v1/elicit/{q['id']}") as r:
            assert (await r.json())["elicitation"]["state"] == "pending"

        box(screen, "email").control.value = ""
        await pilot.click("#accept")
        assert "✗ email is required" in screen_text(app)
        box(screen, "email").control.focus()
        await pilot.press(*"a@b.co")  # a value given: "is required" goes, not only at the next accept
        await until(pilot, lambda: "email is required" not in screen_text(app), "the field's problem to go")
        assert not box(screen, "email").has_class("-invalid") and "✗ count must be at most 10" in screen_text(app)

        await pilot.click("#decline")  # declining never needs the form filled in
        assert isinstance(app.screen, ReasonScreen)
        await pilot.press("enter")  # no reason
        answer = await wait_answer(pilot, http, q["id"])
        assert (answer["action"], answer["by"], answer.get("reason")) == ("decline", "person:tui", None)
        await until(pilot, lambda: app.screen is app.screen_stack[0], "the list again")


INJECTED = "[bold red]pwned[/] [link=https://evil.example]click[/link] [@click=app.quit]quit[/]"


async def test_the_servers_words_render_literally_never_as_markup(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    schema = {"type": "object", "properties": {
        "pick": {"type": "string", "title": "[b]bold[/b]", "description": "[link=https://evil.example]x[/link]",
                 "oneOf": [{"const": "a", "title": "[red]A[/red]"}, {"const": "b", "title": "B"}]}}}
    async with inbox(daemon) as (app, pilot):
        q = await ask(http, message=INJECTED + "\x1b[31m", requestedSchema=schema, server="[i]srv[/i]")
        await until(pilot, lambda: q["id"] in app.pending, "the question")
        # drawn: its id in the table and its words in the preview (shown either way, markup or literal); one pause
        # was not always enough beside a loaded machine
        await until(pilot, lambda: q["id"] in screen_text(app, app.table) and "pwned" in screen_text(app, app.preview),
                    "the question drawn in the table and the preview")
        for widget in (app.table, app.preview):
            listed = screen_text(app, widget)
            assert "[bold red]pwned[/]" in listed and "[link=https://evil.example]click[/link]" in listed
            assert "[i]srv[/i]" in listed
            assert "\x1b" not in listed and "\\x1b" in listed  # control characters are shown as escapes

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, QuestionScreen), "the question's screen")
        assert f"“{INJECTED}\\x1b[31m”" in screen_text(app, app.screen.query_one("#message"))  # quoted: their words
        label = screen_text(app, box(app.screen, "pick").query_one(".field-label"))
        assert "[b]bold[/b]" in label and "[link=https://evil.example]x[/link]" in label
        pick = box(app.screen, "pick").control
        pick.focus()
        await pilot.press("enter")
        overlay = await until(pilot, lambda: pick.expanded and pick.query_one(SelectOverlay), "the choices")
        assert "[red]A[/red]" in screen_text(app, overlay)
        await pilot.press("down", "enter")  # the first choice: its title, literally, in the closed select
        await until(pilot, lambda: not pick.expanded and "[red]A[/red]" in screen_text(app, pick), "the choice shown")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0], "the list again")
        assert app.is_running


async def test_a_url_question_shows_its_domain_and_opens_only_with_consent(daemon: Daemon,
                                                                          http: aiohttp.ClientSession) -> None:
    opened: list[str] = []
    url = "https://xn--pypal-4ve.com/login?next=%2F"
    async with inbox(daemon, opener=opened.append) as (app, pilot):
        q = await ask(http, message="Log in to the payment provider", url=url)
        screen = await open_form(app, pilot, q["id"])
        shown = screen_text(app)
        assert url in shown and "Domain: xn--pypal-4ve.com" in shown and "Punycode" in shown
        assert "pаypal.com" in shown  # noqa: RUF001, RUF003 -- what the Punycode reads as: a Cyrillic а
        assert opened == []

        await pilot.press("o")
        assert isinstance(app.screen, OpenUrlScreen)
        await pilot.press("escape")  # refused: nothing opened
        assert isinstance(app.screen, QuestionScreen) and opened == []
        assert "not opened" in text_of(app.status)

        await pilot.press("o")
        await pilot.click("#open")
        assert opened == [url]
        assert isinstance(app.screen, QuestionScreen) is True and screen is app.screen
        await pilot.press("a")
        answer = await wait_answer(pilot, http, q["id"])
        assert (answer["action"], answer["by"]) == ("accept", "person:tui") and "content" not in answer


async def test_a_question_answered_elsewhere_leaves_the_screen(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    async with inbox(daemon) as (app, pilot):
        q = await ask(http)
        await until(pilot, lambda: q["id"] in app.pending, "the question")
        pushed = app.push_screen(QuestionScreen(app.pending[q["id"]]))
        app.tick()  # the clock's tick between a screen's push and its compose (CI saw it): nothing to refresh yet
        await pushed
        await app.pop_screen()
        await open_form(app, pilot, q["id"])
        async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "a/b"}}) as r:
            assert r.status == 200
        await until(pilot, lambda: not isinstance(app.screen, QuestionScreen), "the screen to close")
        assert "ended elsewhere: accept by person:rest" in text_of(app.status)
        assert text_of(app.badge) == "no questions"


async def test_a_without_fields_accepts_and_an_escalation_updates_the_row(daemon: Daemon,
                                                                          http: aiohttp.ClientSession) -> None:
    async with inbox(daemon) as (app, pilot):
        free_text = await ask(http, message="Which repository?", audience="agent-then-human")
        await until(pilot, lambda: free_text["id"] in app.pending, "the question")
        assert app.table.get_cell(free_text["id"], "for").plain == "agent-then-human"
        async with http.post(f"/v1/elicit/{free_text['id']}/decline", json={"reason": "I do not know"},
                             headers={"X-Mcpx-Answerer": "agent:cli"}) as r:
            assert r.status == 200 and (await r.json())["escalated"] is True
        await until(pilot, lambda: app.table.get_cell(free_text["id"], "for").plain == "human", "the escalation")

        confirm = await ask(http, message="Go ahead?", requestedSchema={"type": "object", "properties": {}})
        await until(pilot, lambda: confirm["id"] in app.pending, "the second question")
        app.table.move_cursor(row=app.table.get_row_index(confirm["id"]))
        await pilot.press("a")  # nothing to fill in: accepted from the list
        answer = await wait_answer(pilot, http, confirm["id"])
        assert (answer["action"], answer["by"], answer.get("content")) == ("accept", "person:tui", {})

        # one only the person's passkey accepts (docs/presence.md): its screen says so, and `a` is refused, saying so
        signed = await ask(http, message="Delete main?", requestedSchema={"type": "object", "properties": {}},
                           presence=True)
        screen = await open_form(app, pilot, signed["id"])
        assert "Accepting it needs the person's passkey, on its page" in text_of(screen.query_one("#presence"))
        await pilot.press("a")
        await until(pilot, lambda: "is accepted only with the person's passkey" in text_of(app.status),
                    "the refusal")
        assert await answer_of(http, signed["id"]) is None


async def test_filters_and_a_daemon_restart_resume_from_the_last_event(daemon: Daemon,
                                                                      http: aiohttp.ClientSession) -> None:
    async with inbox(daemon, server="ci") as (app, pilot):
        other = await ask(http, message="not for this inbox")
        mine = await ask(http, message="for this inbox", server="ci")
        await until(pilot, lambda: mine["id"] in app.pending, "the ci question")
        assert other["id"] not in app.pending and text_of(app.badge) == "● 1 question"

        daemon.stop()
        await until(pilot, lambda: app.link_state.has_class("-down"), "the link to show the daemon gone")
        daemon.start()
        # answered and opened while the inbox may still be reconnecting: the replay from its last event id brings both
        async with daemon.session() as fresh:
            async with fresh.post(f"/v1/elicit/{mine['id']}/decline", json={}) as r:
                assert r.status == 200
            later = await ask(fresh, message="after the restart", server="ci")
        await until(pilot, lambda: set(app.pending) == {later["id"]}, "the inbox to catch up")
        await until(pilot, lambda: "live" in text_of(app.link_state), "the link to be live again")
        assert app.feed.last is not None and text_of(app.badge) == "● 1 question"


def run_in_terminal(daemon: Daemon, *expected: str, keys: bytes = b"q", timeout: float = 30.0,
                    ) -> tuple[int | None, bytes]:
    """`mcpx tui` in a real pseudo-terminal: read until all of `expected` has shown (bounded), type `keys`,
    await its exit."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "mcpx", "tui"], stdin=slave, stdout=slave, stderr=slave,
                            env={**daemon.env, "TERM": "xterm-256color"}, cwd=daemon.home, start_new_session=True)
    os.close(slave)
    seen = b""

    def all_seen() -> bool:
        return all(text.encode() in seen for text in expected)
    try:
        deadline = time.monotonic() + timeout
        while not all_seen() and proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:  # the terminal closed: the process is gone
                    break
        if all_seen() and proc.poll() is None:
            os.write(master, keys)
        return proc.wait(timeout), seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(master)


async def test_mcpx_tui_runs_in_a_terminal_and_quits_on_q(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    await ask(http, message="Which repository?")
    code, seen = await asyncio.to_thread(run_in_terminal, daemon, "● 1 question", "Which repository?")
    assert "● 1 question".encode() in seen and b"Which repository?" in seen
    assert code == 0

    daemon.stop()
    code, seen = await asyncio.to_thread(run_in_terminal, daemon, "no mcpx daemon answers")
    assert code == 69 and b"no mcpx daemon answers" in seen

    out = daemon.cli("tui")  # no terminal: a clear word, not a garbled screen
    assert out.returncode == 2 and "needs a terminal" in out.stderr
