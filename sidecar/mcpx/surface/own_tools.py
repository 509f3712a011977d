"""The tools mcpx itself offers on its MCP surface: list, read and answer questions, collect results.

An agent reaches questions only through these, only in its own session, and only those the
broker lets an agent answer; the broker's refusals come back as tool errors in its words.
"""

from __future__ import annotations

import json
from typing import Any

from mcpx.broker.broker import Broker
from mcpx.broker.models import Elicitation
from mcpx.broker.refusals import BrokerError
from mcpx.broker.store import QuestionFilter
from mcpx.call.record import DONE_STATES
from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import RpcError
from mcpx.presentation.answering import for_agent, withheld_meta
from mcpx.shared.ids import is_id
from mcpx.surface.client_state import ClientState
from mcpx.surface.results import finished_result, task_result, text_result, waiting_result
from mcpx.upstream.gateway import Gateway, UnknownTask

ANSWER_WAIT = 45.0  # how long `wait: true` holds a tool call: well inside a host's 60 s MCP timeout

SESSION_ARG = "_mcpx_session"

_ID = {"type": "string", "description": "the question's id, elc- and 16 hex digits"}

MCPX_TOOLS: dict[str, dict[str, Any]] = {
    "mcpx_elicit_list": {
        "description": "Questions that MCP servers behind mcpx are waiting on in your session, with who may answer "
                       "each (the agent, or only the person), their fields and deadlines.",
        "inputSchema": {"type": "object", "properties": {
            "state": {"type": "string", "enum": ["pending", "answered", "expired", "abandoned", "all"],
                      "default": "pending"},
            "server": {"type": "string", "description": "only questions from this server"}}},
        "annotations": {"title": "List open questions", "readOnlyHint": True, "openWorldHint": False},
    },
    "mcpx_elicit_get": {
        "description": "One question in full: the server's message, the fields with their types and constraints, "
                       "who may answer it, and the exact call that answers it.",
        "inputSchema": {"type": "object", "properties": {"id": _ID}, "required": ["id"]},
        "annotations": {"title": "Read a question", "readOnlyHint": True, "openWorldHint": False},
    },
    "mcpx_elicit_answer": {
        "description": "Answer a question a server asked mid-call: accept (with content matching its fields), "
                       "decline (no — say why in reason), or cancel (not now). Only answer what you truly know: "
                       "if you do not know, decline and explain; never invent a value. Questions for the person "
                       "(credentials, logins, confirmations) are refused to agents. With wait: true, returns the "
                       "resumed call's real result.",
        "inputSchema": {"type": "object", "required": ["id", "action"], "properties": {
            "id": _ID,
            "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
            "content": {"type": "object", "description": "the field values, for accept"},
            "reason": {"type": "string", "description": "why, for decline or cancel"},
            "wait": {"type": "boolean", "default": False,
                     "description": "wait for the call that asked, and return its result"}}},
        "annotations": {"title": "Answer a question", "readOnlyHint": False, "destructiveHint": False,
                        "openWorldHint": False},
    },
    "mcpx_task_result": {
        "description": "The real result of a call that waited for an answer (its task id came with the question).",
        "inputSchema": {"type": "object", "required": ["task"], "properties": {
            "task": {"type": "string", "description": "tsk- and 16 hex digits"},
            "wait": {"type": "boolean", "default": False, "description": "wait for it if it is still running"}}},
        "annotations": {"title": "Collect a call's result", "readOnlyHint": True, "openWorldHint": False},
    },
}


def listed() -> list[dict[str, Any]]:
    return [{"name": name, **spec} for name, spec in MCPX_TOOLS.items()]


def _collect_hint(state: ClientState, task: str | None) -> str:
    """How the agent collects the result of the call a question belongs to, when it belongs to one."""
    if not task:
        return ""
    return f"; collect its result with {state.tool_prefix}mcpx_task_result {json.dumps({'task': task})}"


