"""Fixtures that run the real daemon on a real socket in a temporary MCPX_HOME."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"


def in_ci() -> bool:
    """CI is set (to anything but an empty, 0, false or no), as CI runners and .ci/run set it."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def loud_skip(reason: str) -> NoReturn:
    """A part the suite needs is missing here. Skipped, loudly, on a developer's machine; under CI (the CI
    variable set, as .ci/run sets it) a failure, so a CI run never goes green with a part of it unrun."""
    if in_ci():
        pytest.fail(f"LOUD SKIP under CI, so a failure: {reason}", pytrace=False)
    pytest.skip(f"LOUD SKIP: {reason}")


class Daemon:
    """One real `mcpx daemon` process, and the ways a test talks to it."""

    def __init__(self, home: Path, config: Path, env: dict[str, str], listen: str | None = None) -> None:
        self.home = home
        self.config = config
        self.env = env
        self.listen = listen
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / "daemon.stderr"

    @property
    def socket(self) -> Path:
        return self.home / "daemon.sock"

    def start(self, timeout: float = 15.0) -> None:
        args = [sys.executable, "-m", "mcpx", "daemon"] + (["--listen", self.listen] if self.listen else [])
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(args, env=self.env, stdout=out, stderr=out, cwd=self.home)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            if self._ready():
                return
            time.sleep(0.02)
        raise RuntimeError(f"daemon did not start: {self.log.read_text()[-2000:]}")

    def _ready(self) -> bool:
        """Our process wrote daemon.json and its socket accepts connections (not a stale one)."""
        try:
            info = json.loads((self.home / "daemon.json").read_text())
        except (OSError, ValueError):
            return False
        if self.proc is None or info.get("pid") != self.proc.pid:
            return False
        import socket as _socket

        probe = _socket.socket(_socket.AF_UNIX)
        try:
            probe.connect(str(self.socket))
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def stop(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def restart(self) -> None:
        self.start()

    def session(self, **headers: str) -> aiohttp.ClientSession:
        connector = aiohttp.UnixConnector(path=str(self.socket))
        return aiohttp.ClientSession("http://mcpx", connector=connector, headers=headers,
                                     timeout=aiohttp.ClientTimeout(total=60))

    def cli(self, *args: str, input: str | None = None, timeout: float = 60, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mcpx", *args], env={**self.env, **(env or {})},
                              capture_output=True, text=True, input=input, timeout=timeout, cwd=self.home)

    def cli_bg(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "mcpx", *args], env={**self.env, **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.home)

    def write_config(self, data: dict[str, Any]) -> None:
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.config)


def base_env(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_") and k not in ("AGENT", "OPENCODE")}
    env.update(MCPX_HOME=str(home), MCPX_CONFIG=str(config), PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "sidecar"), str(ROOT / "tests")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def make_daemon(home: Path, config: dict[str, Any] | None = None, listen: str | None = None,
                extra_env: dict[str, str] | None = None) -> Daemon:
    cfg = home / "config.json"
    cfg.write_text(json.dumps(config if config is not None else {"servers": {}}))
    env = base_env(home, cfg)
    env.update(extra_env or {})
    return Daemon(home, cfg, env, listen)


@pytest.fixture
def daemon(home: Path) -> Iterator[Daemon]:
    d = make_daemon(home)
    d.start()
    yield d
    d.stop()


@pytest.fixture
async def http(daemon: Daemon) -> AsyncIterator[aiohttp.ClientSession]:
    async with daemon.session() as s:
        yield s


async def ask(http: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    body.setdefault("message", "Which repository?")
    if "url" not in body:
        body.setdefault("requestedSchema", {"type": "object", "properties": {"repo": {"type": "string"}},
                                            "required": ["repo"]})
    async with http.post("/v1/elicit", json=body) as r:
        data = await r.json()
        assert r.status == 201, data
        return data["elicitation"]


async def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate() if asyncio.iscoroutinefunction(predicate) else predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)
