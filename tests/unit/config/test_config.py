"""Config: the shapes people paste in, comments allowed, and errors that name the file and the field."""

import json
import sys
from pathlib import Path

import pytest

from harness import make_daemon, read_log, wait_for_sync
from mcpx.config.finding import load_config
from mcpx.config.problems import ConfigError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_embedded_default_runs_the_demo_server(tmp_path, monkeypatch):
    monkeypatch.delenv("MCPX_CONFIG", raising=False)
    monkeypatch.setenv("MCPX_USER_CONFIG", str(tmp_path / "none.json"))
    loaded = load_config(tmp_path)
    assert loaded.sources == [] and list(loaded.config.servers) == ["demo"]
    assert loaded.config.elicit.ttl == 120 and loaded.config.elicit.mode == "ask"


def test_all_three_server_shapes_with_comments(tmp_path, monkeypatch):
    cfg = write(tmp_path / "c.json", """{
      // mcpx's own shape
      "servers": {"gh": {"command": "python", "args": ["s.py"], "elicit": {"ttl": "10m"}}},
      /* the common shape */
      "mcpServers": {"remote": {"url": "http://127.0.0.1:9000/mcp", "headers": {"X": "1"},}},
      "mcp": {"oc": {"type": "local", "command": ["node", "s.js"], "environment": {"A": "b"}, "timeout": 5000},
              "off": {"type": "local", "command": ["x"], "enabled": false}},
      "elicit": {"ttl": "90s", "askTimeout": 30},
    }""")
    monkeypatch.setenv("MCPX_CONFIG", str(cfg))
    c = load_config(tmp_path).config
    assert set(c.servers) == {"gh", "remote", "oc"}
    assert c.servers["gh"].args == ["s.py"] and c.ttl_for("gh") == 600 and c.ttl_for("remote") == 90
    assert c.servers["remote"].headers == {"X": "1"}
    oc = c.servers["oc"]
    assert (oc.command, oc.args, oc.env, oc.timeout) == ("node", ["s.js"], {"A": "b"}, 5.0)
    assert c.elicit.ask_timeout == 30


def test_project_config_merges_over_the_user_config(tmp_path, monkeypatch):
    monkeypatch.delenv("MCPX_CONFIG", raising=False)
    user = write(tmp_path / "user" / "config.json", json.dumps({
        "servers": {"a": {"command": "a"}}, "elicit": {"ttl": 60, "mode": "auto"}}))
    monkeypatch.setenv("MCPX_USER_CONFIG", str(user))
    project = tmp_path / "proj"
    write(project / ".mcpx" / "config.json", json.dumps({"servers": {"b": {"command": "b"}}, "elicit": {"ttl": 30}}))
    (project / "deep" / "er").mkdir(parents=True)
    loaded = load_config(project / "deep" / "er")
    assert set(loaded.config.servers) == {"a", "b"}
    assert loaded.config.elicit.ttl == 30 and loaded.config.elicit.mode == "auto"
    assert loaded.fallback_session() == loaded.fallback_session()
    assert loaded.fallback_session("/x") != loaded.fallback_session("/y")


@pytest.mark.parametrize("text,field,words", [
    ('{"servers": {"x": {"args": []}}}', "servers.x", "command"),
    ('{"servers": {"x": {"command": "a", "tiemout": 3}}}', "servers.x.tiemout", "unknown key; did you mean 'timeout'?"),
    ('{"servers": {"x": {"comand": "a"}}}', "servers.x.comand", "unknown key; did you mean 'command'?"),
    ('{"elicit": {"tll": 3}}', "elicit.tll", "unknown key; did you mean 'ttl'?"),
    ('{"elicit": {"ttl": "soon"}}', "elicit.ttl", "not a duration"),
    ('{"elicit": {"mode": "yolo"}}', "elicit.mode", "ask"),
    ('{"elicit": {"rules": [{"match": {"server": "a"}, "action": "decline"}, {"match": {}, "action": "accept"}]}}',
     "elicit.rules[1]", "empty match"),
    ('{"elicit": {"rules": [{"match": {"server": "a"}}]}}', "elicit.rules[0]", "says nothing about the answer"),
    ('{"elicit": {"rules": [{"match": {"message": "("}}]}}', "elicit.rules[0].match", "regular expression"),
    ('{"plugin": {"elicit": "loud"}}', "plugin.elicit", "notify"),
    ('{"servers": {"bad name": {"command": "a"}}}', None, "server name"),
    ("{nope", None, "not valid JSON"),
    (" \n", None, "the file is empty"),
])
def test_errors_name_the_file_and_the_field(tmp_path, monkeypatch, text, field, words):
    cfg = write(tmp_path / "c.json", text)
    monkeypatch.setenv("MCPX_CONFIG", str(cfg))
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert err.value.path == str(cfg)
    if field:
        assert err.value.field == field, str(err.value)
    assert words in str(err.value)


# ---------------------------------------------------------------- `mcpx config check`: what would fail later


def executable(path: Path) -> Path:
    write(path, "#!/bin/sh\nexit 0\n").chmod(0o755)
    return path


