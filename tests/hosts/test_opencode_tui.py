"""The person answers in mcpx's own dialog in opencode's TUI: the real opencode 1.18.33 TUI in tmux, set up by
`mcpx opencode install` (opencode.json and tui.json), the scripted model deciding its tool calls, the mcp SDK peer
asking (tests/peers/sdk_server.py), and the test playing the person at the keyboard, judged by what the screen
shows. What the dialog is made of is checked key by key in plugin/opencode/test (form, desk); how fast it opens
is bench/opencode_tui.py's (here the bounds only keep a broken build from passing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from browser import chromium, create_passkey, person_page, sign_on_page
from gateway_helpers import stdio
from harness import PATIENCE, Daemon, free_port, make_daemon, mcpx_command, wait_for_sync
from opencode.fake_model import Call, Request, Say, ScriptedModel
from opencode.harness import clean_env, make_project, require_opencode
from opencode.tui import Tmux, flat

# one opencode TUI and one daemon for the module, on one worker
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("opencode-tui")]

ACTIONS = ("Accept", "Decline", "Cancel")


@dataclass
class World:
    daemon: Daemon
    model: ScriptedModel
    tui: Tmux
    root: Path
    home: Path
    opened: Path  # what the fake browser opener was asked to open, one URL a line

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(mcpx_command(*args), env=self.daemon.env, capture_output=True, text=True,
                              timeout=PATIENCE)

    def audit(self, eid: str, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.daemon.api().audit(eid) if r["kind"] == kind]

    def question(self, eid: str) -> dict[str, Any]:
        done = self.cli("elicit", "show", eid, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def pending(self, session: str | None = None) -> list[dict[str, Any]]:
        return [q for q in self.daemon.api().pending() if session is None or q["session"] == session]



def opened_at(world: World, eid: str) -> float:
    """When the daemon opened question `eid` (its elicit.open record), on the wall clock."""
    at = world.audit(eid, "elicit.open")[0]["at"]
    from datetime import datetime
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("opencode-tui")
    binary = require_opencode(root)
    tui = Tmux(width=180, height=45)
    mcpx_home = root / "mcpx-home"
    mcpx_home.mkdir()
    # a browser opener that opens nothing: it writes down what it was asked to open
    opener = root / "bin"
    opener.mkdir()
    opened = root / "opened.txt"
    (opener / "xdg-open").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> {opened}\n")
    (opener / "xdg-open").chmod(0o755)
    # a TCP listener: the inbox, where a passkey signs (docs/presence.md)
    config = {"servers": {"sdk": stdio("sdk_server.py")}}
    with make_daemon(mcpx_home, config, listen=f"127.0.0.1:{free_port()}") as daemon:
        listed = subprocess.run(mcpx_command("tools"), env=daemon.env, capture_output=True, text=True,
                                timeout=PATIENCE)  # the server's first start, now: the plugin lists tools
        assert listed.returncode == 0, listed.stderr
        model = ScriptedModel(root / "model-requests.jsonl").start()
        home = root / "home"
        home.mkdir()
        env = {**clean_env(home), **{k: v for k, v in daemon.env.items() if k.startswith(("MCPX_", "PYTHON"))}}
        env["PATH"] = os.pathsep.join([str(opener), env["PATH"]])
        env["TERM"] = "xterm-256color"
        project = make_project(root / "project", model.base_url, env)
        try:
            tui.start([str(binary)], project, env)
            tui.wait_text("Ask anything", timeout=180)  # seen past 90 s at a load of 15 on 2 cores
            yield World(daemon, model, tui, root, home, opened)
        finally:
            tui.stop()
            model.stop()


def ask_in_tui(world: World, name: str, steps: list[Any]) -> None:
    """A new session of the TUI whose model follows `steps`, once the model has been asked its first turn."""
    tui = world.tui
    marker = world.model.script(name, steps)
    tui.keys("C-x", "n")  # a new session (opencode's <leader>n), whatever was on screen
    tui.wait_text("Ask anything")
    tui.type(f"{marker} do the task")
    tui.keys("Enter")
    world.model.wait_for(name, lambda rs: any(r.tools for r in rs), PATIENCE)


def question_of(world: World, name: str) -> dict[str, Any]:
    """The question the script's first tool call raised: the newest pending one opened after its first request."""
    first = next(r for r in world.model.of(name) if r.tools)
    def fresh() -> list[dict[str, Any]]:
        return [q for q in world.pending() if opened_epoch(q) >= first.wall - 1]
    found = wait_for_sync(fresh, what=f"the question of {name}")
    return sorted(found, key=opened_epoch)[-1]


