"""The official MCP conformance suite's SERVER scenarios with our fixture server BEHIND mcpx.

    suite -> bearer proxy (adds Authorization only) -> mcpx daemon /mcp/fixture (loopback TCP) -> fixture_server.py

The same runs as the direct baseline (tests/conformance/server_baseline.py RUNS, both suite versions),
against http://localhost:P/mcp/fixture: mcpx's one-server surface, the upstream's tools under their own
names and its resources, prompts, completion and logging passed through. The chain is built by
tests/conformance/mcpx_behind.py (also a CLI: `python tests/conformance/mcpx_behind.py --keep DIR`
keeps every checks.json and the daemon's home). Every run gets its own chain (fixture, daemon, proxy), so the
runs are independent of one another; within a run the suite's scenario order is fixed, and the verdicts are too.

The requirement: every scenario that passes against the fixture directly (server_baseline.json) passes
through mcpx too. A scenario that fails only through mcpx is an mcpx bug; until it is fixed it is listed,
with a one-line reason naming the bug, in tests/conformance/mcpx_expected_failures.json. The list may only
shrink: a listed scenario that passes makes the test fail until its entry is removed (its "bugs" entry
goes when no scenario names it). Scenarios that fail
directly as well (the tasks-* extension: the mcp SDK has none) are not judged.

The ten tasks-* scenarios are judged in a run of their own, "0.2.0-alpha.12:tasks" (server_baseline.TASKS_RUN),
with tasks_fixture.py (FastMCP with fastmcp-tasks) behind /mcp/fixture instead: all ten pass against it
directly and through mcpx (there mcpx passes the client's declaration of the extension on, follows the task the
server makes and serves it as its own, at once: surface/tasks_extension.py).

Needs `npm install` at the repository root (node@22, conformance-0116, conformance-020a12); without it every
test is skipped, loudly. The checks.json of each run are kept under the test's tmp_path.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

import mcpx_behind as mb
import server_baseline as sb

from conftest import loud_skip


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[mb.Chain]:
    """A fresh chain for every run: what one run teaches mcpx (e.g. the era it settles on for the server) must
    not change the next run's verdicts. The daemon's home (logs, store) is kept in tmp_path."""
    why = sb.missing()
    if why:
        loud_skip(f"the MCP conformance suite cannot run: {why}")
    with mb.mcpx_chain(home=tmp_path / "home") as c:
        yield c


def _post(url: str, headers: dict[str, str]) -> tuple[int, str]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_expected_failures_file_is_well_formed() -> None:
    problems = mb.expected_failures_problems()
    assert not problems, f"{mb.EXPECTED_FAILURES.name}:\n  " + "\n  ".join(problems)


@pytest.mark.timeout(30)
def test_the_proxy_adds_only_the_token(chain: mb.Chain) -> None:
    """Without the proxy the daemon's port wants the token; through it, Host and Origin still reach mcpx as sent
    (its DNS-rebinding guard answers, not the proxy)."""
    status, text = _post(chain.daemon_url + "/mcp/" + mb.SERVER, {})
    assert status == 401 and "Bearer" in text, (status, text)
    status, text = _post(chain.url, {"Host": "evil.example.com"})
    assert status == 403 and "evil.example.com" in text, (status, text)
    status, text = _post(chain.url, {"Origin": "http://evil.example.com"})
    assert status == 403 and "evil.example.com" in text, (status, text)


def judged(run: sb.RunResult, chain: mb.Chain, kept: Path) -> None:
    """Fail on a scenario that passes directly (server_baseline.json) and fails through mcpx without being listed in
    mcpx_expected_failures.json, and on a stale entry there; the daemon's log and where checks.json are kept said."""
    baseline = sb.load_baseline()
    print(mb.table(baseline, {run.label: run}))
    assert run.scenarios, f"the suite ran no scenario through mcpx:\n{run.output[-4000:]}"
    regressions, stale = mb.judge(baseline, {run.label: run}, mb.load_expected_failures())
    message = []
    if regressions:
        message.append("scenarios that pass against the fixture directly FAIL through mcpx (an mcpx bug; list it in "
                       f"{mb.EXPECTED_FAILURES.name} only with a reason naming the bug):\n  "
                       + "\n  ".join(regressions))
    if stale:
        message.append(f"stale entries in {mb.EXPECTED_FAILURES.name} (the list may only shrink):\n  "
                       + "\n  ".join(stale))
    if message:
        log = (chain.home / "daemon.stderr")
        tail = log.read_text()[-3000:] if log.exists() else ""
        pytest.fail("\n\n".join(message) + f"\n\nchecks.json kept in {kept}\n"
                    f"--- daemon log (tail) ---\n{tail}")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("label, version, args", sb.RUNS, ids=[r[0] for r in sb.RUNS])
def test_server_scenarios_through_mcpx(label: str, version: str, args: list[str], chain: mb.Chain,
                                       tmp_path: Path) -> None:
    run = sb.run_server_suite(version, chain.url, args, label=label, timeout=80, keep=tmp_path / "suite")
    judged(run, chain, tmp_path / "suite")


@pytest.fixture
def tasks_chain(tmp_path: Path) -> Iterator[mb.Chain]:
    """tasks_fixture.py behind a fresh daemon (as `chain`)."""
    why = sb.missing() or sb.tasks_missing()
    if why:
        loud_skip(f"the tasks-* conformance scenarios cannot run: {why}")
    with mb.mcpx_chain(home=tmp_path / "home", fixture=sb.TASKS_FIXTURE) as c:
        yield c


@pytest.mark.timeout(180)
def test_tasks_scenarios_through_mcpx(tasks_chain: mb.Chain, tmp_path: Path) -> None:
    """The tasks-* scenarios through mcpx, every one as directly."""
    judged(sb.run_tasks(tasks_chain.url, keep=tmp_path / "suite"), tasks_chain, tmp_path / "suite")
