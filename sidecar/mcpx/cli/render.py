"""Questions for a terminal: readable fields, the server's words quoted, the exact commands that answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpx.broker.schema import FlatSchema
from mcpx.config.durations import format_duration
from mcpx.presentation.answering import respond_with
from mcpx.presentation.rendering import presence_text
from mcpx.presentation.text import plain, quoted, shell_quote_json

if TYPE_CHECKING:
    from mcpx.client.replies import AnswerDoc, QuestionDoc

AUDIENCE_WORDS = {
    "agent": "the agent (fixed choices it can pick from what it has seen)",
    "human": "the person — an agent must not answer it",
    "agent-then-human": "the agent if it truly knows; if it declines, the person",
}


def answer_commands(q: QuestionDoc) -> list[str]:
    eid = q["id"]
    if isinstance(approvals := q.get("approvals"), dict):
        # only its approvers' own links accept or decline it (any other answer is refused): hand each theirs
        links = [f"mcpx elicit link {eid} --as {name}   # {plain(name)}'s own link: it answers only as them"
                 for name in approvals.get("waiting") or []]
        return [*links, f"mcpx elicit cancel {eid}                    # not now (anyone may cancel)"]
    lines = [respond_with(q)]
    fields = FlatSchema.of(q.get("requestedSchema")).fields
    if fields and q.get("mode") != "url":
        pairs = " ".join(f"{f.name}=…" for f in fields if f.required) or " ".join(f"{f.name}=…" for f in fields[:2])
        lines.append(f"mcpx elicit answer {eid} {pairs}")
    lines.append(f"mcpx elicit decline {eid} --reason '…'      # no")
    lines.append(f"mcpx elicit cancel {eid}                    # not now")
    return lines


def field_lines(schema: dict[str, Any] | None) -> list[str]:
    return [plain(f.describe(), 400) for f in FlatSchema.of(schema).fields]


def render_question(q: QuestionDoc, answer: AnswerDoc | None = None) -> str:
    state = q.get("state", "?")
    head = f"{q['id']} · {state}"
    if state == "pending":
        head += f" · {format_duration(q.get('secondsLeft', 0))} left (until {q.get('expiresAt')})"
    lines = [head]
    who = plain(q.get("server", "?"))
    if q.get("tool"):
        who += f", during {plain(q['tool'])}"
    lines.append(f"  asks      {who}" + (" (via mcpx)" if q.get("server") != "mcpx" else ""))
    lines.append(f"  message   {quoted(q.get('message', ''))}")
    lines.append(f"  for       {AUDIENCE_WORDS.get(q.get('audience', ''), q.get('audience'))}")
    lines.append(f"  because   {plain(q.get('reason', ''))}")
    if q.get("mode") == "url":
        lines.append(f"  url       {plain(q.get('url', ''))}   (open it yourself; then accept, decline or cancel)")
    else:
        fields = field_lines(q.get("requestedSchema"))
        if fields:
            lines.append("  fields    " + fields[0])
            lines.extend("            " + f for f in fields[1:])
        else:
            lines.append("  fields    (none: accept or decline)")
    lines.append(f"  session   {q.get('session')} ({q.get('sessionSource')})")
    if isinstance(approvals := q.get("approvals"), dict):
        waiting = f"; waiting for {', '.join(approvals.get('waiting') or [])}" if approvals.get("waiting") else ""
        lines.append(f"  approvals {plain(str(approvals.get('status', '')))}{plain(waiting)}   (each approver answers "
                     "through their own link)")
    if (presence := presence_text(str(q.get("id")), q.get("presence") is True, None)) is not None:
        lines.append(f"  presence  {presence}")
    if q.get("task"):
        lines.append(f"  task      {q['task']}   (its result: mcpx task result {q['task']})")
    if q.get("stateReason"):
        lines.append(f"  note      {plain(q['stateReason'])}")
    if answer:
        content = answer.get("content")
        lines.append(f"  answer    {answer.get('action')} by {answer.get('by')} at {answer.get('at')}"
                     + (f" after {answer.get('answeredAfterMs')} ms"
                        if answer.get("answeredAfterMs") is not None else ""))
        if content:
            lines.append(f"            {plain(shell_quote_json(content)[1:-1], 400)}")
        if answer.get("reason"):
            lines.append(f"            reason: {plain(answer['reason'])}")
    if state == "pending":
        if q.get("page"):
            lines.append(f"  page      {q['page']}   (the web inbox; on another device: mcpx elicit link {q['id']})")
        cmds = answer_commands(q)
        lines.append("  answer    " + cmds[0])
        lines.extend("            " + c for c in cmds[1:])
    return "\n".join(lines)
