"""`mcpx call SERVER.TOOL`, `mcpx task result ID`, `mcpx tools [SERVER]`.

A call that waits for input does not hang: on a terminal the question is put to you field by
field (`--elicit=prompt`); otherwise the question and the command that answers it are printed
and mcpx exits 75 (`--elicit=return`) while the call keeps running in the daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from mcpx.cli.client import ApiError, DaemonClient, Response
from mcpx.cli.common import EX_TEMPFAIL, add_json_flag, emit_json, guarded, run
from mcpx.cli.prompt import Declined, TerminalForm
from mcpx.cli.render import render_question
from mcpx.text import plain

MODES = ("prompt", "return", "auto", "decline", "error")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("call", help="call an upstream tool; questions it asks are prompted for or returned (exit 75)")
    p.add_argument("target", metavar="SERVER.TOOL")
    p.add_argument("arguments", nargs="?", default="{}", help="the tool's arguments as a JSON object")
    p.add_argument("--elicit", choices=MODES, default=None,
                   help="prompt (default on a terminal), return (default otherwise: print the question, exit 75), "
                        "auto (rules only), decline (refuse every question), error (fail if it asks)")
    p.add_argument("--session", help="the session the call (and its questions) belong to")
    add_json_flag(p)
    p.set_defaults(func=guarded(call_cmd))

    task = sub.add_parser("task", help="calls running in the daemon")
    tsub = task.add_subparsers(dest="task_cmd", required=True, metavar="COMMAND")
    p = tsub.add_parser("result", help="a call's real result (waits up to --timeout)")
    p.add_argument("id")
    p.add_argument("--timeout", type=float, default=30.0)
    add_json_flag(p)
    p.set_defaults(func=run(task_result_cmd))
    p = tsub.add_parser("show", help="a call's status")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(func=run(task_show_cmd))
    p = tsub.add_parser("cancel", help="cancel a call; its open questions are abandoned")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(func=run(task_cancel_cmd))

    p = sub.add_parser("tools", help="what is behind mcpx: each server's tools")
    p.add_argument("server", nargs="?")
    add_json_flag(p)
    p.set_defaults(func=run(tools_cmd))


def print_result(result: dict[str, Any]) -> None:
    texts = [c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text"]
    others = [c for c in result.get("content") or [] if c.get("type") != "text"]
    for text in texts:
        print(text)
    for item in others:
        print(json.dumps(item))
    if not texts and not others and "structuredContent" in result:
        print(json.dumps(result["structuredContent"], indent=2))
    if "error" in result and not texts:
        print(json.dumps(result["error"]))


def _exit_for_result(result: dict[str, Any]) -> int:
    return 1 if result.get("isError") or "error" in result else 0


def _split(target: str) -> tuple[str, str]:
    server, dot, tool = target.partition(".")
    if not dot or not server or not tool:
        raise ValueError(f"{target!r}: name the tool as SERVER.TOOL, e.g. demo.choose_repository")
    return server, tool


def _arguments(text: str) -> dict[str, Any]:
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments are not JSON ({exc.msg} at character {exc.pos}): {text!r}; give the "
                         """tool's arguments as one JSON object, e.g. '{"repo": "octo/hello"}'""") from None
    if not isinstance(arguments, dict):
        raise ValueError(f"the arguments must be a JSON object ({{\"name\": value, …}}), not {text!r}")
    return arguments


