"""Run the official MCP conformance suite's SERVER scenarios against a URL; get pass/fail per scenario.

Used by tests/conformance/test_conformance_server_direct.py (the suite against our fixture server directly: the
baseline) and meant for the same run through mcpx's own /mcp endpoint, whose results are compared
with the baseline scenario by scenario (`compare`).

The suite is `@modelcontextprotocol/conformance` under two npm aliases in /work/main/node_modules
(package.json devDependencies), run with Node 22 from the npm package `node` (Node 20 cannot run
it). `-o DIR` makes it write DIR/server-<scenario>-<timestamp>/checks.json per scenario; a scenario
passes when none of its checks is a FAILURE (WARNING and SKIPPED do not fail it, as in the suite).

The suite's ten `tasks-*` scenarios (0.2.0-alpha.12, the Tasks extension) need tools and a tasks-serving
server that fixture_server.py is not: TASKS_RUN runs them, one `--scenario` each, against tasks_fixture.py
(FastMCP with fastmcp-tasks); its baseline is the run of the same name in server_baseline.json.

CLI:
    python tests/conformance/server_baseline.py --fixture                 # start fixture_server.py, run RUNS
    python tests/conformance/server_baseline.py --fixture --tasks         # start tasks_fixture.py, run TASKS_RUN
    python tests/conformance/server_baseline.py --url http://127.0.0.1:PORT/mcp [--run 0.1.16:all ...]
    python tests/conformance/server_baseline.py --fixture --write tests/conformance/server_baseline.json
    python tests/conformance/server_baseline.py --url ... --compare tests/conformance/server_baseline.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/harness.py, however this file is run

from harness import free_port, listening, stop_process, wait_started  # noqa: E402

NODE = ROOT / "node_modules" / "node" / "bin" / "node"
SUITES = {
    "0.1.16": ROOT / "node_modules" / "conformance-0116" / "dist" / "index.js",
    "0.2.0-alpha.12": ROOT / "node_modules" / "conformance-020a12" / "dist" / "index.js",
}
FIXTURE = HERE / "fixture_server.py"
TASKS_FIXTURE = HERE / "tasks_fixture.py"
BASELINE = HERE / "server_baseline.json"

# The runs that make the baseline: (label, version, extra arguments). ~20 s in all against the fixture.
RUNS: list[tuple[str, str, list[str]]] = [
    ("0.1.16:all", "0.1.16", ["--suite", "all"]),  # active + pending (json-schema-2020-12, server-sse-polling)
    ("0.2.0-alpha.12:all", "0.2.0-alpha.12", ["--suite", "all"]),  # active + draft + extensions + pending
    ("0.2.0-alpha.12:req-2025-11-25", "0.2.0-alpha.12", ["--requirements", "2025-11-25"]),  # legacy era, frozen
    ("0.2.0-alpha.12:req-2026-07-28", "0.2.0-alpha.12", ["--requirements", "2026-07-28"]),  # modern era, frozen
]

# The suite's scenarios for the Tasks extension (SEP-2663), all server side: 0.2.0-alpha.12 has no tasks scenario
# for clients (`conformance list --client`). `--suite all` and `--requirements 2026-07-28` run them too, against
# fixture_server.py, where they fail (the mcp SDK serves no tasks); TASKS_RUN runs them one by one against
# tasks_fixture.py, whose tools they name. test_conformance_server_direct.py checks that the suite lists exactly these.
TASKS_SCENARIOS = ("tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields",
                   "tasks-request-state-removal", "tasks-mrtr-input", "tasks-request-headers",
                   "tasks-dispatch-and-envelope", "tasks-status-notifications", "tasks-required-task-error",
                   "tasks-mrtr-composition")
SCENARIOS_AT_ONCE = 4
TASKS_RUN = ("0.2.0-alpha.12:tasks", "0.2.0-alpha.12", list(TASKS_SCENARIOS))  # (label, version, scenarios)

_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class ScenarioResult:
    scenario: str
    passed: bool
    success: int = 0
    failure: int = 0
    warning: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)  # "check-id: message", one per failed check

    def brief(self) -> dict[str, Any]:
        """What a baseline keeps: the verdict and the counts (messages are in the run's output)."""
        return {"passed": self.passed, "success": self.success, "failure": self.failure, "warning": self.warning}


@dataclass
class RunResult:
    label: str
    version: str
    args: list[str]
    url: str
    returncode: int
    seconds: float
    scenarios: dict[str, ScenarioResult]
    output: str  # the suite's combined stdout+stderr, colours stripped

    @property
    def passed(self) -> list[str]:
        return sorted(s for s, r in self.scenarios.items() if r.passed)

    @property
    def failed(self) -> list[str]:
        return sorted(s for s, r in self.scenarios.items() if not r.passed)

    def summary(self) -> str:
        lines = [f"{self.label}: {len(self.passed)}/{len(self.scenarios)} scenarios pass "
                 f"(suite rc={self.returncode}, {self.seconds:.1f}s, {self.url})"]
        for name in sorted(self.scenarios):
            r = self.scenarios[name]
            mark = "PASS" if r.passed else "FAIL"
            lines.append(f"  {mark} {name}: {r.success} ok, {r.failure} failed, {r.warning} warnings")
            lines.extend(f"       - {f}" for f in r.failures[:5])
        return "\n".join(lines)


def missing() -> str | None:
    """Why the suite cannot run here, or None."""
    if not NODE.exists():
        return f"{NODE} is missing (npm install in {ROOT}: devDependency node@22)"
    for version, path in SUITES.items():
        if not path.exists():
            return f"{path} is missing (npm install in {ROOT}: conformance {version})"
    return None


def tasks_missing() -> str | None:
    """Why TASKS_RUN cannot run here (beside `missing()`), or None."""
    if importlib.util.find_spec("fastmcp_tasks") is None:
        return "fastmcp-tasks is not installed (./dev installs it: tasks_peer)"
    return None


def parse_output_dir(out: Path) -> dict[str, ScenarioResult]:
    results: dict[str, ScenarioResult] = {}
    for d in sorted(out.iterdir()):
        m = _DIR.match(d.name)
        checks_file = d / "checks.json"
        if not m or not checks_file.exists():
            continue
        checks = json.loads(checks_file.read_text())
        r = ScenarioResult(m.group("scenario"), passed=True)
        for c in checks:
            status = c.get("status")
            if status == "SUCCESS":
                r.success += 1
            elif status == "FAILURE":
                r.failure += 1
                r.failures.append(f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}")
            elif status == "WARNING":
                r.warning += 1
            elif status == "SKIPPED":
                r.skipped += 1
        r.passed = r.failure == 0
        if r.scenario in results:  # the same scenario twice in one run: it passes only if both did
            prev = results[r.scenario]
            r.passed = r.passed and prev.passed
            r.failures = prev.failures + r.failures
        results[r.scenario] = r
    return results


def run_server_suite(version: str, url: str, args: list[str] | None = None, *, label: str | None = None,
                     timeout: float = 120.0, scenario_timeout_ms: int | None = None,
                     keep: Path | None = None) -> RunResult:
    """One `conformance server` run (a suite or `--scenario S`) against `url`, parsed per scenario.
    `keep`: write the suite's `-o` output (checks.json per scenario) and its console output there, and keep it."""
    why = missing()
    if why:
        raise RuntimeError(why)
    cmd = [str(NODE), str(SUITES[version]), "server", "--url", url, *(args or [])]
    if scenario_timeout_ms is not None and version != "0.1.16":  # 0.1.16 has no --timeout for server
        cmd += ["--timeout", str(scenario_timeout_ms)]
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    out = keep if keep is not None else Path(tempfile.mkdtemp(prefix="mcpx-conformance-server-"))
    try:
        started = time.monotonic()
        proc = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT, env={**os.environ, "NO_COLOR": "1"})
        seconds = time.monotonic() - started
        scenarios = parse_output_dir(out)
    finally:
        if keep is None:
            shutil.rmtree(out, ignore_errors=True)
    output = _ANSI.sub("", proc.stdout + proc.stderr)
    if keep is not None:
        (keep / "suite-output.txt").write_text(output)
    return RunResult(label or f"{version}:{' '.join(args or []) or 'active'}", version, list(args or []), url,
                     proc.returncode, seconds, scenarios, output)


