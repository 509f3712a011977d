"""`mcpx codex install [--scope project|user] [--uninstall]` and `mcpx codex import`, run as a person runs them; and
what they write, read back by the real Codex CLI (`codex mcp list --json`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from codex.harness import require_codex
from harness import ROOT, mcpx_command, python_env

SKILL = ROOT / "skills" / "mcpx-elicitation" / "SKILL.md"
BIN = Path(sys.executable).parent  # this installation's console scripts: `mcpx` among them
MINE = """\
# my own settings: mcpx must keep this comment
model = "o3"  # and this one

[mcp_servers.github]
command = "gh-mcp"
env_vars = ["GITHUB_TOKEN"]  # my token

[mcp_servers.off]
command = "old-server"
enabled = false

[tui]
theme = "dark"
"""


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Any]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    (home / ".codex").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPX_", "CODEX", "XDG_", "GITHUB_"))}
    env.update(HOME=str(home), **python_env(), PATH=os.pathsep.join([str(BIN), "/usr/bin", "/bin"]),
               MCPX_CONFIG=str(tmp_path / "mcpx.json"))
    (tmp_path / "mcpx.json").write_text(json.dumps({"servers": {}, "elicit": {"ttl": "20m"}}))
    return {"project": project, "home": home, "env": env, "tmp": tmp_path, "user": home / ".codex" / "config.toml"}


def mcpx(place: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpx_command("codex", *args), cwd=place["project"], env=place["env"],
                          capture_output=True, text=True, timeout=60)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def entry(timeout: int) -> dict[str, Any]:
    return {"command": "mcpx", "args": ["serve"], "env": {"MCPX_TOOL_PREFIX": "mcp__mcpx__"},
            "env_vars": ["MCPX_HOME", "MCPX_CONFIG", "MCPX_USER_CONFIG", "MCPX_DAEMON_URL", "MCPX_TOKEN",
                         "MCPX_SESSION_ID", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME",
                         "XDG_CACHE_HOME"],
            "tool_timeout_sec": timeout}


def test_project_install_keeps_the_persons_file_and_uninstall_gives_it_back_byte_for_byte(
        place: dict[str, Any]) -> None:
    project = place["project"]
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(MINE + '\n[mcp_servers.mcpx]\ncommand = "mcpx"\nargs = ["serve"]\nstartup_timeout_sec = 30\n')
    original = config.read_bytes()
    done = ok(mcpx(place, "install"))
    assert f"installed for Codex (project scope, {project})" in done.stdout
    # the project is not trusted yet: Codex would not read its config, and install says so (writing nothing of yours)
    assert "only in a project you trust" in done.stdout and not place["user"].exists()
    text = config.read_text()
    assert text.startswith(MINE) and "# my token" in text  # every comment, table and key of the person's
    data = tomllib.loads(text)
    # 20 minutes in mcpx's config, and a minute more: Codex's own default would give up after 60 s
    assert data["mcp_servers"]["mcpx"] == {**entry(1260), "startup_timeout_sec": 30}
    assert (project / ".codex/skills/mcpx-elicitation/SKILL.md").read_bytes() == SKILL.read_bytes()
    # twice: nothing changes
    before = config.read_bytes()
    assert "already installed for Codex" in ok(mcpx(place, "install")).stdout and config.read_bytes() == before
    report = json.loads(ok(mcpx(place, "install", "--json")).stdout)
    assert report["changed"] is False and report["trusted"] is False and report["toolTimeoutSec"] == 1260
    # uninstall: the person's own mcpx table (it ran mcpx serve) goes, with the skill, and the rest is as it was
    ok(mcpx(place, "install", "--uninstall"))
    assert config.read_text() == original.decode().split("\n[mcp_servers.mcpx]")[0] + "\n"
    assert not (project / ".codex" / "skills").exists()


def test_a_file_that_does_not_parse_is_refused_untouched(place: dict[str, Any]) -> None:
    place["user"].write_text('model = "o3"\n[mcp_servers.x\n')
    before = place["user"].read_bytes()
    done = mcpx(place, "install", "--scope", "user")
    assert done.returncode == 1 and "not valid TOML" in done.stderr and str(place["user"]) in done.stderr
    assert place["user"].read_bytes() == before and not (place["home"] / ".codex" / "skills").exists()
    done = mcpx(place, "import", "--scope", "user", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["error"]["code"] == "codex_config"


def test_user_scope_in_a_new_codex_home_leaves_nothing_behind(place: dict[str, Any]) -> None:
    codex_home = place["tmp"] / "elsewhere"
    place["env"]["CODEX_HOME"] = str(codex_home)
    ok(mcpx(place, "install", "--scope", "user"))
    assert tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["mcpx"] == entry(1260)
    assert (codex_home / "skills/mcpx-elicitation/SKILL.md").is_file()
    ok(mcpx(place, "install", "--scope", "user", "--uninstall"))
    assert not codex_home.exists() or not any(codex_home.rglob("*"))
    assert "nothing changed" in ok(mcpx(place, "install", "--scope", "user", "--uninstall")).stdout


def test_import_moves_codexs_servers_behind_mcpx_and_the_real_codex_reads_what_install_wrote(
        place: dict[str, Any]) -> None:
    binary = require_codex()
    place["user"].write_text(MINE)
    done = mcpx(place, "import", "--scope", "user", "--json")
    assert done.returncode == 1, done.stderr  # one server stayed, and import says why
    report = json.loads(done.stdout)
    assert report["moved"] == ["github"] and "turned off in Codex" in report["skipped"]["off"]
    # Codex gave it GITHUB_TOKEN by name (env_vars): mcpx passes it through by name
    moved = json.loads((place["tmp"] / "mcpx.json").read_text())["servers"]["github"]
    assert moved == {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}
    text = place["user"].read_text()
    assert "github" not in text and "# my own settings" in text and 'theme = "dark"' in text
    listed = subprocess.run([str(binary), "mcp", "list", "--json"], cwd=place["project"], capture_output=True,
                            text=True, timeout=60, env={**place["env"], "CODEX_HOME": str(place["home"] / ".codex")})
    assert listed.returncode == 0, listed.stderr
    servers = {s["name"]: s for s in json.loads(listed.stdout)}
    assert set(servers) == {"mcpx", "off"}
    assert servers["mcpx"]["transport"]["command"] == "mcpx" and servers["mcpx"]["transport"]["args"] == ["serve"]
    assert servers["mcpx"]["tool_timeout_sec"] == 1260 and "MCPX_HOME" in servers["mcpx"]["transport"]["env_vars"]
