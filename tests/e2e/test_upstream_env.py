"""Upstreams get what their config gives them, not the daemon's secrets; their command lines are shown masked.

A real daemon with secrets in its environment starts a real SDK server that reports its environment,
and another that fails to start with an API key on its command line.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from gateway_helpers import call, result, stdio, tool_text
from harness import make_daemon, read_log


async def test_a_server_gets_the_safe_set_and_its_own_env_only(home: Path) -> None:
    llm_key = "sk-proj-" + secrets.token_hex(16)
    gh_token = "ghp_" + secrets.token_hex(18)
    flag_key = "sk-" + secrets.token_hex(16)
    d = make_daemon(home, {"servers": {
        "env": stdio("env_server.py", "--api-key", flag_key, env={
            "GH": "${GITHUB_TOKEN}", "LITERAL": "as written", "ESCAPED": "$${GITHUB_TOKEN}",
            "MISSING": "${MCPX_TEST_NOT_SET}"}),
    }}, extra_env={"OPENAI_API_KEY": llm_key, "GITHUB_TOKEN": gh_token, "LC_ALL": "C.UTF-8", "TMPDIR": str(home)})
    d.start()
    try:
        async with d.session() as http:
            status, body, _ = await call(http, "env", "environment")
            assert status == 200, body
            env = tool_text(body if "result" in body else await result(http, body["task"]))
        status_text = d.cli("status").stdout
        status_json = json.loads(d.cli("status", "--json").stdout)
    finally:
        d.stop()
    assert "OPENAI_API_KEY" not in env and llm_key not in json.dumps(env)
    assert "GITHUB_TOKEN" not in env and env["GH"] == gh_token  # passed through under the name the config gave
    assert env["LITERAL"] == "as written" and env["ESCAPED"] == "${GITHUB_TOKEN}"
    assert "MISSING" not in env
    assert env["PATH"] == d.env["PATH"] and env["HOME"] == d.env["HOME"]
    assert env["LC_ALL"] == "C.UTF-8" and env["TMPDIR"] == str(home)
    assert not any(name.startswith("MCPX_") or name == "PYTHONPATH" for name in env)

    log = read_log(home)
    assert "server 'env': its env MISSING was left out: ${MCPX_TEST_NOT_SET} is not set" in log
    assert "--api-key [redacted]" in log and flag_key not in log
    assert "--api-key [redacted]" in status_text and flag_key not in status_text
    assert status_json["serverCommands"]["env"].endswith("--api-key [redacted]")


async def test_a_failing_servers_command_line_never_shows_its_key(home: Path) -> None:
    key = "sk-" + secrets.token_hex(16)
    d = make_daemon(home, {"servers": {"broken": stdio("env_server.py", "--fail", "--api-key", key)}})
    d.start()
    try:
        async with d.session() as http:
            status, body, _ = await call(http, "broken", "environment")
            if status == 202:  # the call started before the server failed: its result says how
                body = await result(http, body["task"])
            async with http.get("/v1/audit", params={"kinds": "task"}) as r:
                audit = await r.text()
            async with http.get("/v1/tools/broken") as r:
                tools = await r.text()
                assert r.status == 502, tools
        listed = d.cli("tools")
        status_text = d.cli("status").stdout
    finally:
        d.stop()
    text = json.dumps(body)
    assert "did not start" in text and "--api-key [redacted]" in text and "exited with code 3" in text
    # the server's own stderr, which echoed its arguments, is masked too
    assert "refusing to start with --fail --api-key [redacted]" in text
    for shown in (text, audit, tools, listed.stdout + listed.stderr, status_text, read_log(home)):
        assert key not in shown
    assert "--api-key [redacted]" in read_log(home)
