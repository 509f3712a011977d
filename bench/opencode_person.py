"""Benchmark: how soon the person in opencode hears of a question meant for them, with the real opencode.

One `opencode serve` (1.18.33, the scripted model as its provider, mcpx installed by `mcpx opencode install`,
the plugin at level ask) in front of a daemon whose one server is the SDK peer (tests/peers/sdk_server.py).
Timed from the daemon's own clock of each transition (the audit record's `at`) to the event arriving on
opencode's `/event` stream, which is what a TUI or app draws from:

1. with no model step — a call of `delete_branch` (a confirmation for the person), made through the plugin's
   own copy of the tool: `elicit.open` → the toast (`tui.toast.show`), and `elicit.open` → the permission
   dialog (`permission.asked`), opened in that same call;
2. through the model — the path a question that a permission dialog cannot carry still takes: `need_repo`
   (free text), which the scripted model declines, so mcpx re-raises it to the person; then the model calls
   `mcpx_ask_person`, then opencode's `question` tool as told: `elicit.escalated` → the toast, and
   `elicit.escalated` → the question dialog (`question.asked`). The scripted model answers at once; a real one
   takes seconds per step, so this is the floor of that path.

Rounds alternate between the two, so load on the machine hits both alike; p50/p99 of each, side by side.

    .venv/bin/python bench/opencode_person.py            # about 2 minutes on 2 cores
    .venv/bin/python bench/opencode_person.py --rounds 8

It is a benchmark, not a test: it exits 0, and says MISSED where the 1 s target of the issue is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
from broker import latency_line, p50, say  # noqa: E402
from gateway_helpers import stdio  # noqa: E402
from harness import scratch_daemon  # noqa: E402
from opencode.fake_model import Call, Request, Say, ScriptedModel  # noqa: E402
from opencode.harness import VERSION, Opencode, clean_env, make_project, ready_to_run  # noqa: E402

TARGET_S = 1.0


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def of(kind: str, eid: str) -> Any:
    def match(event: dict[str, Any]) -> bool:
        e = event.get("payload", event)
        return e.get("type") == kind and eid in json.dumps(e.get("properties", {}))
    return match


class Bench:
    def __init__(self, daemon: Any, model: ScriptedModel, oc: Opencode) -> None:
        self.daemon, self.model, self.oc = daemon, model, oc

    def audit_at(self, eid: str, kind: str) -> float:
        done = self.daemon.cli("audit", "--json", "--elicit", eid)
        records = json.loads(done.stdout)["records"]
        return stamp(next(r["at"] for r in records if r["kind"] == kind))

    def question_of(self, session: str) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = self.daemon.cli("elicit", "list", "--json", "--state", "all")
            found = [q for q in json.loads(done.stdout)["elicitations"] if q["session"] == session]
            if found:
                return found[0]["id"]
            time.sleep(0.05)
        raise AssertionError(f"no question in {session}")

    def session_until(self, marker: str, dialog: str) -> tuple[str, float, float, dict[str, Any]]:
        """A session prompted with `marker`: its question, when the toast and the `dialog` event arrived, the event."""
        events = self.oc.follow_events()
        try:
            session = self.oc.session()
            self.oc.prompt(session, f"{marker} go")
            eid = self.question_of(session)
            toast, _ = events.wait("toast", of("tui.toast.show", eid))
            shown, event = events.wait(dialog, of(dialog, eid))
        finally:
            events.close()
        return eid, toast, shown, event.get("payload", event)["properties"]

    def no_model_step(self, n: int) -> tuple[float, float]:
        name = f"direct{n}"
        marker = self.model.script(name, [lambda r: Call("mcpx_sdk_delete_branch", {}), lambda r: Say("done.")])
        eid, toast, dialog, asked = self.session_until(marker, "permission.asked")
        opened = self.audit_at(eid, "elicit.open")
        self.oc.reply_permission(asked["id"], "once")
        self.model.wait_for(name, lambda rs: any(r.turn >= 1 for r in rs if r.tools), 90)
        return toast - opened, dialog - opened

    def through_model(self, n: int) -> tuple[float, float]:
        name = f"model{n}"

        def first_id(r: Request) -> str:
            return r.question_ids()[0]

        def question_call(r: Request) -> Call:
            line = next(x for x in r.last_tool_result().splitlines() if x.startswith("question {"))
            return Call("question", json.loads(line[len("question "):]))

        steps = [lambda r: Call("mcpx_sdk_need_repo", {}),
                 lambda r: Call("mcpx_mcpx_elicit_answer",
                                {"id": first_id(r), "action": "decline", "reason": "unknown"}),
                 lambda r: Call("mcpx_ask_person", {"id": first_id(r)}),
                 question_call, lambda r: Say("done.")]
        marker = self.model.script(name, steps)
        eid, toast, dialog, asked = self.session_until(marker, "question.asked")
        escalated = self.audit_at(eid, "elicit.escalated")
        self.oc.reply_question(asked["id"], [["person/answer"]])
        self.model.wait_for(name, lambda rs: any(r.turn >= 4 for r in rs if r.tools), 90)
        return toast - escalated, dialog - escalated


def line(what: str, values: list[float]) -> str:
    return latency_line(what, values, TARGET_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    binary, why = ready_to_run()
    if binary is None:
        say(why)
        return
    root = Path(tempfile.mkdtemp(prefix="ocp-"))
    with scratch_daemon("ocp-", {"servers": {"sdk": stdio("sdk_server.py")}}) as daemon:
        model = ScriptedModel(root / "model.jsonl").start()
        oc: Opencode | None = None
        try:
            env = {**clean_env(root / "home"),
                   **{k: v for k, v in daemon.env.items() if k.startswith(("MCPX_", "PYTHON"))},
                   "MCPX_PLUGIN_ELICIT": "ask"}
            (root / "home").mkdir()
            project = make_project(root / "project", model.base_url, env)
            oc = Opencode(binary, project, root / "home", env).start()
            bench = Bench(daemon, model, oc)
            bench.no_model_step(0)  # warm: the first call starts the upstream server
            direct: list[tuple[float, float]] = []
            through: list[tuple[float, float]] = []
            lost: list[str] = []
            for n in range(1, args.rounds + 1):
                for run, into in ((bench.no_model_step, direct), (bench.through_model, through)):
                    try:
                        into.append(run(n))
                    except AssertionError as exc:  # a round that stalled is reported, not averaged in
                        lost.append(f"{run.__name__} round {n}: {str(exc).splitlines()[0]}")
        finally:
            if oc is not None:
                oc.stop()
            model.stop()
    for what in lost:
        say(f"  lost: {what}")
    if not direct or not through:
        say("too few rounds completed to compare")
        return
    say(f"opencode {VERSION} serve, plugin at ask, {len(direct)} and {len(through)} rounds "
        "(from the daemon's clock of the transition to the event on opencode's /event):")
    say("  no model step: a confirmation, asked in the call (elicit.open →)")
    say(line("the toast", [t for t, _ in direct]))
    say(line("the permission dialog, in that call", [d for _, d in direct]))
    say("  through the model: free text the agent declined (elicit.escalated →)")
    say(line("the toast", [t for t, _ in through]))
    say(latency_line("the question dialog (mcpx_ask_person, question)", [d for _, d in through], None)
        + "  (no target: the model's steps)")
    ratio = p50([d for _, d in through]) / max(p50([d for _, d in direct]), 1e-6)
    say(f"  the dialog with no model step is {ratio:.1f}x sooner at p50 than through the scripted model")


if __name__ == "__main__":
    main()
