"""`mcpx opencode install [--global] [--uninstall]`, `plugin-dir` and `import`, run as a person runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import loud_skip
from gateway_helpers import call, tool_text
from harness import PEERS, ROOT, make_daemon, mcpx_command, python_env
from mcpx.config.finding import load_config
from opencode.harness import PLUGIN, build_plugin

SKILL = ROOT / "skills" / "mcpx-elicitation"
SPEC = "./.opencode/mcpx"  # the plugin, as the project's opencode.json and tui.json name it
BIN = Path(sys.executable).parent  # this installation's console scripts: `mcpx` among them


@pytest.fixture(scope="module", autouse=True)
def plugin_built() -> None:
    if (reason := build_plugin()):
        loud_skip(reason)


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Any]:
    project = tmp_path / "project"
    project.mkdir()
    # GITHUB_*: import passes a variable named like a server (github) through to it
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MCPX_", "OPENCODE_", "XDG_", "GITHUB_")) and k not in ("AGENT", "OPENCODE")}
    # this mcpx on PATH, first: the person's shell after `./dev run` (or pipx)
    env.update(HOME=str(tmp_path / "home"), **python_env(),
               PATH=os.pathsep.join([str(BIN), "/usr/bin", "/bin"]))
    return {"project": project, "env": env, "tmp": tmp_path}


def mcpx(place: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpx_command("opencode", *args), cwd=place["project"],
                          env={**place["env"], **(env or {})}, capture_output=True, text=True, timeout=60)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


EXISTING = {
    "$schema": "https://opencode.ai/config.json",
    "theme": "tokyonight",
    "model": "anthropic/claude-sonnet-4",
    "permission": {"bash": "ask"},
    "mcp": {"github": {"type": "local", "command": ["npx", "-y", "gh-mcp"], "environment": {"GH": "1"}}},
    "plugin": ["opencode-wakatime", ["./my-plugin.js", {"loud": True}]],
    "skills": {"paths": ["./my-skills"]},
}
MCP = {"mcpx": {"type": "local", "command": ["mcpx", "serve"], "enabled": True,
                "environment": {"MCPX_TOOL_PREFIX": "mcpx_"}}}
WRITTEN = ["opencode.json", "tui.json", ".opencode/mcpx/package.json", ".opencode/mcpx/server.js",
           ".opencode/mcpx/tui.js", ".opencode/skills/mcpx-elicitation/SKILL.md"]


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_install_into_a_new_project_writes_what_anyone_can_commit(place: dict[str, Any]) -> None:
    project = place["project"]
    done = ok(mcpx(place, "install"))
    assert f"installed for opencode in {project}" in done.stdout
    assert "opencode.json" in done.stdout and "tui.json" in done.stdout and "can be committed" in done.stdout
    assert json.loads((project / "opencode.json").read_text()) == {
        "$schema": "https://opencode.ai/config.json", "mcp": MCP, "plugin": [SPEC]}
    assert json.loads((project / "tui.json").read_text()) == {"$schema": "https://opencode.ai/tui.json",
                                                              "plugin": [SPEC]}
    assert sorted(files_under(project)) == sorted(WRITTEN)
    for name in ("package.json", "server.js", "tui.js"):  # the entry points, as the plugin ships them
        assert (project / ".opencode" / "mcpx" / name).read_bytes() == (PLUGIN / "entry" / name).read_bytes()
    assert (project / ".opencode/skills/mcpx-elicitation/SKILL.md").read_bytes() == (SKILL / "SKILL.md").read_bytes()
    # nothing names a path of this machine: the files are the same wherever mcpx is installed
    for name, data in files_under(project).items():
        text = data.decode()
        assert str(place["tmp"]) not in text and str(ROOT) not in text and str(BIN) not in text, name
    report = json.loads(ok(mcpx(place, "install", "--json")).stdout)
    assert report["changed"] is False and report["machineSpecific"] is False and report["written"] == []
    assert report["mcpxOnPath"] == str(BIN / "mcpx")
    # what the entry points run: this mcpx's plugin, built
    dist = ok(mcpx(place, "plugin-dir")).stdout.strip()
    assert Path(dist) == PLUGIN / "dist" and (Path(dist) / "tui.js").is_file()


def test_install_keeps_every_setting_twice_changes_nothing_and_uninstall_reverses_it(place: dict[str, Any]) -> None:
    project = place["project"]
    path = project / "opencode.json"
    path.write_text(json.dumps(EXISTING))
    tui = project / "tui.json"
    tui.write_text(json.dumps({"theme": "dark", "plugin": ["./mine.tsx"]}))
    ok(mcpx(place, "install"))
    data = json.loads(path.read_text())
    assert list(data) == list(EXISTING)  # the keys in their order; nothing added at the top but what was missing
    for key in ("$schema", "theme", "model", "permission", "skills"):
        assert data[key] == EXISTING[key]
    assert data["mcp"] == {**EXISTING["mcp"], **MCP}
    assert data["plugin"] == [*EXISTING["plugin"], SPEC]
    assert json.loads(tui.read_text()) == {"theme": "dark", "plugin": ["./mine.tsx", SPEC]}
    before = files_under(project)
    stamps = {p: p.stat().st_mtime_ns for p in project.rglob("*") if p.is_file()}
    again = ok(mcpx(place, "install"))
    assert "nothing changed" in again.stdout
    assert files_under(project) == before
    assert stamps == {p: p.stat().st_mtime_ns for p in project.rglob("*") if p.is_file()}
    gone = ok(mcpx(place, "install", "--uninstall"))
    assert f"removed mcp.mcpx, plugin from {path}" in gone.stdout and f"removed plugin from {tui}" in gone.stdout
    assert json.loads(path.read_text()) == EXISTING
    assert json.loads(tui.read_text()) == {"theme": "dark", "plugin": ["./mine.tsx"]}
    assert sorted(files_under(project)) == ["opencode.json", "tui.json"]
    assert not (project / ".opencode").exists()
    assert "nothing changed" in ok(mcpx(place, "install", "--uninstall")).stdout


def test_uninstall_removes_the_files_install_created(place: dict[str, Any]) -> None:
    ok(mcpx(place, "install"))
    report = json.loads(ok(mcpx(place, "install", "--uninstall", "--json")).stdout)
    assert report["deleted"] is True and report["deletedTui"] is True
    assert report["removed"] == ["mcp.mcpx", "plugin"] and report["removedTui"] == ["plugin"]
    assert sorted(report["files"]) == sorted(WRITTEN[2:])
    assert list(place["project"].iterdir()) == []


def test_uninstall_leaves_what_is_not_mcpxs(place: dict[str, Any]) -> None:
    project = place["project"]
    path = project / "opencode.json"
    path.write_text(json.dumps({"mcp": {"mcpx": {"type": "local", "command": ["something-else"]}}}))
    mine = project / ".opencode" / "mcpx" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    ok(mcpx(place, "install", "--uninstall"))
    assert json.loads(path.read_text()) == {"mcp": {"mcpx": {"type": "local", "command": ["something-else"]}}}
    assert mine.read_text() == "mine"


def test_an_other_entry_name_goes_to_both_parts_of_the_plugin_as_their_option(place: dict[str, Any]) -> None:
    project = place["project"]
    ok(mcpx(place, "install", "--entry", "gateway"))
    data = json.loads((project / "opencode.json").read_text())
    assert list(data["mcp"]) == ["gateway"]
    assert data["plugin"] == [[SPEC, {"entry": "gateway"}]]
    assert json.loads((project / "tui.json").read_text())["plugin"] == [[SPEC, {"entry": "gateway"}]]
    ok(mcpx(place, "install"))  # back to the default name: the plugin is listed once, as now wanted
    data = json.loads((project / "opencode.json").read_text())
    assert data["plugin"] == [SPEC] and set(data["mcp"]) == {"gateway", "mcpx"}
    assert json.loads((project / "tui.json").read_text())["plugin"] == [SPEC]


def test_an_older_mcpxs_plugin_and_skill_paths_are_replaced_not_doubled(place: dict[str, Any]) -> None:
    project = place["project"]
    old_plugin = "file:///opt/venv/lib/python3.11/site-packages/mcpx/assets/opencode/index.js"
    old_skill = "/opt/venv/lib/python3.11/site-packages/mcpx/assets/skills/mcpx-elicitation"
    (project / "opencode.json").write_text(json.dumps({
        "mcp": {"mcpx": {"type": "local", "command": ["/opt/venv/bin/mcpx", "serve"]}},
        "plugin": ["opencode-wakatime", old_plugin], "skills": {"paths": ["./my-skills", old_skill]}}))
    ok(mcpx(place, "install"))
    data = json.loads((project / "opencode.json").read_text())
    assert data["plugin"] == ["opencode-wakatime", SPEC] and data["skills"] == {"paths": ["./my-skills"]}
    assert data["mcp"] == MCP


def test_the_files_opencode_itself_would_read(place: dict[str, Any]) -> None:
    project = place["project"]
    dot = project / ".opencode" / "opencode.json"
    dot.parent.mkdir()
    dot.write_text('{"theme": "dark"}')
    ok(mcpx(place, "install"))
    assert not (project / "opencode.json").exists()
    config = json.loads(dot.read_text())
    assert config["theme"] == "dark" and "mcpx" in config["mcp"] and config["plugin"] == ["./mcpx"]
    assert json.loads((project / ".opencode" / "tui.json").read_text())["plugin"] == ["./mcpx"]  # beside it
    jsonc = project / "opencode.jsonc"
    jsonc.write_text('{"theme": "light"}')  # the project's own file wins over .opencode/, as in opencode
    ok(mcpx(place, "install"))
    assert "mcpx" in json.loads(jsonc.read_text())["mcp"] and json.loads(jsonc.read_text())["plugin"] == [SPEC]
    assert json.loads((project / "tui.json").read_text())["plugin"] == [SPEC]


@pytest.mark.parametrize("name", ["opencode.json", "tui.json"])
def test_a_config_with_comments_is_refused_untouched(place: dict[str, Any], name: str) -> None:
    path = place["project"] / name
    text = '{\n  // my theme\n  "theme": "dark",\n}\n'
    path.write_text(text)
    done = mcpx(place, "install")
    assert done.returncode == 1
    assert "has comments or trailing commas" in done.stderr and str(path) in done.stderr
    assert path.read_text() == text
    assert sorted(files_under(place["project"])) == [name]  # nothing else was written either
    broken = mcpx(place, "install", "--json")
    assert json.loads(broken.stdout)["error"]["code"] == "opencode_config"


def test_with_no_mcpx_on_path_it_says_so_and_names_this_one(place: dict[str, Any]) -> None:
    done = ok(mcpx(place, "install", env={"PATH": "/usr/bin:/bin"}))
    data = json.loads((place["project"] / "opencode.json").read_text())
    script = str(BIN / "mcpx")
    assert data["mcp"]["mcpx"]["command"] == [script, "serve"]
    assert data["plugin"] == [[SPEC, {"mcpx": [script]}]]  # the plugin starts a daemon with this one too
    assert f"names this machine's mcpx ({script})" in done.stdout
    assert "there is no `mcpx` on PATH" in done.stdout and "can be committed" not in done.stdout


@pytest.mark.parametrize("how", ["xdg", "opencode_config_dir", "home"])
def test_global_install_goes_where_opencode_reads_its_global_config(place: dict[str, Any], how: str) -> None:
    tmp = place["tmp"]
    env, expected = {
        "xdg": ({"XDG_CONFIG_HOME": str(tmp / "xdg")}, tmp / "xdg" / "opencode"),
        "opencode_config_dir": ({"OPENCODE_CONFIG_DIR": str(tmp / "occ"), "XDG_CONFIG_HOME": str(tmp / "xdg")},
                                tmp / "occ"),
        "home": ({}, tmp / "home" / ".config" / "opencode"),
    }[how]
    done = ok(mcpx(place, "install", "--global", "--json", env=env))
    report = json.loads(done.stdout)
    assert report["config"] == str(expected / "opencode.json") and report["tui"] == str(expected / "tui.json")
    assert json.loads((expected / "opencode.json").read_text())["mcp"] == MCP
    assert json.loads((expected / "opencode.json").read_text())["plugin"] == ["./mcpx"]
    assert json.loads((expected / "tui.json").read_text())["plugin"] == ["./mcpx"]
    assert sorted(files_under(expected)) == sorted(["opencode.json", "tui.json", "mcpx/package.json",
                                                    "mcpx/server.js", "mcpx/tui.js",
                                                    "skills/mcpx-elicitation/SKILL.md"])
    assert list(place["project"].iterdir()) == []
    ok(mcpx(place, "install", "--global", "--uninstall", env=env))
    assert not expected.exists() or list(expected.rglob("*")) == []


def test_import_moves_the_servers_behind_mcpx(place: dict[str, Any]) -> None:
    path = place["project"] / "opencode.json"
    remote = {"type": "remote", "url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}}
    path.write_text(json.dumps({**EXISTING, "mcp": {**EXISTING["mcp"], "docs": remote,
                                                    "odd": {"type": "remote", "url": "ftp://nope"}}}))
    ok(mcpx(place, "install"))
    done = mcpx(place, "import")
    assert done.returncode == 1, "one server could not move: it says so"
    assert "moved 'github'" in done.stdout and "mcpx_github_TOOL" in done.stdout and "moved 'docs'" in done.stdout
    assert "left 'odd'" in done.stderr and "url must start with http:// or https://" in done.stderr
    target = place["project"] / ".mcpx" / "config.json"
    moved = json.loads(target.read_text())["servers"]
    assert moved == {"github": EXISTING["mcp"]["github"], "docs": remote}
    data = json.loads(path.read_text())
    assert set(data["mcp"]) == {"mcpx", "odd"}
    assert data["theme"] == EXISTING["theme"] and data["plugin"][-1] == SPEC
    loaded = load_config(place["project"])  # mcpx reads what import wrote, opencode's shapes and all
    assert loaded.config.servers["github"].command == "npx" and loaded.config.servers["github"].env == {"GH": "1"}
    assert loaded.config.servers["docs"].url == remote["url"]
    again = json.loads(mcpx(place, "import", "--json").stdout)
    assert again["moved"] == [] and list(again["skipped"]) == ["odd"]


def test_import_into_mcpx_config_keeps_what_is_there_and_refuses_a_different_namesake(place: dict[str, Any]) -> None:
    target = place["tmp"] / "mcpx.json"
    target.write_text(json.dumps({"elicit": {"ttl": "10m"}, "servers": {"github": {"command": "gh-other"}}}))
    path = place["project"] / "opencode.json"
    path.write_text(json.dumps({"mcp": {"github": EXISTING["mcp"]["github"],
                                        "local": {"type": "local", "command": ["python3", "srv.py"]}}}))
    report = json.loads(mcpx(place, "import", "--json", env={"MCPX_CONFIG": str(target)}).stdout)
    assert report["into"] == str(target) and report["moved"] == ["local"] and "github" in report["skipped"]
    assert report["mcpxInstalled"] is False
    config = json.loads(target.read_text())
    assert config["elicit"] == {"ttl": "10m"} and config["servers"]["github"] == {"command": "gh-other"}
    assert config["servers"]["local"] == {"type": "local", "command": ["python3", "srv.py"]}
    assert json.loads(path.read_text()) == {"mcp": {"github": EXISTING["mcp"]["github"]}}


def test_import_with_nothing_to_move(place: dict[str, Any]) -> None:
    ok(mcpx(place, "install"))
    done = ok(mcpx(place, "import"))
    assert "no MCP servers to import" in done.stdout
    assert not (place["project"] / ".mcpx").exists()


async def test_an_imported_server_still_gets_what_opencode_gave_it(place: dict[str, Any]) -> None:
    """opencode gave a local server its whole environment and filled {env:NAME}; after import the server
    gets the variables its entry names and those named like it, and nothing else of the daemon's."""
    path = place["project"] / "opencode.json"
    server = [sys.executable, str(PEERS / "env_server.py")]
    path.write_text(json.dumps({"mcp": {
        "github": {"type": "local", "command": server,
                   "environment": {"GITHUB_PERSONAL_ACCESS_TOKEN": "{env:GH_PAT}", "LITERAL": "a${b}"}},
        "docs": {"type": "remote", "url": "https://mcp.example.com/mcp", "headers": {"X-Key": "{env:DOCS_KEY}"}},
        "vault": {"type": "local", "command": server, "environment": {"KEY": "{file:~/.vault-key}"}},
    }}))
    secrets_here = {"GH_PAT": "ghp_" + "1" * 36, "GITHUB_TOKEN": "ghp_" + "2" * 36, "OPENAI_API_KEY": "sk-" + "3" * 40}
    done = mcpx(place, "import", "--json", env=secrets_here)
    report = json.loads(done.stdout)
    assert report["moved"] == ["github"] and report["passed"] == {"github": ["GH_PAT", "GITHUB_TOKEN"]}
    assert "{env:DOCS_KEY} outside its environment" in report["skipped"]["docs"]
    assert "{file:" in report["skipped"]["vault"]
    config = json.loads((place["project"] / ".mcpx" / "config.json").read_text())
    assert config["servers"]["github"]["environment"] == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_PAT}", "LITERAL": "a$${b}", "GITHUB_TOKEN": "${GITHUB_TOKEN}"}
    assert set(json.loads(path.read_text())["mcp"]) == {"docs", "vault"}  # still opencode's, still working

    (place["tmp"] / "state").mkdir()
    d = make_daemon(place["tmp"] / "state", config, extra_env=secrets_here)
    d.start()
    try:
        async with d.session() as http:
            status, body, _ = await call(http, "github", "environment")
            assert status == 200, body
            env = tool_text(body)
    finally:
        d.stop()
    assert env["GITHUB_PERSONAL_ACCESS_TOKEN"] == secrets_here["GH_PAT"]
    assert env["GITHUB_TOKEN"] == secrets_here["GITHUB_TOKEN"] and env["LITERAL"] == "a${b}"
    assert "OPENAI_API_KEY" not in env and "GH_PAT" not in env