def run_scenarios(version: str, url: str, scenarios: list[str], *, label: str, timeout: float = 60.0,
                  keep: Path | None = None) -> RunResult:
    """`conformance server --scenario S` for each of `scenarios` in turn against `url`, as one RunResult (the
    suite takes one `--scenario` at a time). `keep`: as run_server_suite, one subdirectory per scenario."""
    started = time.monotonic()
    merged: dict[str, ScenarioResult] = {}
    outputs: list[str] = []
    rc = 0

    def one(scenario: str) -> RunResult:
        return run_server_suite(version, url, ["--scenario", scenario], label=scenario, timeout=timeout,
                                keep=keep / scenario if keep is not None else None)

    # side by side: each is a process of the suite's that mostly waits (on a task's poll interval, or on a call
    # that runs long), so four at once take the time of the longest rather than of all of them in turn
    with concurrent.futures.ThreadPoolExecutor(max_workers=SCENARIOS_AT_ONCE) as pool:
        runs = list(pool.map(one, scenarios))
    for scenario, r in zip(scenarios, runs, strict=True):
        if scenario not in r.scenarios:  # the suite wrote no checks.json: it did not run, which is a failure
            r.scenarios[scenario] = ScenarioResult(scenario, passed=False, failure=1,
                                                   failures=[f"no result (suite rc={r.returncode})"])
        merged.update(r.scenarios)
        outputs.append(r.output)
        rc = rc or r.returncode
    return RunResult(label, version, ["--scenario", *scenarios], url, rc, time.monotonic() - started, merged,
                     "\n".join(outputs))


