"""`mcpx call`, `mcpx task result`, `mcpx tools` through the real CLI, with the bundled demo server behind the
daemon."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from conftest import daemon_of, events
from gateway_helpers import stdio
from harness import PATIENCE, Daemon, make_daemon, stop_process
from terminal import Terminal, end_elsewhere

# how soon the next question of a call must be on the terminal: short beside the 30 s it once took, long enough
# for a loaded machine
NEXT_QUESTION_BOUND = 10.0


@pytest.fixture
def demo(request: pytest.FixtureRequest, home: Path) -> Iterator[Daemon]:
    """A daemon with the demo server: the module's, for the tests marked `shared_daemon` (each looks only at its
    own calls and questions)."""
    server = {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"]}
    with daemon_of(request, home, {"servers": {"demo": server}}) as d:
        yield d


@pytest.mark.shared_daemon
def test_tools_lists_what_is_behind_mcpx(demo: Daemon) -> None:
    out = demo.cli("tools")
    assert out.returncode == 0, out.stderr
    assert "demo.choose_repository" in out.stdout and "demo.delete_branch" in out.stdout
    assert "[destructive]" in out.stdout and "[read-only]" in out.stdout
    body = json.loads(demo.cli("tools", "demo", "--json").stdout)
    assert len(body["servers"]["demo"]) == 5


@pytest.mark.shared_daemon
def test_without_a_terminal_the_question_is_returned_with_exit_75(demo: Daemon) -> None:
    out = demo.cli("call", "demo.choose_repository")
    assert out.returncode == 75, out
    assert "Which repository should the notes go in?" in out.stderr
    assert "mcpx elicit answer elc-" in out.stderr and "mcpx task result tsk-" in out.stderr
    js = demo.cli("call", "demo.choose_repository", "--json")
    assert js.returncode == 75
    doc = json.loads(js.stdout)["inputRequired"]
    q = doc["elicitation"]
    assert q["respondWith"].startswith(f"mcpx elicit answer {q['id']}")
    # where it says how to answer, it gives the question's page in the web inbox
    inbox = json.loads((demo.home / "daemon.json").read_text())["inbox"]
    assert q["page"] == f"{inbox}/q/{q['id']}"
    assert f"page      {inbox}/q/elc-" in out.stderr and "mcpx elicit link elc-" in out.stderr
    assert demo.cli("elicit", "answer", q["id"], "repo=octo/notes").returncode == 0
    done = demo.cli("task", "result", doc["task"])
    assert done.returncode == 0 and "octo/notes" in done.stdout


@pytest.mark.shared_daemon
def test_elicit_decline_error_and_auto(demo: Daemon) -> None:
    declined = demo.cli("call", "demo.choose_repository", "--elicit=decline")
    assert declined.returncode == 0 and "You said no" in declined.stdout
    auto = demo.cli("call", "demo.choose_repository", "--elicit=auto")
    assert auto.returncode == 0 and "cancelled" in auto.stdout
    failed = demo.cli("call", "demo.choose_repository", "--elicit=error")
    assert failed.returncode == 1
    assert "needed an answer to elc-" in failed.stderr and "Which repository" in failed.stderr
    usage = demo.cli("call", "choose_repository")
    assert usage.returncode == 2 and "SERVER.TOOL" in usage.stderr


@pytest.mark.shared_daemon
def test_on_a_terminal_the_form_is_asked_field_by_field(demo: Daemon) -> None:
    with Terminal(demo, "call", "demo.create_issue") as term:
        term.expect("title (string; min length 3")
        term.type("ab")
        term.expect("at least 3 characters")
        term.type("Printer on fire")
        term.expect("1) Urgent  2) Soon  3) Someday")
        term.type("2")
        term.expect("labels")
        term.type("1, api")
        term.expect("due")
        term.type("2026-02-30")
        term.expect("not a date")
        term.type("2026-12-24")
        term.expect("notify [true]")
        term.type("")
        assert term.finish() == 0
    text = term.out.decode(errors="replace")
    assert "'title': 'Printer on fire'" in text and "'priority': 'p1'" in text
    assert "'labels': ['bug', 'api']" in text and "'notify': True" in text


def test_on_a_terminal_decline_is_decline_and_ctrl_c_is_cancel(demo: Daemon) -> None:
    with Terminal(demo, "call", "demo.choose_repository") as term:
        term.expect("repo (string; required)")
        term.type("decline")
        term.expect("why")
        term.type("not mine to say")
        assert term.finish() == 0 and "You said no" in term.out.decode()
    audit = json.loads(demo.cli("audit", "--kinds", "elicit.answered", "--json").stdout)["records"]
    assert audit[-1]["data"]["action"] == "decline" and audit[-1]["data"]["reason"] == "not mine to say"

    with Terminal(demo, "call", "demo.choose_repository") as term:
        term.expect("repo (string; required)")
        os.write(term.fd, b"\x03")  # Ctrl-C
        assert term.finish() == 0 and "cancelled" in term.out.decode()
    audit = json.loads(demo.cli("audit", "--kinds", "elicit.answered", "--json").stdout)["records"]
    assert audit[-1]["data"]["action"] == "cancel" and audit[-1]["data"]["by"] == "person:cli"


@pytest.mark.shared_daemon
async def test_on_a_terminal_the_next_question_shows_as_soon_as_it_opens(demo: Daemon) -> None:
    """deploy asks twice: where, then whether. The second question is on the terminal at once, measured from its
    elicit.open event (mcpx call once waited for a result long-poll of 30 s to run out before showing it)."""
    loop = asyncio.get_running_loop()
    async with demo.session() as http, events(http, kinds="elicit.open") as stream:
        with Terminal(demo, "call", "demo.deploy") as term:
            first = await stream.until(lambda r: r["kind"] == "elicit.open", what="deploy's first question")
            await asyncio.to_thread(term.expect, "Deploy where?")
            term.type("1")  # staging
            second = await stream.until(lambda r: r["trace"] == first["trace"] and r["elicit"] != first["elicit"],
                                        what="deploy's second question")
            opened = loop.time()
            await asyncio.to_thread(term.expect, "Deploy build 417 to staging now?", NEXT_QUESTION_BOUND)
            assert loop.time() - opened < NEXT_QUESTION_BOUND
            term.type("y")
            assert await asyncio.to_thread(term.finish) == 0
    assert "Build 417 would now be deploying to staging" in term.out.decode(errors="replace")
    answer = json.loads(demo.cli("elicit", "show", second["elicit"], "--json").stdout)["answer"]
    assert (answer["by"], answer["content"]) == ("person:cli", {"confirm": True})


@pytest.mark.shared_daemon
async def test_on_a_terminal_a_question_that_ends_elsewhere_ends_its_prompt(demo: Daemon) -> None:
    """The prompt watches its question: answered from another door (REST here), it stops at the field it was at,
    says how the question ended, and the call goes on to its result; abandoned (its call cancelled elsewhere), it
    says so and the cancelled call exits 1. Once every field was asked before it said anything."""
    async with demo.session() as http, events(http, kinds="elicit.open") as stream:
        with Terminal(demo, "call", "demo.create_issue") as term:
            opened = await stream.until(lambda r: r["kind"] == "elicit.open", what="create_issue's question")
            await end_elsewhere(term, http, opened, "answered")
            assert await asyncio.to_thread(term.finish) == 0, term.out.decode(errors="replace")
        text = term.out.decode(errors="replace")
        assert "'title': 'Filed from elsewhere'" in text  # the call's result, from the answer given elsewhere
        assert "Priority" not in text  # the next field was never asked

        with Terminal(demo, "call", "demo.create_issue") as term:
            opened = await stream.until(lambda r: r["kind"] == "elicit.open", what="the second call's question")
            await end_elsewhere(term, http, opened, "abandoned")
            assert await asyncio.to_thread(term.finish) == 1
    assert "Priority" not in term.out.decode(errors="replace")


def test_on_a_terminal_a_question_the_daemons_restart_abandons_ends_its_prompt(home: Path) -> None:
    """At the first field of a legacy server's form when the daemon restarts: the call ends with the daemon, its
    question is abandoned, and the prompt (whose watch waits through the restart) stops there, saying so, instead of
    asking every field before it is told; the call's end is said, exit 1 (issue 35 item 3, the newcomer's case)."""
    with make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}}) as d, \
            Terminal(d, "call", "sdk.file_issue") as term:
        term.expect("title (string; min length 3; required)")
        d.stop()
        d.start()
        term.expect("was abandoned")
        code = term.finish()
        shown = term.out.decode(errors="replace")
        eid = "elc-" + shown.split("(elc-", 1)[1].split(";", 1)[0]
        asked = json.loads(d.cli("elicit", "show", eid, "--json").stdout)["elicitation"]
    assert asked["state"] == "abandoned" and asked["task"], asked
    assert f"({eid} was abandoned: the mcpx daemon stopped during the call)" in shown, shown
    assert "count (" not in shown  # no field asked after the restart
    assert code == 1 and shown.rstrip().endswith("mcpx: the mcpx daemon stopped during the call"), shown


def test_the_main_command_gives_a_new_user_a_real_question_at_once(home: Path) -> None:
    """`./dev run` is `mcpx daemon --demo` on the embedded default: no config file at all."""
    d = make_daemon(home)
    env = {k: v for k, v in d.env.items() if k != "MCPX_CONFIG"}
    env["MCPX_USER_CONFIG"] = str(home / "no-such-config.json")
    proc = subprocess.Popen([sys.executable, "-m", "mcpx", "daemon", "--demo"], env=env, cwd=home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        said = Said(proc.stderr)
        said.wait_for("demo server is asking")
        listing = json.loads(d.cli("elicit", "list", "--json", env={"MCPX_CONFIG": ""}).stdout)
        q = listing["elicitations"][0]
        assert q["server"] == "demo" and q["session"] == "demo" and q["tool"] == "choose_repository"
        assert d.cli("elicit", "answer", q["id"], "repo=octo/hello").returncode == 0
        done = d.cli("task", "result", q["task"])
        assert done.returncode == 0 and "octo/hello" in done.stdout
    finally:
        stop_process(proc)


class Said:
    """Everything a process writes to a pipe, read as it comes (so the pipe never fills and stalls it)."""

    def __init__(self, stream: IO[str]) -> None:
        self.text = ""
        self._changed = threading.Condition()
        self._ended = False
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self.text += line
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, words: str, timeout: float = PATIENCE) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: words in self.text or self._ended, timeout):
                raise AssertionError(f"{words!r} not said within {timeout:.0f}s; so far:\n{self.text[-3000:]}")
            assert words in self.text, f"the process ended without saying {words!r}:\n{self.text[-3000:]}"
