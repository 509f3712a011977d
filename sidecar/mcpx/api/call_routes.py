"""/v1 routes of the gateway: call an upstream tool, follow its task, list what is behind mcpx.

A call that waits for input is not an error: it answers 202 with the question (or questions),
a Location to answer at and a Retry-After of the time left, while the call keeps running.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, cast, get_args

from aiohttp import web
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from mcpx.api.inbox_routes import page_of
from mcpx.api.peers import session_of
from mcpx.api.schemas import ChainPath, ErrorDetail, TaskPath
from mcpx.api.state import BROKER, CONFIG, GATEWAY
from mcpx.api.table import Api, Reply, RouteCall, RouteError
from mcpx.broker.broker import Broker
from mcpx.broker.models import AuditRecord, Elicitation, TaskDoc, TaskState, WireModel
from mcpx.broker.store import AuditFilter
from mcpx.call import record
from mcpx.call.request import CallRequest
from mcpx.presentation.answering import respond_with
from mcpx.shared.ids import HEX, is_id
from mcpx.shared.names import CWD_HEADER, SESSION_SOURCE_HEADER
from mcpx.shared.sessions import header_source, resolve_session
from mcpx.shared.upstream_errors import UnknownTool
from mcpx.upstream.gateway import Gateway, UnknownServer, UnknownTask
from mcpx.upstream.kind import InstanceInfo

api = Api()


class CallBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any] = Field(default_factory=dict)
    session: str | None = Field(default=None, min_length=1, max_length=200)
    elicit: Literal["ask", "auto", "decline", "error"] | None = Field(
        default=None, description="how this call's questions are met, instead of elicit.mode")


class CallQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wait: float | None = Field(default=None, ge=0, le=3600,
                               description="return 202 (running) after this many seconds even without a question")


KNOWN_MAX = 23


class ResultQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout: float = Field(default=30.0, ge=0, le=3600)
    wake: Literal["result", "question"] = Field(
        default="result", description="question: end with 202 as soon as a question of the call waits for an answer "
                                      "(one asked since, or one not answered yet), not only with the result")
    # 23 ids at most: a request line stays inside the 8 KiB aiohttp reads even with every character percent-encoded
    known: str | None = Field(
        default=None, max_length=KNOWN_MAX * 21 - 1, pattern=f"^elc-{HEX}(,elc-{HEX})*$",
        description="with wake=question: comma-separated ids of questions the caller has already and leaves to "
                    "others; they do not end the wait while they wait")


class CallResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    trace: str
    result: dict[str, Any] = Field(description="the server's CallToolResult, as it sent it")


class CallFailure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: ErrorDetail
    task: str
    trace: str


class WaitingQuestion(Elicitation):
    respond_with: str = Field(description="the mcpx command that answers it, with placeholder content of its shape")
    page: str | None = Field(default=None, description="its page in the web inbox (it opens in a browser signed in)")


class CallInputRequired(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["input-required", "running"] = Field(description="input-required (a question waits) or running")
    task: str
    trace: str
    elicitation: WaitingQuestion | None = Field(description="the first open question")
    elicitations: list[WaitingQuestion] = Field(description="every open question")
    result: str = Field(description="where the call's real result is long-polled")


class ToolsList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    servers: dict[str, list[dict[str, Any]] | str] = Field(
        description="each server's tools as it listed them, or why they could not be listed")


class UpstreamList(WireModel):
    instances: list[InstanceInfo]
    processes: int = Field(description="upstream processes running, the ones they started included")
    rss_kib: int = Field(alias="rssKiB", description="their resident memory, all together")


class SecretsChanged(WireModel):
    """What the daemon did when told a server's secrets changed in the keychain."""

    server: str
    stopped: int = Field(description="its idle instances, stopped: the next call starts one with the keychain's values")
    busy: int = Field(description="its instances busy with calls: each stops once its calls are done")


def waiting(task: record.Call, broker: Broker) -> list[Elicitation]:
    """The call's questions that wait for an answer. One answered a moment ago is still among task.open until the
    call wakes to its answer: it is not offered again."""
    return [q for eid, q in task.open.items() if (h := broker.handle(eid, q)) is not None and not h.done()]


