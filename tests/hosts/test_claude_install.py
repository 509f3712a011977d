"""`mcpx claude install [--scope project|user] [--uninstall]` and `mcpx claude import`, run as a person runs them;
and what they install, used by real Claude Code (tests/claude/harness.py)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claude.fake_model import Call, Request, Say, ScriptedClaudeModel
from claude.harness import claude_env, require_claude, run_print, seed_home, start_print
from gateway_helpers import answer, stdio
from harness import PATIENCE, ROOT, mcpx_command, python_env, scratch_daemon, stop_process
from mcpx.config.finding import load_config

SKILL = ROOT / "skills" / "mcpx-elicitation" / "SKILL.md"
BIN = Path(sys.executable).parent  # this installation's console scripts: `mcpx` among them
ENTRY = {"type": "stdio", "command": "mcpx", "args": ["serve"], "env": {"MCPX_TOOL_PREFIX": "mcp__mcpx__"}}


def group(timeout: int, command: str = "mcpx claude hook") -> dict[str, Any]:
    return {"matcher": "mcpx", "hooks": [{"type": "command", "command": command, "timeout": timeout}]}


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Any]:
    project = tmp_path / "project"
    project.mkdir()
    # GITHUB_*: import passes a variable named like a server (github) through to it
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MCPX_", "CLAUDE", "XDG_", "GITHUB_")) and k not in ("AGENT", "OPENCODE")}
    # this mcpx on PATH, first: the person's shell after `./dev run` (or pipx)
    env.update(HOME=str(tmp_path / "home"), **python_env(),
               PATH=os.pathsep.join([str(BIN), "/usr/bin", "/bin"]))
    (tmp_path / "home").mkdir()
    return {"project": project, "home": tmp_path / "home", "env": env, "tmp": tmp_path}


def mcpx(place: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpx_command("claude", *args), cwd=place["project"],
                          env={**place["env"], **(env or {})}, capture_output=True, text=True, timeout=60)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


# ---- installing into a project


def test_install_into_a_new_project_writes_what_anyone_can_commit(place: dict[str, Any]) -> None:
    project = place["project"]
    subprocess.run(["git", "init", "-q", str(place["tmp"])], check=True, timeout=30)  # the project is in a work tree
    done = ok(mcpx(place, "install"))
    assert f"installed for Claude Code (project scope, {project})" in done.stdout and "can be committed" in done.stdout
    # the approval file is this machine's alone, and git would take it: said, with the line that keeps it out
    assert "git does not ignore .claude/settings.local.json: add it to .gitignore" in done.stdout, done.stdout
    assert read(project / ".mcp.json") == {"mcpServers": {"mcpx": ENTRY}}
    # no config file: the embedded default's demo server, whose questions wait an hour
    assert read(project / ".claude" / "settings.json") == {"hooks": {"Elicitation": [group(3660)]}}
    assert read(project / ".claude" / "settings.local.json") == {"enabledMcpjsonServers": ["mcpx"]}
    assert (project / ".claude/skills/mcpx-elicitation/SKILL.md").read_bytes() == SKILL.read_bytes()
    assert sorted(files_under(project)) == [".claude/settings.json", ".claude/settings.local.json",
                                            ".claude/skills/mcpx-elicitation/SKILL.md", ".mcp.json"]
    for name, data in files_under(project).items():  # nothing names a path of this machine
        text = data.decode()
        assert str(place["tmp"]) not in text and str(ROOT) not in text and str(BIN) not in text, name
    before = files_under(project)
    stamps = {p: p.stat().st_mtime_ns for p in project.rglob("*") if p.is_file()}
    again = ok(mcpx(place, "install"))
    assert "already installed for Claude Code" in again.stdout and "nothing changed" in again.stdout
    assert files_under(project) == before
    assert stamps == {p: p.stat().st_mtime_ns for p in project.rglob("*") if p.is_file()}
    report = json.loads(ok(mcpx(place, "install", "--json")).stdout)
    assert report["changed"] is False and report["written"] == [] and report["machineSpecific"] is False
    assert report["hookTimeout"] == 3660 and report["mcpxOnPath"] == str(BIN / "mcpx")
    gone = json.loads(ok(mcpx(place, "install", "--uninstall", "--json")).stdout)
    assert sorted(gone["deleted"]) == sorted(str(project / p) for p in
                                             (".mcp.json", ".claude/settings.json", ".claude/settings.local.json"))
    assert list(project.iterdir()) == []


SETTINGS = {
    "model": "sonnet",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}],
        "Elicitation": [{"matcher": "github", "hooks": [{"type": "command", "command": "gh-answer"}]}],
    },
}
MCP_JSON = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "gh-mcp"]}}}
LOCAL = {"enabledMcpjsonServers": ["github"], "permissions": {"deny": ["Read(.env)"]}}


def test_install_keeps_every_setting_and_hook_and_uninstall_reverses_it(place: dict[str, Any]) -> None:
    project = place["project"]
    settings, local, mcp = project / ".claude/settings.json", project / ".claude/settings.local.json", \
        project / ".mcp.json"
    write(settings, SETTINGS)
    write(local, LOCAL)
    write(mcp, MCP_JSON)
    ok(mcpx(place, "install"))
    data = read(settings)
    assert list(data) == list(SETTINGS) and data["model"] == "sonnet" and data["permissions"] == SETTINGS["permissions"]
    assert data["hooks"] == {**SETTINGS["hooks"], "Elicitation": [*SETTINGS["hooks"]["Elicitation"], group(3660)]}
    assert read(local) == {**LOCAL, "enabledMcpjsonServers": ["github", "mcpx"]}
    assert read(mcp) == {"mcpServers": {**MCP_JSON["mcpServers"], "mcpx": ENTRY}}
    before = files_under(project)
    assert "nothing changed" in ok(mcpx(place, "install")).stdout
    assert files_under(project) == before
    gone = ok(mcpx(place, "install", "--uninstall"))
    assert f"removed hooks.Elicitation from {settings}" in gone.stdout
    assert f"removed mcpServers.mcpx from {mcp}" in gone.stdout
    assert read(settings) == SETTINGS and read(local) == LOCAL and read(mcp) == MCP_JSON
    assert sorted(files_under(project)) == [".claude/settings.json", ".claude/settings.local.json", ".mcp.json"]
    assert "nothing changed" in ok(mcpx(place, "install", "--uninstall")).stdout


def test_uninstall_keeps_an_empty_object_or_list_that_was_there_and_what_is_not_mcpxs(place: dict[str, Any]) -> None:
    project = place["project"]
    files = {".mcp.json": {"mcpServers": {}}, ".claude/settings.json": {"hooks": {"Elicitation": []}},
             ".claude/settings.local.json": {"enabledMcpjsonServers": []}}
    for name, data in files.items():
        write(project / name, data)
    mine = project / ".claude" / "skills" / "mcpx-elicitation" / "notes.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    ok(mcpx(place, "install"))
    ok(mcpx(place, "install", "--uninstall"))
    assert {name: read(project / name) for name in files} == files
    assert mine.read_text() == "mine" and not (mine.parent / "SKILL.md").exists()
    # an entry named mcpx that does not run mcpx, and a hook that is the person's, are theirs
    write(project / ".mcp.json", {"mcpServers": {"mcpx": {"command": "something-else"}}})
    theirs = {"hooks": {"Elicitation": [{"matcher": "mcpx", "hooks": [{"type": "command", "command": "my-hook"}]}]}}
    write(project / ".claude/settings.json", theirs)
    ok(mcpx(place, "install", "--uninstall"))
    assert read(project / ".mcp.json") == {"mcpServers": {"mcpx": {"command": "something-else"}}}
    assert read(project / ".claude/settings.json") == theirs


def test_the_hook_timeout_is_the_longest_ttl_plus_a_minute_and_follows_the_config(place: dict[str, Any]) -> None:
    config = place["tmp"] / "mcpx.json"
    write(config, {"elicit": {"ttl": "2m"}, "servers": {"slow": {"command": "x", "elicit": {"ttl": "10m"}},
                                                        "quick": {"command": "y"}}})
    env = {"MCPX_CONFIG": str(config)}
    ok(mcpx(place, "install", env=env))
    settings = place["project"] / ".claude" / "settings.json"
    assert read(settings)["hooks"]["Elicitation"] == [group(660)]
    write(config, {"elicit": {"ttl": "30m"}})
    done = ok(mcpx(place, "install", env=env))
    assert "timeout 1860 s" in done.stdout
    assert read(settings)["hooks"]["Elicitation"] == [group(1860)]  # replaced, not doubled
    config.write_text('{"elicit": {"ttl": "soon"}}')
    broken = mcpx(place, "install", env=env)
    assert broken.returncode == 1 and "mcpx's config does not load" in broken.stderr


@pytest.mark.parametrize("name", [".mcp.json", ".claude/settings.json", ".claude/settings.local.json"])
@pytest.mark.parametrize("text", ['{"mcpServers": {', '{\n  // mine\n  "model": "sonnet",\n}\n'])
def test_a_file_that_does_not_parse_is_refused_untouched(place: dict[str, Any], name: str, text: str) -> None:
    path = place["project"] / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    done = mcpx(place, "install")
    assert done.returncode == 1 and str(path) in done.stderr
    assert ("not valid JSON" if "//" not in text else "has comments or trailing commas") in done.stderr
    assert path.read_text() == text
    assert sorted(files_under(place["project"])) == [name]  # nothing else was written either
    assert json.loads(mcpx(place, "install", "--json").stdout)["error"]["code"] == "claude_config"
    assert mcpx(place, "install", "--uninstall").returncode == 1 and path.read_text() == text


def test_with_no_mcpx_on_path_it_names_this_one(place: dict[str, Any]) -> None:
    done = ok(mcpx(place, "install", env={"PATH": "/usr/bin:/bin"}))
    script = str(BIN / "mcpx")
    assert read(place["project"] / ".mcp.json")["mcpServers"]["mcpx"] == {**ENTRY, "command": script}
    assert read(place["project"] / ".claude/settings.json")["hooks"]["Elicitation"] == [
        group(3660, f"{script} claude hook")]
    assert f"name this machine's mcpx ({script})" in done.stdout and "can be committed" not in done.stdout
    ok(mcpx(place, "install"))  # on PATH again: the entry and the hook are replaced, not doubled
    assert read(place["project"] / ".claude/settings.json")["hooks"]["Elicitation"] == [group(3660)]


# ---- the user's own files


@pytest.mark.parametrize("how", ["home", "claude_config_dir"])
def test_user_scope_writes_the_users_own_files(place: dict[str, Any], how: str) -> None:
    home = place["home"]
    own = home / ".claude" if how == "home" else place["tmp"] / "ccd"
    state = home / ".claude.json" if how == "home" else own / ".claude.json"
    env = {} if how == "home" else {"CLAUDE_CONFIG_DIR": str(own)}
    claude_state = {"hasCompletedOnboarding": True, "projects": {"/x": {"mcpServers": {}}}, "mcpServers": {}}
    write(state, claude_state)
    write(own / "settings.json", SETTINGS)
    report = json.loads(ok(mcpx(place, "install", "--scope", "user", "--json", env=env)).stdout)
    assert report["mcp"] == str(state) and report["settings"] == str(own / "settings.json")
    assert report["approvals"] is None  # a user's server is not held for approval
    assert read(state) == {**claude_state, "mcpServers": {"mcpx": ENTRY}}
    assert read(own / "settings.json")["hooks"]["Elicitation"][-1] == group(3660)
    assert (own / "skills/mcpx-elicitation/SKILL.md").read_bytes() == SKILL.read_bytes()
    assert list(place["project"].iterdir()) == []
    before = files_under(own)
    assert "nothing changed" in ok(mcpx(place, "install", "--scope", "user", env=env)).stdout
    assert files_under(own) == before
    ok(mcpx(place, "install", "--scope", "user", "--uninstall", env=env))
    assert read(state) == claude_state and read(own / "settings.json") == SETTINGS
    assert not (own / "skills").exists()


def test_user_scope_in_a_new_home_leaves_nothing_behind(place: dict[str, Any]) -> None:
    ok(mcpx(place, "install", "--scope", "user"))
    home = place["home"]
    assert read(home / ".claude.json") == {"mcpServers": {"mcpx": ENTRY}}
    ok(mcpx(place, "install", "--scope", "user", "--uninstall"))
    assert [p for p in files_under(home) if not p.startswith(".local/state/mcpx/")] == []
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()


# ---- import


GITHUB = {"type": "stdio", "command": "npx", "args": ["-y", "gh-mcp"],
          "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_PAT}"}}
DOCS = {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}}


def test_import_moves_project_and_local_servers_behind_mcpx_and_installs_it(place: dict[str, Any]) -> None:
    project, home = place["project"], place["home"]
    old = {"type": "sse", "url": "https://mcp.example.com/sse"}
    headed = {"type": "http", "url": "https://x.example.com/mcp", "headers": {"Authorization": "Bearer ${X_TOKEN}"}}
    write(project / ".mcp.json", {"mcpServers": {"github": GITHUB, "docs": DOCS, "old": old, "headed": headed}})
    notes = {"command": "python3", "args": ["notes.py"]}
    state = {"theme": "dark", "projects": {str(project): {"allowedTools": [], "mcpServers": {"notes": notes},
                                                          "hasTrustDialogAccepted": True}}}
    write(home / ".claude.json", state)
    done = mcpx(place, "import", env={"GH_PAT": "ghp_" + "1" * 36, "GITHUB_TOKEN": "ghp_" + "2" * 36})
    assert done.returncode == 1, "two servers could not move: it says so"
    for name in ("github", "docs", "notes"):
        assert f"moved {name!r}" in done.stdout and f"mcp__mcpx__{name}_TOOL" in done.stdout
    assert "left 'old'" in done.stderr and "HTTP+SSE" in done.stderr
    assert "left 'headed'" in done.stderr and "${X_TOKEN} outside its env" in done.stderr
    assert "installed for Claude Code (project scope" in done.stdout
    moved = read(project / ".mcpx" / "config.json")["servers"]
    assert moved == {"github": {**GITHUB, "env": {**GITHUB["env"], "GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
                     "docs": DOCS, "notes": notes}
    assert read(project / ".mcp.json") == {"mcpServers": {"old": old, "headed": headed, "mcpx": ENTRY}}
    assert read(home / ".claude.json") == {**state, "projects": {str(project): {
        **state["projects"][str(project)], "mcpServers": {}}}}
    # the hook's timeout, from the config import wrote: no demo server now, the default TTL (120 s) + 60 s
    assert read(project / ".claude/settings.json")["hooks"]["Elicitation"] == [group(180)]
    loaded = load_config(project)  # mcpx reads what import wrote, Claude Code's shapes and all
    assert loaded.config.servers["github"].command == "npx" and loaded.config.servers["docs"].url == DOCS["url"]
    again = json.loads(mcpx(place, "import", "--json").stdout)
    assert again["moved"] == [] and sorted(again["skipped"]) == ["headed", "old"] and again["install"] is None


def test_import_from_the_user_scope_goes_to_mcpxs_user_config(place: dict[str, Any]) -> None:
    home = place["home"]
    state = {"theme": "dark", "mcpServers": {"docs": DOCS, "local": {"command": "python3", "args": ["srv.py"],
                                                                     "env": {"MODE": "${MODE:-fast}"}}}}
    write(home / ".claude.json", state)
    report = json.loads(mcpx(place, "import", "--scope", "user", "--json").stdout)
    assert report["into"] == str(home / ".config" / "mcpx" / "config.json") and report["moved"] == ["docs"]
    assert "no :-default" in report["skipped"]["local"]
    assert report["install"]["scope"] == "user"
    assert read(home / ".config" / "mcpx" / "config.json") == {"servers": {"docs": DOCS}}
    assert read(home / ".claude.json") == {"theme": "dark", "mcpServers": {"local": state["mcpServers"]["local"],
                                                                           "mcpx": ENTRY}}
    assert list(place["project"].iterdir()) == []


def test_import_with_nothing_to_move(place: dict[str, Any]) -> None:
    ok(mcpx(place, "install"))
    done = ok(mcpx(place, "import"))
    assert "no MCP servers to import" in done.stdout
    assert not (place["project"] / ".mcpx").exists()


# ---- in real Claude Code


def test_real_claude_code_calls_a_server_through_the_installed_entry(tmp_path: Path, place: dict[str, Any]) -> None:
    """After `mcpx claude install` in a new project, `claude -p` (the scripted model calling sdk's echo through the
    mcpx entry) gets the server's real result; `claude mcp list` shows the entry approved and connected."""
    binary = require_claude()
    project, home = place["project"], place["home"]
    seed_home(home, [project])
    model = ScriptedClaudeModel(tmp_path / "model.log").start()
    d = scratch_daemon("cci", {"servers": {"sdk": stdio("sdk_server.py")}})
    try:
        d.start()
        ok(mcpx(place, "install", env={"MCPX_CONFIG": str(d.config)}))
        env = claude_env(home, model.base_url, {"MCPX_HOME": str(d.home), "MCPX_CONFIG": str(d.config),
                                                "PYTHONPATH": d.env["PYTHONPATH"]})
        listed = subprocess.run([str(binary), "mcp", "list"], cwd=project, env=env, capture_output=True, text=True,
                                timeout=PATIENCE, stdin=subprocess.DEVNULL)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        line = next(x for x in listed.stdout.splitlines() if x.startswith("mcpx:"))
        assert "mcpx serve" in line and "Connected" in line, listed.stdout

        def answer(r: Request) -> Say:
            return Say("the server said: " + r.last_tool_result())

        marker = model.script("echo", [lambda _r: Call("mcp__mcpx__sdk_echo", {"text": "hi from Claude Code"}),
                                       answer])
        done = run_print(binary, f"{marker} echo something", project, env, allowed=["mcp__mcpx__sdk_echo"])
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith("the server said: ") and "echo: hi from Claude Code" in done.stdout
    finally:
        d.cleanup()
        model.stop()


