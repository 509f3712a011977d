"""A real `mcpx daemon` in a throw-away MCPX_HOME, for the benchmarks in bench/.

Kept apart from tests/conftest.py on purpose: the benchmarks must not depend on the test
suite's layout, and the suite must not grow knobs for the benchmarks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

# what the process reports in /proc/<pid>/stat is in clock ticks
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """user + system CPU time of any process so far (all its threads), from /proc/<pid>/stat."""
    # the command name in field 2 may hold spaces; everything after the last ')' is fixed fields
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / _CLK_TCK


def child_pids(pid: int) -> set[int]:
    """The live children of a process (its direct children only), from /proc."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


class BenchDaemon:
    """One `python -m mcpx daemon` subprocess; a context manager that always stops it.

    `servers` is the config's `servers` object (none by default), e.g.
    {"peer": {"command": sys.executable, "args": ["bench/peer_server.py"]}}.
    """

    def __init__(self, extra_args: list[str] | None = None, keep: bool = False, config_in_home: bool = False,
                 servers: dict[str, dict[str, Any]] | None = None) -> None:
        # short prefix: a unix socket path must stay under ~108 bytes
        self.root = Path(tempfile.mkdtemp(prefix="mcpx-bench-"))
        self.home = self.root / "home"
        self.home.mkdir(mode=0o700)
        # The daemon watches the config file's directory. Beside mcpx.db every WAL write would
        # wake that watcher, which the real layout (~/.config vs ~/.local/state) never does.
        config_dir = self.home if config_in_home else self.root / "config"
        config_dir.mkdir(exist_ok=True)
        self.config = config_dir / "config.json"
        self.config.write_text(json.dumps({"servers": servers or {}}))
        self.extra_args = extra_args or []
        self.keep = keep
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_path = self.home / "daemon.stderr"

    # ---- paths

    @property
    def socket(self) -> Path:
        return self.home / "daemon.sock"

    @property
    def db(self) -> Path:
        return self.home / "mcpx.db"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "daemon not started"
        return self.proc.pid

    def env(self) -> dict[str, str]:
        # drop any MCPX_* of the caller's own daemon, so the benchmark never talks to it
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
        env.update(MCPX_HOME=str(self.home), MCPX_CONFIG=str(self.config), PYTHONUNBUFFERED="1")
        return env

    # ---- lifecycle

    def start(self, timeout: float = 20.0) -> None:
        args = [sys.executable, *self.extra_args, "-m", "mcpx", "daemon"]
        with open(self.stderr_path, "ab") as out:
            self.proc = subprocess.Popen(args, env=self.env(), stdout=out, stderr=out, cwd=self.home)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.tail()}")
            if self._accepts():
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"daemon did not start within {timeout:.0f}s: {self.tail()}")

    def _accepts(self) -> bool:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(self.socket))
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (the daemon drains and exits); SIGKILL if it does not within `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def cleanup(self) -> None:
        self.stop()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> BenchDaemon:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()

    def tail(self, chars: int = 2000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no daemon stderr)"

    # ---- what the kernel says about it

    def rss_kib(self) -> int:
        """VmRSS of the daemon process, in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc status")

    def cpu_seconds(self) -> float:
        """user + system CPU time of the daemon so far (all its threads, aiosqlite's included)."""
        return process_cpu_seconds(self.pid)

    # ---- talking to it

    def session(self, limit: int = 100, timeout: float = 120.0) -> aiohttp.ClientSession:
        connector = aiohttp.UnixConnector(path=str(self.socket), limit=limit)
        return aiohttp.ClientSession("http://mcpx", connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=timeout))
