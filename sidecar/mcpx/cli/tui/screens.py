"""The inbox's screens besides the list: one question (its form or its URL), a decline's reason, and
the consent asked before a URL is opened."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Static

from mcpx.broker.models import Action, Elicitation
from mcpx.cli.render import AUDIENCE_WORDS
from mcpx.cli.tui.feed import ShownQuestion
from mcpx.cli.tui.fields import Form
from mcpx.config.durations import format_duration
from mcpx.presentation.rendering import approvals_text, presence_text
from mcpx.presentation.text import plain, quoted
from mcpx.presentation.urlfacts import url_facts


class ScreenHost(Protocol):
    """What a question's screen asks of the app it is shown in (tui/inbox_app.py's InboxApp), without importing it."""

    async def answer(self, q: Elicitation, action: Action, content: dict[str, Any] | None = None,
                     reason: str | None = None, form: Form | None = None) -> bool: ...

    def url_consent(self, eid: str, url: str, yes: bool) -> None: ...


def asker(p: ShownQuestion) -> str:
    q = p.question
    return plain(q.server, 80) + (f", during {plain(q.tool, 80)}" if q.tool else "")


def time_left(p: ShownQuestion) -> str:
    left = p.seconds_left()
    return format_duration(left) if left > 0 else "expiring"


class QuestionScreen(Screen[None]):
    """One question: who asks and why, then its form (or its URL), and the three answers."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("a", "accept", "Accept"),
        Binding("d", "decline", "Decline"),
        Binding("c", "cancel_question", "Cancel"),
        Binding("o", "open_url", "Open URL", show=False),
    ]
    DEFAULT_CSS = """
    QuestionScreen #question-head { background: $boost; padding: 0 1; text-style: bold; }
    QuestionScreen #question-body { padding: 1 2; }
    QuestionScreen #message { margin-bottom: 1; }
    QuestionScreen .note { color: $text-muted; margin-bottom: 1; }
    QuestionScreen #url-box { border: round $warning; padding: 0 1; height: auto; margin-bottom: 1; }
    QuestionScreen #url-warning { color: $error; text-style: bold; }
    QuestionScreen #buttons { height: auto; padding: 0 2; }
    QuestionScreen #buttons Button { margin-right: 2; }
    """

    def __init__(self, pending: ShownQuestion) -> None:
        super().__init__()
        self.pending = pending
        self.question = pending.question
        self.eid = pending.question.id
        self.form = Form(self.question.requested_schema, self.question.secret_fields) \
            if self.question.mode == "form" else None

    @property
    def inbox(self) -> ScreenHost:
        return cast(ScreenHost, self.app)

    def compose(self) -> ComposeResult:
        q = self.question
        yield Static(id="question-head")
        with VerticalScroll(id="question-body"):
            yield Static(Content.assemble((asker(self.pending), "bold"), " asks: ", Content(quoted(q.message))),
                         id="message")
            who = AUDIENCE_WORDS.get(q.audience, q.audience)
            yield Static(Content(f"for {who} — {plain(q.reason, 400)}"), classes="note")
            if (approvals := approvals_text(q)) is not None:
                yield Static(Content(plain(approvals, 400)), classes="note", id="approvals")
            if (presence := presence_text(q.id, q.presence, None)) is not None:
                yield Static(Content(presence), classes="note", id="presence")
            if self.form is not None:
                if self.form.boxes:
                    yield Static("Enter or Tab moves to the next field; a, d, c answer from outside a text field.",
                                 classes="note")
                yield self.form
            else:
                yield from self._url_box()
        with Horizontal(id="buttons"):
            yield Button("Accept", id="accept", variant="success")
            yield Button("Decline…", id="decline", variant="error")
            yield Button("Cancel", id="cancel", variant="default")
            if q.mode == "url":
                yield Button("Open URL…", id="open-url", variant="warning")
        yield Footer()

    def _url_box(self) -> ComposeResult:
        facts = url_facts(self.question.url or "")
        with Vertical(id="url-box"):
            yield Static(Content.assemble("This asks you to open a page. Domain: ",
                                          (plain(facts.domain, 200), "bold reverse")))
            yield Static(Content(plain(facts.url, 2000)), id="url")
            if facts.warning:
                yield Static(Content(f"⚠ {plain(facts.warning, 300)}"), id="url-warning")
            yield Static("Nothing is opened unless you say so (o). Accept when you are done there.")

    def on_mount(self) -> None:
        self.refresh_head()
        if self.form is not None and self.form.boxes:
            self.form.boxes[0].control.focus()
        else:
            self.query_one("#accept", Button).focus()

    def refresh_head(self) -> None:
        # the app's tick may come between this screen's push and its compose, or during its dismissal: with no
        # head (yet, or any more) there is nothing to refresh; on_mount draws it once it is there
        q = self.question
        for head in self.query("#question-head").results(Static):
            head.update(Content(f"{q.id} · {time_left(self.pending)} left · {q.mode}"))

    @on(Input.Submitted)
    def next_field(self, event: Input.Submitted) -> None:
        """Enter moves on, as in a paper form; the last field's Enter lands on Accept."""
        event.stop()
        if self.form is not None and event.input is self.form.boxes[-1].control:
            self.query_one("#accept", Button).focus()
        else:
            self.focus_next()

    @on(Button.Pressed)
    async def pressed(self, event: Button.Pressed) -> None:
        action = {"accept": self.action_accept, "decline": self.action_decline,
                  "cancel": self.action_cancel_question, "open-url": self.action_open_url}.get(event.button.id or "")
        if action is not None:
            await action()

    def action_back(self) -> None:
        self.dismiss()

    async def action_accept(self) -> None:
        content: dict[str, Any] | None = None
        if self.form is not None:
            content = self.form.check()
            if content is None:
                return
        if await self.inbox.answer(self.question, "accept", content, form=self.form):
            self.dismiss()

    async def action_decline(self) -> None:
        async def decline(reason: str | None) -> None:
            if reason is not None and await self.inbox.answer(self.question, "decline", reason=reason or None):
                self.dismiss()
        self.app.push_screen(ReasonScreen(self.question.id), decline)

    async def action_cancel_question(self) -> None:
        if await self.inbox.answer(self.question, "cancel"):
            self.dismiss()

    async def action_open_url(self) -> None:
        if self.question.mode != "url" or not self.question.url:
            return
        url = self.question.url

        def consent(yes: bool | None) -> None:
            self.inbox.url_consent(self.question.id, url, bool(yes))
        self.app.push_screen(OpenUrlScreen(self.eid, url), consent)


