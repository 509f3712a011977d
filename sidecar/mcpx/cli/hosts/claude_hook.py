"""`mcpx claude hook`: Claude Code's `Elicitation` hook (docs/claude-code.md; `mcpx claude install` adds it).

Claude Code runs it with the question it was passed as JSON on stdin (its session id, the MCP server's name, the
message, the mode, the schema), before it shows or answers the question, and takes what it prints as the answer.

- In its TUI (a person at it) the hook prints nothing: Claude Code draws its own form, and what the person
  chooses there goes back to mcpx as their answer.
- Unattended (print mode, `claude -p`, which cancels every question by itself; the Agent SDKs) the hook finds the
  same question in mcpx (POST /v1/elicit/passed: the session and what Claude Code was passed, there being no id),
  tells the person where it waits (on Claude Code's own stderr, as `mcpx elicit answer …`; the notification targets
  were told when it opened), and prints their answer once they give it: Claude Code hands it back, mcpx already has
  it (surface/driver.py records nothing an unattended host says). Its wait ends with the question: answered,
  expired (cancel) or abandoned.

Whatever goes wrong (no daemon, not mcpx's question), it says so and prints nothing: Claude Code then does what it
does without a hook, and mcpx keeps the question waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcpx.client.transport import ApiError, DaemonApi, NoDaemon, wait_for_answer_blocking
from mcpx.presentation.text import plain
from mcpx.shared.hostenv import claude_session, host_of

MARGIN = 5.0  # s past the question's deadline: its expiry is recorded (cancel), and the wait returns it


class HookInput(BaseModel):
    """What Claude Code 2.1.332 writes on the hook's stdin for an elicitation (more keys are ignored)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    session_id: str = Field(min_length=1)
    hook_event_name: str = "Elicitation"
    mcp_server_name: str | None = None
    message: str = ""
    mode: Literal["form", "url"] = "form"
    requested_schema: dict[str, Any] | None = None
    url: str | None = None


def hook_output(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The answer as Claude Code takes it from an Elicitation hook."""
    out: dict[str, Any] = {"hookEventName": "Elicitation", "action": answer["action"]}
    if answer["action"] == "accept" and answer.get("content") is not None:
        out["content"] = answer["content"]
    return {"hookSpecificOutput": out}


def tell(text: str, env: Mapping[str, str]) -> None:
    """Say `text` where the person running Claude Code sees it: Claude Code's own stderr (it keeps a hook's to
    itself), else this process's terminal, else this process's stderr."""
    targets = [f"/proc/{env['CLAUDE_PID']}/fd/2"] if env.get("CLAUDE_PID", "").isdigit() else []
    for path in [*targets, "/dev/tty"]:
        try:
            with open(path, "w") as out:
                out.write(text + "\n")
            return
        except OSError:
            continue
    print(text, file=sys.stderr, flush=True)


def answer_for(given: HookInput, env: Mapping[str, str]) -> dict[str, Any] | None:
    """The hook's output for this question, or None to print nothing."""
    host = host_of(env)
    if host is not None and not host.unattended:
        return None  # the TUI: Claude Code shows its own form to the person
    body = {"session": claude_session(given.session_id), "message": given.message, "mode": given.mode,
            "requestedSchema": given.requested_schema, "url": given.url}
    try:
        reply = DaemonApi().post("/v1/elicit/passed", body)  # blocking: the hook waits and does nothing else
    except ApiError as exc:
        if exc.status == 404:
            return None  # not one of mcpx's: nothing to wait for
        raise
    found, answer = reply["elicitation"], reply.get("answer")
    eid = found["id"]
    if found.get("state") == "pending":
        if found.get("audience") != "human":
            return None  # the agent's: it answers through mcpx_elicit_answer, never through this hook
        tell(found["render"]["line"], env)
        answer = wait_for_answer_blocking(eid, float(found.get("secondsLeft") or 0) + MARGIN)
    if answer is None:
        tell(f"mcpx: {eid} still waits; Claude Code goes on without its answer." if found.get("state") == "pending"
             else f"mcpx: {eid} is {found.get('state')}, with no answer to give.", env)
        return None
    tell(f"mcpx: {eid} was answered ({answer['action']} by {plain(str(answer.get('by')), 100)}).", env)
    return hook_output(answer)


def main(args: argparse.Namespace) -> int:
    env = os.environ
    try:
        given = HookInput.model_validate_json(sys.stdin.read())
    except ValidationError as exc:
        tell(f"mcpx claude hook: what Claude Code sent is not an elicitation: {exc.errors()[0]['msg']}", env)
        return 0
    try:
        out = answer_for(given, env)
    except (NoDaemon, ApiError) as exc:
        tell(f"mcpx claude hook: {exc}; Claude Code goes on without it, and the question waits in mcpx.", env)
        return 0
    if out is not None:
        print(json.dumps(out), flush=True)
    return 0