def waiting_document(task: record.Call, open_questions: list[Elicitation],
                     page: Callable[[str], str | None] = lambda _eid: None) -> CallInputRequired:
    questions = [WaitingQuestion.model_validate({**q.wire(), "respondWith": respond_with(q.wire()), "page": page(q.id)})
                 for q in open_questions]
    return CallInputRequired(status="input-required" if questions else "running", task=task.id, trace=task.trace,
                         elicitation=questions[0] if questions else None, elicitations=questions,
                         result=f"/v1/tasks/{task.id}/result")


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None, **always: Any,
          ) -> web.Response:
    """`model` as its document (fields left out where None, but those in `always`)."""
    return web.json_response({**model.model_dump(mode="json", by_alias=True, exclude_none=True), **always},
                             status=status, headers=headers)


def waiting_response(task: record.Call, broker: Broker, page: Callable[[str], str | None]) -> web.Response:
    doc = waiting_document(task, waiting(task, broker), page)
    headers = {"Location": f"/v1/tasks/{task.id}", "Retry-After": "1"}
    if doc.elicitation is None:
        return _json(doc, 202, headers, elicitation=None)  # null, not absent: "no question yet" is news
    headers = {"Location": f"/v1/elicit/{doc.elicitation.id}",
               "Retry-After": str(max(1, doc.elicitation.seconds_left))}
    return _json(doc, 202, headers)


def finished_response(task: record.Call) -> web.Response:
    if task.state == "completed":
        return _json(CallResult(task=task.id, trace=task.trace, result=task.result or {}))
    return _json(CallFailure(error=ErrorDetail(code=f"call_{task.state}", message=task.error or task.state),
                            task=task.id, trace=task.trace), 502)


@api.route("POST", "/v1/call/{server}/{tool}", "Call an upstream tool; 202 while it waits for input", body=CallBody,
           query=CallQuery, tag="call",
           replies={200: Reply("the call completed", CallResult),
                    202: Reply("the call waits for input (or is still running); it keeps running", CallInputRequired,
                               headers=("Location", "Retry-After")),
                    404: Reply("no such server, or no such tool on it (its tools named, and the nearest)"),
                    502: Reply("the call failed: the message names the server and what happened", CallFailure)})
async def call_tool(call: RouteCall) -> web.StreamResponse:
    gw = call.app[GATEWAY]
    body: CallBody = call.body
    headers = call.request.headers
    session, source = resolve_session(call.app[CONFIG].fallback_session, argument=body.session,
                                      header=session_of(call.request),
                                      source=header_source(headers.get(SESSION_SOURCE_HEADER)),
                                      cwd=headers.get(CWD_HEADER))
    try:
        task = await gw.start_call(CallRequest(
            server=call.path["server"], tool=call.path["tool"], arguments=body.arguments, session=session,
            session_source=source, cwd=headers.get(CWD_HEADER), surface="rest", policy_mode=body.elicit))
    except UnknownTool as exc:
        raise RouteError(404, "unknown_tool", str(exc)) from None
    except UnknownServer as exc:
        raise RouteError(404, "unknown_server", str(exc)) from None
    limit = call.query.wait if call.query.wait is not None else gw.entry(task.request.server).timeout + 5
    # a question answered the moment it opened (another surface was quicker) is not news: wait on for the
    # result, or for the next question
    await task.wait_for(lambda: task.done or bool(waiting(task, call.app[BROKER])), limit)
    return finished_response(task) if task.done else waiting_response(task, call.app[BROKER], page_of(call.app))


TASK_STATES: tuple[TaskState, ...] = get_args(TaskState)


def _states(text: str) -> str:
    words = [w.strip() for w in text.split(",") if w.strip()]
    bad = [w for w in words if w not in (*TASK_STATES, "all")]
    if bad or not words:
        raise ValueError(f"{', '.join(bad) or 'nothing'}: not a state (one or more of {', '.join(TASK_STATES)}, "
                         "or all)")
    return ",".join(words)


class TasksQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: Annotated[str, AfterValidator(_states)] = Field(
        default="running,input-required", description=f"comma-separated: {', '.join(TASK_STATES)}; or all")
    session: str | None = Field(default=None, max_length=200)
    limit: int = Field(default=100, ge=1, le=1000)


class ListedTask(TaskDoc):
    survives_restart: bool = Field(description="the daemon re-drives it after a restart (a modern call between "
                                               "rounds); any other call in flight ends with the daemon, its open "
                                               "questions abandoned")


class TaskList(WireModel):
    tasks: list[ListedTask]


@api.route("GET", "/v1/tasks", "Calls, newest first (default: the ones in flight)", tag="call", query=TasksQuery,
           replies={200: Reply("the calls", TaskList), 400: Reply("a state that is none")})
async def list_tasks(call: RouteCall) -> web.StreamResponse:
    q: TasksQuery = call.query
    states = cast(tuple[TaskState, ...], TASK_STATES if "all" in q.state.split(",") else tuple(q.state.split(",")))
    found = await call.app[GATEWAY].tasks(states, q.session)
    listed = [ListedTask(**t.shown().model_dump(), survives_restart=bool(
        t.state in ("running", "input-required") and t.era == "modern" and t.resume is not None))
              for t in found[: q.limit]]
    return web.json_response(TaskList(tasks=listed).wire())


@api.route("GET", "/v1/tasks/{id}", "A call's status: running, input-required, completed, failed, cancelled",
           tag="call", params=TaskPath,
           replies={200: Reply("the task", TaskDoc), 404: Reply("no such task")})
async def get_task(call: RouteCall) -> web.StreamResponse:
    return web.json_response((await _task_or_404(call.app[GATEWAY], call.path["id"])).wire())


@api.route("GET", "/v1/tasks/{id}/result", "Long-poll for a call's real result", query=ResultQuery, tag="call",
           params=TaskPath,
           replies={200: Reply("the call finished (its state says how)", TaskDoc),
                    202: Reply("still running or waiting for input", CallInputRequired,
                               headers=("Location", "Retry-After")),
                    404: Reply("no such task")})
async def task_result(call: RouteCall) -> web.StreamResponse:
    gw = call.app[GATEWAY]
    broker = call.app[BROKER]
    live = gw.task(call.path["id"])
    if live is not None and not live.done:
        # a task's condition is notified as a question opens, so a caller that puts questions to someone (mcpx call
        # on a terminal) hears of the next one at once, not when its timeout runs out
        known = frozenset(call.query.known.split(",")) if call.query.known else frozenset()
        wake = (lambda: live.done or any(q.id not in known for q in waiting(live, broker))) \
            if call.query.wake == "question" else (lambda: live.done)
        await live.wait_for(wake, call.query.timeout)
        if not live.done:
            return waiting_response(live, broker, page_of(call.app))
    return web.json_response((await _task_or_404(gw, call.path["id"])).wire())


@api.route("POST", "/v1/tasks/{id}/cancel", "Cancel a running call; its open questions are abandoned", tag="call",
           params=TaskPath,
           replies={200: Reply("cancelled", TaskDoc), 404: Reply("no such task"), 409: Reply("already finished")})
async def cancel_task(call: RouteCall) -> web.StreamResponse:
    gw = call.app[GATEWAY]
    doc = await _task_or_404(gw, call.path["id"])
    if not await gw.cancel(call.path["id"], "cancelled through the REST API"):
        raise RouteError(409, "task_done", f"{call.path['id']} already finished ({doc.state})")
    return web.json_response((await gw.task_doc(call.path["id"])).wire())


class AuditChain(WireModel):
    """A call and what followed from it: the call itself, then its records in the order they were written."""

    task: TaskDoc = Field(description="the call: its tool, session, state and times")
    records: list[AuditRecord] = Field(description="its questions, their answers (who, pid, answeredAfterMs), each "
                                                   "elicit.resumed, the call's end: in the order they happened")


CHAIN_LIMIT = 10000  # a call that asked more than this is a loop: its first records tell the story


@api.route("GET", "/v1/audit/chain/{id}", "A call and everything that followed from it, named by its task, its "
           "trace or one of its questions", tag="call", params=ChainPath,
           replies={200: Reply("the call and its records, oldest first", AuditChain),
                    400: Reply("not a tsk-, cal- or elc- id"),
                    404: Reply("no such call, or a question no call raised")})
