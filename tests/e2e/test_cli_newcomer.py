"""What a newcomer tripped on in the command line, each through the real CLI against a real daemon with real
servers behind it: a server that crashes at once, a stop that would drop waiting calls, a phone link on loopback,
a secret typed on a terminal (in tmux, judged by the screen), silent waits, errors and exit codes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_call import Terminal

from conftest import daemon_of
from gateway_helpers import stdio
from harness import PATIENCE, Daemon, make_daemon, stop_process, wait_for_sync
from opencode.tui import Tmux, flat

DEMO = {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"]}


def broken_server(home: Path) -> dict[str, object]:
    """A server whose command exits at once, saying why on stderr, before mcpx's first write reaches it."""
    script = home / "broken.py"
    script.write_text("import sys\nsys.stderr.write('broken: no licence key\\n')\nsys.exit(1)\n")
    return {"command": sys.executable, "args": [str(script)]}


@pytest.fixture
def demo(request: pytest.FixtureRequest, home: Path) -> Iterator[Daemon]:
    """A daemon with the demo and SDK servers: the module's, for the tests marked `shared_daemon` (each looks only
    at its own calls and questions; one that takes the first pending question or lists every call has its own)."""
    with daemon_of(request, home, {"servers": {"demo": DEMO, "sdk": stdio("sdk_server.py")}}) as d:
        yield d


def asked(d: Daemon, message: str, props: dict[str, object]) -> str:
    """A question asked by `mcpx elicit ask` (which waits for its answer, in the background here); its id."""
    before = {q["id"] for q in pending(d)}
    schema = json.dumps({"type": "object", "properties": props})
    ask = d.cli_bg("elicit", "ask", "--message", message, "--schema", schema, "--ttl", "10m")
    try:
        found = wait_for_sync(lambda: [q["id"] for q in pending(d) if q["id"] not in before])
    except BaseException:
        stop_process(ask)
        raise
    _asking.append(ask)
    return str(found[0])


_asking: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _stop_askers() -> Iterator[None]:
    try:
        yield
    finally:
        while _asking:
            stop_process(_asking.pop())


def pending(d: Daemon) -> list[dict[str, object]]:
    return d.api().pending()


# ---- 1. one crashing server hides no other


def test_a_server_that_exits_at_once_hides_no_other(home: Path) -> None:
    # "aaa" sorts first: it is listed (and started) before the good one, on a fresh daemon each time
    config = {"servers": {"aaa": broken_server(home), "demo": DEMO}}
    for _ in range(3):
        with make_daemon(home, config) as d:
            listed = d.cli("tools")
            assert listed.returncode == 0, listed.stderr
            assert "internal error" not in listed.stderr + listed.stdout
            assert "aaa: cannot list tools" in listed.stdout and "demo.choose_repository" in listed.stdout
            one = d.cli("tools", "aaa")
            assert one.returncode != 0 and "RuntimeError" not in one.stderr and "internal error" not in one.stderr
            assert "aaa" in one.stderr
            js = json.loads(d.cli("tools", "--json").stdout)["servers"]
            assert isinstance(js["aaa"], str) and len(js["demo"]) == 5
            called = d.cli("call", "demo.choose_repository", "--elicit=decline")
            assert called.returncode == 0 and "You said no" in called.stdout


# ---- 4. stopping the daemon says what it would drop


def test_stop_and_restart_refuse_while_calls_wait_unless_forced(demo: Daemon) -> None:
    survivor = asked(demo, "Which region?", {"region": {"type": "string"}})
    # a question asked by `elicit ask` survives a restart: alone, it is no reason to refuse
    listed = json.loads(demo.cli("task", "list", "--json").stdout)["tasks"]
    assert listed == []
    waiting = demo.cli("call", "sdk.need_repo")  # not a terminal: the question is returned (exit 75), the call waits
    assert waiting.returncode == 75, waiting.stderr
    task = re.search(r"tsk-[0-9a-z]+", waiting.stderr)
    assert task is not None
    listed = json.loads(demo.cli("task", "list", "--json").stdout)["tasks"]
    assert [t["id"] for t in listed] == [task.group()] and listed[0]["survivesRestart"] is False
    eid = listed[0]["open"][0]
    text = demo.cli("task", "list")
    assert f"{task.group()} · input-required" in text.stdout and "ends if the daemon stops" in text.stdout

    for action in ("stop", "restart"):
        refused = demo.cli("daemon", action)
        assert refused.returncode == 1, refused
        assert "1 call in flight would end with the daemon" in refused.stderr
        assert "1 question they wait on would be abandoned" in refused.stderr
        assert task.group() in refused.stderr and eid in refused.stderr and "--force" in refused.stderr
        assert survivor not in refused.stderr
        assert demo.cli("status").returncode == 0  # still running
    assert json.loads(demo.cli("elicit", "show", eid, "--json").stdout)["elicitation"]["state"] == "pending"

    stopped = demo.cli("daemon", "stop", "--force")
    assert stopped.returncode == 0, stopped.stderr
    assert demo.proc is not None
    demo.proc.wait(PATIENCE)


