"""mcpx's UPSTREAM client under the official MCP conformance suite's CLIENT scenarios.

For each scenario the suite starts its mock MCP server and runs
`<python> tests/conformance/mcpx_client.py <mock URL>`, which starts a real `mcpx daemon` whose only
server is the mock and drives it over the /v1 REST API (list tools, call, answer questions, fetch
results). So every byte the mock judges was sent by mcpx (sidecar/mcpx/upstream/connection.py,
sidecar/mcpx/mcp/http_client.py), end to end.

Pass = the suite exits 0 (no FAILURE check) and reports at least one SUCCESS. Known mcpx bugs are
strict xfails: when one is fixed the test XPASSes, fails, and the marker must go.

Needs `npm install` at the repository root (devDependencies node@22, conformance-0116,
conformance-020a12); without them every test is skipped, loudly (and fails under CI).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from conftest import loud_skip
from harness import run_group

ROOT = Path(__file__).resolve().parents[1].parent
CLIENT = ROOT / "tests" / "conformance" / "mcpx_client.py"
NODE = ROOT / "node_modules" / "node" / "bin" / "node"
SUITES = {
    "0.1.16": ROOT / "node_modules" / "conformance-0116" / "dist" / "index.js",
    "0.2.0-alpha.12": ROOT / "node_modules" / "conformance-020a12" / "dist" / "index.js",
}
SUITE_TIMEOUT_MS = 30_000
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# Known mcpx client failures go here as strict xfails (none today): a fix then shows as XPASS, and the
# marker must go, so the list can only shrink.

# (suite version, scenario, extra args, xfail reason or None, client deadline in s: daemon start included, so
# generous; it must stay under the suite's own client timeout, SUITE_TIMEOUT_MS)
CASES = [
    ("0.1.16", "initialize", [], None, 20),
    ("0.1.16", "tools_call", [], None, 20),
    ("0.1.16", "elicitation-sep1034-client-defaults", [], None, 20),
    ("0.2.0-alpha.12", "sep-2322-client-request-state", [], None, 20),
    ("0.2.0-alpha.12", "initialize", [], None, 20),
    ("0.2.0-alpha.12", "tools_call", [], None, 20),
    ("0.2.0-alpha.12", "tools_call", ["--spec-version", "2026-07-28"], None, 20),
    ("0.2.0-alpha.12", "elicitation-sep1034-client-defaults", [], None, 20),
    ("0.2.0-alpha.12", "request-metadata", [], None, 20),
    ("0.2.0-alpha.12", "http-standard-headers", [], None, 20),
    ("0.2.0-alpha.12", "json-schema-ref-no-deref", [], None, 20),
    ("0.2.0-alpha.12", "json-schema-2020-12-preservation", [], None, 20),
    ("0.2.0-alpha.12", "http-custom-headers", [], None, 20),
    ("0.2.0-alpha.12", "http-invalid-tool-headers", [], None, 20),
    ("0.1.16", "sse-retry", [], None, 20),
]


def _id(case: tuple) -> str:
    version, scenario, args, _, _ = case
    return f"{version}-{scenario}" + ("-" + "-".join(a.lstrip("-") for a in args) if args else "")


def _params() -> list:
    out = []
    for case in CASES:
        marks = [pytest.mark.xfail(reason=case[3], strict=True)] if case[3] else []
        out.append(pytest.param(*case, id=_id(case), marks=marks))
    return out


def _missing() -> str | None:
    if not NODE.exists():
        return (f"{NODE} is missing: run `npm install` in {ROOT} (devDependency node@22.23.3; Node 20 cannot run "
                "the suite)")
    for version, path in SUITES.items():
        if not path.exists():
            return f"{path} is missing: run `npm install` in {ROOT} (conformance {version})"
    return None


def _checks(out: Path) -> tuple[list[dict], str]:
    """The scenario's checks.json and the client's stderr as the suite saved them under -o."""
    dirs = [d for d in out.iterdir() if d.is_dir()]
    if not dirs:
        return [], ""
    d = max(dirs, key=lambda p: p.stat().st_mtime)
    checks = json.loads((d / "checks.json").read_text()) if (d / "checks.json").exists() else []
    stderr = (d / "stderr.txt").read_text(errors="replace") if (d / "stderr.txt").exists() else ""
    return checks, stderr


@pytest.mark.timeout(90)
@pytest.mark.parametrize("version, scenario, args, known_bug, deadline", _params())
def test_mcpx_client_conformance(version: str, scenario: str, args: list[str], known_bug: str | None,
                                 deadline: int, tmp_path: Path) -> None:
    why = _missing()
    if why:
        loud_skip(f"the MCP conformance suite cannot run: {why}")
    # the suite splits --command on spaces and runs it under /bin/sh -c, appending the mock's URL
    assert " " not in sys.executable + str(CLIENT), "the suite cannot run a command whose path has spaces"
    command = f"{sys.executable} {CLIENT}"
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
    env.update(MCPX_CONFORMANCE_DEADLINE=str(deadline), NO_COLOR="1")
    started = time.monotonic()
    proc = run_group(
        [str(NODE), str(SUITES[version]), "client", "--command", command, "--scenario", scenario,
         "--timeout", str(SUITE_TIMEOUT_MS), "-o", str(out), *args], timeout=75, cwd=ROOT, env=env)
    seconds = time.monotonic() - started
    output = ANSI.sub("", proc.stdout + proc.stderr)
    checks, client_stderr = _checks(out) if out.exists() else ([], "")
    failed = [c for c in checks if c.get("status") == "FAILURE"]
    succeeded = [c for c in checks if c.get("status") == "SUCCESS"]
    report = (f"conformance {version} client --scenario {scenario} {' '.join(args)}: exit {proc.returncode} "
              f"in {seconds:.1f}s, {len(succeeded)} checks ok, {len(failed)} failed\n"
              + "".join(f"  FAILURE {c.get('id')}: {c.get('errorMessage') or c.get('description')}\n" for c in failed)
              + f"--- suite output ---\n{output[-6000:]}\n--- mcpx_client.py stderr ---\n{client_stderr[-4000:]}")
    shutil.rmtree(out, ignore_errors=True)
    assert proc.returncode == 0 and succeeded and not failed, report
