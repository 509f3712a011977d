"""Asking a question at a terminal, field by field: types, choices and defaults shown, bad input re-asked.

Typing `decline` at any prompt declines (with an optional reason); Ctrl-C cancels.
"""

from __future__ import annotations

import functools
import json
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from mcpx.broker.schema import Field, FlatSchema, Option
from mcpx.client.question_watch import QuestionWatch
from mcpx.presentation.text import plain, quoted
from mcpx.shared.errors import McpxError

if TYPE_CHECKING:
    from mcpx.client.replies import QuestionDoc

Reader = Callable[[str], str]


def read_line(prompt: str, until: QuestionWatch | None = None) -> str:
    """input() for a terminal, except that Ctrl-C cancels whenever it is pressed. CPython's input() misses a
    SIGINT that lands after the prompt is written and before its read() blocks (no EINTR comes then) until the
    person types a line; seen as a Ctrl-C that did nothing on a loaded machine. Here the signal also writes to
    a wakeup pipe, so the wait ends however it lands, and the KeyboardInterrupt follows at once.

    `until`: the question being asked; once it ends elsewhere the read stops with its EndedMeanwhile."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    fd = sys.stdin.fileno()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    previous = signal.set_wakeup_fd(wake_w)
    try:
        while True:
            ready, _, _ = select.select([fd, wake_r] + ([until.fileno()] if until is not None else []), [], [])
            if until is not None and until.fileno() in ready:
                sys.stderr.write("\n")  # off the prompt's line, to say how the question ended
                raise until.ended()
            if wake_r in ready:
                os.read(wake_r, 512)  # a signal: its handler (KeyboardInterrupt for Ctrl-C) has run or runs now
                continue
            line = os.read(fd, 65536)  # a terminal in canonical mode gives one whole line per read
            if not line:
                raise EOFError
            return line.decode(errors="replace").rstrip("\r\n")
    finally:
        signal.set_wakeup_fd(previous)
        os.close(wake_r)
        os.close(wake_w)


def read_secret(prompt: str, until: QuestionWatch | None = None) -> str:
    """read_line with the terminal's echo off: a credential typed here is never shown (nor left on the screen for
    the scrollback); the line ends with the person's Enter. Not a terminal: read as any line."""
    fd = sys.stdin.fileno()
    if not os.isatty(fd):
        return read_line(prompt, until)
    import termios  # POSIX terminals only; imported where it is used

    before = termios.tcgetattr(fd)
    hidden = termios.tcgetattr(fd)
    hidden[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSAFLUSH, hidden)
    try:
        return read_line(prompt, until)
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, before)
        sys.stderr.write("\n")  # the Enter the terminal did not echo
        sys.stderr.flush()


class Declined(McpxError):
    def __init__(self, reason: str | None) -> None:
        super().__init__(reason or "declined")
        self.reason = reason


def _choose(options: Sequence[Option], text: str) -> Any:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    return None


def _field_value(f: Field, text: str) -> Any:
    """What was typed at a field's prompt: a choice by its number, value or title; else typed by the field."""
    if f.kind == "enum":
        picked = _choose(f.options, text)
        return picked if picked is not None else f.parse(text)
    if f.kind == "multi-enum":
        out = []
        for part in [p.strip() for p in text.split(",") if p.strip()]:
            picked = _choose(f.options, part)
            out.append(picked if picked is not None else f.pick(part))
        return out
    return f.parse(text)


def shown_default(value: Any) -> str:
    """A default as one would type it at the prompt: bug, api — not ["bug", "api"]; p1 — not "p1"."""
    if isinstance(value, list):
        return ", ".join(shown_default(v) for v in value)
    if isinstance(value, str):
        return value
    return json.dumps(value)  # true, false, 3, null: JSON's words are what the prompt takes