def opened_epoch(q: dict[str, Any]) -> float:
    from datetime import datetime
    return datetime.fromisoformat(q["created"].replace("Z", "+00:00")).timestamp()


def tool_result(world: World, name: str, turn: int) -> str:
    requests = world.model.wait_for(name, lambda rs: any(r.tools and r.turn >= turn for r in rs), 90)
    return next(r for r in requests if r.tools and r.turn == turn).last_tool_result()


def dialog_on_screen(world: World, words: str, timeout: float = PATIENCE) -> tuple[str, float]:
    """mcpx's dialog for the question whose words are `words`, once drawn; the time it was first seen. Its actions
    answer keys once armed (a moment after it opens, so that a key meant for the prompt answers nothing): a person
    sees that as its line of keys appearing, and so does the test before it presses one."""
    def drawn(s: str) -> bool:
        return words in flat(s) and all(a in s for a in ACTIONS) and "(via mcpx) asks" in s
    _, seen = world.tui.wait(f"mcpx's dialog for {words!r}", drawn, timeout)
    screen, _ = world.tui.wait("its keys, once armed", lambda s: drawn(s) and "enter: " in s, timeout)
    return screen, seen


def test_a_confirmation_is_put_to_the_person_in_mcpxs_dialog_at_once_and_enter_accepts(world: World) -> None:
    name = "tui_confirm"
    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_delete_branch", {}), lambda r: Say("done.")])
    screen, seen = dialog_on_screen(world, "“Really delete branch main?”")
    q = question_of(world, name)
    # no model request between the question and the dialog: the plugin opened it by itself
    assert len([r for r in world.model.of(name) if r.tools]) == 1
    assert seen - opened_at(world, q["id"]) < 5, "bounded here; measured in bench/opencode_tui.py"
    text = flat(screen)
    assert "sdk (via mcpx) asks" in text and "sdk · delete_branch, via mcpx" in text
    assert "It is yours to answer" in text and "Answer by" in text and "left" in text
    assert "Accept answers yes" in text
    assert "Permission required" not in screen, "no permission dialog beside mcpx's own"
    shown = world.audit(q["id"], "elicit.shown")
    assert [r["data"] for r in shown] == [{"where": "opencode", "how": "dialog", "by": "person:opencode"}]
    world.tui.keys("Enter")
    result = tool_result(world, name, 1)
    assert result.endswith('{"action": "accept", "data": {"confirm": true}}'), result
    assert f"Question {q['id']} (sdk asked the person): It was shown to the person in opencode's dialog at" in result
    assert "accept by person:opencode" in result
    world.tui.wait_gone("“Really delete branch main?”")
    answer = world.question(q["id"])["answer"]
    assert (answer["action"], answer["by"], answer["content"]) == ("accept", "person:opencode", {"confirm": True})


def test_decline_with_a_reason_typed_in_the_dialog_reaches_the_server(world: World) -> None:
    name = "tui_decline"
    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_delete_branch_why", {}), lambda r: Say("done.")])
    dialog_on_screen(world, "“Really delete branch main?”")
    world.tui.keys("Right", "Enter")  # Decline: it asks why first
    world.tui.wait_text("Why not? (optional; Enter declines)")
    world.tui.type("not main, use staging")
    world.tui.keys("Enter")
    result = tool_result(world, name, 1)
    assert result.endswith('{"action": "decline", "content": null, "reason": "not main, use staging"}'), result


