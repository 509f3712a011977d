"""A server's question passed through `mcpx serve` to the real Claude Code 2.1.332 TUI, in both eras: the test plays
the person at Claude Code's own form (tmux), and judges by the screen, by what the upstream reported it received
(as the scripted model is sent it: the tool's result in the legacy era, the task's notification in the modern era) and
by what the daemon recorded (GET /v1/elicit/{id},
/v1/audit on its unix socket).

Two TUIs run for the module, each in a project of its own with a HOME of its own and `mcpx serve` as its MCP server:
one in the modern era (Claude Code sends `server/discover` and `mcpx serve` answers it, declaring the Tasks extension;
Claude Code declares it on each `tools/call`, so a call that waits on a question is mcpx's task, `tsk-…`: see
docs/mcp.md, "A call as a task"), and one in the legacy era. mcpx has no setting that refuses `server/discover` on its
surface, so the legacy TUI is made so on the client side, by Claude Code's own `MCP_PROTOCOL_NEGOTIATION=legacy` (read
from its binary: 'legacy' or 'auto'), with which it sends `initialize` (2025-11-25) and takes the question as an
`elicitation/create` request mid-call.

Behind mcpx, three upstreams: `sdk` (tests/peers/sdk_server.py: it answers `server/discover` but asks with plain
`ctx.elicit`, so mcpx calls it in the legacy era), `resolver` (sdk_resolver.py: modern, asks by `input_required`)
and `legacy` (sdk_legacy.py: handshake-only). Each tool reports exactly what it got.

Facts about Claude Code these tests pin (seen here; the reports of issues 27 and 28 say how):
- the form: 'MCP server “mcpx” requests your input', the message as mcpx passed it ('sdk (via mcpx) asks: ...'),
  the fields; typing fills the focused field, Enter moves to Accept, Enter accepts; Right on the actions moves to
  Decline. In the legacy era Esc cancels ('Esc to cancel').
- modern era (a task): the model's tool result is not the server's but Claude Code's word that the call 'started
  server-side task tsk-…' and was moved to the background; the model's turn goes on (here: ends), the screen says
  '1 MCP task still running', and Claude Code polls `tasks/get` and shows the form for the task's question. Its
  hint says 'Esc to answer later': Esc takes the form down and answers nothing (mcpx records nothing, the question
  stays open in mcpx and answerable there); the footer says the task 'needs your input', and Down, Enter (the task's
  page, naming the server's task and its status message) and Enter ('Enter to answer') bring the form back. Once the
  task ends, Claude Code shows 'MCP task tsk-… (mcpx/TOOL) completed.' and sends the model a new request with a
  `<task-notification>` whose `<result>` is the server's result (its structured content, as a tool result's).
  There is no 'Fulfilling input required' line under the call (that was the `input_required` retry's, which a call
  as a task never gets).
- a question answered elsewhere first (`mcpx elicit answer`): in the legacy era mcpx withdraws its request
  (`notifications/cancelled`) and Claude Code takes its form down; in the modern era the task moves on in mcpx
  (completed), but Claude Code, which does not read the task again while its form is up, keeps the form up (a
  quarter of an hour, by hand). What the person then answers there is not recorded (mcpx ignores a `tasks/update`
  for a question no longer open), the form goes, and the model is notified of the server's result, with the first
  answer.
- `/clear` starts a new Claude Code session (a new transcript) but keeps its MCP servers running with the session
  id they were started with: mcpx's session of the TUI stays `claude-<the first session id>`.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from claude.fake_model import Call, Request, Say, ScriptedClaudeModel
from claude.harness import (
    FORM,
    Form,
    claude_env,
    clear,
    mcpx_entry,
    prompt,
    require_claude,
    seed_home,
    start_tui,
    transcripts,
    write_mcp_config,
)
from gateway_helpers import stdio
from harness import PATIENCE, ApiProbe, Daemon, make_daemon, wait_for_sync
from opencode.tui import Tmux, flat

# two Claude Code TUIs and one daemon for the module, on one worker
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("claude-tui")]

SERVERS = {"sdk": stdio("sdk_server.py"), "resolver": stdio("sdk_resolver.py"), "legacy": stdio("sdk_legacy.py")}
ERAS = ("modern", "legacy")
ROUND = "Fulfilling input required by 'tools/call'"  # an input_required retry's line, which a task never shows
RUNNING = "1 MCP task still running"  # after the turn that made the call a task, while the task runs
NEEDS_INPUT = "needs your input"  # the footer's word on a task whose question the person put off (Esc)
TASK_STARTED = re.compile(r'MCP tool "mcpx/(\w+)" started server-side task (tsk-[0-9a-f]+)\.')
REPO_WORDS = "sdk (via mcpx) asks: Which repository should this go in?"


@dataclass
class Host:
    """One Claude Code TUI, in a project and a HOME of its own, with `mcpx serve` as its MCP server `mcpx`."""

    era: str
    tui: Tmux
    home: Path
    project: Path
    session: str = ""  # mcpx's session of it: claude-<the session id its MCP servers were started with>


@dataclass
class World:
    daemon: Daemon
    api: ApiProbe
    model: ScriptedClaudeModel
    hosts: dict[str, Host]

    def question(self, eid: str) -> dict[str, Any]:
        return self.api.json("GET", f"/v1/elicit/{eid}")

    def audit(self, eid: str) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.api.json("GET", f"/v1/audit?elicit={eid}")["records"]
        return records

    def pending(self, session: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.api.json("GET", f"/v1/elicit?session={session}")["elicitations"]
        return found

    def person(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`mcpx …` run as the person at a terminal: from this test process, in an environment with no agent's
        mark (tests/harness.py's base_env drops them; Claude Code's CLAUDECODE=1 is never in it)."""
        assert "CLAUDECODE" not in self.daemon.env and "AGENT" not in self.daemon.env
        return self.daemon.cli(*args)


