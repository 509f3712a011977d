"""The one build step a wheel of mcpx needs beyond setuptools: the opencode plugin, built, and the skill, carried
as package data (mcpx/assets/), so that `pip install mcpx-….whl` and then `mcpx opencode install` work on a
machine without Node. Everything else about the package is in pyproject.toml.

The plugin is TypeScript (plugin/opencode/), built with Babel into plugin/opencode/dist/ (`npm run build`). When
the built plugin is missing, or older than a source, the wheel's build runs `npm run build` itself; that needs
Node.js and the plugin's build tools, package.json's `dependencies` (`npm ci --omit=dev`; its devDependencies are
the tests'). Without them the build fails, saying so: a wheel without the plugin is never made. `./dev wheel` does
it all. An editable install (`pip install -e .`, as ./dev does) carries nothing: mcpx finds the plugin and the
skill in the checkout.
"""

from __future__ import annotations

import atexit
import fcntl
import shutil
import subprocess
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
PLUGIN = ROOT / "plugin" / "opencode"
DIST = PLUGIN / "dist"
SKILL = ROOT / "skills" / "mcpx-elicitation"


class PluginMissing(SystemExit):
    def __init__(self, why: str) -> None:
        super().__init__(f"\nmcpx: the wheel carries the opencode plugin, built from {PLUGIN}/*.ts, and it cannot be "
                         f"built here: {why}.\nRun `./dev wheel` (it installs the plugin's build tools and builds "
                         f"the wheel), or `npm ci --omit=dev` in {ROOT} with Node.js 20 or newer first. No wheel is "
                         "built without the plugin.\n")


def _sources() -> list[Path]:
    """What the built plugin is made from (plugin/opencode/build.mjs): a newer one means dist/ is stale."""
    return [ROOT / "tsconfig.json", PLUGIN / "build.mjs", PLUGIN / "index.ts", PLUGIN / "tui.tsx",
            *sorted((PLUGIN / "lib").rglob("*.ts*")), *sorted((PLUGIN / "entry").glob("*"))]


def built_plugin() -> Path:
    """plugin/opencode/dist, built now if it is missing or older than a source."""
    entry = DIST / "index.js"
    sources = [p for p in _sources() if p.exists()]
    if entry.exists() and all(entry.stat().st_mtime >= p.stat().st_mtime for p in sources):
        return DIST
    if not sources:
        raise PluginMissing(f"neither {entry} nor its sources are here")
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise PluginMissing("Node.js and npm are not on PATH")
    if not (ROOT / "node_modules" / "@babel" / "core").exists():
        raise PluginMissing(f"the plugin's build tools (Babel) are not installed in {ROOT / 'node_modules'}")
    with open(ROOT / "tsconfig.json", "rb") as lock:  # the lock the test suite's builds of the plugin take too
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run([npm, "run", "build"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0 or not entry.exists():
        raise PluginMissing(f"`npm run build` failed:\n{done.stdout}{done.stderr}")
    return DIST


class BuildPyWithAssets(build_py):
    """build_py, then the built plugin and the skill into mcpx/assets/ of the build."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # a checkout: mcpx finds both where they are (mcpx/system/assets.py)
        assets = Path(self.build_lib) / "mcpx" / "assets"
        if assets.exists():
            shutil.rmtree(assets)
        plugin = assets / "opencode"
        # dist/ carries its package.json: ES modules, and the server and TUI entry points opencode looks for
        shutil.copytree(built_plugin(), plugin, ignore=shutil.ignore_patterns("*.map", "*.d.ts"))
        shutil.copytree(SKILL, assets / "skills" / SKILL.name)
        needed = [plugin / "index.js", plugin / "tui.js", plugin / "package.json", plugin / "entry" / "server.js",
                  assets / "skills" / SKILL.name / "SKILL.md"]
        if not all(p.exists() for p in needed):
            raise PluginMissing(f"the copy into {assets} is incomplete")


class SdistWithPlugin(sdist):
    """An sdist carries the built plugin too (MANIFEST.in), so a wheel built from it needs no Node."""

    def run(self) -> None:
        built_plugin()
        super().run()


def private_build_base() -> str:
    """A build directory of this run's own, removed when it ends. setuptools' default, build/ in the checkout, is
    shared: a build that was interrupted, or one running beside this one, leaves build/bdist.*/wheel/*.dist-info
    there, and bdist_wheel then stops with "File exists" (seen once in CI)."""
    base = tempfile.mkdtemp(prefix="mcpx-build-")
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    return base


setup(cmdclass={"build_py": BuildPyWithAssets, "sdist": SdistWithPlugin},
      options={"build": {"build_base": private_build_base()}})
