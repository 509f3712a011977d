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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conftest import loud_skip
from harness import PATIENCE, ROOT
from opencode.tui import Tmux, flat

NODE_MODULES = ROOT / "node_modules"
VERSION = "2.1.332"
CLEAR_ENTRY = "Start a new session with empty context"  # /clear's line in the TUI's command menu
PROMPT = "\u276f"
FORM = "requests your input"  # the head of Claude Code's form: 'MCP server “NAME” requests your input'
# Claude Code's form ignores an answer this soon after it was drawn (under 0.2 s measured; 0.09 s was ignored), and
# Enter on Accept this soon after a typed key, starting that wait again (`refuses()` in its binary: 600 ms)
ARRIVAL_GUARD = 0.2
TYPED_GUARD = 0.6
GUARD_MARGIN = 0.1  # the TUI's input line, once it is ready for a prompt
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


def write_settings(home: Path, settings: dict[str, Any]) -> Path:
    """The user's own settings (~/.claude/settings.json): hooks, say."""
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))
    return path


def approve_project_servers(project: Path, names: Sequence[str]) -> None:
    """A project's .mcp.json servers wait for the person's approval in the TUI (whose default is "continue
    without"): the approval it records, in the project's local settings."""
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(local.read_text()) if local.exists() else {}
    settings["enabledMcpjsonServers"] = sorted(set(settings.get("enabledMcpjsonServers", [])) | set(names))
    local.write_text(json.dumps(settings, indent=2))


def mcpx_entry(env: dict[str, str], *, server: str | None = None) -> dict[str, Any]:
    """The MCP entry of `mcpx serve` as a person writes it (this checkout's mcpx, as ./dev run links it), with the
    environment that points it at the test's daemon (tests/harness.py's base_env: MCPX_HOME, MCPX_CONFIG, ...)."""
    return {"command": str(Path(sys.executable).parent / "mcpx"), "args": ["serve", *(["--server", server] if server
                                                                                     else [])],
            "env": {k: v for k, v in env.items() if k.startswith(("MCPX_", "PYTHON"))}}


def write_mcp_config(path: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """A file for --mcp-config: {"mcpServers": servers}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def transcripts(home: Path) -> list[str]:
    """The ids of the sessions Claude Code has written a transcript of in this HOME (~/.claude/projects/<the
    project's path, slugged>/<session id>.jsonl), oldest first. A session's file appears with its first message."""
    found = sorted((home / ".claude" / "projects").glob("*/*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    return [p.stem for p in found]


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
    env = {"TERM": "xterm-256color", **env}
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


def prompt(tui: Tmux, text: str) -> None:
    """Type `text` at the TUI's prompt and send it, once the prompt shows it whole (keys sent before the prompt has
    taken them all would be cut)."""
    tui.type(text)
    tui.wait_text(text)
    tui.keys("Enter")


def clear(tui: Tmux) -> None:
    """A fresh conversation in the same TUI (`/clear`), with nothing of the last one on screen. Claude Code starts a
    new session (a new transcript) but keeps its MCP servers running: they keep the session id they were started
    with (CLAUDE_CODE_SESSION_ID is read once, at their start)."""
    tui.keys("Escape")  # a form or a menu left open by a test that failed
    tui.type("/clear")
    tui.wait_text("/clear", CLEAR_ENTRY)  # the command's menu entry: Enter now runs it
    tui.keys("Enter")
    tui.wait("a cleared screen at the prompt", lambda s: "[script:" not in s and CLEAR_ENTRY not in flat(s))


class Form:
    """Claude Code's form for an MCP server's question, as a person works it: type into the focused field; Enter moves
    to Accept, Enter accepts; Right moves to Decline; Esc cancels.

    Two guards of Claude Code's decide when a key is taken (read from its binary, and measured here): an answer
    given less than ARRIVAL_GUARD after the form was drawn is ignored (a key meant for the prompt must not answer a
    form that opened under it), and Enter on Accept less than TYPED_GUARD after a typed key is ignored and starts that
    wait again. Those waits are for the clock (a person's pause), from when the screen showed the form or the key,
    which is after Claude Code had taken it."""

    def __init__(self, tui: Tmux, *texts: str, timeout: float = PATIENCE) -> None:
        self.tui = tui
        self.screen, _ = tui.wait_text(FORM, *texts, timeout=timeout)
        self.ready = time.monotonic() + ARRIVAL_GUARD + GUARD_MARGIN

    def _after_guards(self) -> None:
        while (left := self.ready - time.monotonic()) > 0:
            time.sleep(left)

    def type(self, label: str, value: str) -> None:
        self.tui.type(value)
        self.tui.wait_text(f"{label}: {value}")
        self.ready = max(self.ready, time.monotonic() + TYPED_GUARD + GUARD_MARGIN)

    def accept(self) -> None:
        self.tui.keys("Enter")  # from the field to Accept
        self.tui.wait("Accept chosen", on_accept)
        self._after_guards()
        self.tui.keys("Enter")

    def decline(self) -> None:
        self.tui.keys("Down")  # from the field to the actions
        self.tui.wait("Accept chosen", on_accept)
        self.tui.keys("Right")
        self.tui.wait("Decline chosen", on_decline)
        self._after_guards()
        self.tui.keys("Enter")

    def cancel(self) -> None:
        self.tui.keys("Escape")  # no guard: Esc is never an accident Claude Code guards against

    def gone(self, timeout: float = PATIENCE) -> str:
        screen, _ = self.tui.wait_gone(FORM, timeout)
        return screen


def on_accept(screen: str) -> bool:
    return any(line.strip().startswith(f"{PROMPT} Accept") for line in screen.splitlines())


def on_decline(screen: str) -> bool:
    return any(f"{PROMPT} Decline" in line and "Accept" in line for line in screen.splitlines())