def tool(server: str, name: str) -> str:
    return f"mcp__mcpx__{server}_{name}"


ALLOWED = [tool(s, t) for s in SERVERS for t in ("need_repo", "delete_branch", "file_issue")]


def start_host(world_root: Path, era: str, daemon: Daemon, model: ScriptedClaudeModel) -> Host:
    root = world_root / era
    project, home = root / "project", root / "home"
    project.mkdir(parents=True)
    seed_home(home, [project])
    config = write_mcp_config(root / "mcp.json", {"mcpx": mcpx_entry(daemon.env)})
    # the legacy era is Claude Code's own choice here: mcpx serve always answers server/discover
    extra = {"MCP_PROTOCOL_NEGOTIATION": "legacy"} if era == "legacy" else {}
    tui = start_tui(require_claude(), project, claude_env(home, model.base_url, extra), allowed=ALLOWED,
                    mcp_config=config)
    host = Host(era, tui, home, project)
    try:
        # a first conversation, so that the session Claude Code started with has its transcript: its name is the
        # session id that mcpx serve was started with, and keeps (see clear())
        marker = model.script(f"hello-{era}", [lambda r: Say("hello.")])
        prompt(tui, f"{marker} say hello")
        tui.wait_text("hello.")
        (first,) = wait_for_sync(lambda: transcripts(home), what=f"the {era} TUI's first transcript")
        host.session = f"claude-{first}"
    except BaseException:
        tui.stop()
        raise
    return host


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_claude()
    root = tmp_path_factory.mktemp("claude-tui")
    mcpx_home = root / "mcpx-home"
    mcpx_home.mkdir()
    with make_daemon(mcpx_home, {"servers": SERVERS}) as daemon:
        # every server's first start and era probe, now, not under a test's first question
        listed = daemon.cli("tools")
        assert listed.returncode == 0, listed.stderr
        model = ScriptedClaudeModel(root / "model-requests.jsonl").start()
        hosts: dict[str, Host] = {}
        try:
            for era in ERAS:
                hosts[era] = start_host(root, era, daemon, model)
            yield World(daemon, ApiProbe(daemon.socket), model, hosts)
        finally:
            for host in hosts.values():
                host.tui.stop()
            model.stop()


# ---- one question, from the prompt to the form


def ask(world: World, era: str, name: str, call: str) -> tuple[Host, dict[str, Any], Form]:
    """A fresh conversation in the era's TUI whose model calls `call` once: the host, the question it raised, and
    Claude Code's form, once it shows it."""
    host = world.hosts[era]
    clear(host.tui)
    before = {q["id"] for q in world.pending(host.session)}  # none, unless a test before failed half-way
    marker = world.model.script(name, [lambda r: Call(call, {}), lambda r: Say("done.")])
    prompt(host.tui, f"{marker} do the task")
    form = Form(host.tui)
    new = wait_for_sync(lambda: [q for q in world.pending(host.session) if q["id"] not in before],
                        what=f"the question of {name}")
    assert len(new) == 1, new
    return host, new[0], form


