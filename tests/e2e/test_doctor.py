"""`mcpx doctor` on a good set-up and a broken one: a real daemon, real SDK servers (one that exits at once), a real
Secret Service (tests/keychain.py), mcpx installed into opencode and Claude Code in the project, then broken there.
On a terminal a missing secret is asked for through the broker, and the server then starts with it."""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import loud_skip
from gateway_helpers import stdio
from harness import Daemon, make_daemon, wait_for_sync
from keychain import Keychain, private_keychain
from opencode.harness import build_plugin
from terminal import Terminal


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Keychain]:
    with private_keychain(tmp_path / "kc") as k:
        yield k


def isolated(tmp_path: Path, keys: Keychain) -> dict[str, str]:
    """The person's own host configs in the test's folders; this mcpx on PATH (the plugin looks for it there)."""
    return {**keys.env, "HOME": str(tmp_path / "user"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "OPENCODE_CONFIG_DIR": str(tmp_path / "occ"),
            "CODEX_HOME": str(tmp_path / "codex"), "GEMINI_CLI_HOME": str(tmp_path / "gem"),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def lines(out: str, level: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(level)]


def installed(d: Daemon) -> None:
    if (reason := build_plugin()):  # opencode install copies the built plugin's entry points
        loud_skip(reason)
    for host in ("opencode", "claude", "codex", "gemini"):
        done = d.cli(host, "install")
        assert done.returncode == 0, done
    # the project trusted in both, as the person does when each first starts there
    codex, gemini = Path(d.env["CODEX_HOME"]), Path(d.env["GEMINI_CLI_HOME"]) / ".gemini"
    codex.mkdir(parents=True, exist_ok=True)
    gemini.mkdir(parents=True, exist_ok=True)
    (codex / "config.toml").write_text(f'[projects."{d.home.resolve()}"]\ntrust_level = "trusted"\n')
    (gemini / "trustedFolders.json").write_text(json.dumps({str(d.home.resolve()): "TRUST_FOLDER"}))


def test_a_good_set_up_is_all_well(home: Path, tmp_path: Path, keys: Keychain) -> None:
    keys.store("env", "API_TOKEN", "tok-" + secrets.token_hex(8))
    with make_daemon(home, {"servers": {"env": stdio("env_server.py", secrets=["API_TOKEN"])}},
                     extra_env=isolated(tmp_path, keys)) as d:
        installed(d)
        out = d.cli("doctor")
        js = d.cli("doctor", "--json")
    assert out.returncode == 0, out
    assert lines(out.stdout, "PROBLEM") == [] and lines(out.stdout, "warn") == [], out.stdout
    for said in ("ok      config", "ok      daemon", "ok      store    sqlite",
                 "ok      secrets  env: API_TOKEN in the keychain", "ok      server   env: started (pid ",
                 "and listed 2 tools in",
                 "ok      opencode this project", "ok      claude   this project", "ok      codex    this project",
                 "ok      gemini   this project", "-       opencode your own config: mcpx is not installed",
                 "-       codex    your own config: mcpx is not installed"):
        assert said in out.stdout, out.stdout
    assert out.stdout.rstrip().endswith("mcpx doctor: all is well")
    doc = json.loads(js.stdout)
    assert js.returncode == 0 and doc["ok"] is True
    # the second run finds the instance the first started: it says so, not "started … in 0.0s"
    env = next(f for f in doc["findings"] if f["area"] == "server" and f["subject"] == "env")
    assert env["says"].startswith("running already (pid ") and "started" not in env["says"], env
    assert "ok      config   " in out.stdout and ": in force;" in out.stdout  # which config is in force
    assert {f["area"] for f in doc["findings"]} >= {"config", "daemon", "store", "secrets", "server", "opencode",
                                                      "claude", "codex", "gemini"}


def test_a_broken_set_up_names_each_problem_and_what_to_do(home: Path, tmp_path: Path, keys: Keychain) -> None:
    servers = {"quits": stdio("env_server.py", "--fail"), "needy": stdio("env_server.py", secrets=["API_TOKEN"])}
    with make_daemon(home, {"servers": servers}, extra_env=isolated(tmp_path, keys)) as d:
        installed(d)
        (home / ".opencode" / "mcpx" / "tui.js").unlink()
        (home / ".codex" / "skills" / "mcpx-elicitation" / "SKILL.md").unlink()
        out = d.cli("doctor")
        d.write_config({"servers": servers, "elicit": {"ttl": "soon"}})  # the daemon keeps the config before it
        wait_for_sync(lambda: d.api().json("GET", "/v1/health").get("configError"),
                      what="the daemon's reload of the bad config failed")
        bad = d.cli("doctor", "--json")
        pending = json.loads(d.cli("elicit", "list", "--json").stdout)["elicitations"]
    assert out.returncode == 1, out
    problems = lines(out.stdout, "PROBLEM")
    assert any("server   quits: server 'quits'" in p and "exited with code 3" in p and "— check its command" in p
               for p in problems), problems
    assert any("secrets  needy: API_TOKEN not in the keychain — `mcpx secrets set needy API_TOKEN`" in p
               for p in problems), problems
    assert any("server   needy: not started: its secrets are missing" in p for p in problems), problems
    assert any("opencode this project" in p and ".opencode/mcpx/tui.js is missing" in p
               and "— run `mcpx opencode install` again" in p for p in problems), problems
    assert "ok      claude   this project" in out.stdout
    assert any("codex    this project" in p and ".codex/skills/mcpx-elicitation/SKILL.md is missing" in p
               and "— run `mcpx codex install` again" in p for p in problems), problems
    assert "mcpx doctor: 5 problems" in out.stdout
    assert pending == []  # without a terminal nothing was asked
    found = json.loads(bad.stdout)
    assert bad.returncode == 1 and found["ok"] is False
    config = [f for f in found["findings"] if f["area"] == "config" and not f["ok"]]
    assert config and "elicit.ttl" in config[0]["subject"] and config[0]["fix"], config
    assert any(f["area"] == "daemon" and f["subject"] == "config" and not f["ok"] for f in found["findings"])


def test_on_a_terminal_a_missing_secret_is_asked_and_the_server_starts(home: Path, tmp_path: Path,
                                                                      keys: Keychain) -> None:
    value = "tok-" + secrets.token_hex(16)
    with make_daemon(home, {"servers": {"env": stdio("env_server.py", secrets=["API_TOKEN"])}},
                     extra_env=isolated(tmp_path, keys)) as d:
        with Terminal(d, "doctor") as term:
            term.expect("API_TOKEN:")  # the prompt itself, written once the echo is off (typing sooner is flushed)
            term.type(value)
            code = term.finish()
            shown = term.out.decode(errors="replace")
        asked = json.loads(d.cli("elicit", "list", "--state", "all", "--json").stdout)["elicitations"]
        shown_q = d.cli("elicit", "show", asked[0]["id"], "--json").stdout
    assert code == 0, shown
    assert "ok      secrets  env: API_TOKEN given in elc-" in shown and "kept in the keychain" in shown, shown
    assert "ok      server   env: " in shown and "2 tools: environment" in shown, shown  # started by the answer
    assert value not in shown  # typed with the echo off
    assert keys.lookup("env", "API_TOKEN") == value
    assert [(q["server"], q["tool"], q["state"]) for q in asked] == [("mcpx", "env", "answered")]
    assert '"person:cli"' in shown_q and value not in shown_q, shown_q
