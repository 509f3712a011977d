"""Claude Code's print mode (`claude -p`, how it runs in CI and scripts) with mcpx: a question for the person waits
for the person instead of being cancelled.

The real Claude Code 2.1.332 binary, run headless against the scripted model of tests/claude/fake_model.py, with
`mcpx serve` as its MCP server and `mcpx claude hook` as its Elicitation hook; the upstream is the mcp SDK peer
that elicits (tests/peers/sdk_server.py); the test plays the person from a terminal (`mcpx elicit answer`, run
outside Claude Code's process tree, as a person's own terminal is). Without mcpx, print mode cancels every question
by itself about 6 ms after it arrives. docs/claude-code.md is what this checks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from claude.fake_model import Call, Request, Say, ScriptedClaudeModel
from claude.harness import claude_env, require_claude, start_print
from gateway_helpers import stdio
from harness import PATIENCE, make_daemon, wait_for_sync
from host_world import Person

# no xdist_group: a test needs only the module's daemon and scripted model, which each worker starts for itself
pytestmark = [pytest.mark.timeout(300)]

SERVER = "mcpx"  # the MCP entry's name in Claude Code: its tools are mcp__mcpx__SERVER_TOOL
DELETE = f"mcp__{SERVER}__sdk_delete_branch"
NEED_REPO = f"mcp__{SERVER}__sdk_need_repo"
ANSWER_TOOL = f"mcp__{SERVER}__mcpx_elicit_answer"
RESULT_TOOL = f"mcp__{SERVER}__mcpx_task_result"
BRIEF = 4  # s: the TTL of the questions of the server `brief`
HELD = 3.0  # s a question is left waiting before the person answers: print mode alone cancels within ~6 ms


@dataclass
class Run:
    """One `claude -p`, its stderr read line by line as it comes (where the hook tells the person)."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    out: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()
        self._stdout = threading.Thread(target=self._read_out, daemon=True)
        self._stdout.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self.out.append(self.proc.stdout.read())

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()

    def wait_line(self, text: str, timeout: float = PATIENCE) -> str:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                found = next((line for line in self.lines if text in line), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._more()):
                    raise AssertionError(f"claude -p never said {text!r} on stderr; it said: {self.lines[-20:]}")
                self.changed.wait(min(left, 0.5))

    def _more(self) -> bool:
        return self.proc.stderr is not None and not self.proc.stderr.closed

    def finish(self, timeout: float = PATIENCE) -> tuple[int, str]:
        """Its exit code and stdout, once it ends (bounded); stderr stays with the reader of `lines`."""
        code = self.proc.wait(timeout)
        self._stdout.join(timeout)
        return code, "".join(self.out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@dataclass
class World(Person):
    model: ScriptedClaudeModel
    binary: Path
    root: Path


    def project(self, name: str, hook: bool, hook_timeout: int = 600) -> tuple[Path, dict[str, str]]:
        """A project whose Claude Code runs `mcpx serve` (and, with `hook`, mcpx's Elicitation hook), and the
        environment Claude Code runs in there."""
        project = self.root / name
        (project / ".claude").mkdir(parents=True)
        mcp = {"mcpServers": {SERVER: {"command": sys.executable, "args": ["-m", "mcpx", "serve"]}}}
        (project / "mcp.json").write_text(json.dumps(mcp))
        if hook:
            command = f"{sys.executable} -m mcpx claude hook"
            settings = {"hooks": {"Elicitation": [{"matcher": SERVER, "hooks": [
                {"type": "command", "command": command, "timeout": hook_timeout}]}]}}
            (project / ".claude" / "settings.json").write_text(json.dumps(settings))
        mcpx_env = {k: v for k, v in self.daemon.env.items() if k.startswith("MCPX_") or k == "PYTHONPATH"}
        return project, claude_env(self.root / f"{name}-home", self.model.base_url, mcpx_env)

    def start(self, name: str, script: list[Any], tools: list[str], hook: bool = True, hook_timeout: int = 600,
              ) -> Run:
        project, env = self.project(name, hook, hook_timeout)
        marker = self.model.script(name, script)
        proc = start_print(self.binary, f"{marker} go", project, env, allowed=tools,
                           mcp_config=project / "mcp.json")
        return Run(proc)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    binary = require_claude()
    root = tmp_path_factory.mktemp("claude-print")
    model = ScriptedClaudeModel(root / "model.log").start()
    servers = {"sdk": stdio("sdk_server.py"), "brief": {**stdio("sdk_server.py"), "elicit": {"ttl": f"{BRIEF}s"}}}
    daemon = make_daemon(root / "mcpx-home", {"servers": servers, "elicit": {"ttl": "10m"}})
    try:
        daemon.start()
        yield World(daemon, model, binary, root)
    finally:
        daemon.stop()
        model.stop()


def said(request: Request) -> Say:
    return Say("RESULT: " + request.last_tool_result())


def one_pending(world: World, since: set[str]) -> dict[str, Any]:
    return wait_for_sync(lambda: next((q for q in world.pending() if q["id"] not in since), None),
                         what="a new question pending")


def test_a_confirmation_in_print_mode_waits_for_the_person_and_the_run_ends_with_the_servers_result(
        world: World) -> None:
    before = {q["id"] for q in world.pending()}
    run = world.start("confirm", [lambda r: Call(DELETE, {}), said], [DELETE])
    try:
        q = one_pending(world, before)
        # the hook found it and told the person, on Claude Code's own stderr, where and how to answer it
        line = run.wait_line(q["id"])
        assert "sdk (via mcpx) asks you:" in line and "Really delete branch main?" in line
        assert f"mcpx elicit answer {q['id']}" in line
        assert q["session"].startswith("claude-") and q["audience"] == "human"
        # print mode alone would have cancelled it ~6 ms in: it is still the person's to answer seconds later
        opened = time.monotonic()
        wait_for_sync(lambda: time.monotonic() - opened >= HELD and q["id"] in {p["id"] for p in world.pending()},
                      what=f"{q['id']} still pending after {HELD} s")
        done = world.cli("elicit", "answer", q["id"], '{"confirm": true}')
        assert done.returncode == 0, done.stderr
        code, out = run.finish()
        assert code == 0, (out, run.lines[-10:])
        assert '\\"confirm\\": true' in out or '"confirm": true' in out, out  # the server's own result, reported
        run.wait_line(f"{q['id']} was answered (accept by person:cli)")
        records = world.audit(q["id"])
        answers = [r for r in records if r["kind"] == "elicit.answered"]
        assert [(a["data"]["action"], a["data"]["by"]) for a in answers] == [("accept", "person:cli")], records
        assert not [r for r in records if r["kind"] == "elicit.answered" and r["data"].get("action") == "cancel"]
    finally:
        run.stop()


def test_a_decline_reaches_the_server_as_a_decline(world: World) -> None:
    before = {q["id"] for q in world.pending()}
    run = world.start("decline", [lambda r: Call(DELETE, {}), said], [DELETE])
    try:
        q = one_pending(world, before)
        run.wait_line(q["id"])
        assert world.cli("elicit", "decline", q["id"]).returncode == 0
        code, out = run.finish()
        assert code == 0 and "decline" in out, out
        answers = [r for r in world.audit(q["id"]) if r["kind"] == "elicit.answered"]
        assert [(a["data"]["action"], a["data"]["by"]) for a in answers] == [("decline", "person:cli")]
    finally:
        run.stop()


def test_without_the_hook_print_mode_cancels_by_itself_and_mcpx_records_nothing_the_question_waits(
        world: World) -> None:
    before = {q["id"] for q in world.pending()}
    run = world.start("nohook", [lambda r: Call(DELETE, {}), said], [DELETE], hook=False)
    try:
        q = one_pending(world, before)
        code, out = run.finish()
        assert code == 0, out
        # the call came back early, saying where the question waits; nobody's cancel was recorded
        assert q["id"] in out and "waiting for an answer" in out, out
        assert q["id"] in {p["id"] for p in world.pending()}
        assert not [r for r in world.audit(q["id"]) if r["kind"] == "elicit.answered"]
        # the person answers later; the call, which went on in the daemon, ends with the server's result
        assert world.cli("elicit", "answer", q["id"], '{"confirm": false}').returncode == 0
        result = world.cli("task", "result", q["task"], "--timeout", str(PATIENCE))
        assert result.returncode == 0 and '"confirm": false' in result.stdout, result
    finally:
        run.stop()


def test_the_agents_question_is_not_handed_to_the_hook_the_agent_answers_it(world: World) -> None:
    before = {q["id"] for q in world.pending()}

    def answer(request: Request) -> Call:
        ids = request.question_ids()
        assert ids, request.last_tool_result()
        return Call(ANSWER_TOOL, {"id": ids[0], "action": "accept", "content": {"repo": "acme/widgets"}})

    def collect(request: Request) -> Call:
        task = next(t for r in reversed(request.tool_results()) if (t := _task_of(r)))
        return Call(RESULT_TOOL, {"task": task, "wait": True})

    run = world.start("agent", [lambda r: Call(NEED_REPO, {}), answer, collect, said],
                      [NEED_REPO, ANSWER_TOOL, RESULT_TOOL])
    try:
        q = one_pending(world, before)
        assert q["audience"] in ("agent", "agent-then-human"), q
        code, out = run.finish()
        assert code == 0 and "acme/widgets" in out, out
        assert not any(q["id"] in line for line in run.lines), run.lines  # the hook never took it
        answers = [r for r in world.audit(q["id"]) if r["kind"] == "elicit.answered"]
        assert [(a["data"]["action"], a["data"]["by"].split(":")[0]) for a in answers] == [("accept", "agent")], answers
    finally:
        run.stop()


def _task_of(text: str) -> str | None:
    from opencode.fake_model import TASK_ID

    m = TASK_ID.search(text)
    return m.group(0) if m else None


def test_two_sessions_each_hold_their_own_question(world: World) -> None:
    before = {q["id"] for q in world.pending()}
    first = world.start("one", [lambda r: Call(DELETE, {}), said], [DELETE])
    second = world.start("two", [lambda r: Call(DELETE, {}), said], [DELETE])
    try:
        both = wait_for_sync(lambda: (new := [q for q in world.pending() if q["id"] not in before])
                             and len(new) == 2 and new, what="both questions pending")
        assert len({q["session"] for q in both}) == 2 and all(q["session"].startswith("claude-") for q in both)
        # the same words in both: each run's hook told its own person of its own question
        line_one = first.wait_line("mcpx elicit answer elc-")
        line_two = second.wait_line("mcpx elicit answer elc-")
        ids = {q["id"] for q in both}
        mine = {run: next(i for i in ids if i in line) for run, line in ((1, line_one), (2, line_two))}
        assert mine[1] != mine[2]
        listed = world.cli_json("elicit", "list", "--session", next(q["session"] for q in both if q["id"] == mine[1]))
        assert [q["id"] for q in listed["elicitations"]] == [mine[1]]
        assert world.cli("elicit", "answer", mine[1], '{"confirm": true}').returncode == 0
        code, out = first.finish()
        assert code == 0 and '"confirm": true' in out.replace('\\"', '"'), out
        assert second.proc.poll() is None and mine[2] in {p["id"] for p in world.pending()}
        assert world.cli("elicit", "decline", mine[2]).returncode == 0
        code, out = second.finish()
        assert code == 0 and "decline" in out, out
    finally:
        first.stop()
        second.stop()


def test_a_sign_in_page_in_print_mode_waits_for_the_person(world: World) -> None:
    login = f"mcp__{SERVER}__sdk_login"
    before = {q["id"] for q in world.pending()}
    run = world.start("url", [lambda r: Call(login, {}), said], [login])
    try:
        q = one_pending(world, before)
        assert q["mode"] == "url"
        line = run.wait_line(q["id"])
        assert "Sign in to Example" in line and "https://example.com/login?x=1" in line, line
        assert world.cli("elicit", "answer", q["id"]).returncode == 0  # they signed in, and say so
        code, out = run.finish()
        assert code == 0 and "accept" in out, out
        answers = [r for r in world.audit(q["id"]) if r["kind"] == "elicit.answered"]
        assert [(a["data"]["action"], a["data"]["by"]) for a in answers] == [("accept", "person:cli")]
    finally:
        run.stop()


def test_past_the_hooks_timeout_claude_code_goes_on_and_the_question_still_waits(world: World) -> None:
    """Claude Code kills a hook at its timeout (install sets it from the longest TTL) and cancels by itself: mcpx
    records no answer, the call comes back early saying where the question waits, and it stays the person's."""
    before = {q["id"] for q in world.pending()}
    run = world.start("timeout", [lambda r: Call(DELETE, {}), said], [DELETE], hook_timeout=2)
    try:
        q = one_pending(world, before)
        run.wait_line(q["id"])  # the hook took it, then was stopped 2 s in
        code, out = run.finish()
        assert code == 0 and q["id"] in out and "waiting for an answer" in out, out
        assert q["id"] in {p["id"] for p in world.pending()}
        assert not [r for r in world.audit(q["id"]) if r["kind"] == "elicit.answered"]
        assert world.cli("elicit", "decline", q["id"]).returncode == 0
    finally:
        run.stop()


def test_a_question_that_expires_is_answered_cancel_never_decline(world: World) -> None:
    brief = f"mcp__{SERVER}__brief_delete_branch"
    before = {q["id"] for q in world.pending()}
    run = world.start("expiry", [lambda r: Call(brief, {}), said], [brief])
    try:
        q = one_pending(world, before)
        run.wait_line(q["id"])
        code, out = run.finish()
        assert code == 0 and "cancel" in out and "decline" not in out, out
        run.wait_line(f"{q['id']} was answered (cancel by")
        records = world.audit(q["id"])
        assert [r["kind"] for r in records if r["kind"].startswith("elicit.")][:2] == ["elicit.open", "elicit.expired"]
    finally:
        run.stop()
