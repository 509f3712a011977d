"""The daemon outlives opencode, with the real opencode 1.18.33: no daemon runs when opencode starts, and the
plugin (`mcpx daemon start`) or its MCP entry (`mcpx serve`), both installed by `mcpx opencode install`, starts
one, detached; a call through the MCP entry has its question open when opencode disposes its instance (stopping
its MCP servers and their descendants) and then stops; the person answers from a terminal, and the call
completes with its result kept.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gateway_helpers import stdio
from harness import PATIENCE, ApiProbe, base_env, child_pids, mcpx_command, read_log, stop_pid, wait_for_sync
from mcpx.system import processes
from mcpx.system.paths import StatePaths
from opencode.fake_model import Call, Say, ScriptedModel
from opencode.harness import Opencode, clean_env, make_project, require_opencode

# each test has an opencode and a daemon of its own: they run on any worker, beside the other opencode tests
pytestmark = [pytest.mark.timeout(300)]


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpx_command(*args), env=env, capture_output=True, text=True, timeout=2 * PATIENCE)


def pending(home: Path) -> list[dict[str, Any]]:
    """The questions pending in the daemon of `home`; none while no daemon serves it (opencode starts one)."""
    try:
        return ApiProbe(StatePaths(home).socket).pending()
    except OSError:
        return []


def recorded_pid(home: Path) -> int | None:
    try:
        return int(json.loads((home / "daemon.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.mark.parametrize("grace", ["2s", "10m"], ids=["answered-early", "in-flight"])
def test_opencode_stopped_while_a_question_waits_then_answered_from_the_terminal(tmp_path: Path, grace: str) -> None:
    """answered-early: opencode got the early result (elicit.grace 2 s) before it stopped. in-flight: the tool
    call was still waiting in opencode when it stopped (a grace of 10 minutes)."""
    binary = require_opencode(tmp_path)
    home = tmp_path / "mcpx-home"
    home.mkdir()
    config = home / "config.json"
    config.write_text(json.dumps({"servers": {"sdk": stdio("sdk_server.py")}, "elicit": {"grace": grace}}))
    mcpx_env = base_env(home, config)  # no daemon runs: opencode's `mcpx serve` starts one
    model = ScriptedModel(tmp_path / "model-requests.jsonl").start()
    oc: Opencode | None = None
    try:
        # notify: the servers' tools are the MCP entry's, so the call waits in opencode's `mcpx serve`
        env = {**clean_env(tmp_path / "home"), "MCPX_PLUGIN_ELICIT": "notify",
               **{k: v for k, v in mcpx_env.items() if k.startswith(("MCPX_", "PYTHON"))}}
        project = make_project(tmp_path / "project", model.base_url, env)
        oc = Opencode(binary, project, tmp_path / "home", env).start()
        marker = model.script("outlive", [lambda r: Call("mcpx_sdk_need_repo", {}), lambda r: Say("done.")])
        session = oc.session()
        oc.prompt(session, f"{marker} do the task")
        question = wait_for_sync(lambda: pending(home), what="the upstream's question, open")[0]
        daemon = recorded_pid(home)
        assert daemon is not None and question["session"] == session

        assert oc.proc is not None
        serve = [p for p in child_pids(oc.proc.pid) if b"serve" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert serve, "opencode runs its MCP entry, mcpx serve"
        oc.call("POST", "/instance/dispose")  # opencode stops its MCP servers and all they started
        oc.stop()
        wait_for_sync(lambda: not any(processes.alive(p) for p in serve), what="opencode's mcpx serve gone")
        assert processes.alive(daemon), "the daemon stopped with opencode"
        if grace != "2s":  # the call was in flight when its client went: it goes on, and says so
            wait_for_sync(lambda: f"mcpx task result {question['task']}" in read_log(home),
                          what="the daemon seeing opencode's call go")
        answered = cli(mcpx_env, "elicit", "answer", question["id"], "repo=person/later")
        assert answered.returncode == 0, answered.stdout + answered.stderr
        done = cli(mcpx_env, "task", "result", question["task"], "--json", "--timeout", str(PATIENCE))
        assert done.returncode == 0, done.stdout + done.stderr
        doc = json.loads(done.stdout)
        assert doc["state"] == "completed"
        assert json.loads(doc["result"]["content"][0]["text"]) == {"action": "accept", "data": {"repo": "person/later"}}
        shown = json.loads(cli(mcpx_env, "elicit", "show", question["id"], "--json").stdout)
        assert shown["answer"]["by"] == "person:cli" and shown["elicitation"]["state"] == "answered"
        assert recorded_pid(home) == daemon  # the very daemon started when opencode did
    finally:
        if oc is not None:
            oc.stop()
        model.stop()
        if (pid := recorded_pid(home)) is not None:
            stop_pid(pid)