def test_a_form_of_four_fields_is_typed_and_picked_in_the_dialog(world: World) -> None:
    """plan_release asks for free input: the agent declines it, so it is the person's, and the dialog opens."""
    name = "tui_form"

    def decline(r: Request) -> Call:
        return Call("mcpx_mcpx_elicit_answer", {"id": r.question_ids()[0], "action": "decline",
                                                "reason": "I cannot know the release's name"})

    def collect(r: Request) -> Call:
        return Call("mcpx_mcpx_task_result", {"task": r.task_id() or world_task(world, name), "wait": True})

    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_plan_release", {}), decline, collect, lambda r: Say("done.")])
    screen, _ = dialog_on_screen(world, "“Plan the release”")
    assert "The agent declined it, and it asks for free input, so it is yours." in flat(screen)
    tui = world.tui
    tui.type("Winter")            # name
    tui.keys("Enter")
    tui.type("3")                 # count
    tui.keys("Enter")
    tui.keys("Right")             # channel: stable → beta
    tui.keys("Enter")
    tui.keys("Space", "Right", "Right", "Space")  # targets: linux and windows
    tui.wait_text("[x] linux", "[x] windows")
    tui.keys("Enter")             # from the last field to Accept
    tui.keys("Enter")             # Accept
    result = tool_result(world, name, 3)
    assert json.loads(result.strip().splitlines()[-1]) == {"action": "accept", "data": {
        "name": "Winter", "count": 3, "channel": "beta", "targets": ["linux", "windows"]}}, result


def world_task(world: World, name: str) -> str:
    first = next(r for r in world.model.of(name) if r.tools and r.turn == 1)
    task = first.task_id()
    assert task, first.last_tool_result()
    return task


def test_an_answer_that_does_not_fit_is_shown_beside_its_field_and_the_dialog_stays(world: World) -> None:
    name = "tui_refused"

    def decline(r: Request) -> Call:
        return Call("mcpx_mcpx_elicit_answer", {"id": r.question_ids()[0], "action": "decline", "reason": "no idea"})

    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_plan_release", {}), decline, lambda r: Say("asked.")])
    dialog_on_screen(world, "“Plan the release”")
    tui = world.tui
    tui.type("W")
    tui.keys("Enter")
    tui.type("9")
    for _ in range(3):
        tui.keys("Enter")
    tui.keys("Enter")
    screen, _ = tui.wait_text("✗ must be at least 2 characters", "✗ must be at most 5")
    assert "“Plan the release”" in flat(screen), "the dialog stays open"
    q = [q for q in world.pending() if q["message"] == "Plan the release"]
    assert q and q[0]["state"] == "pending"
    world.cli("elicit", "cancel", q[0]["id"])
    tui.wait_gone("“Plan the release”")


def test_a_page_is_opened_only_when_the_person_chooses_to(world: World) -> None:
    name = "tui_url"
    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_login", {}), lambda r: Say("done.")])
    screen, _ = dialog_on_screen(world, "“Sign in to Example”")
    text = flat(screen)
    assert "Page:   https://example.com/login?x=1" in text and "Domain: example.com" in text
    assert "Open page" in screen
    assert not world.opened.exists(), "nothing opened before the person chose to"
    world.tui.keys("Enter")  # Open page is where the focus starts
    wait_for_sync(lambda: world.opened.exists() and world.opened.read_text().strip(), what="the page opened")
    assert world.opened.read_text().splitlines() == ["https://example.com/login?x=1"]
    world.tui.wait_text("Opened in your browser")
    world.tui.keys("Right", "Enter")  # Accept: done on the page
    result = tool_result(world, name, 1)
    assert result.endswith('{"action": "accept"}'), result
    consent = [r for r in json.loads(world.cli("audit", "--json").stdout)["records"] if r["kind"] == "elicit.consent"]
    assert consent and consent[-1]["data"] == {"consent": True, "by": "person:opencode", "domain": "example.com"}


