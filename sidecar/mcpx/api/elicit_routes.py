"""/v1 routes of the broker: health, questions, answers, long-poll waits, the event stream, the audit log."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from aiohttp import web

from mcpx import __version__
from mcpx.api.inbox_routes import INBOX, NOTIFIER, page_of
from mcpx.api.peers import answerer_of, peer_pid, refuse_agent_as_person, session_of
from mcpx.api.schemas import (
    AnswerBody,
    AnswerPath,
    AnswerResult,
    AskBody,
    AuditList,
    AuditQuery,
    ConsentBody,
    DaemonLease,
    ElicitationList,
    ElicitationWithAnswer,
    EventsHeaders,
    EventsQuery,
    Health,
    ListQuery,
    OpenApiDocument,
    Opened,
    PassedBody,
    QuestionPath,
    QuestionRenderQuery,
    ShownBody,
    StoreStatus,
    WaitQuery,
    kind_list,
)
from mcpx.api.state import BROKER, CONFIG, GATEWAY, INFO, OPENAPI, PASSED_CLAIMS
from mcpx.api.table import Api, JsonReply, Reply, RouteCall, RouteError, json_reply
from mcpx.broker.broker import redact
from mcpx.broker.models import (
    Answer,
    Answerer,
    ApprovalRequest,
    AuditRecord,
    Elicitation,
    OpenRequest,
    is_action,
)
from mcpx.broker.refusals import PresenceNeeded
from mcpx.broker.store import AuditFilter, QuestionFilter
from mcpx.config.durations import parse_duration
from mcpx.presentation.dialog_form import EntriesProblem, content_of_entries
from mcpx.presentation.dialogs import RepliesProblem, content_of_replies
from mcpx.presentation.passing import passed_as
from mcpx.presentation.rendering import render
from mcpx.presentation.urlfacts import url_facts
from mcpx.shared import sse, wirejson
from mcpx.shared.names import CWD_HEADER, SESSION_SOURCE_HEADER
from mcpx.shared.sessions import header_source, resolve_session
from mcpx.shared.shutdown import SHUTDOWN

api = Api()
PASSED_LIMIT = 1000  # a session's pending questions read to find the one a hook was passed
LISTING_HEAD = b'{"elicitations":['  # a listing's first bytes, before its questions

_ERR = {
    400: Reply("the request is malformed; the message names what"),
    403: Reply("wrong session, an agent answering a question that is the person's, an answer as the person "
               "from an agent's shell, or an accept or decline of a question only its approvers' own links answer"),
    404: Reply("no such question"),
    409: Reply("already answered; the first answer stands"),
    410: Reply("expired or abandoned"),
    422: Reply("the content does not fit the question's schema; each field's problem is named"),
}


def answer_document(answer: Answer | None, q: Elicitation) -> Answer | dict[str, Any] | None:
    """An answer as the API shows it: a credential's value never leaves the daemon. Without one to hide, the model
    itself, for json_reply to encode in one pass."""
    if answer is None:
        return None
    if not answer.content or not q.secret_fields:
        return answer
    doc = answer.wire()
    doc["content"] = redact(doc["content"], q.secret_fields)
    return doc


def rendered(call: RouteCall, q: Elicitation, answer: Answer | None, prefix: str, **where: Any) -> dict[str, Any]:
    """A question as the API shows it, with what each party is shown of it (mcpx.presentation.rendering; `where`:
    its keywords)."""
    return {**q.wire(), "render": render(q, answer, prefix, page_of(call.app)(q.id), **where).wire()}


@api.route("GET", "/v1/health", "Is the daemon up, and what is it running", tag="daemon",
           replies={200: Reply("the daemon is serving", Health)})
async def health(call: RouteCall) -> web.StreamResponse:
    info, settings, broker = call.app[INFO], call.app[CONFIG], call.app[BROKER]
    config = settings.config
    where = broker.store_info
    store = StoreStatus(kind=where.kind, where=where.where, daemon=where.daemon.id if where.daemon else None,
                        lease=where.lease, daemons=[DaemonLease.of(d) for d in await broker.daemons()])
    body = Health(
        ok=True, version=__version__, pid=os.getpid(), started_at=info.started_at, socket=str(info.paths.socket),
        listen=info.listen, config=settings.origin, config_error=settings.error,
        pending=await call.app[BROKER].count("pending"), servers=sorted(config.servers),
        server_commands={name: entry.shown for name, entry in sorted(config.servers.items())},
        plugin_elicit=config.plugin.elicit, store=store,
        inbox=inbox.base + "/inbox" if (inbox := call.app.get(INBOX)) is not None and inbox.base else None,
        notify=notifier.summary() if (notifier := call.app.get(NOTIFIER)) is not None else [],
        needs_login={name: why for name in sorted(config.servers)
                     if (why := call.app[GATEWAY].logins.problem(name)) is not None},
    )
    return web.json_response(body.wire())


@api.route("GET", "/v1/openapi.json", "This API, generated from the route table", tag="daemon",
           replies={200: Reply("OpenAPI 3.1", OpenApiDocument)})
async def openapi(call: RouteCall) -> web.StreamResponse:
    return web.json_response(call.app[OPENAPI]())


@api.route("GET", "/v1/elicit", "Questions, oldest first (default: pending ones)", query=ListQuery,
           replies={200: Reply("the questions", ElicitationList), 400: _ERR[400]})
async def list_questions(call: RouteCall) -> web.StreamResponse:
    q: ListQuery = call.query
    where = QuestionFilter(state=None if q.state == "all" else q.state, session=q.session, server=q.server,
                           audience=q.audience, trace=q.trace, task=q.task)
    if q.render:
        questions = await call.app[BROKER].questions(where, q.limit)
        docs = [rendered(call, each, None, q.tool_prefix) for each in questions]
        return web.json_response({"elicitations": docs, "count": len(docs)})
    pieces, count = await call.app[BROKER].questions_json(where, q.limit)  # as stored: no parse per question
    pieces.append(b'],"count":%d}' % count)
    body = b"".join(pieces)  # 10,000 questions are 5 MB: joined once, here
    # the headers leave with the few bytes before the array, so the body is written as it is: aiohttp joins the
    # headers with the first chunk written after them (on Python < 3.12.9), which for a Response is the whole body,
    # a second 5 MB copy (docs/bench.md: 10,000 pending listed)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(LISTING_HEAD) + len(body)
    try:
        await response.prepare(call.request)
        await response.write(LISTING_HEAD)
        await response.write(body)
        await response.write_eof()
    except ConnectionResetError:  # the client went away while it was sent: nobody to answer
        pass
    return response


@api.route("POST", "/v1/elicit", "mcpx asks on its own behalf: approvals from CI and scripts", body=AskBody,
           replies={201: Reply("the question is open", Opened, headers=("Location",)), 400: _ERR[400]})
async def ask(call: RouteCall) -> web.StreamResponse:
    body: AskBody = call.body
    mode = body.mode or ("url" if body.url else "form")
    try:
        ttl = parse_duration(body.ttl) if body.ttl is not None else None
    except ValueError as exc:
        raise RouteError(400, "bad_body", f"invalid body: ttl: {exc}", fields={"ttl": str(exc)}) from None
    if ttl is not None and not 0 < ttl <= 7 * 86400:
        raise RouteError(400, "bad_body", "invalid body: ttl must be more than 0 and at most 7 days",
                       fields={"ttl": "out of range"})
    headers = call.request.headers
    session, source = resolve_session(call.app[CONFIG].fallback_session, argument=body.session,
                                      header=session_of(call.request),
                                      source=header_source(headers.get(SESSION_SOURCE_HEADER)),
                                      cwd=headers.get(CWD_HEADER))
    handle = await call.app[BROKER].open(OpenRequest(
        session=session, session_source=source, server=body.server or "mcpx", tool=body.tool, mode=mode,
        message=body.message, requested_schema=body.requested_schema, url=body.url,
        upstream_id=body.elicitation_id, ttl=ttl, audience=body.audience, meta=body.meta,
        pid=peer_pid(call.request), approvals=_approvals(call, body), asker=body.from_, presence=body.presence,
    ))
    # the document its commit encoded (a question that opens pending is in the index by now), not encoded again
    return JsonReply(b'{"elicitation":%s}' % call.app[BROKER].question_json(handle.elicitation), 201,
                     location=f"/v1/elicit/{handle.id}")


def _approvals(call: RouteCall, body: AskBody) -> ApprovalRequest | None:
    """The approvals an ask names, checked against the config's people; None when it names none (an
    elicit.approvals rule may still ask for some)."""
    if body.approvers is None:
        if body.need is not None or body.remind is not None or body.escalate is not None:
            raise RouteError(400, "bad_body", "invalid body: need, remind and escalate go with approvers",
                             fields={"approvers": "missing"})
        return None
    people = call.app[CONFIG].config.people
    steps = body.escalate or []
    unknown = [p for p in [*body.approvers, *(p for step in steps for p in step.to)] if p not in people]
    if unknown:
        raise RouteError(400, "bad_body", f"invalid body: approvers: {', '.join(unknown)} not in the config's people "
                         f"(known: {', '.join(sorted(people)) or 'nobody'}; docs/approvals.md)",
                         fields={"approvers": "unknown people"})
    remind = _positive("remind", body.remind) if body.remind is not None else None
    escalate = [(_positive(f"escalate[{i}].after", step.after), step.to) for i, step in enumerate(steps)]
    return ApprovalRequest(approvers=body.approvers, need=body.need or 1, remind=remind, escalate=escalate,
                           asker=body.from_ or call.app[BROKER].asker())


def _positive(name: str, value: float | str) -> float:
    """A duration of the body (seconds, or '10m'): more than 0, else a 400 naming it."""
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise RouteError(400, "bad_body", f"invalid body: {name}: {exc}", fields={name: str(exc)}) from None
    if seconds <= 0:
        raise RouteError(400, "bad_body", f"invalid body: {name} must be more than 0", fields={name: "not > 0"})
    return seconds


# tried after the routes below it, which share its prefix: those a lifecycle takes (the answer, the wait) are then
# found without trying it first
@api.route("GET", "/v1/elicit/{id}", "One question and its answer, if it has one", params=QuestionPath,
           query=QuestionRenderQuery, order=1,
           replies={200: Reply("the question", ElicitationWithAnswer), 400: _ERR[400], 404: _ERR[404]})
async def get_question(call: RouteCall) -> web.StreamResponse:
    q, answer = await call.app[BROKER].get(call.path["id"])
    query: QuestionRenderQuery = call.query
    doc = rendered(call, q, answer, query.tool_prefix, waiting=query.waiting, shown_at=query.shown_at,
                   shown_in=query.shown_in) if query.render else q
    return json_reply({"elicitation": doc, "answer": answer_document(answer, q)})


async def _pending(call: RouteCall) -> Elicitation:
    """The question of the path, while it waits for an answer (410 once it does not)."""
    q, answer = await call.app[BROKER].get(call.path["id"])
    if q.state != "pending":
        raise RouteError(410, "gone", f"{q.id} is {q.state}" + (f" ({answer.action} by {answer.by})" if answer else ""))
    return q


@api.route("POST", "/v1/elicit/passed", "Which of a session's questions a host was passed, from what it was passed "
           "(a hook that is handed no id)", body=PassedBody,
           replies={200: Reply("the question, with what each party is shown of it: a pending one, else (it ended "
                               "before the hook asked) the last that ended, with its answer", ElicitationWithAnswer),
                    400: _ERR[400], 404: Reply("no question of that session was passed as that")})
async def passed(call: RouteCall) -> web.StreamResponse:
    body: PassedBody = call.body

    def alike(questions: list[Elicitation]) -> list[Elicitation]:
        return [q for q in questions if passed_as(q, body.message, body.mode, body.requested_schema, body.url)]

    broker = call.app[BROKER]
    pending = await broker.questions(QuestionFilter(state="pending", session=body.session), PASSED_LIMIT)
    found = alike(pending)
    if not found:
        # answered or expired between being passed and the hook's asking (a slow start, a quick person): the hook
        # hands the host that answer instead of a wait
        ended = [q for q in alike(await broker.questions(QuestionFilter(session=body.session), PASSED_LIMIT))
                 if q.state != "pending"]
        if not ended:
            raise RouteError(404, "not_passed", f"no question of session {body.session!r} was passed as that "
                             f"{body.mode} question (not one of mcpx's)")
        q, answer = await broker.get(ended[-1].id)
        return json_reply({"elicitation": rendered(call, q, answer, ""), "answer": answer_document(answer, q)})
    # two alike in one session (a tool called twice at once): each hook takes its own, the oldest not taken first
    claims = call.app[PASSED_CLAIMS].setdefault(body.session, set())
    claims.intersection_update(q.id for q in pending)  # those that no longer wait are let go
    q = next((q for q in found if q.id not in claims), found[0])
    claims.add(q.id)
    return json_reply({"elicitation": rendered(call, q, None, ""), "answer": None})


# registered before the answer route, whose {action} would take these names too (and refuse them)
@api.route("POST", "/v1/elicit/{id}/shown", "A client has put the question in front of the person (audited)",
           body=ShownBody, params=QuestionPath,
           replies={200: Reply("recorded as elicit.shown", AuditRecord), 400: _ERR[400], 404: _ERR[404],
                    410: Reply("it no longer waits for an answer")})
async def shown(call: RouteCall) -> web.StreamResponse:
    body: ShownBody = call.body
    q = await _pending(call)
    record = await call.app[BROKER].record_shown(q, body.where, body.how, answerer_of(call.request),
                                                 peer_pid(call.request))
    return json_reply(record)


@api.route("POST", "/v1/elicit/{id}/consent", "The person's yes or no to opening a url-mode question's page "
           "(audited)", body=ConsentBody, params=QuestionPath,
           replies={200: Reply("recorded as elicit.consent", AuditRecord), 400: _ERR[400], 404: _ERR[404],
                    409: Reply("not a url-mode question"), 410: Reply("it no longer waits for an answer")})
async def consent(call: RouteCall) -> web.StreamResponse:
    body: ConsentBody = call.body
    q = await _pending(call)
    if q.mode != "url" or not q.url:
        raise RouteError(409, "not_url", f"{q.id} has no page to open: it is a form")
    record = await call.app[BROKER].record_consent(q, body.open, answerer_of(call.request), url_facts(q.url).domain)
    return json_reply(record)


@api.route("POST", "/v1/elicit/{id}/{action}", "Answer a question: accept (with content), decline or cancel",
           body=AnswerBody, params=AnswerPath,
           replies={200: Reply("answered (or, for an agent's decline, escalated to the person)", AnswerResult),
                    **{s: _ERR[s] for s in (400, 403, 404, 409, 410, 422)}})
async def answer_question(call: RouteCall) -> web.StreamResponse:
    action = call.path["action"]
    assert is_action(action)  # AnswerPath refused any other
    body: AnswerBody = call.body
    by = answerer_of(call.request)
    refuse_agent_as_person(call.request, by)
    content = body.content
    if body.replies is not None:
        content = await _content_of_replies(call, action, body)
    elif body.form is not None:
        content = await _content_of_form(call, action, body)
    try:
        q, answer = await call.app[BROKER].answer(
            call.path["id"], action, content, by=by, session=session_of(call.request),
            pid=peer_pid(call.request), reason=body.reason, text_known=True)  # the body was looked at as read
    except PresenceNeeded as exc:
        raise with_page(call, call.path["id"], by, exc) from None
    # the documents the answer's commit encoded, not encoded again (json_reply would write the same bytes)
    shown = answer_document(answer, q)
    reply = b'{"elicitation":%s,"answer":%s,"escalated":%s}' % (
        q.json_bytes(), b"null" if shown is None else shown.json_bytes() if isinstance(shown, Answer)
        else wirejson.encode_models(shown), b"true" if answer is None else b"false")
    return JsonReply(reply)


def with_page(call: RouteCall, eid: str, by: str, exc: PresenceNeeded) -> PresenceNeeded:
    """The refusal of an accept without a passkey, naming the page where the passkey signs: the question's link
    (by name, where a passkey works) for the person past the agent guard, its signed-in page for anyone else."""
    inbox = call.app.get(INBOX)
    if inbox is None or not inbox.base:
        return exc
    page = inbox.presence_url(eid) if Answerer.kind_of(by) == "person" else inbox.page_url(eid)
    return PresenceNeeded(f"{exc.message}. Its page: {page}", **{**exc.details, "page": page})


async def _content_of_replies(call: RouteCall, action: str, body: AnswerBody) -> dict[str, Any]:
    """The content of the question dialog's replies (render.questions), typed by the question's own schema."""
    assert body.replies is not None
    replies = body.replies
    return await _content_of(call, action, body, "replies", lambda q: content_of_replies(q, replies),
                             (RepliesProblem,))


async def _content_of_form(call: RouteCall, action: str, body: AnswerBody) -> dict[str, Any]:
    """The content of the entries of the question's own dialog (render.form), typed by the question's own schema."""
    assert body.form is not None
    form = body.form
    return await _content_of(call, action, body, "form", lambda q: content_of_entries(q, form), (EntriesProblem,))


async def _content_of(call: RouteCall, action: str, body: AnswerBody, name: str,
                      make: Callable[[Elicitation], dict[str, Any]],
                      problems: tuple[type[ValueError], ...]) -> dict[str, Any]:
    """What a dialog sent back in place of content (`name`: replies or form), as content; only with accept, and
    alone. A reply that cannot belong to the question is named: 400, the question untouched."""
    others = [n for n, given in (("content", body.content), ("replies", body.replies), ("form", body.form))
              if n != name and given is not None]
    if action != "accept" or others:
        raise RouteError(400, "bad_body", f"invalid body: {name} goes with accept, in place of content",
                         fields={name: f"only with accept, and without {' or '.join(others) or 'content'}"})
    q, _ = await call.app[BROKER].get(call.path["id"])
    try:
        return make(q)
    except problems as exc:
        raise RouteError(400, "bad_body", f"invalid body: {name}: {exc}", fields={name: str(exc)}) from None


# tried first among the routes of its prefix: every lifecycle's waiter takes it (its path, ending in /wait, is no
# other route's, and it is the only GET among those of its shape)
@api.route("GET", "/v1/elicit/{id}/wait", "Long-poll until the question is answered or the timeout passes",
           query=WaitQuery, params=QuestionPath, order=-1,
           replies={200: Reply("the answer", Answer),
                    204: Reply("not answered within the timeout", headers=("Retry-After",)),
                    400: _ERR[400], 404: _ERR[404], 410: Reply("abandoned")})
async def wait_answer(call: RouteCall) -> web.StreamResponse:
    answer = await call.app[BROKER].wait(call.path["id"], call.query.timeout, stop=call.app[SHUTDOWN])
    if answer is None:  # the timeout; or the daemon is stopping, and the client may ask its successor
        return web.Response(status=204, headers={"Retry-After": "1"} if call.app[SHUTDOWN].done() else None)
    # as stored (a credential's value is [redacted] there already), in the document its commit encoded
    return JsonReply(answer.json_bytes())


def _kinds(spec: str | None) -> tuple[str, ...]:
    """The kinds a query names (already checked by its model); none: every kind."""
    return tuple(kind_list(spec)) if spec else ()


def _accepts(kinds: tuple[str, ...], session: str | None) -> Any:
    def accept(record: AuditRecord) -> bool:
        if session is not None and record.session != session:
            return False
        if not kinds:
            return True
        return any(record.kind == k or record.kind.startswith(k + ".") for k in kinds)
    return accept


def sse_frame(record: AuditRecord) -> bytes:
    """A record's event: its JSON (compact, so one data line; a lone surrogate from outside written as its escape)
    as the store wrote it, encoded once whatever the number of streams."""
    return sse.json_frame(record.json_bytes(), id=record.seq, event=record.kind)


@api.route("GET", "/v1/events", "Server-sent events of every transition; Last-Event-ID replays from the log",
           query=EventsQuery, headers=EventsHeaders,
           replies={200: Reply("an event stream: each event is an audit record, its id the record's seq", AuditRecord,
                               content_type="text/event-stream"), 400: _ERR[400]})
async def events(call: RouteCall) -> web.StreamResponse:
    broker = call.app[BROKER]
    q: EventsQuery = call.query
    kinds = _kinds(q.kinds)
    header: int | None = call.headers.last_event_id
    last = header if header is not None else q.last_event_id
    heartbeat = float(os.environ.get("MCPX_SSE_HEARTBEAT", "15"))
    accept = _accepts(kinds, q.session)
    response = web.StreamResponse(headers=sse.HEADERS)
    with broker.bus.subscribe(accept) as sub:  # subscribe before replaying: nothing falls in the gap
        await response.prepare(call.request)
        # an id-only frame tells the client where the log stands, so a reconnect can resume from here
        head = last if last is not None else await broker.last_seq()
        await response.write(sse.frame(id=head, retry=1000))
        # what was replayed is not sent twice; without a replay every record that reached us is sent
        sent = last if last is not None else 0
        if last is not None:
            while True:
                page = await broker.audit(AuditFilter(after=sent, kinds=kinds, session=q.session), limit=500)
                for past in page:
                    await response.write(sse_frame(past))
                    sent = past.seq
                if len(page) < 500:
                    break
        loop = asyncio.get_running_loop()
        quiet = loop.time()  # when the stream last wrote
        timer: asyncio.TimerHandle | None = None

        def tick() -> None:
            """A heartbeat once the stream has been quiet for `heartbeat` seconds; else look again then."""
            nonlocal quiet, timer
            due = quiet + heartbeat
            if loop.time() >= due:
                sub.beat()
                quiet = due = loop.time()
                due += heartbeat
            timer = loop.call_at(due, tick)

        timer = loop.call_at(quiet + heartbeat, tick)
        try:
            # one await per record, straight on the queue: a frame leaves in the loop turn after the
            # commit that made it (the bus ends every stream when the daemon stops)
            while True:
                record = await sub.get()
                if record is None:
                    if sub.ended:  # fell behind (the client resumes from its Last-Event-ID) or stopping
                        break
                    await response.write(sse.comment("heartbeat"))
                    continue
                if record.seq <= sent:
                    continue
                await response.write(sse_frame(record))
                sent = record.seq
                quiet = loop.time()
        except ConnectionResetError:  # the subscriber went away; a cancellation (the daemon stopping) goes on up
            pass
        finally:
            if timer is not None:
                timer.cancel()
    return response


@api.route("GET", "/v1/audit", "The audit trail, by question, session or trace", query=AuditQuery,
           replies={200: Reply("audit records, oldest first", AuditList), 400: _ERR[400]})
async def audit(call: RouteCall) -> web.StreamResponse:
    q: AuditQuery = call.query
    where = AuditFilter(after=q.after, elicit=q.elicit, session=q.session, trace=q.trace, task=q.task,
                        kinds=_kinds(q.kinds))
    records = await call.app[BROKER].audit(where, q.limit)
    return web.json_response({"records": [r.wire() for r in records]})

