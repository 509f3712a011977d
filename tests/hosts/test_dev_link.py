"""What `./dev run` does besides the daemon. It leaves `mcpx` callable as `mcpx`: `./dev link` (which it runs) links
~/.local/bin/mcpx to this checkout's .venv/bin/mcpx — and never replaces an mcpx that is not such a link. And it
builds the opencode plugin from the plugin's build tools alone (`./dev plugin`, which it runs): not the tests' Node
packages (opencode, Claude Code, Node 22, the conformance suites), whose install took most of its two minutes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import loud_skip
from harness import PATIENCE, ROOT

VENV_MCPX = ROOT / ".venv" / "bin" / "mcpx"


def link(home: Path, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "dev"), "link"], env={"HOME": str(home), "PATH": path}, capture_output=True,
                          text=True, timeout=PATIENCE)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    if not VENV_MCPX.exists():
        loud_skip(f"{VENV_MCPX} is missing: the suite runs from ./dev test's venv")
    return tmp_path


def test_a_new_link_and_what_to_add_to_path(home: Path) -> None:
    done = link(home)
    target = home / ".local" / "bin" / "mcpx"
    assert done.returncode == 0 and target.is_symlink() and os.readlink(target) == str(VENV_MCPX)
    assert f"linked {target} -> {VENV_MCPX}" in done.stderr
    assert 'export PATH="$HOME/.local/bin:$PATH"' in done.stderr  # not on this PATH
    version = subprocess.run(["mcpx", "--version"], env={"PATH": f"{target.parent}:/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=PATIENCE)
    assert version.returncode == 0 and version.stdout.startswith("mcpx ")
    again = link(home, f"{target.parent}:/usr/bin:/bin")
    assert again.returncode == 0 and again.stderr == "" and os.readlink(target) == str(VENV_MCPX)


def test_another_checkouts_link_is_moved_here_and_anything_else_is_left(home: Path) -> None:
    target = home / ".local" / "bin" / "mcpx"
    target.parent.mkdir(parents=True)
    target.symlink_to("/elsewhere/checkout/.venv/bin/mcpx")
    moved = link(home)
    assert moved.returncode == 0 and os.readlink(target) == str(VENV_MCPX) and "now runs this checkout" in moved.stderr
    target.unlink()
    target.symlink_to("/home/someone/.local/pipx/venvs/mcpx/bin/mcpx")
    kept = link(home)
    assert kept.returncode == 0 and os.readlink(target) == "/home/someone/.local/pipx/venvs/mcpx/bin/mcpx"
    assert "links elsewhere" in kept.stderr
    target.unlink()
    target.write_text("#!/bin/sh\n")
    left = link(home)
    assert left.returncode == 0 and target.read_text() == "#!/bin/sh\n" and "is not a link; leaving it" in left.stderr


def test_the_plugin_is_built_from_its_build_tools_alone(tmp_path: Path) -> None:
    """`./dev plugin` in a copy of the checkout's Node side, with no node_modules: `npm ci --omit=dev` (from npm's
    cache, which ./dev test's install filled) installs package.json's dependencies, and the plugin builds from them."""
    if shutil.which("npm") is None:
        loud_skip("npm is not installed (./dev test installs it)")
    copy = tmp_path / "checkout"
    copy.mkdir()
    for name in ("dev", "package.json", "package-lock.json", "tsconfig.json"):
        shutil.copy2(ROOT / name, copy / name)
    shutil.copytree(ROOT / "plugin" / "opencode", copy / "plugin" / "opencode",
                    ignore=shutil.ignore_patterns("dist", "node_modules"))
    env = {**os.environ, "npm_config_prefer_offline": "true"}
    done = subprocess.run([str(copy / "dev"), "plugin"], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installing the opencode plugin's build tools" in done.stderr
    assert (copy / "plugin" / "opencode" / "dist" / "index.js").exists()
    assert (copy / "plugin" / "opencode" / "dist" / "tui.js").exists()
    modules = copy / "node_modules"
    names = {p.relative_to(modules).as_posix() for p in [*modules.glob("[!@]*"), *modules.glob("@*/*")]}
    tests_only = set(json.loads((ROOT / "package.json").read_text())["devDependencies"])
    # solid-js (small) comes too: an optional peer of babel-preset-solid, which npm installs where the tree has it
    assert {"@babel/core", "babel-preset-solid"} <= names and names & tests_only <= {"solid-js"}, names & tests_only
    # nor what they bring: opencode's and Claude Code's platform binaries (hundreds of MiB)
    assert not [n for n in names if n.startswith(("opencode-", "@anthropic-ai/", "@opentui/"))], sorted(names)
    assert (copy / "node_modules" / ".installed-build").exists()
    again = subprocess.run([str(copy / "dev"), "plugin"], cwd=copy, env=env, capture_output=True, text=True,
                           timeout=PATIENCE)
    assert again.returncode == 0 and again.stderr == "", again.stderr  # installed and built: nothing to do
