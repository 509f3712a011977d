"""What the tests of a host run headless with mcpx share (`codex exec`, `gemini -p`): a daemon in front of the mcp SDK
peer that elicits (tests/peers/sdk_server.py), as `sdk` and as `brief` (whose questions live BRIEF seconds), the
person at a terminal of their own, outside the host's process tree (`mcpx …` with the daemon's environment), and the
host's runs, each in a project and HOME of its own (`HeadlessHost`)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway_helpers import stdio
from harness import PATIENCE, Daemon, make_daemon, mcpx_command
from mcpx.config.models import ElicitSettings
from opencode.fake_model import TASK_ID, Call, Say, ScriptedServer, ToolResults

BRIEF = 4  # s: the TTL of the questions of the server `brief`
GRACE = ElicitSettings().grace  # s: elicit.grace, which elicit_daemon leaves at its default


def elicit_daemon(root: Path) -> Daemon:
    """A daemon (not started) whose servers `sdk` and `brief` ask; questions live ten minutes, brief's BRIEF s."""
    servers = {"sdk": stdio("sdk_server.py"), "brief": {**stdio("sdk_server.py"), "elicit": {"ttl": f"{BRIEF}s"}}}
    return make_daemon(root / "mcpx-home", {"servers": servers, "elicit": {"ttl": "10m"}})


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """A host's run to its end (bounded): its exit code, stdout and stderr."""
    out, err = proc.communicate(timeout=PATIENCE * 2)
    return proc.returncode, out, err


@dataclass
class Person:
    daemon: Daemon

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`mcpx …` from the person's own terminal."""
        return subprocess.run(mcpx_command(*args), env=self.daemon.env, capture_output=True, text=True,
                              timeout=PATIENCE)

    def cli_json(self, *args: str) -> Any:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def pending(self) -> list[dict[str, Any]]:
        return self.daemon.api().pending()

    def pending_of(self, eid: str) -> dict[str, Any]:
        """The pending question `eid`."""
        found = [q for q in self.pending() if q["id"] == eid]
        assert found, f"{eid} is not pending"
        return found[0]

    def audit(self, eid: str) -> list[dict[str, Any]]:
        return self.daemon.api().audit(eid)

    def answered(self, eid: str) -> list[tuple[str, str]]:
        """The answers recorded for `eid`: (action, by), oldest first."""
        return [(r["data"]["action"], r["data"]["by"]) for r in self.audit(eid) if r["kind"] == "elicit.answered"]


@dataclass
class HeadlessHost(Person):
    """A host run headless against the scripted `model`, one run per script, each in a project and a HOME of its own
    under `root`, where `prepare` installs mcpx as a person does; `argv` is the host's command for a prompt."""

    model: ScriptedServer[Any]
    root: Path

    def prepare(self, home: Path, project: Path) -> dict[str, str]:
        """The host's environment for a run in `project`, its HOME (`home`) made ready, mcpx installed."""
        raise NotImplementedError

    def argv(self, prompt: str) -> list[str]:
        raise NotImplementedError

    def mcpx_env(self) -> dict[str, str]:
        """The daemon's MCPX_*, which the host passes on to `mcpx serve`."""
        return {k: v for k, v in self.daemon.env.items() if k.startswith("MCPX_")}

    def start(self, name: str, script: list[Any]) -> subprocess.Popen[str]:
        """A run of the host on `script`, in a project of its own; stop it with stop_process."""
        project, home = self.root / name, self.root / f"{name}-home"
        project.mkdir()
        env = self.prepare(home, project)
        marker = self.model.script(name, script)
        return subprocess.Popen(self.argv(f"{marker} go"), cwd=project, env=env, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)


@contextmanager
def host_daemon(root: Path, model: ScriptedServer[Any]) -> Iterator[Daemon]:
    """An elicit_daemon started; it and the scripted `model` (started) stopped however the block ends."""
    daemon = elicit_daemon(root)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()
        model.stop()


# ---- the scripts and checks both hosts' tests run: the model's side names the host's tools with `prefix`


def said(request: ToolResults) -> Say:
    """The model's last turn: the tool's result, as it read it."""
    return Say("RESULT: " + request.last_tool_result())


def agent_answers(prefix: str, seen: list[str]) -> list[Callable[[Any], Call | Say]]:
    """The agent calls sdk_need_repo, answers the question it gets (noting its id in `seen`) with
    mcpx_elicit_answer, and collects the call's result with mcpx_task_result."""
    def answer(request: ToolResults) -> Call:
        ids = request.question_ids()
        assert ids, request.last_tool_result()
        seen.append(ids[0])
        return Call(f"{prefix}mcpx_elicit_answer", {"id": ids[0], "action": "accept",
                                                    "content": {"repo": "acme/widgets"}})

    def collect(request: Any) -> Call:
        task = next(m.group(0) for r in reversed(request.tool_results()) if (m := TASK_ID.search(r)))
        return Call(f"{prefix}mcpx_task_result", {"task": task, "wait": True})

    return [lambda r: Call(f"{prefix}sdk_need_repo", {}), answer, collect, said]


def two_sessions_one_expiring(person: Person, model: ScriptedServer[Any], first: subprocess.Popen[str],
                              second: subprocess.Popen[str]) -> list[str]:
    """Two runs of a host, scripts "one" (sdk_delete_branch) and "two" (brief_delete_branch), each in a session of its
    own: the sdk question is the person's to decline; the brief one expires as cancel (never decline, whatever the
    host said). The brief one may be gone before the other opens (a slow start), or before its call returns early:
    it is read from every question the log holds. Their two sessions."""
    for proc in (first, second):
        code, _out, err = finish(proc)
        assert code == 0, err[-2000:]
    sdk = person.pending_of(model.of("one")[-1].question_ids()[0])
    [brief] = person.cli_json("elicit", "list", "--state", "all", "--server", "brief")["elicitations"]
    brief_id = brief["id"]
    result = person.cli("task", "result", brief["task"], "--timeout", str(PATIENCE))
    assert '"action": "cancel"' in result.stdout.replace("\\", ""), result
    records = person.audit(brief_id)
    kinds = [r["kind"] for r in records if r["kind"].startswith("elicit.")]
    assert kinds[:2] == ["elicit.open", "elicit.expired"], kinds
    sessions = [sdk["session"], records[0]["session"]]
    assert sessions[0] != sessions[1], sessions
    listed = person.cli_json("elicit", "list", "--session", sdk["session"])["elicitations"]
    assert [q["id"] for q in listed] == [sdk["id"]]
    assert person.cli("elicit", "decline", sdk["id"]).returncode == 0
    assert person.answered(sdk["id"]) == [("decline", "person:cli")]
    return sessions
