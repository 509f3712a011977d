"""The harness's own command, as the plugin's node tests use it (`python tests/harness.py daemon`): a daemon with
the config it was given, where it says it is, and nothing left behind once the caller is done, or if the daemon
cannot start."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import PATIENCE, SOCKET_PATH_MAX, TESTS, base_env, make_daemon, stop_process, unix_session, wait_gone


@pytest.fixture
def tmp() -> Iterator[Path]:
    """A TMPDIR of the test's own for the harness's scratch homes, so it sees what they leave there. Not under
    tmp_path: a pytest worker's tmp_path is too long a prefix for the daemon's socket."""
    with tempfile.TemporaryDirectory(prefix="mcpx-th-") as tmp:
        yield Path(tmp)


def harness(tmp: Path, config: dict[str, Any]) -> subprocess.Popen[str]:
    env = {**base_env(tmp, tmp / "unused.json"), "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, str(TESTS / "harness.py"), "daemon", "--config", json.dumps(config)],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def first_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], PATIENCE)
    assert ready, f"the harness said nothing within {PATIENCE:.0f}s"
    return proc.stdout.readline()


@pytest.mark.parametrize("how", ["stdin closes", "SIGTERM"])
async def test_the_command_serves_a_daemon_until_its_caller_is_done_and_leaves_nothing(tmp: Path, how: str) -> None:
    proc = harness(tmp, {"servers": {"peer": {"command": "never-started"}}})
    try:
        where = json.loads(first_line(proc))
        assert Path(where["home"]).parent == Path(where["config"]).parent.parent  # the config beside the home
        async with unix_session(where["socket"]) as http, http.get("/v1/health") as r:
            health = await r.json()
        assert r.status == 200 and health["pid"] == where["pid"] and health["servers"] == ["peer"]
        assert proc.stdin is not None
        if how == "stdin closes":
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(PATIENCE) == 0
        assert wait_gone(where["pid"], PATIENCE), "the daemon outlived the harness"
        assert os.listdir(tmp) == []  # the scratch home and config removed
    finally:
        stop_process(proc)


def test_a_daemon_that_cannot_start_is_an_error_naming_why_and_leaves_nothing(tmp: Path) -> None:
    proc = harness(tmp, {"servers": {"typo": {"comand": "gh-mcp"}}})
    try:
        assert first_line(proc) == ""  # no JSON line: it ended without a daemon
        assert proc.wait(PATIENCE) == 1
        assert proc.stderr is not None
        said = proc.stderr.read()
        assert "the daemon exited 1" in said and "servers.typo" in said, said  # the daemon's own words
        assert os.listdir(tmp) == []
    finally:
        stop_process(proc)


def test_a_home_too_deep_for_a_unix_socket_is_refused_at_once(tmp_path: Path) -> None:
    home = tmp_path / ("h" * SOCKET_PATH_MAX)
    home.mkdir()
    daemon = make_daemon(home)
    with pytest.raises(RuntimeError, match="a unix socket's path may be 107 at most"):
        daemon.start()
    assert daemon.proc is None  # nothing was started
