"""`codex exec` (Codex CLI with nobody at its screen) with mcpx: nothing it replies for a person's question is recorded
as the person's; the question waits for the person at mcpx's doors, and the agent answers only its own.

The real Codex 0.169.0 binary, headless, against the scripted Responses API of tests/codex/fake_model.py, with mcpx
installed by `mcpx codex install --scope user` in a private CODEX_HOME; the upstream is the mcp SDK peer that elicits
(tests/peers/sdk_server.py); the test plays the person from a terminal (`mcpx elicit answer`). `codex exec` answers
every question `decline` within milliseconds, shown to nobody: mcpx knows it is `codex exec` from the call's own
`_meta` (mcpx/shared/hostenv.py). docs/codex.md is what this checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from codex.fake_model import Call, ScriptedCodexModel
from codex.harness import codex_env, exec_args, install, provider, require_codex
from harness import PATIENCE, read_log, stop_process, wait_for_sync
from host_world import GRACE, HeadlessHost, agent_answers, finish, host_daemon, said, two_sessions_one_expiring

# no xdist_group: a test needs only the module's daemon and scripted model, which each worker starts for itself
pytestmark = [pytest.mark.timeout(300)]

NS = "mcp__mcpx__"  # Codex's namespace for the entry mcpx, as its logs name the tools
DELETE, BRIEF_DELETE = f"{NS}sdk_delete_branch", f"{NS}brief_delete_branch"

SESSION = re.compile(r"session id: ([0-9a-f-]{36})")


@dataclass
class World(HeadlessHost):
    binary: Path

    def prepare(self, home: Path, project: Path) -> dict[str, str]:
        (home / ".codex").mkdir(parents=True)
        env = codex_env(home, self.mcpx_env())
        (home / ".codex" / "config.toml").write_text(provider(self.model.base_url, project))
        install(home, project, env, approve=True)
        return env

    def argv(self, prompt: str) -> list[str]:
        return exec_args(self.binary, prompt)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    binary = require_codex()
    root = tmp_path_factory.mktemp("codex-exec")
    model = ScriptedCodexModel(root / "model.log").start()
    with host_daemon(root, model) as daemon:
        yield World(daemon, model, root, binary)


def test_the_persons_question_waits_for_the_person_and_codexs_own_decline_is_nobodys(world: World) -> None:
    before = {q["id"] for q in world.pending()}
    proc = world.start("person", [lambda r: Call(DELETE, {}), said])
    try:
        code, out, err = finish(proc)
        assert code == 0, err[-3000:]
        q = next(q for q in world.pending() if q["id"] not in before)
        assert q["audience"] == "human" and q["message"] == "Really delete branch main?"
        # the session is Codex's own: the one `codex exec` names on its stderr (and `codex resume` takes)
        session = SESSION.search(err)
        assert session is not None and q["session"] == f"codex-{session.group(1)}", (q["session"], err[:600])
        # Codex was asked, answered decline unseen, and mcpx recorded none of it: the call came back early saying
        # where the question waits, and the model read that
        wait_for_sync(lambda: "the unattended host replied 'decline' to " + q["id"] in read_log(world.daemon.home),
                      what="the daemon's note of codex exec's decline")
        assert world.answered(q["id"]) == []
        assert q["id"] in out and "waiting for an answer" in out, out
        # and it came within the grace of that decline (Codex is asked as the question opens, and declines within
        # milliseconds), with room for a loaded machine: not at the call's next 10 s heartbeat, as when nothing woke
        # the call on an unattended host's reply (issue 40)
        opened = datetime.fromisoformat(q["created"]).timestamp()
        early = next(r for r in world.model.of("person") if r.tool_results())
        assert early.wall - opened < GRACE + 5, (early.wall - opened, q["created"])
        # the skill `mcpx codex install` put in CODEX_HOME was listed to the model
        assert "mcpx-elicitation" in world.model.of("person")[0].instructions
        # the person answers later, from a terminal; the call, which went on in the daemon, ends with it
        assert world.cli("elicit", "answer", q["id"], '{"confirm": true}').returncode == 0
        result = world.cli("task", "result", q["task"], "--timeout", str(PATIENCE))
        assert result.returncode == 0 and '"confirm": true' in result.stdout, result
        assert world.answered(q["id"]) == [("accept", "person:cli")]
    finally:
        stop_process(proc)


def test_the_agents_question_is_the_agents_to_answer(world: World) -> None:
    seen: list[str] = []
    proc = world.start("agent", agent_answers(NS, seen))
    try:
        code, out, err = finish(proc)
        assert code == 0 and "acme/widgets" in out, (out, err[-2000:])
        assert [(a, by.split(":")[0]) for a, by in world.answered(seen[0])] == [("accept", "agent")]
    finally:
        stop_process(proc)


def test_two_runs_are_two_sessions_and_an_unanswered_question_expires_as_cancel(world: World) -> None:
    first = world.start("one", [lambda r: Call(DELETE, {}), said])
    second = world.start("two", [lambda r: Call(BRIEF_DELETE, {}), said])
    try:
        sessions = two_sessions_one_expiring(world, world.model, first, second)
        assert all(s.startswith("codex-") for s in sessions)  # each Codex's own session
    finally:
        stop_process(first)
        stop_process(second)
