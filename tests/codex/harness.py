"""Real Codex CLI (the native binary npm installs: package.json pins @openai/codex), run as its users run it, against
the scripted model of tests/codex/fake_model.py: `codex exec` as a process, the interactive interface in a tmux of
the test's own (tests/opencode/tui.py's `Tmux`). Facts: ../shared/host-facts/codex-gemini.md.

Every run has a private HOME and CODEX_HOME, whose config.toml names the scripted model as its provider and trusts the
project; mcpx's entry in it is the one `mcpx codex install --scope user` writes, run first as a person runs it.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import loud_skip
from harness import PATIENCE, ROOT

VERSION = "0.169.0"
API_KEY = "sk-mcpx-tests"  # the scripted model takes any key


def codex_binary() -> tuple[Path | None, str]:
    """The Codex executable from node_modules, and why it cannot run here when it cannot."""
    arch = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine(),
                                                                                                platform.machine())
    npm_arch = {"x86_64": "x64", "aarch64": "arm64"}.get(arch, arch)
    # the platform package's own binary (what bin/codex.js runs), without Node in between
    candidate = (ROOT / "node_modules" / "@openai" / f"codex-linux-{npm_arch}" / "vendor" / f"{arch}-unknown-linux-musl"
                 / "bin" / "codex")
    if platform.system() == "Linux" and candidate.exists() and os.access(candidate, os.X_OK):
        return candidate, ""
    return None, f"no Codex {VERSION} binary for {platform.system()}-{arch} in node_modules (npm ci installs it)"


def require_codex() -> Path:
    binary, why = codex_binary()
    if binary is None:
        loud_skip(why)
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": tempfile.gettempdir()})
    if done.returncode != 0 or VERSION not in done.stdout:
        loud_skip(f"{binary} --version said {done.returncode}: {done.stdout.strip()} {done.stderr.strip()[-300:]}")
    return binary


def codex_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Codex's environment: a private HOME and CODEX_HOME, the key its provider reads, this checkout's mcpx first on
    PATH; `extra` (the daemon's MCPX_*, which install's env_vars pass on to `mcpx serve`)."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), MCPX_TESTS_MODEL_KEY=API_KEY, NO_COLOR="1")
    env.update(extra or {})
    return env


def provider(base_url: str, project: Path) -> str:
    """The lines of config.toml that make the scripted model Codex's, and trust the project."""
    return (f'model = "gpt-test"\nmodel_provider = "local"\n\n[model_providers.local]\nname = "local"\n'
            f'base_url = "{base_url}"\nwire_api = "responses"\nenv_key = "MCPX_TESTS_MODEL_KEY"\n\n'
            f'[projects."{project}"]\ntrust_level = "trusted"\n')


def install(home: Path, project: Path, env: dict[str, str], *, approve: bool) -> Path:
    """`mcpx codex install --scope user`, as the person runs it in their shell, then `required = true` (Codex's first
    model request waits for mcpx's tools, instead of going without them while `mcpx serve` starts) and, with
    `approve`, what `codex exec` needs to run mcpx's tools at all: `default_tools_approval_mode = "approve"`."""
    done = subprocess.run([sys.executable, "-m", "mcpx", "codex", "install", "--scope", "user"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=PATIENCE)
    assert done.returncode == 0, done.stdout + done.stderr
    config = home / ".codex" / "config.toml"
    added = "required = true\n" + ('default_tools_approval_mode = "approve"\n' if approve else "")
    config.write_text(config.read_text().replace("[mcp_servers.mcpx]\n", "[mcp_servers.mcpx]\n" + added))
    return config


def exec_args(binary: Path, prompt: str) -> list[str]:
    return [str(binary), "exec", "--skip-git-repo-check", prompt]
