"""Real Claude Code (the native binary npm installs: package.json pins it), run as its users run it, against the
scripted model of tests/claude/fake_model.py: print mode (`claude -p`) as a process, the TUI in a tmux of the
test's own (tests/opencode/tui.py's `Tmux`). Facts and traps: ../shared/opencode-e2e/README.md, "Claude Code as a
second host".

Every run has a private HOME (seeded so that the TUI starts without its onboarding), no network but the scripted
model on loopback, and this checkout's `mcpx` first on PATH, as `./dev run` (or pipx) puts one there.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conftest import loud_skip
from harness import PATIENCE, ROOT
from opencode.tui import Tmux

NODE_MODULES = ROOT / "node_modules"
VERSION = "2.1.332"
PROMPT = "\u276f"  # the TUI's input line, once it is ready for a prompt
API_KEY = "sk-ant-api03-mcpx-tests-0000000000000000000000000000"  # the scripted model takes any key


def claude_binary() -> tuple[Path | None, str]:
    """The Claude Code executable from node_modules, and why it cannot run here when it cannot."""
    arch = {"x86_64": "x64", "AMD64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(),
                                                                                      platform.machine())
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system(), platform.system().lower())
    # the platform package's own binary: the wrapper's bin/claude.exe is only a copy made by an install script,
    # which an npm that does not run install scripts never makes
    for candidate in (NODE_MODULES / "@anthropic-ai" / f"claude-code-{system}-{arch}" / "claude",
                      NODE_MODULES / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe"):
        if candidate.exists() and os.access(candidate, os.X_OK):
            return candidate, ""
    return None, (f"no Claude Code {VERSION} binary for {system}-{arch} in {NODE_MODULES} (npm ci installs "
                  "@anthropic-ai/claude-code with its platform package)")


def require_claude() -> Path:
    binary, why = claude_binary()
    if binary is None:
        loud_skip(why)
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(Path(ROOT, ".no-home"))})
    if done.returncode != 0 or VERSION not in done.stdout:
        loud_skip(f"{binary} --version said {done.returncode}: {done.stdout.strip()} {done.stderr.strip()[-300:]}")
    return binary


def claude_env(home: Path, model_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Claude Code's environment: a private HOME, the scripted model, nothing sent anywhere else, nothing of the
    session running the tests (no MCPX_SESSION_ID: the session is Claude Code's own)."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(HOME=str(home), ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY=API_KEY, DISABLE_TELEMETRY="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1",
               CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1", PYTHONUNBUFFERED="1")
    if shutil.which("rg") is None:
        env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/bin"
    env.update(extra or {})
    return env


def seed_home(home: Path, projects: Sequence[Path]) -> None:
    """What a person's first run of the TUI leaves behind (onboarding done, this key approved, each project
    trusted): without it a fresh HOME stops at the first-run screens."""
    home.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {
        "hasCompletedOnboarding": True, "theme": "dark",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {str(p): {"hasTrustDialogAccepted": True} for p in projects},
    }
    (home / ".claude.json").write_text(json.dumps(state))


def approve_project_servers(project: Path, names: Sequence[str]) -> None:
    """A project's .mcp.json servers wait for the person's approval in the TUI (whose default is "continue
    without"): the approval it records, in the project's local settings."""
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(local.read_text()) if local.exists() else {}
    settings["enabledMcpjsonServers"] = sorted(set(settings.get("enabledMcpjsonServers", [])) | set(names))
    local.write_text(json.dumps(settings, indent=2))


def print_args(binary: Path, prompt: str, *, allowed: Sequence[str] = (), mcp_config: Path | None = None,
               extra: Sequence[str] = ()) -> list[str]:
    args = [str(binary), "-p", prompt]
    if mcp_config is not None:
        args += ["--mcp-config", str(mcp_config)]
    if allowed:
        args += ["--allowedTools", ",".join(allowed)]
    return [*args, *extra]


def run_print(binary: Path, prompt: str, cwd: Path, env: dict[str, str], *, allowed: Sequence[str] = (),
              mcp_config: Path | None = None, timeout: float = PATIENCE) -> subprocess.CompletedProcess[str]:
    """`claude -p PROMPT` to its end, bounded."""
    return subprocess.run(print_args(binary, prompt, allowed=allowed, mcp_config=mcp_config), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def start_print(binary: Path, prompt: str, cwd: Path, env: dict[str, str], *, allowed: Sequence[str] = (),
                mcp_config: Path | None = None) -> subprocess.Popen[str]:
    """`claude -p PROMPT` started, for a test that acts while it runs: stop it with tests/harness.py's
    stop_process in a `finally`."""
    return subprocess.Popen(print_args(binary, prompt, allowed=allowed, mcp_config=mcp_config), cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def start_tui(binary: Path, cwd: Path, env: dict[str, str], *, allowed: Sequence[str] = (),
              mcp_config: Path | None = None, width: int = 150, height: int = 45) -> Tmux:
    """Claude Code's TUI in a tmux of its own, at its prompt; stop it with `.stop()` in a `finally`."""
    args = [str(binary)]
    if mcp_config is not None:
        args += ["--mcp-config", str(mcp_config)]
    if allowed:
        args += ["--allowedTools", ",".join(allowed)]
    tui = Tmux(width, height).start(args, cwd, env)
    try:
        tui.wait_text(PROMPT, timeout=PATIENCE)
    except BaseException:
        tui.stop()
        raise
    return tui
