"""mcpx from a package, not a checkout: `./dev wheel` builds a wheel that carries the opencode plugin, built,
and the skill; it is installed into a fresh venv, and `mcpx opencode install`, run where no Node is on PATH, writes
what opencode loads — node imports the plugin through the project's entry point, the real opencode lists its
tools, and a person's first try (no daemon, no config) gets mcpx's dialog in opencode's TUI."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import loud_skip
from harness import ROOT, stop_pid
from opencode.fake_model import Call, Say, ScriptedModel
from opencode.harness import Opencode, clean_env, make_project, require_opencode
from opencode.tui import Tmux, flat

# one wheel and one venv for the module (building and installing take most of a minute), on one worker; beside the
# opencode end-to-end tests, not after them (the plugin's builds, the wheel's among them, take a lock: setup.py)
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("wheel")]


@dataclass
class WheelInstall:
    wheel: Path
    venv: Path

    @property
    def mcpx(self) -> Path:
        return self.venv / "bin" / "mcpx"

    @property
    def path(self) -> str:
        """A PATH with this venv and nothing else: no node, no npm, no checkout's mcpx."""
        return str(self.venv / "bin")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> WheelInstall:
    if shutil.which("npm") is None or shutil.which("node") is None:
        loud_skip("Node.js and npm are not installed: the wheel's plugin cannot be built here "
                  "(./dev test installs them)")
    root = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([str(ROOT / "dev"), "wheel", str(root / "dist")], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = list((root / "dist").glob("mcpx-*.whl"))
    assert len(wheels) == 1, wheels
    venv = root / "venv"
    install_into_a_fresh_venv(wheels[0], venv)
    return WheelInstall(wheels[0], venv)


def install_into_a_fresh_venv(wheel: Path, venv: Path) -> None:
    """A venv of this Python with the wheel installed, and its dependencies from the index. By uv where ./dev put
    it (or one is on PATH): it installs the same files from the same wheel as pip does, in two seconds and a
    second's CPU where `python -m venv` and pip took 45 s and 24 s of CPU. By pip where there is no uv
    (MCPX_INSTALLER=pip)."""
    beside = Path(sys.executable).with_name("uv")
    uv = str(beside) if beside.is_file() else shutil.which("uv")
    steps: list[list[str | Path]]
    if uv is not None:
        steps = [[uv, "venv", "--quiet", "--python", sys.executable, venv],
                 [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel]]
    else:
        steps = [[sys.executable, "-m", "venv", venv], [venv / "bin" / "pip", "install", "--quiet", wheel]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "UV_SYSTEM_CERTS": "1", "UV_NATIVE_TLS": "1"})
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_wheel_carries_the_built_plugin_and_the_skill(installed: WheelInstall) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    built = sorted(p.relative_to(ROOT / "plugin" / "opencode" / "dist").as_posix()
                   for p in (ROOT / "plugin" / "opencode" / "dist").rglob("*.js"))
    assert built and {f"mcpx/assets/opencode/{name}" for name in built} <= names
    assert {"mcpx/assets/opencode/package.json", "mcpx/assets/skills/mcpx-elicitation/SKILL.md"} <= names
    assert not [n for n in names if n.endswith(".ts")]  # the plugin's sources stay in the repository


def test_the_wheel_carries_the_web_inbox_pages(installed: WheelInstall) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert {"mcpx/inbox/templates/page.html", "mcpx/inbox/static/inbox.css", "mcpx/inbox/static/inbox.js"} <= names
    python = installed.venv / "bin" / "python"
    shown = subprocess.run([str(python), "-c", "from mcpx.inbox import pages; print(pages.message_page('t', 'x'))"],
                           capture_output=True, text=True, timeout=60, cwd=installed.venv)
    assert shown.returncode == 0 and "/inbox/static/inbox.css" in shown.stdout, shown.stderr


def test_the_wheel_is_typed(installed: WheelInstall) -> None:
    """mypy reads a script's use of mcpx.Client from the installed package (docs/scripts.md)."""
    assert "mcpx/py.typed" in set(zipfile.ZipFile(installed.wheel).namelist())


def site_packages(installed: WheelInstall) -> Path:
    return next((installed.venv / "lib").glob("python3*/site-packages"))


