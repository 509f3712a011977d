"""What the benches of a real host's question round trip share (bench/claude.py, bench/codex.py): the round trips read
off the scripted model's clock, and the figures said as each run's p50 and their median over the runs.

A round trip is from the moment the model's reply naming a tool call was sent whole to the moment the host's next
request, carrying the tool's result, arrived: the whole round trip as the model sees it. A side is `mcpx` (the tool
through mcpx) or `direct` (the same server, started by the host itself); the ratio is through mcpx over direct,
taken within each run, where both sides met the same load.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from broker import say
from opencode.fake_model import Call, Recorded

SIDES = ("mcpx", "direct")


@dataclass
class Figures:
    """One run's round trips (s) by side, and what went wrong (a result that was not the answer, a count off)."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})
    lost: list[str] = field(default_factory=list)

    def take(self, turns: Sequence[Recorded], tools: dict[str, str], result_ok: Callable[[str], bool],
             label: str = "") -> None:
        """The round trips of the tool calls in `turns` (a conversation's requests, in order) to `tools` (side ->
        the tool's name as the model calls it), each result checked with `result_ok`; the first call of each side
        warms it (the server's first call through that path) and is not counted."""
        calls = [(r, nxt) for r, nxt in itertools.pairwise(turns)
                 if isinstance(r.reply, Call) and r.reply.tool in tools.values()]
        for k, (call, result) in enumerate(calls):
            side = next(s for s, t in tools.items() if isinstance(call.reply, Call) and t == call.reply.tool)
            if not result_ok(result.last_tool_result()):
                self.lost.append(f"{label}{side} call {k}: {result.last_tool_result()[:200]!r}")
            elif k >= 2 and call.replied is not None:
                self.seconds[side].append(result.at - call.replied)


def alternating(rounds: int) -> list[str]:
    """The sides in the order the model calls them: one of each to warm, then `rounds` pairs, which side goes first
    alternating."""
    order = list(SIDES)
    for n in range(rounds):
        order += list(SIDES) if n % 2 == 0 else list(reversed(SIDES))
    return order


def options(doc: str, runs: int) -> argparse.Namespace:
    """The bench's command line: --runs (each with new processes) and --rounds (pairs of calls a run)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--rounds", type=int, default=10)
    return parser.parse_args()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def run_p50(run: int, label: str, figures: Figures) -> tuple[float, float] | None:
    """One run's figures said; its p50 through mcpx and direct, or None when too few round trips completed."""
    for what in figures.lost:
        say(f"  lost: {what}")
    through, direct = figures.seconds["mcpx"], figures.seconds["direct"]
    if len(through) < 3 or len(direct) < 3:
        say(f"  run {run + 1}{label}: too few rounds completed to compare")
        return None
    say(f"  run {run + 1}{label}: through mcpx p50 {ms(statistics.median(through))} (min {ms(min(through))}), "
        f"direct p50 {ms(statistics.median(direct))} (min {ms(min(direct))}), "
        f"{len(through)} and {len(direct)} round trips")
    return statistics.median(through), statistics.median(direct)


def summary(label: str, rows: list[tuple[float, float]], goal: float) -> None:
    """The runs' p50s (through mcpx, direct) said as their median and spread, with the ratio's; MISSED past `goal`."""
    if not rows:
        say(f"  {label}: no run completed")
        return
    ratios = [t / d for t, d in rows]
    through = [t for t, _ in rows]
    direct = [d for _, d in rows]
    extra = [t - d for t, d in rows]
    flag = "" if statistics.median(ratios) <= goal else f"  MISSED (goal <= {goal:g}x)"
    say(f"  {label:<7} through mcpx {ms(statistics.median(through))} ({ms(min(through))}-{ms(max(through))}),"
        f" direct {ms(statistics.median(direct))} ({ms(min(direct))}-{ms(max(direct))}),"
        f" mcpx adds {ms(statistics.median(extra))}; ratio {statistics.median(ratios):.2f}x "
        f"({min(ratios):.2f}-{max(ratios):.2f}){flag}")
