"""Gemini CLI (`gemini -p`, headless) with mcpx: it cannot show a question (it declares no elicitation), so the
person's questions reach the person through mcpx's doors and the call returns early saying where the question waits;
the agent answers its own questions through mcpx_elicit_answer, and never the person's.

The real Gemini CLI 0.61.0, against the scripted Gemini API of tests/gemini/fake_model.py, with mcpx installed by
`mcpx gemini install --scope user` in a private HOME; the upstream is the mcp SDK peer that elicits
(tests/peers/sdk_server.py); the test plays the person from a terminal (`mcpx elicit answer`). docs/gemini.md is what
this checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gemini.fake_model import Call, Request, ScriptedGeminiModel
from gemini.harness import gemini_env, headless, prepare, require_gemini
from harness import PATIENCE, stop_process
from host_world import HeadlessHost, agent_answers, finish, host_daemon, said, two_sessions_one_expiring

# no xdist_group: a test needs only the module's daemon and scripted model, which each worker starts for itself
pytestmark = [pytest.mark.timeout(300)]

PREFIX = "mcp_mcpx_"  # Gemini CLI's names for the entry mcpx's tools
DELETE, BRIEF_DELETE = f"{PREFIX}sdk_delete_branch", f"{PREFIX}brief_delete_branch"
ANSWER_TOOL = f"{PREFIX}mcpx_elicit_answer"



@dataclass
class World(HeadlessHost):
    command: list[str]

    def prepare(self, home: Path, project: Path) -> dict[str, str]:
        env = gemini_env(home, self.model.base_url, self.mcpx_env())
        prepare(home, project, env)
        return env

    def argv(self, prompt: str) -> list[str]:
        return headless(self.command, prompt)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    command = require_gemini()
    root = tmp_path_factory.mktemp("gemini")
    model = ScriptedGeminiModel(root / "model.log").start()
    with host_daemon(root, model) as daemon:
        yield World(daemon, model, root, command)


def test_the_persons_question_waits_at_mcpxs_doors_and_the_agent_cannot_answer_it(world: World) -> None:
    seen: list[str] = []

    def try_to_answer(request: Request) -> Call:  # an agent that oversteps: mcpx refuses it
        ids = request.question_ids()
        assert ids and "waiting for an answer" in request.last_tool_result(), request.last_tool_result()
        seen.append(ids[0])
        return Call(ANSWER_TOOL, {"id": ids[0], "action": "accept", "content": {"confirm": True}})

    proc = world.start("person", [lambda r: Call(DELETE, {}), try_to_answer, said])
    try:
        code, out, err = finish(proc)
        assert code == 0, err[-3000:]
        eid = seen[0]
        assert "is for the person, not the agent" in out, out
        q = next(q for q in world.pending() if q["id"] == eid)
        assert q["audience"] == "human" and q["message"] == "Really delete branch main?"
        assert world.answered(eid) == []
        # the skill `mcpx gemini install` put in ~/.gemini/skills was offered to the model
        assert "mcpx-elicitation" in world.model.of("person")[0].instructions
        # the person answers from a terminal; the call, which went on in the daemon, ends with their answer
        assert world.cli("elicit", "answer", eid, '{"confirm": true}').returncode == 0
        result = world.cli("task", "result", q["task"], "--timeout", str(PATIENCE))
        assert result.returncode == 0 and '"confirm": true' in result.stdout, result
        assert world.answered(eid) == [("accept", "person:cli")]
    finally:
        stop_process(proc)


def test_the_agents_question_is_answered_by_the_agent(world: World) -> None:
    seen: list[str] = []
    proc = world.start("agent", agent_answers(PREFIX, seen))
    try:
        code, out, err = finish(proc)
        assert code == 0 and "acme/widgets" in out, (out, err[-2000:])
        assert [(a, by.split(":")[0]) for a, by in world.answered(seen[0])] == [("accept", "agent")]
    finally:
        stop_process(proc)


def test_two_projects_are_two_sessions_and_an_unanswered_question_expires_as_cancel(world: World) -> None:
    first = world.start("one", [lambda r: Call(DELETE, {}), said])
    second = world.start("two", [lambda r: Call(BRIEF_DELETE, {}), said])
    try:
        # Gemini CLI names no session of its own: each project (its working folder) is one, as mcpx names it
        two_sessions_one_expiring(world, world.model, first, second)
    finally:
        stop_process(first)
        stop_process(second)
