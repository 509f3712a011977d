"""`mcpx elicit …`: list, show, answer, decline, cancel, watch, result, ask."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from mcpx.cli import inbox_cmd
from mcpx.cli.common import EX_TEMPFAIL, add_json_flag, emit_json, guarded, run
from mcpx.cli.lines import render_event, render_row
from mcpx.client.transport import ApiError, DaemonApi, NoDaemon, ensure_running
from mcpx.presentation.text import plain

if TYPE_CHECKING:
    from mcpx.client.replies import AuditDoc, QuestionDoc

# What only some of these commands need is imported where they run (the schema's rules and a question's full
# rendering read with pydantic; the prompt; aiohttp for the event stream and the long waits): `mcpx elicit list`,
# the command run most, starts with the standard library alone (docs/choices.md, "The CLI's start").


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    elicit = sub.add_parser("elicit", help="questions waiting for an answer: list, show, answer, watch, ask")
    esub = elicit.add_subparsers(dest="elicit_cmd", required=True, metavar="COMMAND")

    p = esub.add_parser("list", help="questions, oldest first (pending ones unless --state)")
    p.add_argument("--session", help="only this session's questions")
    p.add_argument("--state", choices=["pending", "answered", "expired", "abandoned", "all"], default="pending",
                   help="which (default pending; all: every question the log holds)")
    p.add_argument("--server", help="only this server's questions")
    p.add_argument("--audience", choices=["agent", "human", "agent-then-human"],
                   help="only the questions for this audience")
    p.add_argument("--limit", type=int, default=1000, help="at most this many (default 1000)")
    add_json_flag(p)
    p.set_defaults(func=guarded(list_cmd))

    p = esub.add_parser("show", help="one question: its fields, who it is for, the commands that answer it")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(func=guarded(show_cmd))

    p = esub.add_parser("answer", help="accept, with content as JSON or key=value pairs typed by the schema")
    p.add_argument("id")
    p.add_argument("content", nargs="*", help="'{\"field\": …}' or field=value …; on a terminal, fields left out "
                                              "are asked for (credentials without echo)")
    add_json_flag(p)
    p.set_defaults(func=guarded(answer_cmd), action="accept")

    for action, help_text in (("decline", "explicitly no: the server should offer something else"),
                              ("cancel", "not now: dismissed without choosing")):
        p = esub.add_parser(action, help=help_text)
        p.add_argument("id")
        p.add_argument("--reason", help="why, in words the server (and the audit) will keep")
        add_json_flag(p)
        p.set_defaults(func=guarded(answer_cmd), action=action, content=[])

    inbox_cmd.register_link(esub)

    p = esub.add_parser("watch", help="follow questions and answers as they happen (the event stream)")
    p.add_argument("--session")
    p.add_argument("--kinds", default="elicit,policy",
                   help="elicit, task, policy or exact kinds (default elicit,policy)")
    p.add_argument("--since", type=int, metavar="EVENT_ID", help="replay from after this event id first")
    add_json_flag(p)
    p.set_defaults(func=run(watch_cmd))

    p = esub.add_parser("result", help="what came of a question: the call's result, or the answer")
    p.add_argument("id")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it (default 30)")
    add_json_flag(p)
    p.set_defaults(func=guarded(result_cmd))

    p = esub.add_parser("ask", help="raise a question and wait for its answer: exit 0 accept, 1 decline, "
                                    "75 cancel/expiry")
    p.add_argument("--message", "-m", required=True)
    p.add_argument("--schema", help="requestedSchema as JSON, or @file.json")
    p.add_argument("--url", help="ask the person to open this URL (url mode)")
    p.add_argument("--ttl", help="how long it waits, e.g. 120s, 30m (default: elicit.ttl)")
    p.add_argument("--session")
    p.add_argument("--audience", choices=["agent", "human", "agent-then-human"],
                   help="at least this human (routing may make it more so)")
    p.add_argument("--approvers", metavar="NAME,…", help="people of the config whose approval it needs, each through "
                                                         "their own link (docs/approvals.md)")
    p.add_argument("--need", type=int, help="how many distinct approvals accept it (default 1)")
    p.add_argument("--remind", help="notify approvers who have not answered again this often, e.g. 10m")
    p.add_argument("--escalate", action="append", metavar="AFTER:NAME,…", help="after AFTER (e.g. 30m) from its "
                                                                               "opening, notify these people too, "
                                                                               "as approvers; repeatable")
    p.add_argument("--from", dest="asker", metavar="NAME", help="who asks (default $MCPX_PERSON): their own "
                                                                "approval never counts")
    p.add_argument("--presence", action="store_true", help="accepted only with a person's passkey, signing exactly "
                                                           "this question (docs/presence.md)")
    add_json_flag(p)
    p.set_defaults(func=run(ask_cmd))


def list_cmd(args: argparse.Namespace) -> int:
    ensure_running("mcpx elicit list")
    body = DaemonApi().get("/v1/elicit", params={"session": args.session, "state": args.state, "server": args.server,
                                                 "audience": args.audience, "limit": args.limit})
    if args.json:
        emit_json(body)
        return 0
    if not body["elicitations"]:
        print(f"no {args.state if args.state != 'all' else ''} questions".replace("  ", " "))
        return 0
    for q in body["elicitations"]:
        print(render_row(q))
    print(f"({body['count']}; `mcpx elicit show ID` for one)")
    return 0


def show_cmd(args: argparse.Namespace) -> int:
    # the text shows the question's page in the web inbox, as `mcpx call` does: the daemon's rendering has it
    body = DaemonApi().get(f"/v1/elicit/{args.id}", params=None if args.json else {"render": "true"})
    if args.json:
        emit_json(body)
    else:
        from mcpx.cli.render import render_question

        q: QuestionDoc = body["elicitation"]
        if page := (body["elicitation"].get("render") or {}).get("page"):
            q["page"] = page
        print(render_question(q, body.get("answer")))
    return 0


def parse_content(schema: dict[str, Any] | None, words: list[str]) -> dict[str, Any] | None:
    if not words:
        return None
    from mcpx.broker.schema import parse_assignments

    if len(words) == 1 and words[0].lstrip().startswith("{"):
        try:
            value = json.loads(words[0])
        except json.JSONDecodeError as exc:
            raise ValueError(f"the content is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("the content must be a JSON object")
        return value
    return parse_assignments(schema, words)


def answer_cmd(args: argparse.Namespace) -> int:
    """accept, decline or cancel. On a terminal, an accept that leaves fields out asks for them (every field when
    no content is given), a credential with the terminal's echo off: a key typed there is in no shell history and no
    process list. Prompting runs outside any event loop, so Ctrl-C ends the prompt (and answers nothing)."""
    question = DaemonApi().get(f"/v1/elicit/{args.id}")["elicitation"] if args.action == "accept" else None
    schema = (question or {}).get("requestedSchema")
    try:
        content = parse_content(schema, args.content) if args.content else None
    except ValueError as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 2
    if question is None or question.get("mode") != "form" or not sys.stdin.isatty() or args.json:
        return _record(args, args.action, content, getattr(args, "reason", None))
    # on a terminal: what was left out is asked for (nothing given: every field; something: the required rest),
    # and an answer that does not fit is asked again, field by field, with each field's problem
    # the prompt stops as soon as the question ends elsewhere (answered, expired, abandoned), saying how
    from mcpx.broker.schema import FlatSchema
    from mcpx.client.prompt import Declined, TerminalForm
    from mcpx.client.question_watch import EndedMeanwhile, QuestionWatch

    with QuestionWatch(args.id) as watch:
        form = TerminalForm.until(watch)
        given = content or {}
        missing = {f.name for f in FlatSchema.of(schema).fields
                   if f.name not in given and (content is None or f.required)}
        try:
            if missing:
                content = {**given, **form.form(question, only=missing)}
            while True:
                try:
                    return _record(args, "accept", content, None)
                except ApiError as exc:
                    if exc.status != 422 or not exc.fields:
                        raise
                    content = {**(content or {}), **form.form(question, exc.fields)}
        except Declined as declined:
            return _record(args, "decline", None, declined.reason)
        except EndedMeanwhile as ended:
            print(f"mcpx: {ended}; nothing was answered here", file=sys.stderr)
            return 1  # as for a question answered already (409) or gone (410)
        except (KeyboardInterrupt, EOFError):
            print(f"\nmcpx: nothing answered; {args.id} still waits", file=sys.stderr)
            return 130


def _record(args: argparse.Namespace, action: str, content: dict[str, Any] | None, reason: str | None) -> int:
    """Send the answer, and print what came of it; a refusal is raised (a 422, to ask again on a terminal)."""
    body = DaemonApi().answer(args.id, action, content, reason)
    if args.json:
        emit_json(body)
    elif body.get("escalated"):
        print(f"{args.id}: declined by the agent; it is now the person's to answer")
    else:
        answer = body["answer"]
        print(f"{args.id}: {answer['action']} (by {answer['by']}, after {answer['answeredAfterMs']} ms)")
    return 0


async def watch_cmd(args: argparse.Namespace) -> int:
    import asyncio

    from mcpx.client.daemon_client import DaemonClient

    last = args.since
    failures_since: float | None = None
    while True:
        try:
            async with DaemonClient() as client:
                async for event_id, event, data in client.events(args.kinds, args.session, last):
                    failures_since = None
                    if event_id is not None:
                        last = event_id
                    if not event:
                        continue  # the stream's opening frame: where the log stands
                    if args.json:
                        print(json.dumps({"id": event_id, "event": event, "data": data}), flush=True)
                    else:
                        record = cast("AuditDoc", data) if isinstance(data, dict) else {}  # an audit record
                        print(render_event(event, record), flush=True)
        except NoDaemon:
            failures_since = failures_since or time.monotonic()
            if time.monotonic() - failures_since > 30:
                raise
        # the stream ended (daemon restarting, or we fell behind): resume after the last event seen
        await asyncio.sleep(0.5)


def exit_for(action: str | None) -> int:
    return {"accept": 0, "decline": 1}.get(action or "", EX_TEMPFAIL)


def result_cmd(args: argparse.Namespace) -> int:
    api = DaemonApi()
    body = api.get(f"/v1/elicit/{args.id}")
    q = body["elicitation"]
    if q.get("task"):
        resp = api.request("GET", f"/v1/tasks/{q['task']}/result", params={"timeout": args.timeout},
                           timeout=args.timeout + 10)
        if resp.status == 202 or resp.status == 204:
            print(f"{q['task']} is still running; try again, or `mcpx elicit show {args.id}`", file=sys.stderr)
            return EX_TEMPFAIL
        if args.json:
            emit_json(resp.body)
        else:
            from mcpx.cli.call_cmd import print_result

            found = resp.body.get("result")
            print_result(found if found else {})
        return 0 if resp.body.get("state") == "completed" else 1
    answer = body.get("answer")
    if answer is None and q["state"] == "pending":
        resp = api.request("GET", f"/v1/elicit/{args.id}/wait", params={"timeout": args.timeout},
                           timeout=args.timeout + 10)
        answer = resp.body if resp.status == 200 else None
    if args.json:
        emit_json({"elicitation": q, "answer": answer})
    elif answer is None:
        print(f"{args.id} is {q['state']}: {plain(q.get('stateReason') or 'no answer yet')}", file=sys.stderr)
    else:
        print(json.dumps(answer.get("content")) if answer["action"] == "accept" else answer["action"])
    return exit_for(answer["action"] if answer else None)


def _read_schema(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--schema is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("--schema must be a JSON object")
    if "properties" not in value and "type" not in value:
        value = {"type": "object", "properties": value}  # shorthand: just the properties
    from mcpx.broker.schema import SchemaProblem, check_schema

    try:
        check_schema(value)  # the daemon's own check: a bad type is a usage error like bad JSON, not a refusal
    except SchemaProblem as exc:
        raise ValueError(f"--schema is not a schema a question can have: {exc}") from None
    return value


async def ask_cmd(args: argparse.Namespace) -> int:
    try:
        schema = _read_schema(args.schema)
    except (ValueError, OSError) as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 2
    body: dict[str, Any] = {"message": args.message}
    if args.url:
        body["url"] = args.url
        body["mode"] = "url"
    else:
        body["requestedSchema"] = schema or {"type": "object", "properties": {}}
    for key in ("ttl", "session", "audience", "need", "remind"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if args.approvers:
        body["approvers"] = [p.strip() for p in args.approvers.split(",") if p.strip()]
    for step in args.escalate or []:
        after, colon, names = step.partition(":")
        if not colon or not after.strip() or not names.strip():
            print(f"mcpx: --escalate {step!r}: write AFTER:NAME,… (e.g. 30m:dave,erin)", file=sys.stderr)
            return 2
        body.setdefault("escalate", []).append(
            {"after": after.strip(), "to": [p.strip() for p in names.split(",") if p.strip()]})
    if asker := args.asker or os.environ.get("MCPX_PERSON"):
        body["from"] = asker
    if args.presence:
        body["presence"] = True
    from mcpx.cli.render import render_question
    from mcpx.client.daemon_client import DaemonClient, wait_for_answer

    async with DaemonClient() as client:
        opened = (await client.post("/v1/elicit", body))["elicitation"]
    eid = opened["id"]
    print(render_question(opened), file=sys.stderr, flush=True)
    try:
        answer = await wait_for_answer(eid, opened["secondsLeft"] + 5)
    except ApiError as exc:
        if exc.status == 410:
            print(f"mcpx: {exc}", file=sys.stderr)
            return EX_TEMPFAIL
        raise
    if answer is None:
        print(f"mcpx: no answer to {eid} in time", file=sys.stderr)
        return EX_TEMPFAIL
    if args.json:
        emit_json(answer)
    elif answer["action"] == "accept":
        print(json.dumps(answer.get("content") or {}))
    else:
        note = f" ({plain(answer['reason'])})" if answer.get("reason") else ""
        print(f"{answer['action']} by {answer['by']}{note}", file=sys.stderr)
    return exit_for(answer["action"])