def test_the_readmes_demo_call_is_answered_across_a_restart(home: Path) -> None:
    """The README's first steps on the embedded default (no config file), with the daemon killed and started in the
    middle: the demo signs its requestState with a key kept in the state directory, so the call re-driven after the
    restart is the demo's own real result, not -32602 invalid requestState (issue 35 item 1)."""
    d = make_daemon(home)
    del d.env["MCPX_CONFIG"]
    d.env["MCPX_USER_CONFIG"] = str(home / "no-config.json")  # nothing to read: the embedded default, as ./dev run
    with d:
        waiting = d.cli("call", "demo.choose_repository")  # not a terminal: the question is printed, exit 75
        assert waiting.returncode == 75, waiting.stderr
        task, eid = (re.search(pattern, waiting.stderr) for pattern in (r"tsk-[0-9a-z]+", r"elc-[0-9a-z]+"))
        assert task is not None and eid is not None, waiting.stderr
        key = home / "demo-request-state.key"
        assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
        d.kill9()  # the demo is stopped by the restart too: a new process with the key it keeps
        d.start()
        answered = d.cli("elicit", "answer", eid.group(), "repo=octo/hello")
        assert answered.returncode == 0, answered.stderr
        result = d.cli("task", "result", task.group())
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Notes would be saved to octo/hello (demo)." in result.stdout


# ---- 5. a phone link on loopback


@pytest.mark.shared_daemon
def test_a_link_on_loopback_says_no_phone_can_open_it(demo: Daemon) -> None:
    eid = asked(demo, "Ship it?", {"ok": {"type": "boolean"}})
    with Terminal(demo, "elicit", "link", eid) as term:  # a terminal, where a QR code would be drawn
        assert term.finish() == 0
    shown = term.out.decode(errors="replace")
    assert "http://127.0.0.1:" in shown and "another device (your phone) cannot open it" in shown
    assert "--listen" in shown and "docs/inbox.md" in shown
    assert "▀" not in shown and "█" not in shown and "Good for one answer" not in shown  # no QR code
    js = json.loads(demo.cli("elicit", "link", eid, "--json").stdout)
    assert js["reachableElsewhere"] is False and js["url"].startswith("http://127.0.0.1:")


# ---- 7. a secret typed on a terminal is never shown


def _tmux_mcpx(d: Daemon, *args: str) -> Tmux:
    return Tmux(120, 30).start([sys.executable, "-m", "mcpx", *args], d.home, d.env)


def test_a_credential_is_asked_for_with_hidden_input(demo: Daemon) -> None:
    token = "sk-live-very-secret-4242"
    # `mcpx elicit answer ID` with no content on a terminal asks for the fields, the credential without echo
    waiting = demo.cli("call", "sdk.use_token", '{"echo": false}')
    assert waiting.returncode == 75, waiting.stderr
    eid = json.loads(demo.cli("elicit", "list", "--json").stdout)["elicitations"][0]["id"]
    term = _tmux_mcpx(demo, "elicit", "answer", eid)
    try:
        term.wait_text("api_token", "a credential: what you type is not shown")
        term.type(token)
        term.keys("Enter")
        term.wait_text("accept")
        assert token not in term.screen()
    finally:
        term.stop()
    assert json.loads(demo.cli("elicit", "show", eid, "--json").stdout)["elicitation"]["state"] == "answered"

    # and `mcpx call` on a terminal, prompting for the same question, shows nothing of what is typed
    term = _tmux_mcpx(demo, "call", "sdk.use_token", "echo=false")
    try:
        term.wait_text("Paste your API token", "a credential: what you type is not shown")
        term.type(token)
        term.keys("Enter")
        screen, _ = term.wait_text('"token_length": 24')
        assert token not in screen and '"action": "accept"' in flat(screen)
    finally:
        term.stop()