def print_waiting(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json({"inputRequired": doc})
        return
    questions = doc.get("elicitations") or []
    if not questions:
        print(f"mcpx: {doc['task']} is still running; collect its result with: mcpx task result {doc['task']}",
              file=sys.stderr)
        return
    print("mcpx: the call is waiting for input, and nothing here answers it.\n", file=sys.stderr)
    for q in questions:
        print(render_question(q), file=sys.stderr)
        print(file=sys.stderr)
    print(f"The call keeps running until it is answered or expires; its result: mcpx task result {doc['task']}\n"
          "Every waiting question, answered from one screen: mcpx inbox (in your browser) or mcpx tui", file=sys.stderr)


def call_cmd(args: argparse.Namespace) -> int:
    try:
        server, tool = _split(args.target)
        arguments = _arguments(args.arguments)
    except ValueError as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 2
    mode = args.elicit or ("prompt" if sys.stdin.isatty() and sys.stderr.isatty() else "return")
    body: dict[str, Any] = {"arguments": arguments}
    if args.session:
        body["session"] = args.session
    if mode in ("auto", "decline", "error"):
        body["elicit"] = mode
    resp = asyncio.run(_post(f"/v1/call/{server}/{tool}", body))
    return _follow(args, resp, mode)


async def _post(path: str, body: dict[str, Any]) -> Response:
    async with DaemonClient() as client:
        return await client.request("POST", path, json_body=body, timeout=3700, ok=(502,))


def _follow(args: argparse.Namespace, resp: Response, mode: str) -> int:
    """Print the result, or put the questions to the person here, until the call is done.

    Prompting happens outside any event loop, so Ctrl-C interrupts the prompt itself (and means cancel).
    """
    form = TerminalForm()
    while True:
        body = resp.body
        if resp.status == 200:
            result = body.get("result") if "result" in body else body
            if args.json:
                emit_json(body)
            elif isinstance(body, dict) and body.get("state") in ("failed", "cancelled"):
                print(f"mcpx: {body.get('error') or body['state']}", file=sys.stderr)
                return 1
            else:
                print_result(result or {})
            if isinstance(body, dict) and body.get("state") in ("failed", "cancelled"):
                return 1
            return _exit_for_result(result or {})
        if resp.status == 502:
            if args.json:
                emit_json(body)
            else:
                print(f"mcpx: {body['error']['message']}", file=sys.stderr)
            return 1
        # 202: waiting for input (or still running)
        if mode != "prompt":
            print_waiting(body, args.json)
            return EX_TEMPFAIL
        for q in body.get("elicitations") or []:
            _prompt_one(form, q)
        # the next question the call asks ends this wait at once, as its result does
        resp = asyncio.run(_result(body["task"], 30, wake="question"))


async def _result(task: str, timeout: float, wake: str = "result") -> Response:
    async with DaemonClient() as client:
        return await client.request("GET", f"/v1/tasks/{task}/result", params={"timeout": timeout, "wake": wake},
                                    timeout=timeout + 10)


def _prompt_one(form: TerminalForm, q: dict[str, Any]) -> None:
    """Put one question to the person at this terminal until it has a valid answer."""
    content: dict[str, Any] = {}
    problems: dict[str, str] | None = None
    while True:
        reason = None
        try:
            if q.get("mode") == "url":
                form.url(q)
            else:
                content = {**content, **form.form(q, problems)}
            action = "accept"
        except Declined as declined:
            action, reason = "decline", declined.reason
        except (KeyboardInterrupt, EOFError):
            action, reason = "cancel", "cancelled at the terminal"
        try:
            asyncio.run(_answer(q, action, content if action == "accept" and q.get("mode") != "url" else None,
                                reason))
            return
        except ApiError as exc:
            if exc.status == 422 and exc.fields:
                problems = exc.fields
                continue
            if exc.status in (409, 410):
                form.say(f"  ({plain(exc)})")
                return
            raise


async def _answer(q: dict[str, Any], action: str, content: dict[str, Any] | None, reason: str | None) -> None:
    async with DaemonClient() as client:
        await client.answer(q["id"], action, content, reason)


async def task_result_cmd(args: argparse.Namespace) -> int:
    resp = await _result(args.id, args.timeout)
    if resp.status == 202:
        print_waiting(resp.body, args.json)
        return EX_TEMPFAIL
    return _follow(args, resp, "return")


async def task_show_cmd(args: argparse.Namespace) -> int:
    async with DaemonClient() as client:
        doc = await client.get(f"/v1/tasks/{args.id}")
    if args.json:
        emit_json(doc)
    else:
        print(f"{doc['id']} · {doc['state']} · {doc['server']}.{doc['tool']} · session {doc['session']}")
        for eid in doc.get("open") or []:
            print(f"  waiting for {eid}: mcpx elicit show {eid}")
        if doc.get("error"):
            print(f"  error: {plain(doc['error'])}")
    return 0


async def task_cancel_cmd(args: argparse.Namespace) -> int:
    async with DaemonClient() as client:
        doc = await client.post(f"/v1/tasks/{args.id}/cancel")
    if args.json:
        emit_json(doc)
    else:
        print(f"{doc['id']}: {doc['state']}")
    return 0


async def tools_cmd(args: argparse.Namespace) -> int:
    async with DaemonClient() as client:
        path = f"/v1/tools/{args.server}" if args.server else "/v1/tools"
        body = await client.get(path, timeout=120)
    if args.json:
        emit_json(body)
        return 0
    for server, tools in body["servers"].items():
        if isinstance(tools, str):
            print(f"{server}: cannot list tools: {plain(tools)}")
            continue
        print(f"{server} ({len(tools)} tools)")
        for t in tools:
            ann = t.get("annotations") or {}
            flags = [f for f, on in (("read-only", ann.get("readOnlyHint")),
                                     ("destructive", ann.get("destructiveHint"))) if on]
            print(f"  {server}.{t['name']:<28} {plain(t.get('description') or '', 90)}"
                  + (f"  [{', '.join(flags)}]" if flags else ""))
    return 0

