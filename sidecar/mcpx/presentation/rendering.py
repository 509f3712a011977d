"""A question as each party is shown it, rendered once, here: clients (the opencode plugin first) show it as given.

The /v1 question documents carry it as `render` when asked (`?render=true`): the text an agent is shown at
each level of the opencode plugin, the announcement of a person's question, the exact calls and commands
that answer it, the dialog it suits and what that dialog shows. Which fields are credentials is the
question's own `secretFields`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from mcpx.broker.models import Answer, Elicitation, WireModel
from mcpx.broker.schema import example_content
from mcpx.presentation.answering import (
    collect_later,
    for_agent,
    head_lines,
    mcp_answer_call,
    respond_with,
    waiting_head,
    withheld_text,
)
from mcpx.presentation.dialog_form import DialogForm, dialog_form
from mcpx.presentation.dialogs import (
    DialogKind,
    PermissionDialog,
    QuestionPrompt,
    dialog_of,
    permission_dialog,
    question_prompts,
)
from mcpx.presentation.text import clock, json_text, plain, quoted

# the opencode plugin's own tool, which opens the person's dialog (generated into
# plugin/opencode/lib/shared/generated.ts)
ASK_TOOL = "mcpx_ask_person"
Level = Literal["notify", "ask", "dialog"]
ShownIn = Literal["toast", "dialog"]


class Texts(WireModel):
    """What the opencode plugin appends to a tool output of the question's session, at each of its levels."""

    notify: str
    ask: str
    dialog: str | None = Field(default=None, description="the person's question, where mcpx's own dialog puts it "
                               "in front of them (the TUI part of the plugin): they answer it there")


class Toast(WireModel):
    """What opencode's TUI shows the person at once when a question for them opens (client.tui.showToast)."""

    title: str = Field(description="loud, with how many of the person's questions wait: ● 1 question for you")
    message: str = Field(description="who asks, their words, the deadline, and where to answer it")
    variant: Literal["warning"] = "warning"


class Ended(WireModel):
    """How a question that no longer waits ended, in one line, for where opencode showed it to the person."""

    toast: str = Field(description="for a toast that takes the place of its own, so that none claims it still waits")
    dialog: str = Field(description="for its dialog in opencode's TUI, closed because it ended elsewhere")


class AskPerson(WireModel):
    """What the opencode plugin's own tool (mcpx_ask_person) answers the agent, where the question decides it."""

    no_dialog: str = Field(description="in a session where nobody can see a dialog (opencode run's): none opened")
    in_front: str = Field(description="mcpx's dialog shows it to the person now (with ?shownAt: since when)")
    question_call: str | None = Field(default=None, description="for question: the exact call of opencode's question "
                                      "tool that puts it to the person (its arguments are render.questions)")
    no_question_tool: str | None = Field(default=None, description="for question, where opencode offers no question "
                                         "tool")


class AnswerCalls(WireModel):
    accept: str = Field(description="the mcpx_elicit_answer call that accepts, with placeholder content of its shape")
    decline: str