def test_check_names_the_server_whose_command_would_not_start(home: Path) -> None:
    own_bin = executable(home / "own-bin" / "only-here")  # on no PATH but the one its env gives
    project = home / "project"
    executable(project / "run.sh")  # ./run.sh from its cwd, not from where check runs
    good = {"py": {"command": sys.executable},
            "own": {"command": "only-here", "env": {"PATH": str(own_bin.parent)}},
            "rel": {"command": "./run.sh", "cwd": str(project)},
            "remote": {"url": "http://127.0.0.1:9/mcp"}}
    d = make_daemon(home, {"servers": {**good, "gone": {"command": "mcpx-no-such-command"},
                                       "nowhere": {"command": "sh", "cwd": str(home / "absent")}}})
    out = d.cli("config", "check", str(d.config))
    assert out.returncode == 1, out
    assert "2 problems" in out.stderr
    assert (f"{d.config}: servers.gone.command: command 'mcpx-no-such-command' not found on its PATH"
            in out.stderr)
    assert f"{d.config}: servers.nowhere.cwd: '{home / 'absent'}' is not a directory" in out.stderr
    js = json.loads(d.cli("config", "check", "--json").stdout)  # the config in force is checked the same way
    assert js["ok"] is False and [p["field"] for p in js["problems"]] == ["servers.gone.command", "servers.nowhere.cwd"]

    d.write_config({"servers": good})
    out = d.cli("config", "check")
    assert out.returncode == 0 and "ok — servers own, py, rel, remote" in out.stdout, out


def test_a_call_to_a_server_whose_command_is_missing_says_so(home: Path) -> None:
    with make_daemon(home, {"servers": {"gone": {"command": "mcpx-no-such-command"}}}) as d:
        out = d.cli("call", "gone.anything", "{}")
    assert out.returncode == 1, out
    assert ("server 'gone' could not start `mcpx-no-such-command`: command 'mcpx-no-such-command' not found on "
            "its PATH") in out.stderr
    assert "Errno" not in out.stderr


def test_check_suggests_the_key_an_unknown_one_is_likely_a_misspelling_of(home: Path) -> None:
    d = make_daemon(home)
    d.write_config({"servers": {"gh": {"comand": "gh-mcp", "idle_timeout": "5m"}},
                    "elicit": {"tll": "2m", "rules": [{"match": {"servr": "gh"}, "action": "decline"}]},
                    "plugn": {"elicit": "ask"}, "zzz": 1})
    out = d.cli("config", "check")
    assert out.returncode == 1
    for line in ["servers.gh.comand: unknown key; did you mean 'command'?",
                 "servers.gh.idle_timeout: unknown key; did you mean 'idleTimeout'?",
                 "elicit.tll: unknown key; did you mean 'ttl'?",
                 "elicit.rules[0].match.servr: unknown key; did you mean 'server'?",
                 "plugn: unknown key; did you mean 'plugin'?",
                 "zzz: unknown key (the keys here: $schema, elicit, mcp, mcpServers, people, plugin, servers, store, "
                 "storeLease)"]:
        assert f"{d.config}: {line}" in out.stderr, out.stderr
    assert "needs either" not in out.stderr and "Extra inputs" not in out.stderr  # the misspelt command says it all
    # the daemon reads its config with the same words
    refused = d.cli("daemon")
    assert refused.returncode == 1 and "elicit.tll: unknown key; did you mean 'ttl'?" in refused.stderr


@pytest.mark.parametrize("text", ["", "  \n", "// nothing yet\n/* at all */\n"])
def test_check_says_an_empty_file_is_empty_and_what_a_config_looks_like(home: Path, text: str) -> None:
    d = make_daemon(home)
    d.config.write_text(text)
    out = d.cli("config", "check", str(d.config))
    assert out.returncode == 1
    assert f"{d.config}: the file is empty" in out.stderr and '{"servers": {"NAME": {"command": ' in out.stderr
    assert "not valid JSON" not in out.stderr


def test_a_timeout_under_the_start_minimum_is_warned_by_check_and_logged_once_by_the_daemon(home: Path) -> None:
    demo = {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"]}
    d = make_daemon(home, {"servers": {"quick": {**demo, "timeout": "5s"}, "slow": {**demo, "timeout": "90s"}}})
    out = d.cli("config", "check")
    assert out.returncode == 0, out
    warning = f"{d.config}: servers.quick.timeout: 5s is under the 10s minimum for a start"
    assert f"mcpx: warning: {warning}" in out.stderr and "servers.slow" not in out.stderr
    js = json.loads(d.cli("config", "check", "--json").stdout)
    assert [w["field"] for w in js["warnings"]] == ["servers.quick.timeout"]
    with d:
        # a reload that keeps the short timeout does not say it again
        d.write_config({"servers": {"quick": {**demo, "timeout": "5s"}}, "elicit": {"ttl": "90s"}})
        wait_for_sync(lambda: "config reloaded" in read_log(home))
    logged = d.paths.log.read_text()  # daemon.log (read_log holds it twice: the log, and the process's stderr)
    assert logged.count(warning) == 1 and "WARNING" in logged, logged