def _marked(result: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A result with its `_meta` (answering.withheld_meta), when it has any."""
    return {**result, "_meta": meta} if meta else result


class OwnTools:
    def __init__(self, broker: Broker, gateway: Gateway) -> None:
        self.broker = broker
        self.gateway = gateway

    async def call(self, name: str, args: dict[str, Any], session: str, state: ClientState) -> dict[str, Any]:
        """One of MCPX_TOOLS; what the broker refuses comes back as a tool error in its words."""
        try:
            if name == "mcpx_elicit_list":
                return await self._tool_list(args, session, state.tool_prefix)
            if name == "mcpx_elicit_get":
                return await self._tool_get(args, session, state.tool_prefix)
            if name == "mcpx_elicit_answer":
                return await self._tool_answer(args, session, state)
            return await self._tool_task_result(args, session, state)
        except BrokerError as exc:
            return text_result(f"mcpx: {exc.message}", error=True)

    async def _tool_list(self, args: dict[str, Any], session: str, prefix: str) -> dict[str, Any]:
        state_filter = args.get("state", "pending")
        if state_filter not in ("pending", "answered", "expired", "abandoned", "all"):
            return text_result(f"mcpx: state {state_filter!r} is not one of pending, answered, expired, abandoned, all",
                               error=True)
        where = QuestionFilter(state=None if state_filter == "all" else state_filter, session=session,
                               server=args.get("server"))
        questions = await self.broker.questions(where)
        docs = [q.wire() for q in questions]
        if not docs:
            return text_result(f"No {state_filter if state_filter != 'all' else ''} questions in your session.".replace(
                "  ", " "), structured={"elicitations": []})
        def text(withhold: bool) -> str:
            return "\n\n".join(for_agent(d, prefix + "mcpx_elicit_answer", withhold=withhold) for d in docs)
        return _marked(text_result(text(False), structured={"elicitations": docs}), withheld_meta(docs, text))

    async def _own(self, eid: Any, session: str) -> Elicitation:
        if not isinstance(eid, str):
            raise RpcError(jsonrpc.INVALID_PARAMS, "id is required: the question's id (elc-…)")
        q, _ = await self.broker.get(eid)
        if q.session != session:
            raise BrokerError(f"{eid} belongs to another session; a question is answered only from the session "
                              "that raised it")
        return q

    async def _tool_get(self, args: dict[str, Any], session: str, prefix: str) -> dict[str, Any]:
        q = await self._own(args.get("id"), session)
        _, answer = await self.broker.get(q.id)
        doc = q.wire()
        if q.state == "pending":
            def shown(withhold: bool) -> str:
                return for_agent(doc, prefix + "mcpx_elicit_answer", withhold=withhold)
            return _marked(text_result(shown(False), structured={
                "elicitation": doc, "answer": answer.wire() if answer else None}), withheld_meta([doc], shown))
        ended = (f"{q.id} is {q.state}" + (f": {answer.action} by {answer.by}" if answer else "")
                 + (f" ({q.state_reason})" if q.state_reason else ""))
        return text_result(ended, structured={"elicitation": doc, "answer": answer.wire() if answer else None})

    async def _tool_answer(self, args: dict[str, Any], session: str, state: ClientState) -> dict[str, Any]:
        eid, action = args.get("id"), args.get("action")
        if action not in ("accept", "decline", "cancel"):
            return text_result(f"mcpx: action must be accept, decline or cancel, not {action!r}", error=True)
        content = args.get("content")
        if content is not None and not isinstance(content, dict):
            return text_result("mcpx: content must be an object of field values", error=True)
        if not isinstance(eid, str) or not is_id(eid, "elc"):
            return text_result(f"mcpx: {eid!r} is not a question id (elc- and 16 hex digits)", error=True)
        reason = args.get("reason") if isinstance(args.get("reason"), str) else None
        q, answer = await self.broker.answer(eid, action, content, by="agent:mcp", session=session, reason=reason)
        if answer is None:
            return text_result(f"You declined {eid}; because it asks for free input, it now waits for the person "
                               "instead. Do not answer it again. The call goes on once they answer"
                               + _collect_hint(state, q.task) + ".",
                               structured={"escalated": True, "elicitation": q.wire()})
        if args.get("wait") and q.task:
            return await self._task_outcome(q.task, session, state, wait=True)
        return text_result(f"Answered {eid}: {answer.action}. The call it belongs to goes on"
                           + _collect_hint(state, q.task) + ".", structured={"answer": answer.wire()})

    async def _tool_task_result(self, args: dict[str, Any], session: str, state: ClientState) -> dict[str, Any]:
        tid = args.get("task")
        if not isinstance(tid, str) or not is_id(tid, "tsk"):
            return text_result(f"mcpx: {tid!r} is not a task id (tsk- and 16 hex digits)", error=True)
        return await self._task_outcome(tid, session, state, wait=bool(args.get("wait")))

    async def _task_outcome(self, tid: str, session: str, state: ClientState, wait: bool) -> dict[str, Any]:
        task = self.gateway.task(tid)
        if task is None:  # finished a while ago, or before a restart: the store answers for it
            try:
                doc = await self.gateway.task_doc(tid)
            except UnknownTask:
                return text_result(f"mcpx: there is no task {tid}", error=True)
            if doc.session != session:
                return text_result(f"mcpx: {tid} belongs to another session", error=True)
            if doc.state in DONE_STATES:
                return finished_result(doc)
            return text_result(f"mcpx: {tid} is {doc.state}, but its call is not running in this daemon "
                               "(it was lost in a restart)", error=True)
        if task.request.session != session:
            return text_result(f"mcpx: {tid} belongs to another session", error=True)
        if wait and not task.done:
            # wait for the call to finish or to ask something new (not the questions already answered)
            seen = set(task.questions)
            await task.wait_for(lambda: task.done or bool(set(task.open) - seen), ANSWER_WAIT)
        if task.done:
            return task_result(task)
        if task.open:
            return waiting_result(task, state.tool_prefix)
        return text_result(f"{tid} is still running; ask again with {state.tool_prefix}mcpx_task_result "
                           + json.dumps({"task": tid, "wait": True}), structured={"task": task.doc().wire()})