def result(world: World, era: str, name: str) -> dict[str, Any]:
    """What the upstream reported it received, as the model was sent it: in the legacy era the tool's result (its
    turn 1), in the modern era the result in the notification of the call's task, once it ended."""
    if era == "legacy":
        return reported(tool_result(world, name))
    notice = notified(world, name)
    assert notice.get("status") == "completed", notice
    return reported(notice["result"])


def tool_result(world: World, name: str) -> str:
    """The text of the tool's result the model was sent, at its turn 1."""
    requests = waited(world, name, lambda rs: any(r.tools and r.turn >= 1 for r in rs), "the tool's result")
    return next(r for r in requests if r.tools and r.turn == 1).last_tool_result()


def task_of(world: World, name: str) -> str:
    """The modern era's tool result: Claude Code's word that the call is a task of the server's, and which (mcpx's
    id, tsk-…), in place of the server's result."""
    text = tool_result(world, name)
    started = TASK_STARTED.search(text)
    assert started is not None, text
    return started.group(2)


def notified(world: World, name: str) -> dict[str, str]:
    """The `<task-notification>` Claude Code sent the model, in a request of its own, once the call's task ended."""
    requests = waited(world, name, lambda rs: any(r.task_notifications() for r in rs), "a task notification")
    notices = next(r for r in requests if r.task_notifications()).task_notifications()
    assert len(notices) == 1, notices
    return notices[0]


def waited(world: World, name: str, predicate: Callable[[list[Request]], bool], what: str) -> list[Request]:
    try:
        return world.model.wait_for(name, predicate, PATIENCE)
    except AssertionError as exc:  # what the person would have seen
        screens = "\n".join(f"--- the {era} TUI:\n{h.tui.screen()}" for era, h in world.hosts.items())
        raise AssertionError(f"{what}: {exc}\n{screens}") from None


def reported(text: str) -> dict[str, Any]:
    """The server's report, from the text Claude Code gives the model: the tool's structured result when it has
    one ({"result": "<the report>"}), else its text."""
    value = json.loads(text)
    if isinstance(value, dict) and set(value) == {"result"}:
        value = json.loads(value["result"])
    assert isinstance(value, dict), text
    return value


def answered(world: World, eid: str) -> dict[str, Any]:
    """The question's answer as the daemon holds it, once it has one."""
    def answer() -> Any:
        return world.question(eid).get("answer")
    found: dict[str, Any] = wait_for_sync(answer, what=f"an answer to {eid}")
    return found


def answers_recorded(world: World, eid: str) -> list[dict[str, Any]]:
    return [r["data"] for r in world.audit(eid) if r["kind"] == "elicit.answered"]


# ---- 1 and 2: accept, decline, cancel or put off, in both eras, before modern, legacy and legacy-only upstreams


@pytest.mark.parametrize(("era", "server"), [("modern", "sdk"), ("modern", "resolver"), ("modern", "legacy"),
                                             ("legacy", "sdk"), ("legacy", "resolver"), ("legacy", "legacy")])
def test_a_value_typed_into_claude_codes_form_reaches_the_server_exactly(world: World, era: str, server: str) -> None:
    name = f"accept-{era}-{server}"
    host, q, form = ask(world, era, name, tool(server, "need_repo"))
    text = flat(form.screen)
    words = REPO_WORDS.replace("sdk", server, 1)
    assert "(via mcpx) asks:" in text and words in text, form.screen
    assert "MCP server \u201cmcpx\u201d requests your input" in text
    assert (q["server"], q["tool"], q["session"]) == (server, "need_repo", host.session)
    assert ROUND not in text
    if era == "modern":
        # the call is mcpx's task: the model was told so in place of a result, and the TUI shows it running
        assert task_of(world, name) == q["task"]
        host.tui.wait_text(RUNNING, "Esc to answer later")
    else:
        assert "Esc to cancel" in text and "MCP task" not in text
    form.type("Repo", "octo/hello-world")
    form.accept()
    assert result(world, era, name) == {"action": "accept", "data": {"repo": "octo/hello-world"}}
    answer = answered(world, q["id"])
    assert (answer["action"], answer["by"], answer["content"]) == ("accept", "person:mcp-client",
                                                                  {"repo": "octo/hello-world"})
    assert [(a["action"], a["by"]) for a in answers_recorded(world, q["id"])] == [("accept", "person:mcp-client")]
    screen = form.gone()
    if era == "modern":
        host.tui.wait_text(f"MCP task {q['task']} (mcpx/{server}_need_repo) completed.")
    assert ROUND not in flat(screen)


