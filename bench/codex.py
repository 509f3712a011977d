"""Benchmark: a server's question passed through mcpx to the real Codex CLI (0.169.0), against Codex asked by the same
server directly.

One Codex (the native binary npm installs, as tests/hosts' Codex tests run it, with the scripted Responses API of
tests/codex/fake_model.py, in a private CODEX_HOME) has two MCP servers: `mcpx` (the entry `mcpx codex install --scope
user` writes, in front of a daemon whose one server `up` is the peer) and `direct` (the same peer, started by Codex
itself). The scripted model calls `need_repo` on each, alternately, in one turn; the peer asks for a repository; the
question is answered at once with {"repo": "bench/repo"}, so no person's pace is in the figure. Timed on the scripted
model's clock: from the moment its reply naming the tool call was sent whole to the moment the next request, carrying
the tool's result, arrived. That is the whole round trip as the model sees it: Codex's own work (the call, the
question's way to its client and back, the reply) on both sides alike, and mcpx's hops, its durable question and its
answer on one. Each result is checked to be the answer as the server received it, and every answer through mcpx to be
recorded as Codex's (`accept` by `person:mcp-client`).

Who answers at once: Codex has no hook for a server's question (Claude Code's `Elicitation` hook is what
bench/claude.py uses). Its app server (`codex app-server`, JSON-RPC on stdio; the TUI starts one of its own) hands a
server's question to its client as a `mcpServer/elicitation/request`, and what the client sends back is Codex's
answer, as a person's choice in the TUI's form is. This bench runs `codex app-server` and is that client: it starts a
thread and a turn (no `turnTrigger`: not `exec`, so mcpx takes a person to be at Codex, as in its TUI), and accepts
each question the moment it arrives. `codex exec` would not do: it answers every question `decline` by itself,
which mcpx rightly does not take as anyone's answer (docs/codex.md), so a question through mcpx would wait for a
person there while the direct one ended at once.

The peer is bench/peer_server.py `--legacy` (the handshake era, which Codex's MCP client speaks: 2025-06-18), asking
with `elicitation/create` mid-call; mcpx serve passes it on as an `elicitation/create` of its own. Its `need_repo`
asks with a schema Codex takes (no top-level `title`: Codex 0.169 cancels such a form unseen, which mcpx strips for
it, but a direct server's question would never be shown). Both entries have `default_tools_approval_mode = "approve"`
(no approval asked of the person before each call) and `required = true` (the turn starts with both servers' tools).

The goal is issue 14's for the same round trip measured with the SDK's client (bench/speed.py, figure 2), as for
Claude Code (bench/claude.py): p50 through mcpx at most 1.5x direct. Codex's own work is on both sides here.

    .venv/bin/python bench/codex.py                       # three runs of 10 rounds: about a minute on 2 cores
    .venv/bin/python bench/codex.py --runs 1 --rounds 4   # short

Rounds alternate which side goes first; each run has new processes (daemon, Codex, peers); the figures are each
run's p50, then their median over the runs with the spread (min-max), and the ratio is taken within each run. It is
a benchmark, not a test: it exits 0, and says MISSED where the goal is missed. The machines here are noisy and shared;
compare the ratios, not the milliseconds.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
from broker import say  # noqa: E402
from codex.fake_model import Call, Say, ScriptedCodexModel  # noqa: E402
from codex.harness import VERSION, codex_binary, codex_env, install, provider  # noqa: E402
from harness import (  # noqa: E402
    PATIENCE,
    ApiProbe,
    scratch_daemon,
    stop_process,
)
from host_round_trips import Figures, alternating, options, run_p50, summary  # noqa: E402

GOAL = 1.5  # p50 through mcpx / p50 direct: issue 14's goal for the elicitation round trip
ANSWER = {"repo": "bench/repo"}
PEER = [sys.executable, str(BENCH / "peer_server.py"), "--legacy"]
SIDES = {"mcpx": "mcp__mcpx__up_need_repo", "direct": "mcp__direct__need_repo"}


class AppServer:
    """`codex app-server` on stdio, with this bench as its client (the part the TUI plays): every question a server
    asks is accepted with ANSWER the moment it arrives, on the thread that reads Codex's messages."""

    def __init__(self, binary: Path, project: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(binary), "app-server"], cwd=project, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.project = project
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()  # Codex's answers to this client's requests
        self.ended = threading.Event()  # turn/completed
        self.asked: list[str] = []  # the servers whose questions were answered, in order
        self.other: list[str] = []  # requests of Codex's this client does not expect
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        threading.Thread(target=self._read, daemon=True).start()

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            method = message.get("method")
            if method == "mcpServer/elicitation/request":
                self._send({"id": message["id"], "result": {"action": "accept", "content": ANSWER}})
                self.asked.append(str(message["params"].get("serverName")))
            elif method == "turn/completed":
                self.ended.set()
            elif method is not None and "id" in message:
                self.other.append(method)
                self._send({"id": message["id"], "error": {"code": -32601, "message": "not in this bench"}})
            elif method is None:
                self.replies.put(message)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._send({"id": next(self._ids), "method": method, "params": params})
        reply = self.replies.get(timeout=PATIENCE)
        assert "result" in reply, f"{method}: {reply}"
        return dict(reply["result"])

    def turn(self, text: str, timeout: float) -> None:
        """A new thread (a conversation) and one turn in it, to its end."""
        self.request("initialize", {"clientInfo": {"name": "mcpx-bench", "version": "0"}})
        self._send({"method": "initialized"})
        thread = self.request("thread/start", {"cwd": str(self.project)})["thread"]["id"]
        self.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]})
        if not self.ended.wait(timeout):
            raise TimeoutError(f"the turn did not end in {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        stop_process(self.proc)


def one_run(binary: Path, rounds: int, root: Path) -> Figures:
    """A daemon, a Codex with both servers, one turn of 2 x (rounds + 1) questions; the first of each side warms it
    (the tool's first call through each path) and is not counted."""
    order = alternating(rounds)
    figures = Figures()
    with scratch_daemon("cxb-", {"servers": {"up": {"command": PEER[0], "args": PEER[1:]}}}) as daemon:
        model = ScriptedCodexModel(root / "model.jsonl").start()
        codex = None
        try:
            project, home = root / "project", root / "home"
            project.mkdir(parents=True)
            (home / ".codex").mkdir(parents=True)
            env = codex_env(home, {k: v for k, v in daemon.env.items() if k.startswith("MCPX_")})
            (home / ".codex" / "config.toml").write_text(
                provider(model.base_url, project)
                + f'\n[mcp_servers.direct]\ncommand = {json.dumps(PEER[0])}\nargs = {json.dumps(PEER[1:])}\n'
                  'required = true\ndefault_tools_approval_mode = "approve"\n')
            install(home, project, env, approve=True)
            steps = [(lambda r, t=SIDES[side]: Call(t, {})) for side in order] + [lambda r: Say("done.")]
            marker = model.script("bench", steps)
            codex = AppServer(binary, project, env)
            codex.turn(f"{marker} ask away", PATIENCE + 10 * len(order))
            if codex.other or codex.asked != order:
                figures.lost.append(f"Codex asked {codex.asked}, and {codex.other}")
            # every question through mcpx was answered by Codex (its client, at once), as the client's answer
            answers = ApiProbe(daemon.socket).json("GET", "/v1/audit?kinds=elicit.answered")["records"]
            by = sorted({(a["data"]["action"], a["data"]["by"]) for a in answers})
            if len(answers) != order.count("mcpx") or by != [("accept", "person:mcp-client")]:
                figures.lost.append(f"mcpx recorded {len(answers)} answers, {by}")
        finally:
            if codex is not None:
                codex.stop()
            model.stop()
    figures.take([r for r in model.of("bench") if r.tools], SIDES,
                 lambda text: reported(text) == {"action": "accept", "data": ANSWER})
    return figures


def reported(text: str) -> object:
    """The peer's report, from Codex's text of a tool's result ("Wall time: …\\nOutput:\\n{"result": "…"}")."""
    _, _, output = text.partition("Output:\n")
    try:
        value = json.loads(output)
        return json.loads(value["result"]) if isinstance(value, dict) and set(value) == {"result"} else value
    except (ValueError, TypeError):
        return None


def main() -> None:
    args = options(__doc__, runs=3)
    binary, why = codex_binary()
    if binary is None:
        say(why)
        return
    root = Path(tempfile.mkdtemp(prefix="cxb-"))
    rows: list[tuple[float, float]] = []
    for run in range(args.runs):
        p50 = run_p50(run, "", one_run(binary, args.rounds, root / f"run{run}"))
        if p50 is not None:
            rows.append(p50)
    say(f"Codex {VERSION} (its app server, a client answering at once); from the model's tool call to its result, p50 "
        f"of each run, {args.rounds} rounds a run; median over {args.runs} run(s) (min-max):")
    summary("legacy", rows, GOAL)


if __name__ == "__main__":
    main()