async def test_a_question_only_a_passkey_accepts_shows_its_page_opens_it_and_refuses_the_dialogs_accept(
        world: World) -> None:
    """The dialog says a passkey is needed and shows the page where it signs; its Accept is refused naming that
    page; Open passkey page opens it in the person's browser, where the passkey accepts, and the dialog closes."""
    name = "tui_presence"
    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_delete_branch", {}), lambda r: Say("done.")])
    dialog_on_screen(world, "“Really delete branch main?”")
    first = question_of(world, name)
    # in the same session, a question only the person's passkey accepts; the first is answered from a terminal
    # (the terminal and tmux are driven synchronously, as in every test here; only the browser is async)
    asker = subprocess.Popen([sys.executable, "-m", "mcpx", "elicit", "ask", "--session", first["session"],  # noqa: ASYNC220
                              "--message", "Force-push to main?", "--schema", '{"confirm": {"type": "boolean"}}',
                              "--presence"], env=world.daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        world.tui.wait_text("● 2 questions")
        assert world.cli("elicit", "answer", first["id"], '{"confirm": true}').returncode == 0
        dialog_on_screen(world, "“Force-push to main?”")
        [q] = [p for p in world.pending(first["session"]) if p["message"] == "Force-push to main?"]
        assert q["presence"] is True
        screen, _ = world.tui.wait_text("Accepting it needs your passkey, on its page in your browser",
                                        "Passkey page: http://localhost:")
        assert "Open passkey page" in screen
        world.tui.keys("Right", "Enter")  # from Open passkey page, where the focus starts, to Accept
        world.tui.wait_text("is accepted only with the person's passkey", "Its page: http://localhost:")
        assert world.question(q["id"])["elicitation"]["state"] == "pending"
        already = world.opened.read_text().splitlines() if world.opened.exists() else []
        world.tui.keys("Left", "Enter")  # Open passkey page
        world.tui.wait_text("Opened in your browser")
        # the dialog says so once the opener has started; the opener writes its line a moment later
        [page] = wait_for_sync(lambda: world.opened.read_text().splitlines()[len(already):],
                               what="the passkey page given to the browser")
        assert page.startswith("http://localhost:") and f"/inbox/q/{q['id']}?link=" in page, page
        async with chromium() as browser, person_page(browser) as ada:
            enrolled = world.cli("person", "enroll", "ada", "--json")
            assert enrolled.returncode == 0, enrolled.stderr
            said = await create_passkey(ada, json.loads(enrolled.stdout)["url"], "ada")
            assert "ada's passkey is enrolled" in said, said
            said = await sign_on_page(ada, page, yes="confirm")
            assert "accept by person:ada, verified by passkey" in said, said
        world.tui.wait_gone("“Force-push to main?”")
        out, err = asker.communicate(timeout=PATIENCE)
        assert asker.returncode == 0, out + err
        assert world.question(q["id"])["answer"]["content"] == {"confirm": True}
    finally:
        if asker.poll() is None:
            asker.kill()
            asker.wait()


def test_esc_answers_nothing_the_badge_counts_and_the_command_brings_it_back(world: World) -> None:
    name = "tui_queue"
    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_delete_branch", {}), lambda r: Say("done.")])
    dialog_on_screen(world, "“Really delete branch main?”")
    q = question_of(world, name)
    # a second question for the person in the same session: an approval CI asks for it, say
    second = subprocess.Popen([sys.executable, "-m", "mcpx", "elicit", "ask", "--session", q["session"], "--message",
                               "Deploy build 417 to production?", "--schema", '{"confirm": {"type": "boolean"}}'],
                              env=world.daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        world.tui.wait_text("● 2 questions")
        screen = world.tui.screen()
        assert "“Really delete branch main?”" in flat(screen), "one dialog at a time: the first stays in front"
        world.tui.keys("Escape")
        screen, _ = world.tui.wait(
            "the next question in the dialog", lambda s: "“Deploy build 417 to production?”" in flat(s))
        assert world.question(q["id"])["elicitation"]["state"] == "pending", "Esc answered nothing"
        assert "● 2 questions" in screen
        world.tui.keys("Escape")
        world.tui.wait_gone("“Deploy build 417 to production?”")
        assert len(world.pending(q["session"])) == 2
        world.tui.keys("C-x", "i")  # the command: the oldest waiting one comes back
        dialog_on_screen(world, "“Really delete branch main?”")
        world.tui.keys("Enter")
        result = tool_result(world, name, 1)
        assert '\n\n{"action": "accept", "data": {"confirm": true}}\n\n' in result, result
        # the other question is the person's, in front of them: the agent is told so, and not asked to answer it
        assert "mcpx's dialog in opencode puts it in front of them; they answer it there" in result
        world.tui.wait_text("● 1 question")
        world.tui.keys("C-x", "i")
        dialog_on_screen(world, "“Deploy build 417 to production?”")
        world.tui.keys("Right", "Enter", "Enter")  # Decline, no reason
        out, err = second.communicate(timeout=PATIENCE)
        assert second.returncode == 1, out + err  # `mcpx elicit ask` exits 1 on decline
        world.tui.wait_gone("● 1 question")
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()


def test_a_question_answered_from_a_terminal_closes_its_dialog_saying_so_and_the_next_is_untouched(
        world: World) -> None:
    """Two of the person's questions wait in the TUI; the first, in the dialog, is answered from a terminal: its
    dialog closes saying so, and the second — which a closed dialog once recorded as the person's decline — is
    answered by nobody: it comes into the dialog, still waiting."""
    name = "tui_elsewhere"
    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_delete_branch", {}), lambda r: Say("done.")])
    dialog_on_screen(world, "“Really delete branch main?”")
    q = question_of(world, name)
    second = subprocess.Popen([sys.executable, "-m", "mcpx", "elicit", "ask", "--session", q["session"], "--message",
                               "Tag the release?", "--schema", '{"confirm": {"type": "boolean"}}'],
                              env=world.daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        world.tui.wait_text("● 2 questions")
        done = world.cli("elicit", "answer", q["id"], '{"confirm": true}')
        assert done.returncode == 0, done.stderr
        # the dialog closes on the answer's event, not at a poll: its latency is measured in bench/opencode_tui.py,
        # never timed here (a loaded machine took 8 s)
        world.tui.wait_gone("“Really delete branch main?”", timeout=10)
        world.tui.wait_text("was answered elsewhere")  # the toast, one line of it (it wraps beside the sidebar)
        result = tool_result(world, name, 1)
        assert "accept by person:cli" in result and '{"action": "accept", "data": {"confirm": true}}' in result
        dialog_on_screen(world, "“Tag the release?”")
        waiting = [p for p in world.pending(q["session"]) if p["message"] == "Tag the release?"]
        assert len(waiting) == 1 and waiting[0]["state"] == "pending", "nobody answered the second"
        world.tui.keys("Enter")
        # the dialog goes with its answer; if it stays, the screen it shows says why (a refusal, a key not taken)
        world.tui.wait_gone("“Tag the release?”")
        out, err = second.communicate(timeout=PATIENCE)
        assert second.returncode == 0, out + err
        answer = world.question(waiting[0]["id"])["answer"]
        assert (answer["action"], answer["by"]) == ("accept", "person:opencode")
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()


def test_a_credential_typed_in_the_dialog_reaches_the_server_and_nothing_else(world: World) -> None:
    name = "tui_secret"
    token = "tok-" + os.urandom(12).hex()
    ask_in_tui(world, name, [lambda r: Call("mcpx_sdk_use_token", {"echo": False}), lambda r: Say("done.")])
    dialog_on_screen(world, "“Paste your API token”")
    world.tui.type(token)
    screen, _ = world.tui.wait_text("•" * 8)
    assert token not in screen, "masked as it is typed"
    world.tui.keys("Enter", "Enter")
    result = tool_result(world, name, 1)
    assert f'"token_length": {len(token)}' in result, result
    # the server had it; opencode, its storage and the model never did
    for path in world.home.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    for path in (world.root / "project").rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert all(token not in json.dumps(r.body) for r in world.model.requests)
    assert token.encode() not in (world.root / "model-requests.jsonl").read_bytes()
