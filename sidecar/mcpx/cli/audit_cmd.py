"""`mcpx audit`: the trail of every transition, by question, session or trace; `--chain`: one call and everything
that followed from it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from mcpx.cli.common import add_json_flag, emit_json, guarded
from mcpx.cli.lines import render_event
from mcpx.client.transport import DaemonApi
from mcpx.presentation.text import plain

if TYPE_CHECKING:
    from mcpx.client.replies import AuditDoc, TaskView


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("audit", help="audit records: who opened, answered, expired or abandoned what, and when",
                       description="The audit log, oldest first: every question's transitions (open, shown, "
                                   "answered, escalated, expired, abandoned) and every call's end, with who did it "
                                   "and their pid.")
    p.add_argument("--elicit", metavar="ID", help="one question's records (elc-…)")
    p.add_argument("--session", help="one session's records")
    p.add_argument("--trace", metavar="CALL_ID", help="one call's records (cal-…)")
    p.add_argument("--task", metavar="TASK_ID", help="one task's records (tsk-…)")
    p.add_argument("--chain", metavar="ID", help="a call and everything that followed from it, in time order: the "
                                                 "call, each question, its answer, elicit.resumed, the call's end "
                                                 "(the call's tsk-, its cal- or one of its questions' elc-)")
    p.add_argument("--kinds", help="elicit, task, policy or exact kinds, comma-separated")
    p.add_argument("--after", type=int, default=0, metavar="SEQ", help="only records after this one (its seq)")
    p.add_argument("--limit", type=int, default=200, help="at most this many (default 200)")
    add_json_flag(p)
    p.set_defaults(func=guarded(audit_cmd))


def audit_cmd(args: argparse.Namespace) -> int:
    if args.chain:
        return chain_cmd(args)
    params = {"elicit": args.elicit, "session": args.session, "trace": args.trace, "task": args.task,
              "kinds": args.kinds, "after": args.after, "limit": args.limit}
    body = DaemonApi().get("/v1/audit", params=params)
    if args.json:
        emit_json(body)
        return 0
    for record in body["records"]:
        print(record_line(record))
    return 0


def record_line(record: AuditDoc) -> str:
    extra = f"  pid {record['pid']}" if record.get("pid") else ""
    data = record.get("data") or {}
    # an approval, or an answer, signed by a person's passkey (an enrolment names its passkey, signed by none)
    if record["kind"] in ("elicit.approval", "elicit.answered") and (data.get("passkey") or data.get("passkeys")):
        extra += f"  verified by passkey ({', '.join(data.get('passkeys') or [data['passkey']])})"
    return f"{record['seq']:>6}  {render_event(record['kind'], record)}{extra}"


def call_entry(task: TaskView) -> dict[str, Any]:
    """The call, as the first entry of its chain: when it started, what it called, for which session."""
    return {"kind": "call", "at": task["created"], "task": task["id"], "trace": task["trace"],
            "session": task["session"], "server": task["server"], "tool": task["tool"], "state": task["state"]}


def chain_cmd(args: argparse.Namespace) -> int:
    body = DaemonApi().get(f"/v1/audit/chain/{args.chain}")
    entries = [call_entry(body["task"]), *body["records"]]
    if args.json:
        emit_json(entries)
        return 0
    call = entries[0]
    print(f"{'call':>6}  {call['at']}  {'call':<17} {call['task']}  {plain(call['server'])}.{plain(call['tool'])} "
          f"· session {plain(call['session'])} · {call['trace']} · now {call['state']}")
    for record in body["records"]:
        print(record_line(record))
    return 0
