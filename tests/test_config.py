"""Config: the shapes people paste in, comments allowed, and errors that name the file and the field."""

import json
from pathlib import Path

import pytest

from mcpx.config import ConfigError, load_config


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
    ('{"servers": {"x": {"command": "a", "tiemout": 3}}}', "servers.x.tiemout", "Extra"),
    ('{"elicit": {"ttl": "soon"}}', "elicit.ttl", "not a duration"),
    ('{"elicit": {"mode": "yolo"}}', "elicit.mode", "ask"),
    ('{"elicit": {"rules": [{"match": {"server": "a"}, "action": "decline"}, {"match": {}, "action": "accept"}]}}',
     "elicit.rules[1]", "empty match"),
    ('{"elicit": {"rules": [{"match": {"server": "a"}}]}}', "elicit.rules[0]", "says nothing about the answer"),
    ('{"elicit": {"rules": [{"match": {"message": "("}}]}}', "elicit.rules[0].match", "regular expression"),
    ('{"plugin": {"elicit": "loud"}}', "plugin.elicit", "notify"),
    ('{"servers": {"bad name": {"command": "a"}}}', None, "server name"),
    ("{nope", None, "not valid JSON"),
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