class Rendering(WireModel):
    dialog: DialogKind = Field(description="the dialog it suits: confirm and url (a permission dialog), question "
                               "(choices and free input), terminal (a credential: no dialog that a model sees)")
    server: str = Field(description="who asks, as one safe line")
    example: dict[str, Any] | None = Field(default=None, description="placeholder content of the question's shape "
                                           "(strings are '...'); none in url mode")
    answer_calls: AnswerCalls = Field(description="the exact MCP tool calls an agent makes")
    terminal: str = Field(description="the commands that answer it from a terminal")
    page: str | None = Field(default=None, description="its page in the web inbox, which opens only in the person's "
                             "browser, signed in (`mcpx inbox`)")
    waits: str = Field(description="the sentence that tells the agent to let the person know it waits, and every "
                       "place they answer it (a terminal, the web inbox)")
    ask_call: str = Field(description="the call of the plugin's tool that puts it to the person")
    ask_now: str = Field(description="the line that tells the agent to make that call now")
    ask_person: AskPerson = Field(description="what the plugin's own tool says of it")
    ask_above: str = Field(description="after an output that showed the person's question already (mcpx serve's "
                           "early result): it is theirs, and the line that tells the agent to make that call now")
    collect: str | None = Field(default=None, description="the call that collects the result of the call that asked")
    call_waits: str | None = Field(default=None, description="the first paragraph of the early result of the call "
                                   "that asked: it waits for an answer, and keeps running (its task)")
    collect_later: str | None = Field(default=None, description="the last paragraph of that early result: how to "
                                      "collect the call's real result once answered")
    asked: str = Field(description="for the output of a call that put it to the person in mcpx's dialog: whether "
                       "and when they were shown it (with ?shownAt), and what became of it")
    agent: Texts | None = Field(default=None, description="the question offered to the agent (not the person's)")
    person: Texts | None = Field(default=None, description="the person's question, announced: never offered to "
                                 "the agent")
    status: str | None = Field(default=None, description="what became of it, once it is no longer pending")
    ended: Ended | None = Field(default=None, description="once it is no longer pending: the lines that say so where "
                                "the person was shown it")
    toast: Toast = Field(description="the person's notification in opencode's TUI")
    note: str | None = Field(default=None, description="for an output that already shows the person's question: "
                             "whether it was shown to them, and where they answer it")
    shown: str | None = Field(default=None, description="with ?shownAt: the sentence that says when and how it was "
                              "shown to the person")
    withheld: str = Field(description="what stands in an output for a person's question at the plugin's levels that "
                          "show them nothing (off, auto): neither its words nor an invitation to answer")
    permission: PermissionDialog | None = Field(default=None, description="for confirm and url")
    questions: list[QuestionPrompt] | None = Field(default=None, description="for question: the question tool's "
                                                   "exact arguments; its replies are answered with `replies`")
    form: DialogForm = Field(description="the question as a dialog of its own draws it (the opencode TUI plugin's): "
                             "its entries are answered with `form`")
    approvals: str | None = Field(default=None, description="a question that needs named people's approvals: where "
                                  "they stand (\"1 of 2 approved (alice)\"), and that only their own links answer it")
    line: str = Field(description="one line for a terminal where the person works (opencode run's): who asks what, "
                      "until when, and where to answer it")


def where_to_answer(doc: dict[str, Any], page: str | None) -> list[str]:
    """Every place the person can answer a question, one line each."""
    return [f"from a terminal: {respond_with(doc)}", *([f"or in the web inbox: {page}"] if page else [])]


def approvals_text(q: Elicitation) -> str | None:
    """Where a question's approvals stand, and who answers it: the one sentence every client shows."""
    a = q.approvals
    if a is None:
        return None
    waiting = f"; waiting for {', '.join(a.waiting)}" if a.waiting and q.state == "pending" else ""
    return (f"{a.status}{waiting}. It needs {a.need} approval{'s' if a.need != 1 else ''} from named people, each "
            "through their own link (sent to them)")


def presence_text(eid: str, presence: bool, page: str | None) -> str | None:
    """What every door says of a question only the person's passkey accepts (docs/presence.md): the one sentence."""
    if not presence:
        return None
    where = f"on its page, {page}" if page else f"on its page (mcpx elicit link {eid} prints it)"
    return (f"Accepting it needs the person's passkey, {where}; declining or cancelling it works from anywhere")


def _toast(q: Elicitation, doc: dict[str, Any], waiting: int, page: str | None) -> Toast:
    count = max(1, waiting)
    asks = f"{plain(q.server, 100)} (via mcpx) asks: {quoted(q.message, 300)}"
    if q.mode == "url":
        asks += f" — open {plain(q.url or '', 300)}"
    if (approvals := approvals_text(q)) is not None:
        asks += f"\n{approvals}"
    if (presence := presence_text(q.id, q.presence, page)) is not None:
        asks += f"\n{presence}"
    # each command and address on a line of its own: a toast wraps at its width (54 columns in opencode's TUI), and
    # there a break after "from a terminal:" could fall inside the id, at its hyphen
    lines = [asks, f"answer by {clock(q.expires_at)} ({q.id})", "from a terminal:", respond_with(doc),
             *(["or in the web inbox:", page] if page else [])]
    return Toast(title=f"● {count} question{'s' if count != 1 else ''} for you", message="\n".join(lines))


def _shown(shown_at: datetime | None, shown_in: ShownIn = "toast") -> str:
    if shown_at is None:
        return "It has not been shown to the person in opencode"
    where = "in opencode's dialog" if shown_in == "dialog" else "in opencode"
    return f"It was shown to the person {where} at {clock(shown_at)}"


