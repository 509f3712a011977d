"""One line per question, per event, per upstream instance: what `mcpx elicit list`, `mcpx elicit watch`, `mcpx
audit` and `mcpx status` print. Kept apart from render.py (a question in full, which reads its schema with pydantic):
these commands start without pydantic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpx.config.durations import format_duration
from mcpx.presentation.text import plain

if TYPE_CHECKING:
    from mcpx.client.replies import AuditDoc, QuestionDoc


def render_row(q: QuestionDoc) -> str:
    left = format_duration(q.get("secondsLeft", 0)) if q.get("state") == "pending" else q.get("state", "")
    return (f"{q['id']}  {left:>7}  {q.get('audience', ''):<16}  {plain(q.get('server', ''), 20):<12}  "
            f"{plain(q.get('message', ''), 70)}")


def render_event(event: str, data: AuditDoc) -> str:
    eid = data.get("elicit") or data.get("task") or ""
    d = data.get("data") or {}
    detail = ""
    if event == "elicit.open":
        detail = f"{d.get('server')}: for {d.get('audience')}"
    elif event in ("elicit.answered", "elicit.expired"):
        detail = f"{d.get('action')} by {d.get('by')} after {d.get('answeredAfterMs')} ms"
    elif event == "elicit.escalated":
        detail = f"now for the person — {plain(d.get('reason', ''), 120)}"
    elif event == "elicit.abandoned":
        detail = plain(d.get("reason", ""), 160)
    elif event == "policy.fired":
        detail = f"rule {d.get('rule')}: {d.get('action')} — {plain(d.get('because', ''), 120)}"
    elif event == "task.done":
        detail = str(d.get("state", ""))
    elif event == "elicit.approval":
        detail = (f"{plain(str(d.get('person')), 64)} {d.get('action')}: "
                  + (f"refused — {plain(str(d['refused']), 160)}" if "refused" in d
                     else f"counted ({len(d.get('approved') or [])} of {d.get('need')})"))
    elif event == "person.enrolled":
        how = (f"vouched for by {plain(str(d.get('vouchedBy')), 64)}'s passkey {d.get('voucherPasskey')}"
               if d.get("how") == "vouched" else "trusted on first use")
        detail = (f"{plain(str(d.get('person')), 64)}'s passkey {d.get('passkey')}: {how}"
                  + (f" (link asked for by {plain(str(d['by']), 64)})" if d.get("by") else ""))
    elif event == "person.revoked":
        detail = f"{plain(str(d.get('person')), 64)}'s passkey {d.get('passkey')}"
    elif event == "elicit.reminded":
        sent = [f"reminded {', '.join(d['remind'])}"] if d.get("remind") else []
        sent += [f"escalated to {', '.join(d['escalate'])}"] if d.get("escalate") else []
        detail = plain("; ".join(sent), 200)
    return f"{data.get('at', '')}  {event:<17} {eid}  {detail}".rstrip()


def upstream_lines(doc: dict[str, Any]) -> list[str]:
    """`mcpx status`: the upstream instances running now, whose they are, and the memory they hold."""
    instances = doc.get("instances") or []
    total = f"{doc.get('rssKiB', 0) / 1024:.1f} MiB resident" if instances else "none running"
    lines = [f"  upstreams {len(instances)} instance(s), {doc.get('processes', 0)} process(es), {total}"]
    rows = []
    for inst in instances:
        sessions = ", ".join(plain(s, 80) for s in inst.get("sessions") or [])
        if inst.get("shared"):
            who = "shared" + (f" ({sessions})" if sessions else "")
        else:
            who = f"session {sessions}" if sessions else "lists tools"
        if inst.get("calls"):
            state = f"{inst['calls']} call(s)"
        else:
            state = f"idle {format_duration(inst.get('idleSeconds') or 0)}"
            if inst.get("stopsIn") is not None:
                state += f", {'a spare, ' if inst.get('spare') else ''}stops in {format_duration(inst['stopsIn'])}"
        rss = f"{inst['rssKiB'] / 1024:.1f} MiB" if inst.get("rssKiB") is not None else "-"
        pid = f"pid {inst['pid']}" if inst.get("pid") else "http"
        rows.append([plain(inst["server"], 64), pid, inst.get("era") or "?", who, state, rss])
    widths = [max(len(row[i]) for row in rows) for i in range(6)] if rows else []
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:5], widths[:5], strict=True)] + [row[5].rjust(widths[5])]
        lines.append("    " + "  ".join(cells))
    return lines
