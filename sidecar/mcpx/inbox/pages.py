"""The inbox's HTML: the list of waiting questions, a question's page, and the pages that say why not.

Server-rendered from the templates in this package (package data, so a wheel carries them). Every value from a
server or a caller is escaped here; the templates only place fragments built in this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from html import escape
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import urlencode

from mcpx.broker import approvals
from mcpx.broker.broker import redact
from mcpx.broker.models import Answer, Elicitation, rfc3339
from mcpx.config.durations import format_duration
from mcpx.inbox.html_form import form_fields
from mcpx.inbox.signing import person_in
from mcpx.presentation.dialog_form import why
from mcpx.presentation.rendering import approvals_text
from mcpx.presentation.text import clock
from mcpx.presentation.urlfacts import url_facts

AUDIENCE = {"human": "for you", "agent": "for the agent", "agent-then-human": "the agent's, then yours"}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


@cache
def asset(name: str) -> str:
    return resources.files("mcpx.inbox").joinpath(name).read_text(encoding="utf-8")


def badge(count: int) -> str:
    text = f"● {count} question{'' if count == 1 else 's'}" if count else "no questions"
    return f'<span id="badge" class="badge{"" if count else " quiet"}">{text}</span>'


def page(title: str, body: str, *, home: str = "/inbox", count: int | None = None) -> str:
    return Template(asset("templates/page.html")).substitute(
        title=_e(title), body=body, home=_e(home), badge=badge(count) if count is not None else "")


def asker(q: Elicitation) -> str:
    return _e(q.server) + (f" <span class='meta'>during {_e(q.tool)}</span>" if q.tool else "")


def left(q: Elicitation) -> str:
    return f'<span class="left" data-left="{q.seconds_left}">{_e(format_duration(q.seconds_left))}</span>'


def question_href(eid: str, link: str | None = None, action: str | None = None) -> str:
    path = f"/inbox/q/{eid}" + (f"/{action}" if action else "")
    return path + ("?" + urlencode({"link": link}) if link else "")


def rows(questions: list[Elicitation]) -> str:
    if not questions:
        return '<tr><td colspan="5" class="empty">No questions waiting. New ones appear here as they open.</td></tr>'
    out = []
    for q in questions:
        message = q.message if len(q.message) <= 200 else q.message[:199] + "…"
        out.append(f'<tr data-id="{_e(q.id)}"><td><a href="{question_href(q.id)}">{_e(q.id)}</a></td>'
                   f'<td class="left">{left(q)}</td><td>{asker(q)}</td>'
                   f"<td>{_e(AUDIENCE.get(q.audience, q.audience))}</td>"
                   f"<td>{_e(message)}{_approvals(q)}</td></tr>")
    return "".join(out)


def _approvals(q: Elicitation) -> str:
    text = approvals_text(q)
    return f'<br><span class="meta approvals">{_e(text)}</span>' if text else ""


def list_page(questions: list[Elicitation], session: str | None, server: str | None) -> str:
    body = (
        "<h1>Questions waiting</h1>"
        '<form class="filters" method="get" action="/inbox">'
        f'<label>session<input name="session" value="{_e(session or "")}"></label>'
        f'<label>server<input name="server" value="{_e(server or "")}"></label>'
        '<button class="cancel" type="submit">Filter</button>'
        '<span class="meta" id="live">connecting…</span></form>'
        "<table><thead><tr><th>question</th><th>left</th><th>asks</th><th>for</th><th>message</th></tr></thead>"
        f'<tbody id="rows">{rows(questions)}</tbody></table>'
        '<p class="meta">Oldest first. Answers given here are recorded as <code>person:web</code>.</p>'
    )
    return page("mcpx inbox", body, count=len(questions))


def until(moment: datetime) -> str:
    """The deadline on a clock: "until 14:05", with the day when it is not today. The daemon's clock says it here
    (it runs on the person's machine); the page's script says it again on the viewer's own clock, from the
    datetime the <time> element carries."""
    local = moment.astimezone()
    day = "" if local.date() == datetime.now().astimezone().date() else local.strftime("%a ")
    return f"until {day}{clock(moment)}"


def _head(q: Elicitation) -> str:
    if q.state == "pending":
        deadline = f'<time id="deadline" data-until datetime="{_e(rfc3339(q.expires_at))}">'
        state = f"{left(q)} left · {deadline}{_e(until(q.expires_at))}</time>"
    else:
        state = _e(q.state)
    return (f'<div class="meta">{_e(q.id)} · {asker(q)} asks · {_e(AUDIENCE.get(q.audience, q.audience))} · '
            f'<span id="state">{state}</span></div>'
            f'<blockquote class="words">{_e(q.message)}</blockquote>'
            '<div class="words-note">the server\'s words, quoted</div>'
            f'<p class="why" id="why">{_e(why(q))}</p>')


def _url_block(q: Elicitation, link: str | None, consent: bool | None) -> str:
    facts = url_facts(q.url or "")
    url = _e(facts.url)
    if facts.domain and facts.domain != "(none)":
        url = url.replace(_e(facts.domain), f'<mark class="domain">{_e(facts.domain)}</mark>', 1)
    parts = [f'<p>It asks you to open this page:</p><div class="url" id="url">{url}</div>',
             f'<p>domain: <mark class="domain" id="domain">{_e(facts.domain)}</mark></p>']
    if facts.warning:
        parts.append(f'<p class="warning" id="url-warning">⚠ {_e(facts.warning)}</p>')
    if consent is not None:
        parts.append(f'<p class="notice" id="consent">{"You opened it." if consent else "You chose not to open it."}'
                     " Answer below when you are done, or change your mind.</p>")
    parts.append(
        "<p>Open it? mcpx does not open or fetch it; it opens only if you say yes, in a new tab.</p>"
        '<div class="buttons">'
        f'<form method="post" action="{question_href(q.id, link, "open")}" target="_blank">'
        '<button class="open" type="submit" id="open">Yes, open it</button></form>'
        f'<form method="post" action="{question_href(q.id, link, "refuse")}">'
        '<button class="cancel" type="submit" id="refuse">No, do not open it</button></form></div>')
    return '<div class="card">' + "".join(parts) + "</div>"


def _buttons(q: Elicitation, link: str | None, form_html: str) -> str:
    accept_label = "Accept" if q.mode == "form" else "Accept (I have done what the page asks)"
    presence = ""
    if q.presence:  # the page's script asks the person's passkey to sign the accept (static/passkey.js)
        accept_label += " with my passkey"
        presence = (f' data-challenge="{_e(passkey_href(q.id, link, "challenge"))}"'
                    f' data-accept="{_e(passkey_href(q.id, link, "accept"))}"')
    accept = (f'<form method="post" action="{question_href(q.id, link, "accept")}" novalidate id="answer"{presence}>'
              f'{form_html}<div class="buttons">'
              f'<button class="accept" type="submit" id="accept">{accept_label}</button>'
              "</div></form>")
    if q.presence:
        accept += ('<p class="meta" id="presence">Accepting this needs your passkey: your browser asks for it, and '
                   'it signs exactly this question and what you accept.</p>'
                   '<p id="passkey-status" role="status"></p>')
    others = (
        '<div class="buttons">'
        f'<form method="post" action="{question_href(q.id, link, "decline")}" class="reason">'
        '<label>reason (optional)<input name="reason" id="reason" maxlength="2000"></label>'
        '<button class="decline" type="submit" id="decline">Decline</button></form>'
        f'<form method="post" action="{question_href(q.id, link, "cancel")}">'
        '<button class="cancel" type="submit" id="cancel">Cancel</button></form></div>')
    return accept + others


def outcome(q: Elicitation, answer: Answer | None, *, elsewhere: bool = False) -> str:
    """What became of a question, as a card. `elsewhere`: for a page that was open on it, waiting, while it ended
    by another way (another surface's answer, expiry, its asker going away): nothing typed there was sent."""
    unsent = "<p>Nothing entered on this page was sent.</p>" if elsewhere else ""
    if q.state == "expired" and answer is not None:
        return (f'<div class="card outcome refused" id="outcome"><h2>Expired — {_e(q.server)} was told '
                f"{_e(answer.action)}</h2><p>Nobody answered it by {_e(rfc3339(answer.at))}.</p>{unsent}"
                "<p>It cannot be answered now.</p></div>")
    if answer is not None:
        said = f"{_e(answer.action)} by {_e(answer.by)} at {_e(rfc3339(answer.at))}"
        extra = ""
        if answer.content:  # a credential's value never leaves the daemon, not even back to whoever typed it
            shown = json.dumps(redact(answer.content, q.secret_fields), indent=2, ensure_ascii=False)
            extra += f'<pre class="content" id="content">{_e(shown)}</pre>'
        if answer.reason:
            extra += f'<p>reason: <q>{_e(answer.reason)}</q></p>'
        title = "Answered elsewhere" if elsewhere else "Answered"
        return (f'<div class="card outcome" id="outcome"><h2>{title}: {said}</h2>{extra}{unsent}'
                "<p>It cannot be answered again.</p></div>")
    because = f": {_e(q.state_reason)}" if q.state_reason else ""
    title = f"Abandoned — {_e(q.server)} stopped waiting" if q.state == "abandoned" else _e(q.state.capitalize())
    return (f'<div class="card outcome refused" id="outcome"><h2>{title}{because}</h2>{unsent}'
            "<p>It cannot be answered.</p></div>")


def _no_vote(q: Elicitation, person: str, where: approvals.Standing | None) -> str:
    """An approver's page once their vote is in (or the asker's, or an outsider's, from a link made before mcpx
    refused to make one): what they did, where the approvals stand, and nothing to press."""
    a = q.approvals
    assert a is not None
    if where == "approved":
        said = f"You approved this, as {person}."
    elif where == "asker":
        said = (f"You asked this question, as {person}: nobody approves their own request. To withdraw it: "
                f"mcpx elicit cancel {q.id}")
    else:
        said = f"{person} is not an approver of this question."
    waiting = f" Waiting for {', '.join(a.waiting)}." if a.waiting else ""
    return (f'<div class="card" id="your-vote"><h2 id="vote">{_e(said)}</h2>'
            f'<p id="standing">{_e(a.status)}.{_e(waiting)}</p>'
            "<p>There is nothing more to answer here; this page shows the outcome once the question ends.</p></div>")


def question_page(q: Elicitation, answer: Answer | None, *, link: str | None = None,
                  values: Mapping[str, Any] | None = None, problems: Mapping[str, str] | None = None,
                  error: str | None = None, notice: str | None = None, consent: bool | None = None,
                  follow: int | None = None, passkey_page: str | None = None) -> str:
    """A question's page: its head, then its form and the three buttons while it is pending, or what became of it.
    `passkey_page`: where a question that needs presence can be signed, when it cannot be here (an address, not a
    name: browsers refuse a passkey on 127.0.0.1).

    `follow`: where the audit log stood before the page read the question, for a browser signed in: the page's
    script follows the daemon's event stream from there, and should the question end by another way, it puts
    what became of it (`outcome`, elsewhere) in place of the form. A link alone does not open the stream."""
    parts = ['<div class="card">', _head(q), _approvals(q), "</div>"]
    if notice:
        parts.append(f'<p class="notice" id="notice">{_e(notice)}</p>')
    if error:
        parts.append(f'<p class="error-box" id="error" role="alert">{_e(error)}</p>')
    if passkey_page is not None:
        parts.append(f'<p class="notice" id="passkey-page">Accepting this needs your passkey, which your browser '
                     f'offers only on <a href="{_e(passkey_page)}">its page on localhost</a>.</p>')
    person = person_in(link)
    where = approvals.standing(q.approvals, person) if q.approvals is not None and person is not None else None
    if q.state == "pending" and where not in (None, "waiting"):
        # this person's vote is in, or was never theirs to give: where it stands, and no button that would be refused
        parts.append(_no_vote(q, person or "", where))
    elif q.state == "pending":
        followed = f' data-follow="{follow}"' if follow is not None else ""
        parts.append(f'<div id="now" data-id="{_e(q.id)}"{followed} aria-live="polite">')
        if q.mode == "url":
            parts.append(_url_block(q, link, consent))
            parts.append('<div class="card">' + _buttons(q, link, "") + "</div>")
        else:
            fields = form_fields(q.requested_schema, set(q.secret_fields), values, problems, asker=q.server)
            parts.append('<div class="card">' + _buttons(q, link, fields) + "</div>")
        live = ' · <span id="live">connecting…</span>' if follow is not None else ""
        who = f"person:{person}" if person else "person:web"
        parts.append(f'<p class="meta">Answers given here are recorded as <code>{_e(who)}</code>.{live}</p></div>')
    else:
        parts.append(outcome(q, answer))
    home = "/inbox" if link is None else question_href(q.id, link)
    if link is None:
        parts.append('<p><a href="/inbox">← all waiting questions</a></p>')
    return page(f"{q.id} · mcpx", "".join(parts), home=home)


def passkey_href(eid: str, link: str | None, step: str) -> str:
    return f"/inbox/passkey/{eid}/{step}" + ("?" + urlencode({"link": link}) if link else "")


def enrol_page(person: str, href: str, terms: str) -> str:
    """Where `person` creates a passkey: one button, the browser does the rest (static/passkey.js); `terms`: how it
    comes to be trusted. A person who has one already then signs with it (the second button, shown then)."""
    body = (f'<div class="card"><h1 id="title">A passkey for {_e(person)}</h1>'
            "<p>mcpx will accept the questions that need you only with this passkey. Your browser asks you to "
            "create it (a fingerprint, a PIN, or your phone).</p>"
            f'<p id="terms" class="meta">{_e(terms)}</p>'
            f'<div class="buttons"><button class="accept" type="button" id="enroll" data-url="{_e(href)}">'
            "Create my passkey</button>"
            '<button class="accept" type="button" id="vouch" hidden>Sign with a passkey I have</button></div>'
            '<p id="passkey-status" role="status"></p></div>')
    return page(f"Passkey for {person} · mcpx", body)


def message_page(title: str, text: str, hint: str | None = None) -> str:
    body = f'<div class="card"><h1 id="title">{_e(title)}</h1><p id="text">{_e(text)}</p>'
    if hint:
        body += f'<p class="meta">{_e(hint)}</p>'
    return page(f"{title} · mcpx", body + "</div>")