def _line(q: Elicitation, doc: dict[str, Any], page: str | None) -> str:
    asks = f"{plain(q.server, 100)} (via mcpx) asks you: {quoted(q.message, 300)}"
    if q.mode == "url":
        asks += f" — open {plain(q.url or '', 300)}"
    if (approvals := approvals_text(q)) is not None:
        return f"mcpx: {asks} — by {clock(q.expires_at)} ({q.id}): {approvals}"
    if (presence := presence_text(q.id, q.presence, page)) is not None:
        return f"mcpx: {asks} — by {clock(q.expires_at)} ({q.id}): {presence}"
    return f"mcpx: {asks} — answer by {clock(q.expires_at)} ({q.id}) {'; '.join(where_to_answer(doc, page))}"


def terminal_commands(doc: dict[str, Any]) -> str:
    eid = doc["id"]
    if doc.get("mode") == "url":
        return f"mcpx elicit answer {eid} (after opening the page), or mcpx elicit decline {eid}"
    return f"{respond_with(doc)}, or mcpx elicit decline {eid}"


def _status(q: Elicitation, answer: Answer | None) -> str | None:
    if q.state == "pending":
        return None
    said = f"{q.id} is {q.state}"
    if answer is not None:
        said += f" ({answer.action} by {plain(answer.by, 100)} at {answer.wire()['at']})"
    if q.state_reason:
        said += f": {plain(q.state_reason, 300)}"
    return said + "."


def _ended(q: Elicitation, answer: Answer | None) -> Ended | None:
    if q.state == "pending":
        return None
    if q.state == "answered":
        by = f" ({answer.action} by {plain(answer.by, 100)})" if answer is not None else ""
        return Ended(toast=f"{q.id} was answered{by}; it no longer waits.",
                     dialog=f"{q.id} was answered elsewhere{by}; its dialog is closed.")
    if q.state == "expired":
        return Ended(toast=f"{q.id} expired (it counts as cancel); it no longer waits.",
                     dialog=f"{q.id} expired (it counts as cancel); its dialog is closed.")
    why = f" ({plain(q.state_reason, 300)})" if q.state_reason else ""
    return Ended(toast=f"{q.id} was abandoned; it no longer waits.", dialog=f"{q.id} was abandoned{why}; its dialog is "
                 "closed.")


def _for_person(doc: dict[str, Any], dialog: DialogKind, level: Level, r: Rendering,
                shown_at: datetime | None, shown_in: ShownIn) -> str:
    lines = head_lines(doc)
    why = ("you declined it and it asks for free input, so it went to the person" if doc.get("escalated")
           else plain(doc.get("reason", ""), 300))
    lines.append(f"  This question is for the person, not for you ({why}). It waits for the person; "
                 f"do not answer it. {_shown(shown_at, shown_in)}.")
    if level == "dialog":
        lines.append("  mcpx's dialog in opencode puts it in front of them; they answer it there (or from a terminal: "
                     f"{r.terminal}).")
    elif level == "ask" and dialog != "terminal":
        lines.append(r.ask_now)
    else:
        if dialog == "terminal":
            lines.append("  It asks for a credential, so it is not shown in opencode: a model must not see the value.")
        lines.append(f"  {r.waits}")
    if r.collect:
        lines.append(f"  The call goes on once they answer; collect its result later with {r.collect}.")
    return "\n".join(lines)


def _asked(q: Elicitation, answer: Answer | None, shown_at: datetime | None, shown_in: ShownIn) -> str:
    shown = _shown(shown_at, shown_in) if shown_at else "it was not shown to them in opencode"
    return (f"Question {q.id} ({plain(q.server, 100)} asked the person): {shown}. "
            f"{_status(q, answer) or f'{q.id} still waits.'}")


def _ask_person(q: Elicitation, dialog: DialogKind, prompts: list[QuestionPrompt] | None, waits: str,
                collect: str | None, shown_at: datetime | None) -> AskPerson:
    shown = _shown(shown_at, "dialog") if shown_at else "It was shown to the person in opencode's dialog"
    in_front = (f"{shown}: {q.id} is in front of them now. Do not answer it yourself; the call goes on once they "
                "answer." + (f" Collect its result with {collect}." if collect else ""))
    r = AskPerson(no_dialog="mcpx: nobody can see a dialog in this session (opencode run answers every dialog by "
                  f"itself), so none was opened and nothing was recorded: {q.id} stays open for the person. {waits}",
                  in_front=in_front)
    if dialog == "question" and prompts is not None:
        arguments = {"questions": [p.wire() for p in prompts]}
        r.question_call = (f"To put {q.id} to the person, make exactly this call with opencode's question tool, "
                           "unchanged (the plugin takes their reply from opencode's dialog, never from anything you "
                           f"write):\n\nquestion {json_text(arguments, separators=(',', ':'))}\n\nDo not answer it "
                           "yourself and do not guess their answer; the server receives exactly what they choose or "
                           "type.")
        r.no_question_tool = (f"mcpx: opencode's question tool is not available here, so {q.id} cannot be put to the "
                              f"person in a dialog. {waits}")
    return r