@pytest.mark.parametrize("era", ERAS)
def test_decline_in_claude_codes_form_is_recorded_as_decline_and_the_server_hears_decline(world: World,
                                                                                         era: str) -> None:
    name = f"decline-{era}"
    _, q, form = ask(world, era, name, tool("sdk", "need_repo"))
    form.decline()
    assert result(world, era, name) == {"action": "decline", "data": None}
    answer = answered(world, q["id"])
    assert (answer["action"], answer["by"], answer.get("content")) == ("decline", "person:mcp-client", None)
    assert [(a["action"], a["by"]) for a in answers_recorded(world, q["id"])] == [("decline", "person:mcp-client")]
    form.gone()


def test_esc_in_claude_codes_form_cancels_which_is_not_a_decline(world: World) -> None:
    """The legacy era: the question came as `elicitation/create`, which Esc answers `cancel`."""
    name = "cancel-legacy"
    _, q, form = ask(world, "legacy", name, tool("sdk", "need_repo"))
    form.type("Repo", "typed/then-dropped")
    form.cancel()
    assert result(world, "legacy", name) == {"action": "cancel", "data": None}
    answer = answered(world, q["id"])
    assert (answer["action"], answer["by"], answer.get("content")) == ("cancel", "person:mcp-client", None)
    form.gone()


def test_modern_era_esc_puts_the_question_off_it_stays_open_in_mcpx_and_the_form_comes_back(world: World) -> None:
    """The modern era: the question is the task's, and Esc answers nothing ('Esc to answer later'). The question
    stays open in mcpx, the person brings the form back from the task's page, puts it off again and answers in
    mcpx: the task ends with that answer, and the model is told."""
    name = "later-modern"
    host, q, form = ask(world, "modern", name, tool("sdk", "need_repo"))
    assert "Esc to answer later" in flat(form.screen), form.screen
    task = task_of(world, name)
    assert task == q["task"]
    form.type("Repo", "typed/then-dropped")
    form.cancel()
    form.gone()
    host.tui.wait_text(NEEDS_INPUT)
    # back to the form: Down to the footer's task, Enter for its page, Enter to answer
    host.tui.keys("Down")
    host.tui.wait_text(NEEDS_INPUT, "enter to view tasks")
    host.tui.keys("Enter")
    page, _ = host.tui.wait_text("Server task:", task, "Enter to answer")
    # the page's status is mcpx's statusMessage: the call waits for this question
    assert f"waits for an answer to {q['id']}" in flat(page), page
    host.tui.keys("Enter")
    again = Form(host.tui, REPO_WORDS, "Esc to answer later")
    assert "typed/then-dropped" not in again.screen  # what was typed before Esc went with the form
    # all the while, nothing answered: the question is open in mcpx, nothing recorded
    assert world.question(q["id"]).get("answer") is None
    assert [q2["id"] for q2 in world.pending(host.session)] == [q["id"]]
    assert answers_recorded(world, q["id"]) == []
    assert not any(r.task_notifications() for r in world.model.of(name))
    again.cancel()
    again.gone()
    host.tui.wait_text(NEEDS_INPUT)
    done = world.person("elicit", "answer", q["id"], "repo=from/the-terminal")
    assert done.returncode == 0, done.stdout + done.stderr
    # Claude Code's next tasks/get sees the task completed, with the terminal's answer
    assert result(world, "modern", name) == {"action": "accept", "data": {"repo": "from/the-terminal"}}
    host.tui.wait_text(f"MCP task {task} (mcpx/sdk_need_repo) completed.")
    assert [(a["action"], a["by"]) for a in answers_recorded(world, q["id"])] == [("accept", "person:cli")]
    assert "typed/then-dropped" not in json.dumps([r.messages[-1] for r in world.model.of(name)])


# ---- 3: the person answers in mcpx first, while Claude Code's form is up


def test_legacy_era_an_answer_given_in_mcpx_first_wins_and_claude_code_takes_its_form_down(world: World) -> None:
    name = "first-legacy"
    _, q, form = ask(world, "legacy", name, tool("sdk", "need_repo"))
    done = world.person("elicit", "answer", q["id"], "repo=from/the-terminal")
    assert done.returncode == 0, done.stdout + done.stderr
    # mcpx withdraws its elicitation/create (notifications/cancelled) and Claude Code honours it: the form goes, and
    # the call ends with the server's result, the terminal's answer in it
    form.gone()
    assert result(world, "legacy", name) == {"action": "accept", "data": {"repo": "from/the-terminal"}}
    assert [(a["action"], a["by"]) for a in answers_recorded(world, q["id"])] == [("accept", "person:cli")]


