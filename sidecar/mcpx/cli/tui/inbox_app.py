"""`mcpx tui`: the terminal inbox. The pending questions, live from the daemon's event stream, under a
loud badge; Enter opens one; a, d, c answer it (as person:tui).

It is a client of the daemon like every other CLI command: /v1 for answers, /v1/events for news.
"""

from __future__ import annotations

import webbrowser
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import DataTable, Footer, Static

from mcpx.broker.models import Action, Elicitation
from mcpx.cli.render import field_lines
from mcpx.cli.tui.feed import Feed, Listener, ShownEnd, ShownQuestion
from mcpx.cli.tui.fields import Form
from mcpx.cli.tui.screens import QuestionScreen, ReasonScreen, asker, time_left
from mcpx.client.daemon_client import DaemonClient
from mcpx.client.transport import ApiError, NoDaemon
from mcpx.presentation.text import plain, quoted

ANSWERER = "person:tui"
EMPTY = "No questions waiting. New ones appear here as they open."
COLUMNS = (("id", "id"), ("left", "left"), ("for", "for"), ("asks", "asks"), ("message", "message"))


def badge_text(count: int) -> str:
    return f"● {count} question{'' if count == 1 else 's'}" if count else "no questions"


class InboxApp(App[None]):
    TITLE = "mcpx inbox"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "accept", "Accept"),
        Binding("d", "decline", "Decline"),
        Binding("c", "cancel_question", "Cancel"),
        Binding("q", "quit", "Quit"),
    ]
    CSS = """
    #top { height: 1; background: $panel; }
    #title { width: auto; padding: 0 1; text-style: bold; }
    #badge { width: auto; padding: 0 1; color: $text-muted; }
    #badge.-loud { background: $accent; color: $text; text-style: bold; }
    #link { width: 1fr; padding: 0 1; color: $text-muted; text-align: right; }
    #link.-down { color: $error; }
    #questions { height: 1fr; }
    #preview { height: auto; max-height: 12; padding: 0 1; border-top: solid $panel; }
    #status { height: auto; padding: 0 1; color: $text-muted; }
    #status.-error { color: $error; text-style: bold; }
    """

    def __init__(self, client: DaemonClient, *, session: str | None = None, server: str | None = None,
                 opener: Callable[[str], Any] = webbrowser.open, warning: str | None = None) -> None:
        super().__init__()
        self.client = client
        self.opener = opener
        self.warning = warning
        self.pending: dict[str, ShownQuestion] = {}
        self.mine: set[str] = set()  # answered from here (or being): their end is not news from elsewhere
        self.feed = Feed(client, Listener(self.reset, self.upsert, self.ended, self.link), session, server)
        filters = [f"session {plain(session, 60)}" if session else "", f"server {plain(server, 60)}" if server else ""]
        self.sub_title = " · ".join(f for f in filters if f)

    def compose(self) -> ComposeResult:
        # kept by reference: the feed reports while a question's screen is the one on top
        self.badge = Static(badge_text(0), id="badge")
        self.link_state = Static("connecting…", id="link")
        self.table: DataTable[Text] = DataTable(id="questions", cursor_type="row", zebra_stripes=True)
        for label, key in COLUMNS:
            self.table.add_column(label, key=key)
        self.preview = Static(Content(EMPTY), id="preview")
        self.status = Static(Content(self.warning or ""), id="status", classes="-error" if self.warning else "")
        with Horizontal(id="top"):
            yield Static(Content.assemble("mcpx inbox", (f"  {self.sub_title}" if self.sub_title else "", "dim")),
                         id="title")
            yield self.badge
            yield self.link_state
        yield self.table
        yield self.preview
        yield self.status
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()
        self.run_worker(self.feed.run(), name="feed", exclusive=True, exit_on_error=True)
        self.set_interval(1.0, self.tick)

    # ---- what the feed reports

    def reset(self, shown: list[ShownQuestion]) -> None:
        self.pending = {p.question.id: p for p in sorted(shown, key=lambda p: p.question.created)}
        self.table.clear()
        for p in self.pending.values():
            self.table.add_row(*self._cells(p), key=p.question.id)
        self._counted()

    def upsert(self, p: ShownQuestion) -> None:
        eid = p.question.id
        known = eid in self.pending
        self.pending[eid] = p
        if known:
            for (_label, key), cell in zip(COLUMNS, self._cells(p), strict=True):
                self.table.update_cell(eid, key, cell)
        else:
            self.table.add_row(*self._cells(p), key=eid)
        self._counted()

    def ended(self, end: ShownEnd) -> None:
        if self.pending.pop(end.id, None) is None:
            return
        self.table.remove_row(end.id)
        self._counted()
        if end.id in self.mine:
            self.mine.discard(end.id)
            return
        while getattr(self.screen, "eid", None) == end.id:  # its form, its reason, its URL consent: all moot
            self.pop_screen()
        self.say(f"{end.id} ended elsewhere: {end.describe()}")

    def link(self, live: bool, detail: str) -> None:
        self.link_state.update(Content(plain(detail, 300)))
        self.link_state.set_class(not live, "-down")

    # ---- the list

    def _cells(self, p: ShownQuestion) -> list[Text]:
        q = p.question
        return [Text(q.id), Text(time_left(p)), Text(q.audience), Text(asker(p)), Text(plain(q.message, 200))]

    def _counted(self) -> None:
        self.badge.update(badge_text(len(self.pending)))
        self.badge.set_class(bool(self.pending), "-loud")
        self._preview()

    def tick(self) -> None:
        for eid, p in self.pending.items():
            self.table.update_cell(eid, "left", Text(time_left(p)))
        if isinstance(self.screen, QuestionScreen):
            self.screen.refresh_head()

    def highlighted(self) -> ShownQuestion | None:
        if not self.pending or self.table.row_count == 0:
            return None
        key = self.table.coordinate_to_cell_key(self.table.cursor_coordinate).row_key.value
        return self.pending.get(key or "")

    @on(DataTable.RowHighlighted, "#questions")
    def _preview(self) -> None:
        p = self.highlighted()
        if p is None:
            self.preview.update(Content(EMPTY))
            return
        q = p.question
        lines = [f"{asker(p)} asks: {quoted(q.message)}"]
        if q.mode == "url":
            lines.append(f"url: {plain(q.url or '', 400)}")
        else:
            lines.extend("  " + line for line in field_lines(q.requested_schema))
        lines.append("Enter opens it · a accepts · d declines · c cancels")
        self.preview.update(Content("\n".join(lines)))

    @on(DataTable.RowSelected, "#questions")
    def open_question(self) -> None:
        p = self.highlighted()
        if p is not None:
            self.push_screen(QuestionScreen(p))

    async def action_accept(self) -> None:
        p = self.highlighted()
        if p is None:
            return
        q = p.question
        if q.mode == "form" and not q.form.fields:
            await self.answer(q, "accept", {})
        else:
            self.push_screen(QuestionScreen(p))  # a form to fill, or a URL to see first

    def action_decline(self) -> None:
        p = self.highlighted()
        if p is None:
            return
        q = p.question

        async def decline(reason: str | None) -> None:
            if reason is not None:
                await self.answer(q, "decline", reason=reason or None)
        self.push_screen(ReasonScreen(q.id), decline)

    async def action_cancel_question(self) -> None:
        p = self.highlighted()
        if p is not None:
            await self.answer(p.question, "cancel")

    # ---- answering

    async def answer(self, q: Elicitation, action: Action, content: dict[str, Any] | None = None,
                     reason: str | None = None, form: Form | None = None) -> bool:
        """Send an answer as person:tui. True when the question is done with (answered now or before)."""
        self.mine.add(q.id)  # before sending: the stream may bring its end before the reply does
        try:
            body = await self.client.answer(q.id, action, content, reason)
        except ApiError as exc:
            self.mine.discard(q.id)
            if exc.status == 422 and form is not None:
                form.show_problems(exc.fields, str(exc))
                self.say(f"{q.id}: the daemon refused the answer: {exc}", error=True)
                return False
            self.say(f"{q.id}: {exc}", error=True)
            return exc.status in (404, 409, 410)  # gone or answered already: nothing left to answer here
        except NoDaemon as exc:
            self.mine.discard(q.id)
            self.say(str(exc), error=True)
            return False
        answer = body.get("answer") or {}
        self.say(f"{q.id}: {answer.get('action', action)} by {answer.get('by', ANSWERER)}"
                 + (f" ({plain(reason, 200)})" if reason else ""))
        return True

    def url_consent(self, eid: str, url: str, yes: bool) -> None:
        if not yes:
            self.say(f"{eid}: not opened")
            return
        self.opener(url)
        self.say(f"{eid}: opened in your browser; accept when you are done there")

    def say(self, text: str, error: bool = False) -> None:
        self.status.update(Content(plain(text, 1000)))
        self.status.set_class(error, "-error")
        self.notify(plain(text, 1000), severity="error" if error else "information", markup=False)
