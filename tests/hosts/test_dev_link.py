"""What `./dev run` does besides the daemon. It leaves `mcpx` callable as `mcpx`: `./dev link` (which it runs) links
~/.local/bin/mcpx to this checkout's .venv/bin/mcpx — and never replaces an mcpx that is not such a link. And it
builds the opencode plugin from the plugin's build tools alone (`./dev plugin`, which it runs): not the tests' Node
packages (opencode, Claude Code, Node 22, the conformance suites), whose install took most of its two minutes. From
a fresh checkout it installs with uv, and only what the daemon needs, so the demo question is on screen in seconds
(the closing notes time it with empty caches)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
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


DEMO_ASKS = "The demo server is asking a question"


def _until_the_question(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """What `./dev run` wrote on stderr up to the demo question (its steps, then the daemon's log)."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while DEMO_ASKS.encode() not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no demo question within {timeout:.0f}s:\n{seen.decode(errors='replace')}"
            if sel.select(left):
                chunk = os.read(proc.stderr.fileno(), 65536)  # not readline: select cannot see a buffered line
                assert chunk, f"./dev run ended ({proc.wait(10)}) without the demo question:\n{seen.decode()}"
                seen += chunk
    return seen.decode(errors="replace")


def _dev_run(copy: Path, env: dict[str, str], timeout: float) -> str:
    """`./dev run` until the demo question is on screen, then stopped (the daemon drains and stops its demo server;
    whatever is left of its process group is killed)."""
    proc = subprocess.Popen([str(copy / "dev"), "run"], cwd=copy, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        return _until_the_question(proc, timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(PATIENCE)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            assert proc.stderr is not None
            proc.stderr.close()


@pytest.mark.timeout(900)
def test_dev_run_from_a_fresh_checkout_installs_what_the_daemon_needs_with_uv(tmp_path: Path) -> None:
    """`./dev run` in a copy of the checkout with no .venv, no node_modules and no built plugin, for a person whose
    HOME is new (the machine's download caches are kept, so the test does not time the network): uv installs
    mcpx's own dependencies into a venv without pip, and none of the tests'; the plugin is built; `mcpx` is linked;
    the demo question is on screen. A second `./dev run` redoes none of it."""
    npm = shutil.which("npm")
    if npm is None:
        loud_skip("npm is not installed (./dev test installs it)")
    copy = tmp_path / "checkout"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    assert not (copy / ".venv").exists() and not (copy / "node_modules").exists()
    home = tmp_path / "home"
    home.mkdir()
    path = os.pathsep.join(dict.fromkeys([str(Path(npm).parent), "/usr/bin", "/bin"]))
    real_home = Path.home()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MCPX_", "XDG_", "UV_", "PIP_", "npm_")) and k != "VIRTUAL_ENV"}
    env.update(HOME=str(home), PATH=path, PYTHON=os.path.realpath(sys.executable),
               XDG_CACHE_HOME=str(real_home / ".cache"), npm_config_cache=str(real_home / ".npm"),
               npm_config_prefer_offline="true")

    first = _dev_run(copy, env, 600)
    steps = re.findall(r"==> (.*?)\x1b", first)
    assert f"installing mcpx into {copy / '.venv'}" in steps, first  # the daemon's dependencies, not mcpx[test]
    venv_python = str(copy / ".venv" / "bin" / "python")
    probe = ("import importlib.util as u; print(' '.join(m for m in ('aiohttp', 'pydantic', 'textual', 'pytest', "
             "'mypy', 'ruff', 'mcp', 'fastmcp', 'schemathesis', 'playwright', 'psycopg') "
             "if u.find_spec(m)))")
    found = subprocess.run([venv_python, "-c", probe], capture_output=True, text=True, timeout=PATIENCE)
    assert found.stdout.split() == ["aiohttp", "pydantic", "textual"], found.stdout + found.stderr
    if shutil.which("uv", path=path) is None:
        assert any(s.startswith("installing uv into") for s in steps), first
        assert (copy / ".venv" / "bin" / "uv").exists() and not (copy / ".venv" / ".uv-boot").exists()
    assert "pip installs instead" not in first and "pip tries instead" not in first, first
    assert (copy / "plugin" / "opencode" / "dist" / "index.js").exists()
    assert os.readlink(home / ".local" / "bin" / "mcpx") == str(copy / ".venv" / "bin" / "mcpx")

    again = _dev_run(copy, env, PATIENCE * 2)
    redone = [s for s in re.findall(r"==> (.*?)\x1b", again) if not s.startswith("mcpx: ")]
    assert redone == [], again  # nothing installed, created or built again: the daemon starts at once
