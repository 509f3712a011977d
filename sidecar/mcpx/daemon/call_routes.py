"""/v1 routes of the gateway: call an upstream tool, follow its task, list what is behind mcpx.

A call that waits for input is not an error: it answers 202 with the question (or questions),
a Location to answer at and a Retry-After of the time left, while the call keeps running.
"""

from __future__ import annotations

from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from mcpx.answering import respond_with
from mcpx.broker.models import WireModel
from mcpx.daemon.api import Api, ApiError, Call, Reply
from mcpx.daemon.peers import CWD_HEADER, session_of
from mcpx.daemon.runtime import RUNTIME, Runtime
from mcpx.upstream.calls import CallRequest, CallTask
from mcpx.upstream.gateway import Gateway, UnknownServer, UnknownTask
from mcpx.upstream.pool import InstanceInfo

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


class ResultQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout: float = Field(default=30.0, ge=0, le=3600)


class CallResult(BaseModel):
    model_config = ConfigDict(extra="allow")
    task: str
    result: dict[str, Any]


class InputRequired(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: str = Field(description="input-required (a question waits) or running")
    task: str
    trace: str
    elicitation: dict[str, Any] | None = Field(default=None, description="the first open question, with respondWith")
    elicitations: list[dict[str, Any]] = Field(default_factory=list, description="every open question")


class TaskDoc(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    state: str
    server: str
    tool: str


class ToolsList(BaseModel):
    model_config = ConfigDict(extra="allow")
    servers: dict[str, Any]


class UpstreamList(WireModel):
    instances: list[InstanceInfo]
    processes: int = Field(description="upstream processes running, the ones they started included")
    rss_kib: int = Field(alias="rssKiB", description="their resident memory, all together")


def _gw(call: Call) -> Gateway:
    rt: Runtime = call.app[RUNTIME]
    if rt.gateway is None:
        raise ApiError(503, "no_gateway", "the gateway is not running")
    return rt.gateway


def waiting_document(task: CallTask) -> dict[str, Any]:
    questions = []
    for q in task.open.values():
        doc = q.wire()
        doc["secondsLeft"] = q.remaining()
        doc["respondWith"] = respond_with(doc)
        questions.append(doc)
    return {"status": "input-required" if questions else "running", "task": task.id, "trace": task.trace,
            "elicitation": questions[0] if questions else None, "elicitations": questions,
            "result": f"/v1/tasks/{task.id}/result"}


def waiting_response(task: CallTask) -> web.Response:
    doc = waiting_document(task)
    headers = {"Location": f"/v1/tasks/{task.id}", "Retry-After": "1"}
    if doc["elicitation"]:
        headers = {"Location": f"/v1/elicit/{doc['elicitation']['id']}",
                   "Retry-After": str(max(1, doc["elicitation"]["secondsLeft"]))}
    return web.json_response(doc, status=202, headers=headers)


def finished_response(task: CallTask) -> web.Response:
    if task.state == "completed":
        return web.json_response({"task": task.id, "trace": task.trace, "result": task.result})
    return web.json_response({"error": {"code": f"call_{task.state}", "message": task.error or task.state},
                              "task": task.id, "trace": task.trace}, status=502)


@api.route("POST", "/v1/call/{server}/{tool}", "Call an upstream tool; 202 while it waits for input", body=CallBody,
           query=CallQuery, tag="call",
           replies={200: Reply("the call completed", CallResult),
                    202: Reply("the call waits for input (or is still running); it keeps running", InputRequired,
                               headers=("Location", "Retry-After")),
                    400: Reply("malformed"), 404: Reply("no such server"),
                    502: Reply("the call failed: the message names the server and what happened")})
async def call_tool(call: Call) -> web.StreamResponse:
    gw = _gw(call)
    body: CallBody = call.body
    header_session = session_of(call.request)
    if body.session:
        session, source = body.session, "argument"
    elif header_session:
        session = header_session
        source = "env" if call.request.headers.get("X-Mcpx-Session-Source") == "env" else "header"
    else:
        session = call.app[RUNTIME].loaded.fallback_session(call.request.headers.get(CWD_HEADER))
        source = "fallback"
    try:
        task = await gw.start_call(CallRequest(
            server=call.path["server"], tool=call.path["tool"], arguments=body.arguments, session=session,
            session_source=source, cwd=call.request.headers.get(CWD_HEADER), surface="rest",  # type: ignore[arg-type]
            policy_mode=body.elicit))
    except UnknownServer as exc:
        raise ApiError(404, "unknown_server", str(exc)) from None
    limit = call.query.wait if call.query.wait is not None else gw.pool.entry(task.request.server).timeout + 5
    await task.wait_for(lambda: task.done or bool(task.open), limit)
    return finished_response(task) if task.done else waiting_response(task)


@api.route("GET", "/v1/tasks/{id}", "A call's status: running, input-required, completed, failed, cancelled",
           tag="call", replies={200: Reply("the task", TaskDoc), 400: Reply("not a task id"), 404: Reply("no such task")})
async def get_task(call: Call) -> web.StreamResponse:
    return web.json_response(await _task_or_404(_gw(call), call.path["id"]))


@api.route("GET", "/v1/tasks/{id}/result", "Long-poll for a call's real result", query=ResultQuery, tag="call",
           replies={200: Reply("the call finished (its state says how)", TaskDoc),
                    202: Reply("still running or waiting for input", InputRequired), 404: Reply("no such task")})
async def task_result(call: Call) -> web.StreamResponse:
    gw = _gw(call)
    live = gw.task(call.path["id"])
    if live is not None and not live.done:
        await live.wait_for(lambda: live.done, call.query.timeout)
        if not live.done:
            return waiting_response(live)
    return web.json_response(await _task_or_404(gw, call.path["id"]))


@api.route("POST", "/v1/tasks/{id}/cancel", "Cancel a running call; its open questions are abandoned", tag="call",
           replies={200: Reply("cancelled", TaskDoc), 404: Reply("no such task"), 409: Reply("already finished")})
async def cancel_task(call: Call) -> web.StreamResponse:
    gw = _gw(call)
    doc = await _task_or_404(gw, call.path["id"])
    if not await gw.cancel(call.path["id"], "cancelled through the REST API"):
        raise ApiError(409, "task_done", f"{call.path['id']} already finished ({doc['state']})")
    return web.json_response(await gw.task_doc(call.path["id"]))


async def _task_or_404(gw: Gateway, tid: str) -> dict[str, Any]:
    try:
        return await gw.task_doc(tid)
    except UnknownTask as exc:
        raise ApiError(400 if "not a task id" in str(exc) else 404, "unknown_task", str(exc)) from None


@api.route("GET", "/v1/tools", "Every upstream server's tools (or why a server could not list them)", tag="call",
           replies={200: Reply("tools by server", ToolsList)})
async def list_tools(call: Call) -> web.StreamResponse:
    return web.json_response({"servers": await _gw(call).all_tools()})


@api.route("GET", "/v1/tools/{server}", "One server's tools", tag="call",
           replies={200: Reply("its tools", ToolsList), 404: Reply("no such server"), 502: Reply("it failed")})
async def server_tools(call: Call) -> web.StreamResponse:
    gw = _gw(call)
    server = call.path["server"]
    try:
        tools = await gw.tools(server)
    except UnknownServer as exc:
        raise ApiError(404, "unknown_server", str(exc)) from None
    except Exception as exc:
        raise ApiError(502, "upstream_failed", str(exc)) from None
    return web.json_response({"servers": {server: tools}})


@api.route("GET", "/v1/upstreams", "The upstream server instances running now: era, sessions, memory", tag="call",
           replies={200: Reply("the instances, oldest first per server", UpstreamList)})
async def upstreams(call: Call) -> web.StreamResponse:
    instances = await _gw(call).pool.describe()
    body = UpstreamList(instances=instances, processes=sum(i.processes or 0 for i in instances),
                        rss_kib=sum(i.rss_kib or 0 for i in instances))
    return web.json_response(body.wire())
