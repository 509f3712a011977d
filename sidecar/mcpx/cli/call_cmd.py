"""`mcpx call SERVER.TOOL`, `mcpx task result ID`, `mcpx tools [SERVER]`.

A call that waits for input does not hang: on a terminal the question is put to you field by
field (`--elicit=prompt`); otherwise the question and the command that answers it are printed
and mcpx exits 75 (`--elicit=return`) while the call keeps running in the daemon.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mcpx.cli.common import EX_TEMPFAIL, add_json_flag, emit_json, guarded, shown
from mcpx.cli.status_line import StatusLine, progress_text, while_waiting
from mcpx.client.target import split_target
from mcpx.client.transport import ApiError, ApiResponse, DaemonApi, ensure_running
from mcpx.presentation.text import clock, one_line, plain

if TYPE_CHECKING:
    from mcpx.client.prompt import TerminalForm
    from mcpx.client.replies import CallWaiting, QuestionDoc, TaskView, ToolDoc, ToolResult

# Each command here asks the daemon through transport.DaemonApi, one blocking exchange per request, and starts
# without aiohttp, asyncio or pydantic; what only a question needs (its rendering, the terminal's form and the watch
# beside it, on pydantic's schema models and aiohttp) is imported where a question is shown or asked.

MODES = ("prompt", "return", "auto", "decline", "error")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("call", help="call an upstream tool; questions it asks are prompted for or returned (exit 75)")
    p.add_argument("target", metavar="SERVER.TOOL")
    p.add_argument("arguments", nargs="*", help="the tool's arguments: one JSON object, or name=value pairs typed "
                                                "by the tool's schema (mcpx tools SERVER.TOOL shows them)")
    p.add_argument("--elicit", choices=MODES, default=None,
                   help="prompt (default on a terminal), return (default otherwise: print the question, exit 75), "
                        "auto (rules only), decline (refuse every question), error (fail if it asks)")
    p.add_argument("--session", help="the session the call (and its questions) belong to")
    add_json_flag(p)
    p.set_defaults(func=guarded(call_cmd))

    task = sub.add_parser("task", help="calls running in the daemon", description="The calls made through mcpx "
                          "(tsk-…): list them, see one, wait for its real result, cancel it.")
    tsub = task.add_subparsers(dest="task_cmd", required=True, metavar="COMMAND")
    p = tsub.add_parser("list", help="the calls in flight, newest first (--state all: the finished ones too)")
    p.add_argument("--state", default="running,input-required",
                   help="comma-separated: running, input-required, completed, failed, cancelled; or all "
                        "(default: the ones in flight)")
    p.add_argument("--session", help="only this session's calls")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    add_json_flag(p)
    p.set_defaults(func=guarded(task_list_cmd))
    p = tsub.add_parser("result", help="a call's real result (waits up to --timeout)")
    p.add_argument("id", help="the call's task id (tsk-…)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it (default 30); exit 75 if it "
                                                               "still runs or waits for an answer")
    add_json_flag(p)
    p.set_defaults(func=guarded(task_result_cmd))
    p = tsub.add_parser("show", help="a call's status")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(func=guarded(task_show_cmd))
    p = tsub.add_parser("cancel", help="cancel a call; its open questions are abandoned")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(func=guarded(task_cancel_cmd))

    p = sub.add_parser("tools", help="what is behind mcpx: each server's tools, or one tool's arguments",
                       description="The tools of the servers behind mcpx (starting each server that is not "
                                   "running). SERVER: that server's alone; SERVER.TOOL: that tool, with its "
                                   "arguments.")
    p.add_argument("server", nargs="?", metavar="SERVER[.TOOL]")
    add_json_flag(p)
    p.set_defaults(func=guarded(tools_cmd))


def print_result(result: ToolResult) -> None:
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


def clock_of(moment: str) -> str:
    return clock(datetime.fromisoformat(moment.replace("Z", "+00:00")))


def _exit_for_result(result: ToolResult) -> int:
    return 1 if result.get("isError") or "error" in result else 0


def given_as_pairs(words: list[str]) -> bool:
    """name=value pairs, rather than one JSON text (an object, or whatever else was meant as JSON)."""
    return all("=" in w for w in words) and not (len(words) == 1 and words[0].lstrip().startswith(("{", "[", '"')))


def _arguments(words: list[str], schema: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's arguments: one JSON object as it is, or name=value pairs, each value typed by the tool's schema (a
    string field takes the text as it is; any other takes JSON: 3, true, ["a","b"], {"k": 1})."""
    if not words:
        return {}
    if not given_as_pairs(words):
        try:
            arguments = json.loads(words[0])
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not JSON ({exc.msg} at character {exc.pos}): {words[0]!r}; give "
                             """one JSON object, e.g. '{"repo": "octo/hello"}', or name=value pairs""") from None
        if not isinstance(arguments, dict):
            raise ValueError(f"the arguments must be a JSON object ({{\"name\": value, …}}), not {words[0]!r}")
        return arguments
    props = (schema or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for word in words:
        name, eq, text = word.partition("=")
        if not eq or not name:
            raise ValueError(f"{word!r} is not name=value; give the tool's arguments as name=value pairs or one JSON "
                             "object")
        if name in out:
            raise ValueError(f"{name} is given twice")
        kind = (props.get(name) or {}).get("type")
        if kind == "string":
            out[name] = text
            continue
        try:
            out[name] = json.loads(text)
        except json.JSONDecodeError:
            if kind not in (None, "string"):
                raise ValueError(f"{name}={text!r}: the tool takes {kind} there, written as JSON") from None
            out[name] = text  # a field the schema does not name: the text as it is
    return out


def print_waiting(doc: CallWaiting, as_json: bool) -> None:
    from mcpx.cli.render import render_question

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
    mode = args.elicit or ("prompt" if sys.stdin.isatty() and sys.stderr.isatty() else "return")
    try:
        server, tool = split_target(args.target)
        pairs = bool(args.arguments) and given_as_pairs(args.arguments)
        # arguments that are not JSON are a usage error, said before any daemon is started or asked anything
        arguments = None if pairs else _arguments(args.arguments, None)
        ensure_running("mcpx call")
        # the tools are listed first (name=value pairs are typed by the tool's schema; and the daemon, knowing them,
        # refuses a tool the server lacks in words, naming the nearest), unless the call must leave no question
        # behind: a listing asks for a server's missing secrets whatever the call's --elicit says
        schema = _input_schema(server, tool) if mode in ("prompt", "return") or pairs else None
        if arguments is None:
            arguments = _arguments(args.arguments, schema)
    except ValueError as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 2
    body: dict[str, Any] = {"arguments": arguments}
    if args.session:
        body["session"] = args.session
    if mode in ("auto", "decline", "error"):
        body["elicit"] = mode
    # on a terminal the call comes back within a second while it runs, so the wait can be shown (its progress)
    resp = _post(f"/v1/call/{server}/{tool}", body, wait=1.0 if mode == "prompt" else None)
    return _follow(args, resp, mode)


def _input_schema(server: str, tool: str) -> dict[str, Any]:
    """The tool's inputSchema, to type name=value pairs by. Listed before every call: the daemon then knows the
    server's tools, and refuses a tool it does not have by naming its tools and the nearest (a call to a server
    never listed would get the server's own raw error). A server that cannot list its tools yet (one waiting for
    its secrets) types nothing: the pairs go as text, and the call says what it waits for."""
    try:
        tools = DaemonApi().get(f"/v1/tools/{server}", timeout=120)["servers"][server]
    except ApiError as exc:
        if exc.status != 502:
            raise
        return {}
    found = next((t for t in tools if t.get("name") == tool), None)
    schema = (found or {}).get("inputSchema")
    return schema if isinstance(schema, dict) else {}


def _post(path: str, body: dict[str, Any], wait: float | None = None) -> ApiResponse:
    return DaemonApi().request("POST", path, json_body=body, timeout=3700, ok=(502,),
                               params={"wait": wait} if wait is not None else None)


def _follow(args: argparse.Namespace, resp: ApiResponse, mode: str) -> int:
    """Print the result, or put the questions to the person here, until the call is done.

    Prompting happens outside any event loop, so Ctrl-C interrupts the prompt itself (and means cancel).
    """
    line = StatusLine()
    while True:
        body = resp.body
        if resp.status != 202 or body.get("elicitations"):
            line.clear()
        if resp.status == 200:
            found = body.get("result") if "result" in body else body
            result: ToolResult = found if found else {}
            if args.json:
                emit_json(body)
            elif isinstance(body, dict) and body.get("state") in ("failed", "cancelled"):
                print(f"mcpx: {body.get('error') or body['state']}", file=sys.stderr)
                return 1
            else:
                print_result(result)
            if isinstance(body, dict) and body.get("state") in ("failed", "cancelled"):
                return 1
            return _exit_for_result(result)
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
            _prompt_one(q)
        if not body.get("elicitations") and line.on:
            # still running: say so, with what the server last reported, and look again in a second
            line.show(progress_text(_task(body["task"])))
            resp = _result(body["task"], 1, wake="question")
            continue
        # the next question the call asks ends this wait at once, as its result does
        resp = _result(body["task"], 30, wake="question")


def _task(task: str) -> TaskView:
    doc: TaskView = DaemonApi().get(f"/v1/tasks/{task}")
    return doc


def _result(task: str, timeout: float, wake: str = "result") -> ApiResponse:
    return DaemonApi().request("GET", f"/v1/tasks/{task}/result", params={"timeout": timeout, "wake": wake},
                               timeout=timeout + 10)


def _prompt_one(q: QuestionDoc) -> None:
    """Put one question to the person at this terminal until it has a valid answer, or until it ends elsewhere
    (answered from another door, expired, abandoned): then say how, and ask no more."""
    from mcpx.client.prompt import TerminalForm
    from mcpx.client.question_watch import EndedMeanwhile, QuestionWatch

    with QuestionWatch(q["id"]) as watch:
        form = TerminalForm.until(watch)
        try:
            _ask_until_answered(form, q)
        except EndedMeanwhile as ended:
            form.say(f"  ({ended})")


def _ask_until_answered(form: TerminalForm, q: QuestionDoc) -> None:
    from mcpx.client.prompt import read_answer

    content: dict[str, Any] = {}
    problems: dict[str, str] | None = None
    while True:
        action, given, reason = read_answer(form, q, content, problems)
        content = given or content
        try:
            DaemonApi().answer(q["id"], action, given, reason)
            return
        except ApiError as exc:
            if exc.status == 422 and exc.fields:
                problems = exc.fields
                continue
            if exc.status in (409, 410):
                form.say(f"  ({plain(exc)})")
                return
            raise


def task_result_cmd(args: argparse.Namespace) -> int:
    resp = _result(args.id, args.timeout)
    if resp.status == 202:
        print_waiting(resp.body, args.json)
        return EX_TEMPFAIL
    return _follow(args, resp, "return")


def task_line(doc: TaskView) -> str:
    """A call in one line: its id, state, tool, session, when it last moved, what it waits for."""
    line = (f"{doc['id']} · {doc['state']:<14} · {plain(doc['server'])}.{plain(doc['tool'])} · session "
            f"{plain(doc['session'])} · {clock_of(doc['updated'])}")
    if doc.get("open"):
        line += f" · waits for {', '.join(doc['open'])}"
    if doc.get("state") in ("running", "input-required") and doc.get("survivesRestart") is False:
        line += " · ends if the daemon stops"
    return line


def task_list_cmd(args: argparse.Namespace) -> int:
    body = DaemonApi().get("/v1/tasks", params={"state": args.state, "limit": args.limit,
                                                **({"session": args.session} if args.session else {})})
    if args.json:
        emit_json(body)
        return 0
    if not body["tasks"]:
        print("no calls" + (" in flight" if args.state == "running,input-required" else ""))
    for doc in body["tasks"]:
        print(task_line(doc))
    return 0


def task_show_cmd(args: argparse.Namespace) -> int:
    def say(doc: TaskView) -> None:
        print(f"{doc['id']} · {doc['state']} · {doc['server']}.{doc['tool']} · session {doc['session']}")
        for eid in doc.get("open") or []:
            print(f"  waiting for {eid}: mcpx elicit show {eid}")
        if doc.get("error"):
            print(f"  error: {plain(doc['error'])}")

    shown(args, f"/v1/tasks/{args.id}", say)
    return 0


def task_cancel_cmd(args: argparse.Namespace) -> int:
    shown(args, f"/v1/tasks/{args.id}/cancel", lambda doc: print(f"{doc['id']}: {doc['state']}"), post={})
    return 0


def tools_cmd(args: argparse.Namespace) -> int:
    server, _, tool = (args.server or "").partition(".")
    ensure_running("mcpx tools")
    api = DaemonApi()
    servers = [server] if server else api.get("/v1/health")["servers"]
    body = {"servers": _listings(api, servers)}
    listing = body["servers"].get(server)
    if isinstance(listing, str):
        print(f"mcpx: {plain(listing)}", file=sys.stderr)  # the one server asked for could not list its tools
        return 1
    if tool and listing is not None:
        return _one_tool(args, server, tool, listing)
    if args.json:
        emit_json(body)
        return 0
    print_listing(body["servers"])
    return 0


NAME_WIDTH = 48  # the names' column at most: a longer name pushes its own description right, not every row's


def print_listing(servers: dict[str, list[ToolDoc] | str]) -> None:
    """Every server's tools, one line each: SERVER.TOOL, then its description (in one line) in one column aligned
    over the whole listing, and its annotations."""
    names = {server: [f"{plain(server)}.{plain(t.get('name', '?'), 200)}" for t in tools]
             for server, tools in servers.items() if not isinstance(tools, str)}
    width = min(max((len(n) for shown in names.values() for n in shown), default=0), NAME_WIDTH)
    for server, tools in servers.items():
        if isinstance(tools, str):
            print(f"{plain(server)}: cannot list tools: {plain(tools)}")
            continue
        print(f"{plain(server)} ({len(tools)} tools)")
        for name, t in zip(names[server], tools, strict=True):
            ann = t.get("annotations") or {}
            flags = [f for f, on in (("read-only", ann.get("readOnlyHint")),
                                     ("destructive", ann.get("destructiveHint"))) if on]
            print((f"  {name:<{width}}  {one_line(t.get('description') or '', 90)}"
                   + (f"  [{', '.join(flags)}]" if flags else "")).rstrip())


def _listings(api: DaemonApi, servers: list[str]) -> dict[str, list[ToolDoc] | str]:
    """Each server's tools, or why it could not list them (one bad server hides no other). A server that is not
    running is started to be listed, seconds each (an npx download: many): on a terminal the status line names the
    ones still starting meanwhile. Each server is asked in a thread of its own (the requests block)."""
    out: dict[str, list[ToolDoc] | str] = {}

    def one(name: str) -> None:
        resp = api.request("GET", f"/v1/tools/{name}", timeout=120, ok=(502,))
        out[name] = resp.body["servers"][name] if resp.status == 200 else str(resp.body["error"]["message"])

    def starting() -> str:
        waiting = [s for s in servers if s not in out]
        return (f"starting {', '.join(waiting)} to list their tools"
                + (f" ({len(out)} of {len(servers)} listed)" if len(servers) > 1 else ""))

    while_waiting([in_thread(one, s) for s in servers], starting)
    return dict(sorted(out.items()))


def in_thread(work: Callable[[str], None], name: str) -> Future[None]:
    """`work(name)` in a daemon thread of its own, its end in the future returned. Not a thread pool's: a pool's
    threads are joined as the process exits, so a Ctrl-C would wait for the requests still blocked (up to 120 s);
    a daemon thread is left behind with its request."""
    done: Future[None] = Future()

    def run() -> None:
        done.set_running_or_notify_cancel()
        try:
            work(name)
        except BaseException as exc:  # handed to whoever waits on the future, as a pool would
            done.set_exception(exc)
        else:
            done.set_result(None)

    threading.Thread(target=run, name=f"mcpx tools {name}", daemon=True).start()
    return done


def _one_tool(args: argparse.Namespace, server: str, tool: str, tools: list[ToolDoc]) -> int:
    """One tool: what it does, what it takes (each argument's type, whether it is required, its default and
    description), and how to call it."""
    from mcpx.shared.upstream_errors import UnknownTool, refuse_unknown_tool  # here: only `tools SERVER.TOOL` needs it

    try:
        refuse_unknown_tool(server, tool, tools)
    except UnknownTool as exc:
        print(f"mcpx: {plain(exc)}", file=sys.stderr)
        return 1
    found = next(t for t in tools if t.get("name") == tool)
    if args.json:
        emit_json(found)
        return 0
    schema: dict[str, Any] = found["inputSchema"] if isinstance(found.get("inputSchema"), dict) else {}
    props = schema.get("properties") or {}
    needed = set(schema.get("required") or [])
    print(f"{server}.{plain(tool)}")
    for paragraph in str(found.get("description") or "").strip().splitlines():
        print(f"  {plain(paragraph, 2000)}".rstrip())  # its own lines, as its server wrote them
    ann = found.get("annotations") or {}
    flags = [f for f, on in (("read-only", ann.get("readOnlyHint")), ("destructive", ann.get("destructiveHint")))
             if on]
    if flags:
        print(f"  [{', '.join(flags)}]")
    if not props:
        print("  takes no arguments")
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        bits = [str(prop.get("type", "any")), "required" if name in needed else "optional"]
        if "default" in prop:
            bits.append(f"default {json.dumps(prop['default'], ensure_ascii=False)}")
        if isinstance(prop.get("enum"), list):
            bits.append("one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in prop["enum"]))
        about = f": {plain(prop['description'], 300)}" if prop.get("description") else ""
        print(f"  {plain(name)} ({plain('; '.join(bits), 300)}){about}")
    example = " ".join(f"{n}=…" for n in props if n in needed) or ""
    print(f"call it: mcpx call {server}.{plain(tool)}" + (f" {example}" if example else ""))
    return 0
