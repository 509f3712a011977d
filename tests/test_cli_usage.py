"""Smaller things a new user hit, each through the real CLI: every problem told at once, usage errors
named as such, defaults shown as values, and the database's side files as private as the database."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import aiohttp

from conftest import Daemon, ask, make_daemon
from gateway_helpers import stdio
from test_cli_call import Terminal

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
    assert f"{bad}: servers.gh: needs either 'command' (stdio) or 'url' (HTTP)" in out.stderr
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
