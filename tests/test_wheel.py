"""mcpx from a package, not a checkout: `./dev wheel` builds a wheel that carries the opencode plugin, built,
and the skill; pip installs it into a fresh venv, and `mcpx opencode install`, run where no Node is on PATH,
writes what opencode loads — node imports the plugin, and the real opencode lists its tool."""

from __future__ import annotations

import contextlib
import json
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
from opencode.fake_model import ScriptedModel
from opencode.harness import Opencode, clean_env, make_project, require_opencode

# one wheel and one venv for the module (building and installing take most of a minute); opencode at the end runs
# on the worker of the other opencode end-to-end tests
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("opencode-e2e")]


@dataclass
class Installed:
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
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
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
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheels[0])], capture_output=True,
                         text=True, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return Installed(wheels[0], venv)


def test_the_wheel_carries_the_built_plugin_and_the_skill(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    built = sorted(p.relative_to(ROOT / "plugin" / "opencode" / "dist").as_posix()
                   for p in (ROOT / "plugin" / "opencode" / "dist").rglob("*.js"))
    assert built and {f"mcpx/assets/opencode/{name}" for name in built} <= names
    assert {"mcpx/assets/opencode/package.json", "mcpx/assets/skills/mcpx-elicitation/SKILL.md"} <= names
    assert not [n for n in names if n.endswith(".ts")]  # the plugin's sources stay in the repository


def test_the_wheel_carries_the_web_inbox_pages(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert {"mcpx/inbox/templates/page.html", "mcpx/inbox/static/inbox.css", "mcpx/inbox/static/inbox.js"} <= names
    python = installed.venv / "bin" / "python"
    shown = subprocess.run([str(python), "-c", "from mcpx.inbox import pages; print(pages.message_page('t', 'x'))"],
                           capture_output=True, text=True, timeout=60, cwd=installed.venv)
    assert shown.returncode == 0 and "/inbox/static/inbox.css" in shown.stdout, shown.stderr


def test_opencode_install_from_the_wheel_where_node_is_not_on_path(installed: Installed, tmp_path: Path) -> None:
    assert shutil.which("node", path=installed.path) is None
    project = tmp_path / "project"
    project.mkdir()
    env = {"PATH": installed.path, "HOME": str(tmp_path / "home"), "MCPX_HOME": str(tmp_path / "mcpx-home")}
    done = subprocess.run([str(installed.mcpx), "opencode", "install", "--json"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    config = json.loads((project / "opencode.json").read_text())
    site = next((installed.venv / "lib").glob("python3*/site-packages"))
    plugin = site / "mcpx" / "assets" / "opencode" / "index.js"
    assert config["plugin"] == [plugin.as_uri()] and plugin.is_file()
    assert config["skills"]["paths"] == [str(site / "mcpx" / "assets" / "skills" / "mcpx-elicitation")]
    assert (site / "mcpx" / "assets" / "skills" / "mcpx-elicitation" / "SKILL.md").is_file()
    assert config["mcp"]["mcpx"]["command"] == [str(installed.mcpx), "serve"]


def test_node_imports_the_installed_plugin(installed: Installed) -> None:
    node = shutil.which("node")
    assert node is not None
    site = next((installed.venv / "lib").glob("python3*/site-packages"))
    url = (site / "mcpx" / "assets" / "opencode" / "index.js").as_uri()
    # opencode loads a plugin module by its default export {id?, server}, or else by its exports, each a Plugin
    script = (f"const m = await import({json.dumps(url)});"
              "console.log(JSON.stringify({server: typeof m.default?.server, "
              "exports: Object.entries(m).map(([k, v]) => [k, typeof v])}))")
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert loaded["server"] == "function" or all(kind == "function" for _name, kind in loaded["exports"]), loaded


@pytest.fixture
def opencode_with_the_wheel(installed: Installed, tmp_path: Path) -> Iterator[tuple[Opencode, Installed]]:
    binary = require_opencode(tmp_path)
    model = ScriptedModel(tmp_path / "model-requests.jsonl").start()
    oc: Opencode | None = None
    try:
        env = {**clean_env(tmp_path / "home"), "MCPX_HOME": str(tmp_path / "mcpx-home")}
        project = make_project(tmp_path / "project", model.base_url, {**env, "PATH": installed.path},
                               mcpx=[str(installed.mcpx)])
        oc = Opencode(binary, project, tmp_path / "home", env).start()
        yield oc, installed
    finally:
        if oc is not None:
            oc.stop()
        model.stop()
        # opencode's MCP entry, the wheel's `mcpx serve`, started a daemon of its own
        with contextlib.suppress(OSError, ValueError, KeyError):
            stop_pid(int(json.loads((tmp_path / "mcpx-home" / "daemon.json").read_text())["pid"]))


def test_opencode_loads_the_plugin_the_wheel_installed(opencode_with_the_wheel: tuple[Opencode, Installed]) -> None:
    oc, installed = opencode_with_the_wheel
    config = json.loads((oc.project / "opencode.json").read_text())
    assert config["plugin"][0].startswith((installed.venv / "lib").as_uri())
    ids = oc.call("GET", "/experimental/tool/ids")
    assert "mcpx_ask_person" in ids, ids  # the tool the plugin defines: it loaded, from the wheel


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