def run_tasks(url: str, keep: Path | None = None, timeout: float = 60.0) -> RunResult:
    label, version, scenarios = TASKS_RUN
    return run_scenarios(version, url, scenarios, label=label, keep=keep, timeout=timeout)


def listed_tasks_scenarios(version: str = "0.2.0-alpha.12") -> dict[str, list[str]]:
    """{"server": [...], "client": [...]}: the `tasks-*` scenarios the suite itself lists (`conformance list`)."""
    why = missing()
    if why:
        raise RuntimeError(why)
    found: dict[str, list[str]] = {}
    for side in ("server", "client"):
        out = subprocess.run([str(NODE), str(SUITES[version]), "list", f"--{side}"], capture_output=True, text=True,
                             timeout=60, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}).stdout
        names = [m.group(1) for m in re.finditer(r"^\s*-\s+(\S+)", _ANSI.sub("", out), re.M)]
        found[side] = [n for n in names if "task" in n.lower()]
    return found


def run_all(url: str, runs: list[tuple[str, str, list[str]]] | None = None) -> dict[str, RunResult]:
    return {label: run_server_suite(version, url, args, label=label) for label, version, args in (runs or RUNS)}


# ---------------------------------------------------------------- baselines


def baseline_document(results: dict[str, RunResult]) -> dict[str, Any]:
    return {
        "about": "Conformance SERVER scenarios against tests/conformance/fixture_server.py directly "
                 "(tests/conformance/server_baseline.py). A run through mcpx's /mcp should match this.",
        "runs": {label: {"version": r.version, "args": r.args,
                         "scenarios": {s: res.brief() for s, res in sorted(r.scenarios.items())}}
                 for label, r in results.items()},
    }


def write_baseline(results: dict[str, RunResult], path: Path = BASELINE) -> None:
    """Write `results` into the baseline file, keeping the runs it holds that `results` does not (RUNS and TASKS_RUN
    are written by different runs, against different fixtures)."""
    doc = baseline_document(results)
    if path.exists():
        doc["runs"] = {**(load_baseline(path).get("runs") or {}), **doc["runs"]}
    path.write_text(json.dumps(doc, indent=2) + "\n")