async def test_real_claude_code_runs_the_installed_hook_with_its_long_timeout(tmp_path: Path,
                                                                              place: dict[str, Any]) -> None:
    """The hook install writes (timeout 3660 s, for a server whose questions wait an hour) is one Claude Code takes
    and runs: under `claude -p`, which cancels every question by itself, the hook waits in mcpx for the person, and
    their answer is the call's."""
    binary = require_claude()
    project, home = place["project"], place["home"]
    seed_home(home, [project])
    model = ScriptedClaudeModel(tmp_path / "model.log").start()
    d = scratch_daemon("cch", {"servers": {"sdk": stdio("sdk_server.py", elicit={"ttl": "1h"})}})
    claude: subprocess.Popen[str] | None = None
    try:
        d.start()
        ok(mcpx(place, "install", env={"MCPX_CONFIG": str(d.config)}))
        assert read(project / ".claude/settings.json")["hooks"]["Elicitation"] == [group(3660)]
        env = claude_env(home, model.base_url, {"MCPX_HOME": str(d.home), "MCPX_CONFIG": str(d.config),
                                                "PYTHONPATH": d.env["PYTHONPATH"]})
        # a credential: the person's alone to give, so the hook waits for them
        marker = model.script("ask", [lambda _r: Call("mcp__mcpx__sdk_use_token", {"echo": False}),
                                      lambda r: Say("the server said: " + r.last_tool_result())])
        claude = start_print(binary, f"{marker} use my token", project, env, allowed=["mcp__mcpx__sdk_use_token"])
        assert claude.stderr is not None
        told = await asyncio.wait_for(asyncio.to_thread(_line_with, claude.stderr, "mcpx elicit answer"), PATIENCE)
        eid = re.search(r"elc-[0-9a-f]+", told)
        assert eid is not None, told
        async with d.session() as http:
            status, body = await answer(http, eid.group(0), "accept", {"api_token": "t" * 24})
            assert status == 200, body
        out, err = await asyncio.to_thread(claude.communicate, timeout=PATIENCE)
        assert claude.returncode == 0, out + err
        assert out.startswith("the server said: ") and '\\"token_length\\": 24' in out, out
    finally:
        if claude is not None:
            stop_process(claude)
        d.cleanup()
        model.stop()


def _line_with(stream: Any, text: str) -> str:
    """The first line of `stream` that holds `text` (what was read before it is dropped)."""
    seen = []
    for line in stream:
        if text in line:
            return str(line)
        seen.append(line)
    raise AssertionError(f"the stream ended with no line holding {text!r}: {''.join(seen)[-3000:]}")