def _answer_at(terminal: str, page: str | None) -> str:
    return f"from a terminal: {terminal}" + (f"; or in the web inbox: {page}" if page else "")


def _note(q: Elicitation, r: Rendering, shown_at: datetime | None, shown_in: ShownIn) -> str:
    tell = "; they answer it" if shown_at else ": tell them it waits; they answer"
    return (f"Question {q.id} is for the person: do not answer it. {_shown(shown_at, shown_in)}{tell} "
            f"{_answer_at(r.terminal, r.page)}")


def render(q: Elicitation, answer: Answer | None = None, prefix: str = "", page: str | None = None, *,
           waiting: int = 1, shown_at: datetime | None = None, shown_in: ShownIn = "toast") -> Rendering:
    """`prefix`: what the client's MCP entry puts before mcpx's tool names (opencode: the entry's name and _).
    `page`: the question's page in the web inbox.
    `waiting`: how many of the person's questions wait where the toast is shown, this one among them;
    `shown_at`: when the opencode plugin showed it to the person, if it did, and `shown_in` what showed it: a toast,
    or the question's own dialog (the TUI plugin's)."""
    doc = q.wire()
    dialog = dialog_of(q)
    answer_tool = prefix + "mcpx_elicit_answer"
    ask_call = f"{ASK_TOOL} {json.dumps({'id': q.id})}"
    terminal = terminal_commands(doc)
    ask_now = (f"  Put it to the person now: call {ask_call} — it opens opencode's dialog for them. "
               "Do not answer it yourself and do not guess their answer.")
    waits = f"Tell the person it waits; they answer {_answer_at(terminal, page)}"
    if (approvals := approvals_text(q)) is not None:
        waits = f"Tell the person it waits for approvals: {approvals}."
    if (presence := presence_text(q.id, q.presence, page)) is not None:
        waits += f" {presence}."
    collect = f"{prefix}mcpx_task_result {json.dumps({'task': q.task, 'wait': True})}" if q.task else None
    prompts = question_prompts(q) if dialog == "question" else None
    r = Rendering(
        dialog=dialog, server=plain(q.server, 100),
        example=None if q.mode == "url" else example_content(q.requested_schema),
        answer_calls=AnswerCalls(**{a: mcp_answer_call(doc, a).replace("mcpx_elicit_answer", answer_tool, 1)
                                    for a in ("accept", "decline")}),
        terminal=terminal, page=page, ask_call=ask_call,
        waits=waits,
        ask_now=ask_now,
        ask_person=_ask_person(q, dialog, prompts, waits, collect, shown_at),
        ask_above=f"Question {q.id} (above) is for the person.\n{ask_now}",
        collect=collect,
        call_waits=waiting_head(q.server, q.tool, q.task) if q.task else None,
        collect_later=collect_later(q.task, prefix) if q.task else None,
        asked=_asked(q, answer, shown_at, shown_in),
        status=_status(q, answer),
        ended=_ended(q, answer),
        permission=permission_dialog(q) if dialog in ("confirm", "url") else None,
        questions=prompts,
        toast=_toast(q, doc, waiting, page),
        shown=_shown(shown_at, shown_in) if shown_at else None,
        form=dialog_form(q),
        line=_line(q, doc, page),
        withheld=withheld_text(q.id),
        approvals=approvals,
    )
    if q.audience == "human":
        r.person = Texts(notify=_for_person(doc, dialog, "notify", r, shown_at, shown_in),
                         ask=_for_person(doc, dialog, "ask", r, shown_at, shown_in),
                         dialog=_for_person(doc, dialog, "dialog", r, shown_at, shown_in))
        r.note = _note(q, r, shown_at, shown_in)
    else:
        offer = [f"  or, if the person should choose: {ask_call}"] if dialog != "terminal" else []
        r.agent = Texts(notify=for_agent(doc, answer_tool), ask=for_agent(doc, answer_tool, offers=offer))
    return r