def load_baseline(path: Path = BASELINE) -> dict[str, Any]:
    return json.loads(path.read_text())


def compare(baseline: dict[str, Any], results: dict[str, RunResult]) -> list[str]:
    """Differences in verdict per scenario (and scenarios present on one side only); [] when they match."""
    diffs: list[str] = []
    for label, run in results.items():
        expected = (baseline.get("runs") or {}).get(label)
        if expected is None:
            diffs.append(f"{label}: not in the baseline")
            continue
        want = expected["scenarios"]
        for s in sorted(set(want) | set(run.scenarios)):
            if s not in run.scenarios:
                diffs.append(f"{label} {s}: in the baseline ({'pass' if want[s]['passed'] else 'fail'}), not run")
            elif s not in want:
                diffs.append(f"{label} {s}: not in the baseline, now {'pass' if run.scenarios[s].passed else 'fail'}")
            elif want[s]["passed"] != run.scenarios[s].passed:
                got = run.scenarios[s]
                diffs.append(f"{label} {s}: baseline {'pass' if want[s]['passed'] else 'fail'}, now "
                             f"{'pass' if got.passed else 'fail'}" + (f" ({'; '.join(got.failures[:3])})"
                                                                       if got.failures else ""))
    return diffs


# ---------------------------------------------------------------- the fixture server


@contextlib.contextmanager
def fixture_server(python: str = sys.executable, port: int | None = None, script: Path = FIXTURE) -> Iterator[str]:
    """tests/conformance/fixture_server.py (or `script`, e.g. TASKS_FIXTURE) on 127.0.0.1:<port>; yields its /mcp
    URL (localhost, as the suite checks DNS-rebinding protection against the Host it was given)."""
    port = port or free_port()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([python, str(script), str(port)], stdout=log, stderr=log, cwd=ROOT)

        def evidence() -> str:
            log.seek(0)
            return log.read().decode(errors="replace")[-2000:]

        try:
            wait_started(proc, lambda: listening(port), f"{script.name} on port {port}", evidence=evidence,
                         interval=0.05)
            yield f"http://localhost:{port}/mcp"
        finally:
            stop_process(proc, 5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the server's MCP endpoint")
    where.add_argument("--fixture", action="store_true",
                       help="start tests/conformance/fixture_server.py (with --tasks: tasks_fixture.py)")
    ap.add_argument("--tasks", action="store_true", help=f"run {TASKS_RUN[0]} (the tasks-* scenarios) instead of RUNS")
    ap.add_argument("--run", action="append", metavar="LABEL",
                    help=f"which of the baseline runs ({', '.join(r[0] for r in RUNS)}); default all")
    ap.add_argument("--write", type=Path, help="write the results as a baseline JSON file")
    ap.add_argument("--compare", type=Path, help="compare with a baseline JSON file; exit 1 on a difference")
    ap.add_argument("--json", action="store_true", help="print the per-scenario results as JSON")
    opts = ap.parse_args()
    runs = [r for r in RUNS if not opts.run or r[0] in opts.run]
    if opts.run and len(runs) != len(opts.run):
        ap.error(f"unknown run label in {opts.run}; known: {[r[0] for r in RUNS]}")
    script = TASKS_FIXTURE if opts.tasks else FIXTURE
    with (fixture_server(script=script) if opts.fixture else contextlib.nullcontext(opts.url)) as url:
        results = {TASKS_RUN[0]: run_tasks(url)} if opts.tasks else run_all(url, runs)
    if opts.json:
        print(json.dumps({k: {**asdict(v), "output": None} for k, v in results.items()}, indent=2))
    else:
        for r in results.values():
            print(r.summary())
    if opts.write:
        write_baseline(results, opts.write)
        print(f"wrote {opts.write}")
    if opts.compare:
        diffs = compare(load_baseline(opts.compare), results)
        for d in diffs:
            print(f"DIFF {d}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
