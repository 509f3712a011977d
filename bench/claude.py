"""Benchmark: a server's question passed through mcpx to the real Claude Code (2.1.332), against Claude Code asked by
the same server directly.

One Claude Code TUI (in tmux, as tests/hosts/test_claude_tui.py runs it) has two MCP servers: `mcpx` (`mcpx serve`, in
front of a daemon whose one server `up` is the peer) and `direct` (the same peer, started by Claude Code itself).
The scripted model (tests/claude/fake_model.py) calls `need_repo` on each, alternately, in one conversation; the
peer asks for a repository; an `Elicitation` hook answers at once (a shell command printing the hook's accept with
{"repo": "bench/repo"}), so no person's pace is in the figure. Timed on the scripted model's clock: from the moment
its reply naming the tool call was sent whole to the moment the next request, carrying the tool's result, arrived.
That is the whole round trip as the model sees it: Claude Code's own work (the call, the hook's process, the
retry or the reply, drawing) on both sides alike, and mcpx's hops, its durable question and its answer on one.
Each result is checked to be the hook's answer as the server received it.

The era compared is the handshake era, the same on both sides:
- legacy: Claude Code is told `MCP_PROTOCOL_NEGOTIATION=legacy` (its own setting: mcpx serve cannot be made to
  refuse `server/discover`); the peer is tests/peers/sdk_legacy.py (handshake only), which asks mid-call with
  `elicitation/create`. mcpx serve passes it on as an `elicitation/create` of its own.

Why not the 2026-07-28 era: there Claude Code's TUI declares the Tasks extension, and mcpx makes a call that
waits on a question a task (docs/claude-code.md): the model is told at once that the call moved to the background,
and gets the result in a task notification at a later turn of its own, while the direct server answers the call
itself. The two are not one round trip measured twice; bench/tasks.py measures a task's question round trip
against a client driving the task directly.

Why the TUI and not print mode: under `claude -p` (CLAUDE_CODE_ENTRYPOINT=sdk-cli) mcpx knows nobody is at Claude
Code and records nothing it answers (mcpx/shared/hostenv.py), so a hook's instant answer would not reach the server
through mcpx at all, while it would directly. In the TUI a person is at it: the hook's answer is taken as the answer
Claude Code gave (`person:mcp-client`), as a person's at the form would be. Nothing in the environment is faked.

The goal is issue 14's for the same round trip measured with the SDK's client (bench/speed.py, figure 2): p50
through mcpx at most 1.5x direct. Claude Code's own work is on both sides here, so this is the easier form of that
goal: missing it means mcpx's part is larger than all of Claude Code's.

    .venv/bin/python bench/claude.py                  # about a minute on 2 cores
    .venv/bin/python bench/claude.py --runs 3 --rounds 20

Rounds alternate which side goes first; `--runs N` repeats everything with new processes and prints each figure's
median over the runs with its spread (min-max). It is a benchmark, not a test: it exits 0, and says MISSED where
the goal is missed. The machines here are noisy and shared; compare the ratios, not the milliseconds.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
from broker import say  # noqa: E402
from claude.fake_model import Call, Say, ScriptedClaudeModel  # noqa: E402
from claude.harness import (  # noqa: E402
    VERSION,
    claude_binary,
    claude_env,
    mcpx_entry,
    prompt,
    seed_home,
    start_tui,
    write_mcp_config,
    write_settings,
)
from harness import (  # noqa: E402
    PEERS,
    ApiProbe,
    scratch_daemon,
)
from host_round_trips import Figures, alternating, options, run_p50, summary  # noqa: E402

GOAL = 1.5  # p50 through mcpx / p50 direct: issue 14's goal for the elicitation round trip
ANSWER = {"repo": "bench/repo"}
PEER = {"legacy": "sdk_legacy.py"}  # the era, and the peer that asks in it (see the docstring for why not modern)
SIDES = {"mcpx": "mcp__mcpx__up_need_repo", "direct": "mcp__direct__need_repo"}


def hook_command() -> str:
    """The Elicitation hook: reads the question (stdin) and accepts it with ANSWER, at once."""
    out = json.dumps({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": ANSWER}})
    return f"cat > /dev/null; printf '%s\\n' {shlex.quote(out)}"


def reported(text: str) -> object:
    value = json.loads(text)
    if isinstance(value, dict) and set(value) == {"result"}:
        value = json.loads(value["result"])
    return value


def one_run(binary: Path, era: str, rounds: int, root: Path) -> Figures:
    """A daemon, a TUI with both servers, one conversation of 2 x (rounds + 1) questions; the first of each side warms
    it (the peer's start, the tool's search) and is not counted."""
    order = alternating(rounds)
    figures = Figures()
    with scratch_daemon("ccb-", {"servers": {"up": {"command": sys.executable, "args": [str(PEERS / PEER[era])]}}}
                        ) as daemon:
        model = ScriptedClaudeModel(root / f"model-{era}.jsonl").start()
        tui = None
        try:
            project, home = root / era / "project", root / era / "home"
            project.mkdir(parents=True)
            seed_home(home, [project])
            write_settings(home, {"hooks": {"Elicitation": [{"hooks": [{"type": "command",
                                                                         "command": hook_command()}]}]}})
            config = write_mcp_config(root / era / "mcp.json", {
                "mcpx": mcpx_entry(daemon.env),
                "direct": {"command": sys.executable, "args": [str(PEERS / PEER[era])]}})
            extra = {"MCP_PROTOCOL_NEGOTIATION": "legacy"} if era == "legacy" else {}
            tui = start_tui(binary, project, claude_env(home, model.base_url, extra), allowed=list(SIDES.values()),
                            mcp_config=config)
            steps = [(lambda r, t=SIDES[side]: Call(t, {})) for side in order] + [lambda r: Say("done.")]
            marker = model.script(era, steps)
            prompt(tui, f"{marker} ask away")
            requests = model.wait_for(era, lambda rs: any(r.turn >= len(order) and r.tools for r in rs),
                                      60 + 10 * len(order))
            # every question through mcpx was answered by Claude Code (its hook), as the client's answer
            answers = ApiProbe(daemon.socket).json("GET", "/v1/audit?kinds=elicit.answered")["records"]
            by = sorted({(a["data"]["action"], a["data"]["by"]) for a in answers})
            if len(answers) != order.count("mcpx") or by != [("accept", "person:mcp-client")]:
                figures.lost.append(f"{era}: mcpx recorded {len(answers)} answers, {by}")
        finally:
            if tui is not None:
                tui.stop()
            model.stop()
    turns = [r for r in requests if r.tools]  # the conversation's own requests, not a title asked on the side
    figures.take(turns, SIDES, lambda text: bool(text) and reported(text) == {"action": "accept", "data": ANSWER},
                 f"{era} ")
    return figures


def main() -> None:
    args = options(__doc__, runs=1)
    binary, why = claude_binary()
    if binary is None:
        say(why)
        return
    root = Path(tempfile.mkdtemp(prefix="ccb-"))
    per_run: dict[str, list[tuple[float, float]]] = {era: [] for era in PEER}
    for run in range(args.runs):
        for era in PEER:
            p50 = run_p50(run, f", {era}", one_run(binary, era, args.rounds, root / f"run{run}"))
            if p50 is not None:
                per_run[era].append(p50)
    say(f"Claude Code {VERSION} TUI, an Elicitation hook answering at once; from the model's tool call to its result, "
        f"p50 of each run, {args.rounds} rounds a run; median over {args.runs} run(s) (min-max):")
    for era, rows in per_run.items():
        summary(era, rows, GOAL)


if __name__ == "__main__":
    main()