def test_modern_era_an_answer_given_in_mcpx_first_wins_and_claude_codes_form_stays_up_until_answered(
        world: World) -> None:
    name = "first-modern"
    host, q, form = ask(world, "modern", name, tool("sdk", "need_repo"))
    task = task_of(world, name)
    done = world.person("elicit", "answer", q["id"], "repo=from/the-terminal")
    assert done.returncode == 0, done.stdout + done.stderr
    # the server has the terminal's answer and has finished the call: the task is completed in mcpx...
    finished = world.person("task", "result", q["task"], "--json", "--timeout", str(PATIENCE))
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "from/the-terminal" in finished.stdout
    # ...while Claude Code, which does not read the task again while its form is up, still shows the form, and the
    # task as running; the model has not been told
    screen = host.tui.screen()
    assert FORM in screen and REPO_WORDS in flat(screen) and RUNNING in flat(screen), screen
    assert not any(r.task_notifications() for r in world.model.of(name))
    # the person answers there too, later: the form goes, their answer is recorded nowhere (mcpx ignores a
    # tasks/update for a question no longer open), and the model is told the task's result, with the first answer
    form.type("Repo", "from/the-form")
    form.accept()
    assert result(world, "modern", name) == {"action": "accept", "data": {"repo": "from/the-terminal"}}
    form.gone()
    host.tui.wait_text(f"MCP task {task} (mcpx/sdk_need_repo) completed.")
    assert "from/the-form" not in json.dumps([r.messages[-1] for r in world.model.of(name)])
    assert [(a["action"], a["by"]) for a in answers_recorded(world, q["id"])] == [("accept", "person:cli")]


# ---- 4: two Claude Code sessions asking at once


def test_two_claude_code_sessions_each_get_their_own_question_and_session(world: World) -> None:
    first, second = world.hosts["modern"], world.hosts["legacy"]
    assert first.session != second.session
    for host in (first, second):
        clear(host.tui)
    markers = {
        "modern": world.model.script("both-modern", [lambda r: Call(tool("sdk", "need_repo"), {}),
                                                     lambda r: Say("done.")]),
        "legacy": world.model.script("both-legacy", [lambda r: Call(tool("legacy", "delete_branch"), {}),
                                                     lambda r: Say("done.")]),
    }
    prompt(first.tui, f"{markers['modern']} do the task")
    prompt(second.tui, f"{markers['legacy']} do the task")
    one = Form(first.tui, REPO_WORDS)
    two = Form(second.tui, "legacy (via mcpx) asks: Really delete branch main?")
    # each TUI shows only its own question
    assert "Really delete branch main?" not in one.screen and "Which repository" not in two.screen
    # each question is in its Claude Code session's mcpx session, and a session's listing holds only its own
    mine = wait_for_sync(lambda: world.pending(first.session), what="the modern TUI's question")
    theirs = wait_for_sync(lambda: world.pending(second.session), what="the legacy TUI's question")
    assert [(q["server"], q["tool"], q["session"]) for q in mine] == [("sdk", "need_repo", first.session)]
    assert [(q["server"], q["tool"], q["session"]) for q in theirs] == [("legacy", "delete_branch", second.session)]
    # the session is Claude Code's own id: the first transcript of each HOME is named after it
    for host in (first, second):
        assert host.session == f"claude-{transcripts(host.home)[0]}"
    # each answers its own: the modern one declines (Esc would only put its task's question off), the legacy one
    # cancels
    one.decline()
    two.cancel()
    assert result(world, "modern", "both-modern")["action"] == "decline"
    assert result(world, "legacy", "both-legacy")["action"] == "cancel"
    assert [(a["action"], a["by"]) for a in answers_recorded(world, mine[0]["id"])] == [
        ("decline", "person:mcp-client")]
    assert [(a["action"], a["by"]) for a in answers_recorded(world, theirs[0]["id"])] == [
        ("cancel", "person:mcp-client")]


def test_after_clear_the_question_keeps_the_session_mcpx_serve_was_started_in(world: World) -> None:
    """/clear starts a new Claude Code session, and a new transcript; mcpx serve, started once with the first
    session's CLAUDE_CODE_SESSION_ID, keeps naming its questions after that one."""
    host, q, form = ask(world, "modern", "after-clear", tool("sdk", "need_repo"))
    current = transcripts(host.home)[-1]
    assert f"claude-{current}" != host.session, "a /clear before each test: Claude Code's session is a newer one"
    assert q["session"] == host.session
    assert world.pending(f"claude-{current}") == []
    form.decline()
    assert result(world, "modern", "after-clear")["action"] == "decline"