class ReasonScreen(ModalScreen[str | None]):
    """Decline, with an optional reason: Enter declines, Escape goes back without declining."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Don't decline")]
    DEFAULT_CSS = """
    ReasonScreen { align: center middle; }
    ReasonScreen > Vertical { width: 70; height: auto; border: thick $error; background: $surface; padding: 1 2; }
    """

    def __init__(self, eid: str) -> None:
        super().__init__()
        self.eid = eid

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Decline {self.eid}? Why (optional; the server and the audit keep it):")
            yield Input(placeholder="reason (Enter declines, Escape goes back)", id="reason")

    @on(Input.Submitted, "#reason")
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_back(self) -> None:
        self.dismiss(None)


class OpenUrlScreen(ModalScreen[bool]):
    """The person's say-so before a server's URL is opened in their browser."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "refuse", "Don't open"), Binding("y", "agree", "Open")]
    DEFAULT_CSS = """
    OpenUrlScreen { align: center middle; }
    OpenUrlScreen > Vertical { width: 80; height: auto; border: thick $warning; background: $surface; padding: 1 2; }
    OpenUrlScreen Horizontal { height: auto; margin-top: 1; }
    OpenUrlScreen Button { margin-right: 2; }
    OpenUrlScreen #open-warning { color: $error; text-style: bold; }
    """

    def __init__(self, eid: str, url: str) -> None:
        super().__init__()
        self.eid = eid
        self.facts = url_facts(url)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content.assemble("Open this page in your browser? Domain: ",
                                          (plain(self.facts.domain, 200), "bold reverse")))
            yield Static(Content(plain(self.facts.url, 2000)))
            if self.facts.warning:
                yield Static(Content(f"⚠ {plain(self.facts.warning, 300)}"), id="open-warning")
            with Horizontal():
                yield Button("Open it", id="open", variant="warning")
                yield Button("Don't open", id="refuse", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#refuse", Button).focus()

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "open")

    def action_refuse(self) -> None:
        self.dismiss(False)

    def action_agree(self) -> None:
        self.dismiss(True)
