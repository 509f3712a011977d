"""Smaller things a new user hit, each through the real CLI: every problem told at once, usage errors
named as such, defaults shown as values, and the database's side files as private as the database."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from pathlib import Path

import aiohttp
from test_cli_call import Terminal

from conftest import ask
from gateway_helpers import stdio
from harness import PATIENCE, Daemon, make_daemon, mcpx_command

FORM = {"type": "object", "required": ["repo"], "properties": {"repo": {"type": "string"}}}


def test_config_check_reports_every_problem_in_one_run(home: Path) -> None:
    d = make_daemon(home)
    bad = home / "bad.json"
    bad.write_text(json.dumps({
        "servers": {"gh": {"args": ["x"]}},
        "elicit": {"ttl": "soon", "rules": [
            {"match": {"server": "gh", "field": "repo"}},  # says nothing about the answer
            {"match": {}, "action": "accept"},
            {"match": {"server": "gh"}, "action": "decline"},  # fine
        ]},
    }))
    out = d.cli("config", "check", str(bad))
    assert out.returncode == 1
    assert "4 problems" in out.stderr
    assert (f"{bad}: servers.gh: needs one of 'command' (an MCP server over stdio), 'url' (over HTTP), 'openapi' "
            "(a REST service) or 'commands' (commands as tools)") in out.stderr
    assert f"{bad}: elicit.ttl: " in out.stderr and "not a duration" in out.stderr
    assert f"{bad}: elicit.rules[0]: says nothing about the answer" in out.stderr
    assert f"{bad}: elicit.rules[1]: has an empty match" in out.stderr and "rules[2]" not in out.stderr
    js = json.loads(d.cli("config", "check", str(bad), "--json").stdout)
    assert js["ok"] is False and [p["field"] for p in js["problems"]] == [
        "servers.gh", "elicit.ttl", "elicit.rules[0]", "elicit.rules[1]"]

    # the files that make up the config in force are each checked, each problem naming its file
    user = home / "user.json"
    user.write_text('{"elicit": {"mode": "yolo"}}')
    (home / ".mcpx").mkdir()
    project = home / ".mcpx" / "config.json"
    project.write_text('{"plugin": {"elicit": "loud"}}')
    env = {k: v for k, v in d.env.items() if k != "MCPX_CONFIG"}
    both = Daemon(home, d.config, {**env, "MCPX_USER_CONFIG": str(user)}).cli("config", "check")
    assert both.returncode == 1 and "2 problems" in both.stderr
    assert f"{user}: elicit.mode" in both.stderr and f"{project}: plugin.elicit" in both.stderr


async def test_answer_with_a_field_given_twice_is_an_error(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, requestedSchema=FORM)
    out = daemon.cli("elicit", "answer", q["id"], "repo=a", "repo=b")
    assert out.returncode == 2, out
    assert "repo is given twice" in out.stderr and "repo=b" in out.stderr
    async with http.get(f"/v1/elicit/{q['id']}") as r:
        assert (await r.json())["elicitation"]["state"] == "pending"


async def test_ask_with_a_bad_schema_is_a_usage_error_whether_json_or_type(daemon: Daemon,
                                                                         http: aiohttp.ClientSession) -> None:
    not_json = daemon.cli("elicit", "ask", "-m", "Which?", "--schema", '{"repo": ')
    assert not_json.returncode == 2 and "--schema is not valid JSON" in not_json.stderr
    bad_type = daemon.cli("elicit", "ask", "-m", "Which?", "--schema", '{"repo": {"type": "strin"}}')
    assert bad_type.returncode == 2, bad_type
    assert "--schema is not a schema a question can have" in bad_type.stderr and "'strin'" in bad_type.stderr
    async with http.get("/v1/elicit", params={"state": "all"}) as r:
        assert (await r.json())["count"] == 0  # nothing was asked


def test_call_says_the_arguments_are_not_json(home: Path) -> None:
    d = make_daemon(home)
    out = d.cli("call", "demo.choose_repository", '{"repo":')
    assert out.returncode == 2
    assert "the arguments are not JSON" in out.stderr and '\'{"repo":\'' in out.stderr
    listed = d.cli("call", "demo.choose_repository", '["octo/hello"]')
    assert listed.returncode == 2 and "must be a JSON object" in listed.stderr


def test_policy_test_warns_of_a_server_that_is_not_configured(home: Path) -> None:
    d = make_daemon(home, {"servers": {"gh": {"command": "gh-mcp"}}})
    schema = '{"repo": {"type": "string"}}'
    unknown = d.cli("policy", "test", "--server", "nosuch", "--schema", schema)
    assert unknown.returncode == 0
    assert "warning: no server 'nosuch' is configured" in unknown.stderr and "servers: gh" in unknown.stderr
    for known in ("gh", "mcpx"):
        out = d.cli("policy", "test", "--server", known, "--schema", schema)
        assert out.returncode == 0 and "warning" not in out.stderr


def test_the_prompt_shows_defaults_as_values(home: Path) -> None:
    d = make_daemon(home, {"servers": {"defaults": stdio("defaults_server.py")}})
    d.start()
    term = Terminal(d, "call", "defaults.triage")
    try:
        for prompt in ("labels [bug, api]: ", "owner [octo]: ", "notify [true]: "):
            term.expect(prompt)
            term.type("")  # take the default
        assert term.finish() == 0
        text = term.out.decode(errors="replace")
        assert '"labels": ["bug", "api"]' in text and '"owner": "octo"' in text
    finally:
        stop_terminal(term)
        d.stop()


def stop_terminal(term: Terminal) -> None:
    """Kill the terminal's process unless it has been reaped already; close its end of the pty."""
    try:
        pid, _ = os.waitpid(term.pid, os.WNOHANG)
        if pid == 0:
            os.kill(term.pid, signal.SIGKILL)
            os.waitpid(term.pid, 0)
    except ChildProcessError:
        pass  # finish() reaped it
    os.close(term.fd)


async def test_the_database_and_its_wal_and_shm_files_are_0600(home: Path) -> None:
    d = make_daemon(home)
    old = os.umask(0)  # the daemon inherits the widest umask: nothing may rely on it
    try:
        d.start()
    finally:
        os.umask(old)
    try:
        async with d.session() as http:
            await ask(http)  # a write: the WAL has content
        modes = {name: stat.S_IMODE((home / name).stat().st_mode)
                 for name in ("mcpx.db", "mcpx.db-wal", "mcpx.db-shm")}
    finally:
        d.stop()
    assert modes == {"mcpx.db": 0o600, "mcpx.db-wal": 0o600, "mcpx.db-shm": 0o600}


def test_a_reader_that_goes_away_ends_the_cli_quietly(daemon: Daemon) -> None:
    # `mcpx status | head -1`: the reader closes the pipe before mcpx has written; the CLI ends as a pipeline's
    # writer does (128 + SIGPIPE), with no traceback
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run(mcpx_command("status"), env=daemon.env, stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=PATIENCE, cwd=daemon.home)
    finally:
        os.close(write)
    assert out.returncode == 141, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
