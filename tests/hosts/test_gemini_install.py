"""`mcpx gemini install [--scope project|user] [--uninstall]` and `mcpx gemini import`, run as a person runs them;
and what they write, connected to by the real Gemini CLI (`gemini mcp list`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gemini.harness import require_gemini
from harness import ROOT, mcpx_command, python_env, scratch_daemon

SKILL = ROOT / "skills" / "mcpx-elicitation" / "SKILL.md"
BIN = Path(sys.executable).parent
ENTRY = {"command": "mcpx", "args": ["serve"], "env": {"MCPX_TOOL_PREFIX": "mcp_mcpx_"}}


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Any]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPX_", "GEMINI", "XDG_", "GITHUB_"))}
    env.update(HOME=str(home), **python_env(), PATH=os.pathsep.join([str(BIN), "/usr/bin", "/bin"]),
               MCPX_CONFIG=str(tmp_path / "mcpx.json"), GEMINI_CLI_NO_RELAUNCH="true", GITHUB_TOKEN="t0ken")
    (tmp_path / "mcpx.json").write_text(json.dumps({"servers": {}}))
    return {"project": project, "home": home, "env": env, "tmp": tmp_path, "user": home / ".gemini" / "settings.json"}


def mcpx(place: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpx_command("gemini", *args), cwd=place["project"], env=place["env"],
                          capture_output=True, text=True, timeout=60)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_project_install_keeps_every_setting_and_uninstall_reverses_it(place: dict[str, Any]) -> None:
    settings = place["project"] / ".gemini" / "settings.json"
    mine = {"theme": "Dracula", "mcpServers": {"other": {"command": "other-server", "timeout": 5000}}}
    settings.parent.mkdir()
    settings.write_text(json.dumps(mine, indent=2) + "\n")
    done = ok(mcpx(place, "install"))
    assert f"installed for Gemini CLI (project scope, {place['project']})" in done.stdout
    # not trusted yet: Gemini CLI would run no MCP server here, and install says so
    assert "not trusted" in done.stdout.replace("have not trusted", "not trusted")
    assert json.loads(settings.read_text()) == {**mine, "mcpServers": {**mine["mcpServers"], "mcpx": ENTRY}}
    assert (place["project"] / ".gemini/skills/mcpx-elicitation/SKILL.md").read_bytes() == SKILL.read_bytes()
    before = settings.read_bytes()
    assert "already installed for Gemini CLI" in ok(mcpx(place, "install")).stdout and settings.read_bytes() == before
    ok(mcpx(place, "install", "--uninstall"))
    assert json.loads(settings.read_text()) == mine and not (place["project"] / ".gemini" / "skills").exists()
    # a file with comments is refused, untouched (Gemini CLI reads them; mcpx would write them away)
    settings.write_text('{\n  // my theme\n  "theme": "Dracula"\n}\n')
    done = mcpx(place, "install")
    assert done.returncode == 1 and "comments" in done.stderr and "docs/gemini.md" in done.stderr
    assert settings.read_text().startswith('{\n  // my theme')


def test_import_moves_gemini_servers_and_the_real_gemini_cli_connects_to_mcpx(place: dict[str, Any]) -> None:
    command = require_gemini()
    place["user"].parent.mkdir()
    place["user"].write_text(json.dumps({"mcpServers": {
        "github": {"command": "gh-mcp", "env": {"TOKEN": "$GITHUB_TOKEN"}, "trust": True},
        "old": {"url": "http://127.0.0.1:9/sse"}}}))
    (place["home"] / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(place["project"]): "TRUST_FOLDER"}))
    done = mcpx(place, "import", "--scope", "user", "--json")
    assert done.returncode == 1, done.stderr  # the SSE server stays, with the reason
    report = json.loads(done.stdout)
    assert report["moved"] == ["github"] and "HTTP+SSE" in report["skipped"]["old"]
    moved = json.loads((place["tmp"] / "mcpx.json").read_text())["servers"]["github"]
    # $GITHUB_TOKEN, as Gemini CLI fills it, is ${GITHUB_TOKEN} for mcpx; and the variable named like the server
    # (Gemini CLI gave it the whole environment) passes through
    assert moved == {"command": "gh-mcp", "env": {"TOKEN": "${GITHUB_TOKEN}", "GITHUB_TOKEN": "${GITHUB_TOKEN}"}}
    assert set(json.loads(place["user"].read_text())["mcpServers"]) == {"old", "mcpx"}
    daemon = scratch_daemon("mcpx-gem-")
    try:
        daemon.start()
        env = {**place["env"], "MCPX_HOME": str(daemon.home), "MCPX_CONFIG": str(daemon.config)}
        listed = subprocess.run([*command, "mcp", "list"], cwd=place["project"], env=env, capture_output=True,
                                text=True, timeout=120)
        said = listed.stdout + listed.stderr
        assert "mcpx: mcpx serve (stdio) - Connected" in said, said
    finally:
        daemon.cleanup()
