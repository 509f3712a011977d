"""Codex CLI's interactive interface with mcpx: a server's question appears in Codex's own form, and what the person
does there is their answer (`person:mcp-client`): typed content accepted, Esc a cancel; one answered in mcpx first
ends the call with that answer, and nothing picked in Codex's form after it is recorded.

The real Codex 0.169.0 in a tmux of the test's own (`codex --no-daemon`: its TUI otherwise starts a background app
server that outlives it), against the scripted Responses API of tests/codex/fake_model.py, with mcpx installed by
`mcpx codex install --scope user`. docs/codex.md is what this checks.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codex.fake_model import Call, ScriptedCodexModel
from codex.harness import codex_env, install, provider, require_codex
from harness import PATIENCE, wait_for_sync
from host_world import Person, elicit_daemon, said
from opencode.tui import Tmux

pytestmark = [pytest.mark.timeout(300)]

NEED_REPO, DELETE = "mcp__mcpx__sdk_need_repo", "mcp__mcpx__sdk_delete_branch"
PROMPT = "Ask Codex to do anything"
FIELD = "Type your answer"  # Codex's form for a text field, focused


@pytest.fixture(scope="module")
def person(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Person]:
    daemon = elicit_daemon(tmp_path_factory.mktemp("codex-tui"))
    try:
        daemon.start()
        yield Person(daemon)
    finally:
        daemon.stop()


def test_the_persons_answer_in_codexs_form_is_theirs_one_given_in_mcpx_first_wins_and_esc_is_a_cancel(person: Person,
                                                                       tmp_path_factory: pytest.TempPathFactory,
                                                                       ) -> None:
    binary = require_codex()
    root = tmp_path_factory.mktemp("codex-tui-run")
    model = ScriptedCodexModel(root / "model.log").start()
    tui: Tmux | None = None
    try:
        project, home = root / "project", root / "home"
        project.mkdir()
        (home / ".codex").mkdir(parents=True)
        env = codex_env(home, {k: v for k, v in person.daemon.env.items() if k.startswith("MCPX_")})
        env["TERM"] = "xterm-256color"
        (home / ".codex" / "config.toml").write_text(provider(model.base_url, project))
        install(home, project, env, approve=True)
        marker = model.script("tui", [lambda r: Call(NEED_REPO, {}), lambda r: Call(DELETE, {}),
                                      lambda r: Call(NEED_REPO, {}), said])
        tui = Tmux(150, 45).start([str(binary), "--no-daemon"], project, env)
        tui.wait_text(PROMPT, timeout=PATIENCE)
        tui.type(f"{marker} go")
        tui.wait_text(f"{marker} go")
        tui.keys("Enter")
        # the first question: Codex's own form, with the server named as mcpx passes it, and a field to type in
        tui.wait_text("sdk (via mcpx) asks: Which repository should this go in?", FIELD)
        first = wait_for_sync(lambda: next(iter(person.pending()), None), what="the first question pending")
        tui.type("acme/widgets")
        tui.wait_text("acme/widgets")
        tui.keys("Enter")
        wait_for_sync(lambda: person.answered(first["id"]), what="the first answer recorded")
        assert person.answered(first["id"]) == [("accept", "person:mcp-client")]
        assert first["session"].startswith("codex-")  # Codex's own session, as its _meta names it
        # the second, answered in mcpx first (a terminal): the call ends with that answer; Codex keeps its form up
        # (it does not take it down when mcpx withdraws the question), and what the person picks there is not recorded
        tui.wait_text("Really delete branch main?", "False")
        second = wait_for_sync(lambda: next((q for q in person.pending() if q["id"] != first["id"]), None),
                               what="the second question pending")
        assert person.cli("elicit", "answer", second["id"], '{"confirm": true}').returncode == 0
        tui.wait_text('"confirm": true}')  # the call's result, on Codex's screen, under the form still up
        tui.keys("Enter")
        # the third: Esc, which Codex sends as cancel — the person's own, recorded as what it is
        tui.wait_text("Which repository should this go in?", FIELD)
        third = wait_for_sync(lambda: next((q for q in person.pending() if q["id"] not in (first["id"],
                                                                                            second["id"])), None),
                              what="the third question pending")
        tui.keys("Escape")
        wait_for_sync(lambda: person.answered(third["id"]), what="the third answer recorded")
        assert person.answered(third["id"]) == [("cancel", "person:mcp-client")]
        assert person.answered(second["id"]) == [("accept", "person:cli")]
        assert first["session"] == second["session"] == third["session"]
        # the request that carries the third call's result (Codex may also send one of its own, with no tools,
        # beside the turn's: counting requests would read the wrong one)
        requests = model.wait_for("tui", lambda rs: any(len(r.tool_results()) >= 3 for r in rs), PATIENCE)
        last = next(r for r in requests if len(r.tool_results()) >= 3)
        results = [r.replace("\\", "") for r in last.tool_results()]  # the server's result, as JSON text
        assert '"repo": "acme/widgets"' in results[0] and '"confirm": true' in results[1], results
        assert '"action": "cancel"' in results[2], results
    finally:
        if tui is not None:
            tui.stop()
        model.stop()