async def audit_chain(call: RouteCall) -> web.StreamResponse:
    broker = call.app[BROKER]
    rid: str = call.path["id"]
    tid: str | None = rid if is_id(rid, "tsk") else None
    if is_id(rid, "elc"):
        q, _ = await broker.get(rid)
        tid = q.task
        if tid is None:
            raise RouteError(404, "no_call", f"{rid} was not raised by a call (it was asked through POST /v1/elicit): "
                                             f"its own records are mcpx audit --elicit {rid}")
    elif is_id(rid, "cal"):
        tid = next((r.task for r in await broker.audit(AuditFilter(trace=rid), 50) if r.task), None)
        if tid is None:
            raise RouteError(404, "unknown_task", f"no call {rid} in the audit log")
    assert tid is not None
    task = await _task_or_404(call.app[GATEWAY], tid)
    records = await broker.audit(AuditFilter(trace=task.trace), CHAIN_LIMIT)
    # in time order: a record that may wait (elicit.resumed) can be committed after one that happened later
    records.sort(key=lambda r: (r.at, r.seq))
    return web.json_response(AuditChain(task=task, records=records).wire())


async def _task_or_404(gw: Gateway, tid: str) -> TaskDoc:
    try:
        return await gw.task_doc(tid)
    except UnknownTask as exc:
        raise RouteError(400 if "not a task id" in str(exc) else 404, "unknown_task", str(exc)) from None


@api.route("GET", "/v1/tools", "Every upstream server's tools (or why a server could not list them)", tag="call",
           replies={200: Reply("tools by server", ToolsList)})
async def list_tools(call: RouteCall) -> web.StreamResponse:
    return web.json_response({"servers": await call.app[GATEWAY].all_tools()})


@api.route("GET", "/v1/tools/{server}", "One server's tools", tag="call",
           replies={200: Reply("its tools", ToolsList), 404: Reply("no such server"),
                    502: Reply("it could not list its tools: the message says why")})
async def server_tools(call: RouteCall) -> web.StreamResponse:
    gw = call.app[GATEWAY]
    server = call.path["server"]
    headers = call.request.headers
    asker = resolve_session(call.app[CONFIG].fallback_session, header=session_of(call.request),
                            source=header_source(headers.get(SESSION_SOURCE_HEADER)), cwd=headers.get(CWD_HEADER))
    try:
        tools = await gw.tools(server, asker)  # a question the listing opens (missing secrets) is the caller's
    except UnknownServer as exc:
        raise RouteError(404, "unknown_server", str(exc)) from None
    except Exception as exc:
        raise RouteError(502, "upstream_failed", str(exc)) from None
    return web.json_response({"servers": {server: tools}})


@api.route("GET", "/v1/upstreams", "The upstream server instances running now: era, sessions, memory", tag="call",
           replies={200: Reply("the instances, oldest first per server", UpstreamList)})
async def upstreams(call: RouteCall) -> web.StreamResponse:
    instances = await call.app[GATEWAY].instances()
    body = UpstreamList(instances=instances, processes=sum(i.processes or 0 for i in instances),
                        rss_kib=sum(i.rss_kib or 0 for i in instances))
    return web.json_response(body.wire())


@api.route("POST", "/v1/secrets/{server}/changed", "A server's secrets changed in the keychain (mcpx secrets set and "
           "forget say so): what the daemon knew of them is dropped, and its instances are replaced", tag="call",
           replies={200: Reply("what was replaced", SecretsChanged), 404: Reply("no such server")})
async def secrets_changed(call: RouteCall) -> web.StreamResponse:
    gw = call.app[GATEWAY]
    server = call.path["server"]
    try:
        gw.entry(server)
    except UnknownServer as exc:
        raise RouteError(404, "unknown_server", str(exc)) from None
    gw.secrets.forget(server)
    stopped, busy = gw.mcp.pool.renew(server)
    return web.json_response(SecretsChanged(server=server, stopped=stopped, busy=busy).wire())