class TerminalForm:
    def __init__(self, read: Reader = read_line, out: TextIO = sys.stderr, read_hidden: Reader = read_secret) -> None:
        self.read = read
        self.read_hidden = read_hidden  # for a credential: nothing typed is shown
        self.out = out

    @classmethod
    def until(cls, watch: QuestionWatch) -> TerminalForm:
        """A form at this terminal that stops asking once `watch`'s question ends elsewhere (EndedMeanwhile)."""
        return cls(read=functools.partial(read_line, until=watch), read_hidden=functools.partial(read_secret,
                                                                                                until=watch))

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def _ask(self, label: str, hidden: bool = False) -> str:
        text = (self.read_hidden if hidden else self.read)(label)
        if text.strip().lower() == "decline":
            reason = self.read("  why (optional, Enter to skip): ").strip()
            raise Declined(reason or None)
        return text

    def header(self, q: QuestionDoc) -> None:
        who = plain(q.get("server", "?")) + (f", during {plain(q['tool'])}" if q.get("tool") else "")
        self.say()
        self.say(f"{who} (via mcpx) asks: {quoted(q.get('message', ''))}")
        self.say(f"  ({q['id']}; type 'decline' to say no, Ctrl-C to cancel)")

    def url(self, q: QuestionDoc) -> str:
        """accept / decline / cancel for a url-mode question."""
        self.header(q)
        self.say(f"  open this page yourself: {plain(q.get('url', ''))}")
        while True:
            text = self._ask("  done there? [a]ccept, [d]ecline, [c]ancel: ").strip().lower()
            if text in ("a", "accept", "y", "yes"):
                return "accept"
            if text in ("d", "no", "n"):
                raise Declined(None)
            if text in ("c", "cancel"):
                raise KeyboardInterrupt

    def form(self, q: QuestionDoc, problems: dict[str, str] | None = None,
             only: set[str] | None = None) -> dict[str, Any]:
        """The question's fields asked one by one (`problems`: only those, after a refused answer, with their
        problems; `only`: only these, the others being given already). A credential is read with the terminal's
        echo off."""
        form = FlatSchema.of(q.get("requestedSchema"))
        secret = set(q.get("secretFields") or [])
        if problems is None:
            self.header(q)
        else:
            for name, problem in problems.items():
                self.say(f"  ! {name} {problem}")
        content: dict[str, Any] = {}
        if not form.fields:
            text = self._ask("  accept? [y]es, or type decline: ").strip().lower()
            if text in ("y", "yes", ""):
                return {}
            raise Declined(None)
        for f in form.fields:
            name = f.name
            if (problems is not None and name not in problems) or (only is not None and name not in only):
                continue
            hidden = name in secret or f.format == "password"
            self.say("  " + plain(f.describe(), 400)
                     + (" — a credential: what you type is not shown" if hidden else ""))
            if f.options:
                self.say("    " + "  ".join(f"{i}) {plain(title, 60)}" for i, (_v, title) in enumerate(f.options, 1)))
            while True:
                default = f" [{plain(shown_default(f.default), 200)}]" if f.has_default and not hidden else ""
                text = self._ask(f"  {name}{default}: ", hidden)
                if not text.strip():
                    if f.has_default or not f.required:
                        break  # the daemon fills defaults; optional fields may stay empty
                    self.say(f"  ! {name} is required")
                    continue
                value = _field_value(f, text)
                misfit = f.problem(value)
                if misfit:
                    self.say(f"  ! {name} {misfit}")
                    continue
                content[name] = value
                break
        return content


def read_answer(form: TerminalForm, q: QuestionDoc, content: dict[str, Any],
                problems: dict[str, str] | None) -> tuple[str, dict[str, Any] | None, str | None]:
    """The person's answer to `q` at this terminal (`content`: what they gave before `problems` were found in it):
    its action, content and reason. Ctrl-C or the end of input is cancel."""
    try:
        if q.get("mode") == "url":
            form.url(q)
            return "accept", None, None
        return "accept", {**content, **form.form(q, problems)}, None
    except Declined as declined:
        return "decline", None, declined.reason
    except (KeyboardInterrupt, EOFError):
        return "cancel", None, "cancelled at the terminal"