def test_an_answer_that_does_not_fit_is_asked_again_on_a_terminal(demo: Daemon) -> None:
    waiting = demo.cli("call", "sdk.file_issue")
    assert waiting.returncode == 75
    eid = json.loads(demo.cli("elicit", "list", "--json").stdout)["elicitations"][0]["id"]
    term = _tmux_mcpx(demo, "elicit", "answer", eid, "title=ab", "count=3")
    try:
        term.wait_text("title", "at least 3 characters")
        term.type("Printer on fire")
        term.keys("Enter")
        term.wait_text("accept")
    finally:
        term.stop()
    answer = json.loads(demo.cli("elicit", "show", eid, "--json").stdout)["answer"]
    assert answer["content"]["title"] == "Printer on fire" and answer["content"]["count"] == 3


# ---- 8. silent waits


@pytest.mark.shared_daemon
def test_a_call_shows_the_servers_progress_on_a_terminal(demo: Daemon) -> None:
    with Terminal(demo, "call", "sdk.hold") as term:
        term.expect("sdk.hold: 0 — holding in pid")
        pid = re.search(rb"holding in pid (\d+)", term.out)
        assert pid is not None
        os.kill(int(pid.group(1)), signal.SIGUSR2)
        assert term.finish() == 0
    assert "released" in term.out.decode(errors="replace")
    # not a terminal: nothing but the result
    out = demo.cli("call", "sdk.echo", "text=hi")
    assert out.returncode == 0 and out.stderr == "" and "echo: hi" in out.stdout


