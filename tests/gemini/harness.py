"""Real Gemini CLI (npm @google/gemini-cli, pinned in package.json, on the pinned Node), run headless as its users
run it in scripts (`gemini -p`), against the scripted model of tests/gemini/fake_model.py. Facts:
../shared/host-facts/codex-gemini.md.

Every run has a private HOME whose ~/.gemini/settings.json chooses the Gemini API key as the way in (the key is
anything: GOOGLE_GEMINI_BASE_URL points the API at the scripted model) and whose trustedFolders.json trusts the
project (in a folder not trusted, Gemini CLI runs no MCP server at all); mcpx's entry is the one `mcpx gemini install
--scope user` writes, run first as a person runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import loud_skip
from harness import PATIENCE, ROOT

VERSION = "0.61.0"
NODE = ROOT / "node_modules" / "node" / "bin" / "node"
GEMINI = ROOT / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"


def require_gemini() -> list[str]:
    """The command that runs Gemini CLI here: the pinned Node and the package's bundle."""
    if not (NODE.is_file() and GEMINI.is_file()):
        loud_skip(f"no Gemini CLI {VERSION} (or no Node) in node_modules (npm ci installs both)")
    command = [str(NODE), str(GEMINI)]
    done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": tempfile.gettempdir(),
                               "GEMINI_CLI_NO_RELAUNCH": "true"})
    if done.returncode != 0 or VERSION not in done.stdout:
        loud_skip(f"Gemini CLI --version said {done.returncode}: {done.stdout.strip()} {done.stderr.strip()[-300:]}")
    return command


def gemini_env(home: Path, model_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Gemini CLI's environment: a private HOME, the scripted model, no relaunch (it halves the start), this
    checkout's mcpx first on PATH, and `extra` (the daemon's MCPX_*, which Gemini CLI passes on to `mcpx serve`)."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(HOME=str(home), GEMINI_CLI_NO_RELAUNCH="true", GOOGLE_GEMINI_BASE_URL=model_url,
               GEMINI_API_KEY="mcpx-tests", NO_COLOR="1", TERM="dumb")
    env.update(extra or {})
    return env


def prepare(home: Path, project: Path, env: dict[str, str]) -> Path:
    """The person's Gemini CLI: the API key chosen, the project trusted; then `mcpx gemini install --scope user`."""
    own = home / ".gemini"
    own.mkdir(parents=True, exist_ok=True)
    (own / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (own / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    done = subprocess.run([sys.executable, "-m", "mcpx", "gemini", "install", "--scope", "user"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=PATIENCE)
    assert done.returncode == 0, done.stdout + done.stderr
    return own / "settings.json"


def headless(command: list[str], prompt: str) -> list[str]:
    """`gemini -p PROMPT`, its tools run without asking (a script's way: nobody is there to approve them)."""
    return [*command, "-p", prompt, "--approval-mode", "yolo"]
