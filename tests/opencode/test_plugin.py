"""The plugin's own checks, in the suite's one command: `tsc --noEmit` against the real @opencode-ai/plugin
types, then its node:test unit tests (plugin/opencode/test), which run against a real daemon: on Node, and on
the Bun inside the opencode binary, which is what runs the plugin in opencode and does not behave as Node does."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import loud_skip
from gateway_helpers import stdio
from harness import run_group
from opencode.harness import NODE_MODULES, ROOT, build_plugin, clean_env, opencode_binary

pytestmark = pytest.mark.timeout(300)


def node() -> str:
    local = NODE_MODULES / ".bin" / "node"  # the Node the package pins, else the machine's
    found = str(local) if local.exists() else shutil.which("node")
    if found is None:
        loud_skip("no node to run the plugin's tests with (npm ci installs one)")
    return found


def forked_peer() -> dict[str, str]:
    """The SDK peer of calls.test.mjs, as this worker's fork server starts it (the SDK imported once, not by each
    start: a test at level ask is a session of its own, so a run starts a dozen of them, ~2 s of CPU each otherwise).
    Run by hand, the test files start the peer itself."""
    return {"MCPX_TEST_SDK_SERVER": json.dumps(stdio("sdk_server.py"))}


def test_the_plugin_type_checks_against_the_real_opencode_types() -> None:
    tsc = NODE_MODULES / ".bin" / "tsc"
    if not tsc.exists():
        loud_skip(f"{tsc} is missing: run `npm ci` (./dev test does)")
    done = run_group([node(), str(tsc), "-p", str(ROOT / "tsconfig.json"), "--noEmit"], timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_plugins_unit_tests_pass() -> None:
    if (reason := build_plugin()):
        loud_skip(reason)
    files = sorted(str(p) for p in (ROOT / "plugin" / "opencode" / "test").glob("*.test.mjs"))
    # in a process group of its own: a daemon a test file started is stopped even if node is killed
    done = run_group([node(), "--test", "--test-reporter=spec", *files], timeout=240, cwd=ROOT,
                     env={**os.environ, **forked_peer()})
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    assert "fail 0" in done.stdout, done.stdout[-4000:]


def test_the_plugins_unit_tests_pass_on_the_bun_that_runs_it_in_opencode(tmp_path: Path) -> None:
    """opencode is a Bun program (BUN_BE_BUN=1 makes the binary Bun itself): Bun closed the event stream's request
    once the response's headers were in, which Node never does, and the plugin took that as the stream's end."""
    binary, why = opencode_binary()
    if binary is None:
        loud_skip(why)
    if (reason := build_plugin()):
        loud_skip(reason)
    tests = ROOT / "plugin" / "opencode" / "test"
    files = sorted(f"./{p.name}" for p in tests.glob("*.test.mjs"))
    env = {**clean_env(tmp_path), "BUN_BE_BUN": "1", **forked_peer()}
    done = run_group([str(binary), "test", "--timeout", "60000", *files], timeout=240, cwd=tests, env=env)
    out = done.stdout + done.stderr  # bun test reports on stderr
    assert done.returncode == 0, out[-8000:]
    assert re.search(r"^ *0 fail$", out, re.M) and not re.search(r"^\(fail\)", out, re.M), out[-4000:]
