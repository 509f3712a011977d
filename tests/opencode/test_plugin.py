"""The plugin's own checks, in the suite's one command: `tsc --noEmit` against the real @opencode-ai/plugin
types, then its node:test unit tests (plugin/opencode/test), which run against a real daemon."""

from __future__ import annotations

import shutil

import pytest

from conftest import loud_skip
from harness import run_group
from opencode.harness import NODE_MODULES, ROOT, build_plugin

pytestmark = pytest.mark.timeout(300)


def node() -> str:
    local = NODE_MODULES / ".bin" / "node"  # the Node the package pins, else the machine's
    found = str(local) if local.exists() else shutil.which("node")
    if found is None:
        loud_skip("no node to run the plugin's tests with (npm ci installs one)")
    return found


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
    done = run_group([node(), "--test", "--test-reporter=spec", *files], timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    assert "fail 0" in done.stdout, done.stdout[-4000:]