def test_tools_starts_the_daemon_and_names_the_servers_still_starting(home: Path) -> None:
    slow = home / "slow.py"
    gate = home / "gate"
    # a server that starts once the test lets it: the listing waits on it, and says so meanwhile
    slow.write_text(f"import os, runpy, sys, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
                    f"sys.argv = [{str(Path(__file__).parents[1] / 'peers' / 'sdk_server.py')!r}]\n"
                    "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    d = make_daemon(home, {"servers": {"slow": {"command": sys.executable, "args": [str(slow)]}, "demo": DEMO}})
    try:
        # no daemon runs (after a wheel install, say): these commands start one, as serve and doctor do
        listed = d.cli("elicit", "list")
        assert listed.returncode == 0 and "no pending questions" in listed.stdout, listed
        assert "no daemon was running; started one" in listed.stderr
        with Terminal(d, "tools") as term:
            term.expect("starting slow to list their tools (1 of 2 listed)")  # which one it still waits for
            gate.touch()
            assert term.finish() == 0
        assert "slow.need_repo" in term.out.decode(errors="replace")
    finally:
        d.stop()


def test_a_config_where_mcpx_does_not_read_it_is_named_by_status_and_doctor(home: Path, tmp_path: Path) -> None:
    """A newcomer's config in $MCPX_HOME/config.json (not read: only $MCPX_CONFIG, the user's and the project's
    are): status and doctor say the embedded default is in force, and name the unread file and where mcpx reads."""
    d = make_daemon(home, {"servers": {"mine": DEMO}})  # written to $MCPX_HOME/config.json ...
    del d.env["MCPX_CONFIG"]  # ... and not named
    d.env.update(HOME=str(tmp_path / "user"), MCPX_USER_CONFIG=str(tmp_path / "user" / "none.json"))
    try:
        doctor = d.cli("doctor", "--no-ask")  # starts the daemon, on the embedded default
        status = d.cli("status")
    finally:
        d.stop()
    unread = f"{home / 'config.json'}: this file is not read: mcpx reads $MCPX_CONFIG"
    assert "ok      config   (embedded default): in force;" in doctor.stdout, doctor.stdout
    assert f"warn    config   {unread}" in doctor.stdout and f"MCPX_CONFIG={home / 'config.json'}" in doctor.stdout
    assert status.returncode == 0, status
    assert "config    (embedded default) (in force)" in status.stdout and f"! config  {unread}" in status.stdout


# ---- 9. errors and exit codes


def test_errors_speak_the_command_lines_words_with_their_own_exit_codes(demo: Daemon) -> None:
    bad = demo.cli("elicit", "show", "nonsense")
    assert bad.returncode == 2 and "invalid path" not in bad.stderr and "elc-" in bad.stderr
    unknown = demo.cli("elicit", "show", "elc-0123456789abcdef")
    assert unknown.returncode == 1 and "mcpx elicit list --state all" in unknown.stderr
    no_task = demo.cli("task", "show", "tsk-0123456789abcdef")
    assert no_task.returncode == 1 and "mcpx task list --state all" in no_task.stderr

    waiting = demo.cli("call", "sdk.file_issue")
    eid = json.loads(demo.cli("elicit", "list", "--json").stdout)["elicitations"][0]["id"]
    assert waiting.returncode == 75
    unfit = demo.cli("elicit", "answer", eid, "title=ab", "count=3")
    assert unfit.returncode == 65 and "title" in unfit.stderr  # not a decline's 1
    declined = demo.cli("elicit", "decline", eid)
    assert declined.returncode == 0

    alone = demo.cli()
    assert alone.returncode == 2 and "usage: mcpx" in alone.stderr and "elicit" in alone.stderr
    for command in ("status", "serve", "tools", "task"):
        helped = demo.cli(command, "--help")
        lines = [ln for ln in helped.stdout.splitlines() if ln.strip()]
        assert len(lines) > 2 and not lines[1].startswith(("positional", "options")), (command, helped.stdout)
    for command in (("audit",), ("elicit", "list"), ("task", "result")):
        helped = demo.cli(*command, "--help").stdout
        options = re.findall(r"^  (--[a-z-]+)[^\n]*\n?([^\n]*)", helped, re.M)
        assert options and all(re.search(r"\w{3}", line + more.strip()) for line, more in options), helped


@pytest.mark.shared_daemon
def test_a_tools_arguments_are_shown_and_taken_as_name_value_pairs(demo: Daemon) -> None:
    listing = demo.cli("tools").stdout
    rows = [re.match(r"  (\S+ +)(.*)", line) for line in listing.splitlines() if line.startswith("  ")]
    assert {m.group(1).split(".")[0] for m in rows if m} == {"demo", "sdk"}, listing
    assert len({len(m.group(1)) for m in rows if m}) == 1, listing  # one column over both servers' tools
    # a description in paragraphs reads as one line, not as "back. ⏎  ⏎     Nothing"
    assert "⏎" not in listing and "Says the text back. Nothing more (a description" in listing, listing
    shown = demo.cli("tools", "sdk.sleepy")
    assert shown.returncode == 0, shown.stderr
    assert "seconds (number; required)" in shown.stdout
    missing = demo.cli("tools", "sdk.nope")
    assert missing.returncode == 1 and "'sdk' has no tool 'nope'" in missing.stderr and "need_repo" in missing.stderr
    # a call to a tool the server lacks: refused by the daemon before it runs, naming the tools and the nearest
    for words in (("sdk.slepy",), ("sdk.slepy", "seconds=1")):
        typo = demo.cli("call", *words)
        assert typo.returncode == 1, typo
        assert "server 'sdk' has no tool 'slepy'; did you mean 'sleepy'?" in typo.stderr, typo.stderr
        assert "echo" in typo.stderr and "-32602" not in typo.stderr
    slept = demo.cli("call", "sdk.sleepy", "seconds=0.01")
    assert slept.returncode == 0 and "slept 0.01" in slept.stdout
    echoed = demo.cli("call", "sdk.echo", "text=3")  # a string field takes the text as it is, not the number 3
    assert echoed.returncode == 0 and "echo: 3" in echoed.stdout
    wrong = demo.cli("call", "sdk.sleepy", "seconds=soon")
    assert wrong.returncode == 2 and "seconds='soon': the tool takes number there" in wrong.stderr
    js = demo.cli("call", "sdk.echo", '{"text": "json"}')
    assert js.returncode == 0 and "echo: json" in js.stdout


def test_task_list_shows_calls_in_flight_and_finished(demo: Daemon) -> None:
    assert demo.cli("task", "list").stdout.strip() == "no calls in flight"
    assert demo.cli("call", "sdk.echo", "text=x").returncode == 0
    done = json.loads(demo.cli("task", "list", "--state", "all", "--json").stdout)["tasks"]
    assert [(t["tool"], t["state"]) for t in done] == [("echo", "completed")]
    bad = demo.cli("task", "list", "--state", "sleeping")
    assert bad.returncode == 2 and "sleeping: not a state" in bad.stderr
