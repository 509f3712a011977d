"""Real opencode, headless, for end-to-end tests: `opencode serve` in a temporary git project with a
private HOME, the scripted model as its only provider, and mcpx + its plugin + its skill installed
by `mcpx opencode install` — the way a person would set it up.

Its HTTP API is how a test plays the person: GET /permission and POST /permission/{id}/reply answer
the permission dialog, GET /question and POST /question/{id}/reply the question dialog.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from conftest import loud_skip
from harness import PATIENCE, ROOT, free_port, stop_process, wait_for_sync, wait_started

NODE_MODULES = ROOT / "node_modules"
PLUGIN = ROOT / "plugin" / "opencode"
PLUGIN_SOURCES = [ROOT / "tsconfig.json", PLUGIN / "build.mjs", PLUGIN / "index.ts", PLUGIN / "tui.tsx",
                  *sorted((PLUGIN / "lib").rglob("*.ts*")), *sorted((PLUGIN / "entry").glob("*"))]
PLUGIN_DIST = PLUGIN / "dist" / "index.js"
VERSION = "1.18.33"


def build_plugin() -> str | None:
    """Build plugin/opencode/dist when a source is newer; the reason it cannot be built, if so.

    Each test worker asks for it (a clean clone has no dist/), at the same moment as often as not: one builds,
    under an exclusive lock, and the others wait for it and then find dist/ fresh. Without the lock two tsc runs
    wrote dist/ at once while a third process (opencode, node's test runner) read it half written."""
    node = NODE_MODULES / ".bin" / "node"
    with open(ROOT / "tsconfig.json", "rb") as lock:  # a file every checkout has, locked, never written
        fcntl.flock(lock, fcntl.LOCK_EX)
        if PLUGIN_DIST.exists() and PLUGIN_DIST.stat().st_mtime >= max(p.stat().st_mtime for p in PLUGIN_SOURCES):
            return None
        if not (NODE_MODULES / "@babel" / "core").exists():
            return f"the plugin's build tools are missing from {NODE_MODULES}: run `npm ci` (./dev test does)"
        done = subprocess.run([str(node) if node.exists() else "node", str(PLUGIN / "build.mjs")], cwd=ROOT,
                              capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        raise RuntimeError(f"the plugin does not build:\n{done.stdout}{done.stderr}")
    return None


def opencode_binary() -> tuple[Path | None, str]:
    """The opencode executable from node_modules, and why it cannot run here when it cannot."""
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system(), platform.system().lower())
    arch = {"x86_64": "x64", "AMD64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(),
                                                                                      platform.machine())
    exact = NODE_MODULES / f"opencode-{system}-{arch}" / "bin" / "opencode"  # before -baseline and -musl builds
    candidates = [exact] if exact.exists() else sorted(NODE_MODULES.glob(f"opencode-{system}-{arch}*/bin/opencode"))
    if not candidates:
        return None, (f"no opencode {VERSION} binary for {system}-{arch} in {NODE_MODULES} "
                      "(npm ci installs opencode-ai with its platform package)")
    return candidates[0], ""


def clean_env(home: Path) -> dict[str, str]:
    """opencode's environment: a private HOME, no network fetches, nothing of the session running the tests. This
    checkout's `mcpx` first on PATH, as `./dev run` (or pipx) puts one there: the plugin's entry points that
    `mcpx opencode install` writes into a project load the plugin of the mcpx on PATH."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(HOME=str(home), OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1",
               OPENCODE_DISABLE_SHARE="1", OPENCODE_DISABLE_LSP_DOWNLOAD="1", PYTHONUNBUFFERED="1")
    if shutil.which("rg") is None:
        env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/bin"
    return env


def ready_to_run() -> tuple[Path | None, str]:
    """For a benchmark: the opencode binary and the plugin built, or why not (a test uses require_opencode)."""
    binary, why = opencode_binary()
    if binary is None:
        return None, f"opencode cannot run here: {why}"
    if (reason := build_plugin()):
        return None, f"the plugin cannot be built: {reason}"
    return binary, ""


def can_run(binary: Path, scratch: Path) -> str:
    """'' if `opencode --version` runs here, else what it said."""
    home = scratch / "version-home"
    home.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([str(binary), "--version"], env=clean_env(home), capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} --version failed: {exc}"
    if done.returncode != 0 or VERSION not in done.stdout:
        return f"{binary} --version said {done.returncode}: {done.stdout.strip()} {done.stderr.strip()[-500:]}"
    return ""


def require_opencode(scratch: Path) -> Path:
    """The opencode binary, once it is known to run here and the plugin is built; else a loud skip, saying why."""
    binary, why = opencode_binary()
    if binary is None:
        loud_skip(why)
    if (reason := can_run(binary, scratch)):
        loud_skip(f"opencode cannot run on this machine: {reason}")
    if shutil.which("git") is None:
        loud_skip("git is not installed; opencode needs a git project")
    if (reason := build_plugin()):
        loud_skip(reason)
    return binary


def seed_plugin_dependency(config_dir: Path) -> None:
    """With a plugin configured, opencode npm-installs @opencode-ai/plugin into each config directory (the
    project's .opencode/, ~/.config/opencode) at start-up — seconds of network — unless node_modules is there
    and package-lock.json lists it (Npm.install, 1.18.33). mcpx's plugin itself imports nothing from it."""
    (config_dir / "node_modules" / "@opencode-ai").mkdir(parents=True, exist_ok=True)
    link = config_dir / "node_modules" / "@opencode-ai" / "plugin"
    if not link.exists():
        link.symlink_to(NODE_MODULES / "@opencode-ai" / "plugin")
    deps = {"@opencode-ai/plugin": VERSION}
    (config_dir / "package.json").write_text(json.dumps({"dependencies": deps}, indent=2))
    (config_dir / "package-lock.json").write_text(json.dumps(
        {"lockfileVersion": 3, "packages": {"": {"dependencies": deps}}}, indent=2))


def make_project(path: Path, model_url: str, env: dict[str, str], mcpx: list[str] | None = None) -> Path:
    """A git project with the scripted model as its provider, and mcpx installed by `mcpx opencode install`
    (of the checkout, or of the `mcpx` command given: one installed from a wheel)."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text("a project for mcpx's end-to-end tests\n")
    (path / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                              "options": {"baseURL": model_url, "apiKey": "none"},
                              "models": {"fake": {"name": "fake", "tool_call": True}}}},
        "model": "fake/fake",
        "small_model": "fake/fake",
        "autoupdate": False,
        "share": "disabled",
    }, indent=2))
    done = subprocess.run([*(mcpx or [sys.executable, "-m", "mcpx"]), "opencode", "install", "--json"], cwd=path,
                          env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"mcpx opencode install failed: {done.stdout}{done.stderr}")
    seed_plugin_dependency(path / ".opencode")
    return path


class EventLog:
    """opencode's event stream (GET /event), read on a thread from the moment it is made: every event with the
    wall-clock time it arrived, so a test can see what opencode showed the person (tui.toast.show) and when."""

    def __init__(self, url: str) -> None:
        self.events: list[tuple[float, dict[str, Any]]] = []
        self._changed = threading.Condition()
        self._stopped = False
        host, port = url.removeprefix("http://").split(":")
        self._conn = http.client.HTTPConnection(host, int(port), timeout=PATIENCE)
        self._conn.request("GET", "/event", headers={"Accept": "text/event-stream"})
        self._response = self._conn.getresponse()
        assert self._response.status == 200, f"opencode's /event answered {self._response.status}"
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        data = ""
        try:
            for raw in self._response:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("data:"):
                    data += line[5:].strip()
                elif not line and data:
                    try:
                        event = json.loads(data)
                    except ValueError:
                        event = {"type": "?", "raw": data}
                    data = ""
                    with self._changed:
                        self.events.append((time.time(), event))
                        self._changed.notify_all()
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass  # closed under it: the test is over

    def wait(self, what: str, match: Any, timeout: float = PATIENCE) -> tuple[float, dict[str, Any]]:
        """The first event `match` accepts, with when it arrived; waits for it, bounded."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [(at, e) for at, e in self.events if match(e)]
                if found:
                    return found[0]
                left = deadline - time.monotonic()
                if left <= 0:
                    kinds = sorted({e.get("type", "?") for _, e in self.events})
                    raise AssertionError(f"opencode sent no {what} within {timeout:.0f} s (it sent: {kinds})")
                self._changed.wait(min(left, 0.5))

    def close(self) -> None:
        """Ends the stream under the reader (a shutdown, so it sees the end), then closes it once the reader is done."""
        try:
            if self._conn.sock is not None:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(timeout=10)
        self._conn.close()


class Opencode:
    """One `opencode serve`, and the HTTP calls a test makes of it."""

    def __init__(self, binary: Path, project: Path, home: Path, env: dict[str, str]) -> None:
        self.binary, self.project, self.home, self.env = binary, project, home, env
        self.port = free_port()
        self.log = project.parent / f"opencode-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        seed_plugin_dependency(home / ".config" / "opencode")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = PATIENCE) -> Opencode:
        out = self.log.open("ab")
        self.proc = subprocess.Popen([str(self.binary), "serve", "--hostname", "127.0.0.1", "--port", str(self.port),
                                      "--print-logs", "--log-level", "INFO"],
                                     cwd=self.project, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        wait_started(self.proc, lambda: "opencode server listening" in self.log.read_text(errors="replace"),
                     "opencode serve", timeout, self.tail, interval=0.1)
        return self

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    # ---- the HTTP API

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"opencode {method} {path} answered {exc.code}: "
                                 f"{exc.read().decode()[:2000]}") from None
        return json.loads(text) if text.strip() else None

    def session(self) -> str:
        return self.call("POST", "/session", {})["id"]

    def follow_events(self) -> EventLog:
        """opencode's event stream, from now on (close it when done)."""
        return EventLog(self.url)

    def prompt(self, session: str, text: str) -> None:
        self.call("POST", f"/session/{session}/prompt_async", {"parts": [{"type": "text", "text": text}]})

    def permissions(self, session: str) -> list[dict[str, Any]]:
        return [p for p in self.call("GET", "/permission") or [] if p.get("sessionID") == session]

    def questions(self, session: str) -> list[dict[str, Any]]:
        return [q for q in self.call("GET", "/question") or [] if q.get("sessionID") == session]

    def wait(self, what: str, probe: Any, timeout: float = PATIENCE) -> Any:
        try:
            return wait_for_sync(probe, timeout, what=f"opencode: a {what}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.tail(3000)}") from None

    def reply_permission(self, request_id: str, reply: str, message: str | None = None) -> None:
        body: dict[str, Any] = {"reply": reply}
        if message is not None:
            body["message"] = message
        self.call("POST", f"/permission/{request_id}/reply", body)

    def reply_question(self, request_id: str, answers: list[list[str]]) -> None:
        self.call("POST", f"/question/{request_id}/reply", {"answers": answers})