def test_opencode_install_from_the_wheel_where_node_is_not_on_path(installed: WheelInstall, tmp_path: Path) -> None:
    assert shutil.which("node", path=installed.path) is None
    project = tmp_path / "project"
    project.mkdir()
    env = {"PATH": installed.path, "HOME": str(tmp_path / "home"), "MCPX_HOME": str(tmp_path / "mcpx-home")}
    done = subprocess.run([str(installed.mcpx), "opencode", "install", "--json"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["machineSpecific"] is False and report["mcpxOnPath"] == str(installed.mcpx)
    config = json.loads((project / "opencode.json").read_text())
    assert config["mcp"]["mcpx"]["command"] == ["mcpx", "serve"]  # the wheel's mcpx is the one on PATH
    assert config["plugin"] == ["./.opencode/mcpx"]
    assert json.loads((project / "tui.json").read_text())["plugin"] == ["./.opencode/mcpx"]
    assert (project / ".opencode" / "skills" / "mcpx-elicitation" / "SKILL.md").is_file()
    entry = project / ".opencode" / "mcpx"
    assert json.loads((entry / "package.json").read_text())["exports"] == {"./server": "./server.js",
                                                                          "./tui": "./tui.js"}
    # what the entry points load: the wheel's own plugin, built
    where = subprocess.run([str(installed.mcpx), "opencode", "plugin-dir"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert where.returncode == 0, where.stderr
    plugin = site_packages(installed) / "mcpx" / "assets" / "opencode"
    assert Path(where.stdout.strip()) == plugin
    assert (plugin / "index.js").is_file() and (plugin / "tui.js").is_file()
    assert json.loads((plugin / "package.json").read_text())["exports"] == {"./server": "./index.js",
                                                                           "./tui": "./tui.js"}


def test_node_imports_the_installed_plugin_through_a_projects_entry_point(installed: WheelInstall,
                                                                          tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None
    project = tmp_path / "project"
    project.mkdir()
    env = {"PATH": os.pathsep.join([installed.path, str(Path(node).parent)]), "HOME": str(tmp_path / "home")}
    done = subprocess.run([str(installed.mcpx), "opencode", "install"], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    url = (project / ".opencode" / "mcpx" / "server.js").as_uri()
    # opencode loads a plugin module by its default export {id, server}
    script = f"const m = await import({json.dumps(url)}); console.log(JSON.stringify({{id: m.default?.id, " \
             "server: typeof m.default?.server, name: m.default?.server?.name}))"
    done = subprocess.run([node, "--input-type=module", "-e", script], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"id": "mcpx", "server": "function", "name": "McpxPlugin"}, done.stdout
    # with no mcpx on PATH the entry point still loads, as a plugin that says why it is not mcpx's
    bare = {"PATH": str(Path(node).parent), "HOME": str(tmp_path / "home")}
    done = subprocess.run([node, "--input-type=module", "-e", script], env=bare, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "server", done.stdout


@pytest.fixture
def opencode_with_the_wheel(installed: WheelInstall, tmp_path: Path) -> Iterator[tuple[Opencode, WheelInstall]]:
    binary = require_opencode(tmp_path)
    model = ScriptedModel(tmp_path / "model-requests.jsonl").start()
    oc: Opencode | None = None
    try:
        env = {**clean_env(tmp_path / "home"), "MCPX_HOME": str(tmp_path / "mcpx-home")}
        env["PATH"] = os.pathsep.join([installed.path, env["PATH"]])  # the wheel's mcpx is the one on PATH
        project = make_project(tmp_path / "project", model.base_url, env, mcpx=[str(installed.mcpx)])
        oc = Opencode(binary, project, tmp_path / "home", env).start()
        yield oc, installed
    finally:
        if oc is not None:
            oc.stop()
        model.stop()
        stop_daemon_of(tmp_path / "mcpx-home")


def stop_daemon_of(home: Path) -> None:
    """The daemon opencode's plugin or its MCP entry, the wheel's mcpx, started."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        stop_pid(int(json.loads((home / "daemon.json").read_text())["pid"]))


def test_opencode_loads_the_plugin_the_wheel_installed(opencode_with_the_wheel: tuple[Opencode, WheelInstall]) -> None:
    oc, _installed = opencode_with_the_wheel
    ids = oc.call("GET", "/experimental/tool/ids")
    assert "mcpx_ask_person" in ids, ids  # the tool the plugin defines: it loaded, from the wheel
    assert "mcpx_demo_delete_branch" in ids, ids  # the embedded default's demo server, as the plugin's own tool


def test_first_use_from_the_wheel_a_fresh_home_and_no_daemon_the_first_calls_dialog_opens(
        installed: WheelInstall, tmp_path: Path) -> None:
    """A person's first try: the wheel installed, `mcpx opencode install`, no daemon, no config (the embedded
    default and its demo server), opencode's TUI started: the first call that asks opens mcpx's dialog."""
    binary = require_opencode(tmp_path)
    tui = Tmux(width=180, height=45)
    model = ScriptedModel(tmp_path / "model-requests.jsonl").start()
    mcpx_home = tmp_path / "mcpx-home"
    try:
        env = {**clean_env(tmp_path / "home"), "MCPX_HOME": str(mcpx_home), "TERM": "xterm-256color"}
        env["PATH"] = os.pathsep.join([installed.path, env["PATH"]])
        project = make_project(tmp_path / "project", model.base_url, env, mcpx=[str(installed.mcpx)])
        assert not (mcpx_home / "daemon.json").exists(), "no daemon runs yet"
        marker = model.script("first_use", [lambda r: Call("mcpx_demo_delete_branch", {}), lambda r: Say("done.")])
        tui.start([str(binary)], project, env)
        tui.wait_text("Ask anything", timeout=120)
        tui.type(f"{marker} delete the branch")
        tui.keys("Enter")
        words = "“Really delete branch 'main'? This cannot be undone.”"
        tui.wait(f"mcpx's dialog for {words}", lambda s: words in flat(s) and "Accept" in s and "enter: " in s, 120)
        tui.keys("Enter")
        result = model.wait_for("first_use", lambda rs: any(r.tools and r.turn >= 1 for r in rs), 90)
        text = next(r for r in result if r.tools and r.turn == 1).last_tool_result()
        assert text.endswith("Branch main would be deleted now (demo: nothing happened)."), text
        assert "It was shown to the person in opencode's dialog at" in text
    finally:
        tui.stop()
        model.stop()
        stop_daemon_of(mcpx_home)


def test_without_node_no_wheel_is_built_and_the_build_says_why(tmp_path: Path) -> None:
    """A copy of the repository whose plugin was never built, built where no Node is on PATH."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True, timeout=60).stdout.split()
    source = tmp_path / "source"
    for name in listed:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    assert not (source / "plugin" / "opencode" / "dist").exists()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path / "out"),
                           str(source)], env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "Node.js and npm are not on PATH" in said and "No wheel is built without the plugin" in said, said[-3000:]
    assert not list((tmp_path / "out").glob("*.whl"))
