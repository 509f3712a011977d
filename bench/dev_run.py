"""Benchmark of `./dev run` on a fresh machine (issue 35, item 5: the demo question on screen within 45 s).

Each run is a copy of this checkout's tracked files with no .venv, no node_modules and no built plugin, run by a
person whose HOME is new, with empty pip, uv and npm caches (everything is downloaded), and no uv on the PATH:
`./dev run` is timed from its start to the demo question on its screen, with the moment each of its steps began.
One run with uv (what `./dev` does) and one with `MCPX_INSTALLER=pip` (what it did), side by side, so the ratio
holds on a loaded machine; `uptime` is printed beside them.

    .venv/bin/python bench/dev_run.py              # both installers, one run each: two to four minutes
    .venv/bin/python bench/dev_run.py --short      # uv only

A benchmark, not a test: it exits 0 and says MISSED where the goal is not met. It needs the network (PyPI, npm).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_ASKS = b"The demo server is asking a question"
GOAL = 45.0
STEP = re.compile(rb"==> (.*?)\x1b")


def checkout_copy(into: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def one_run(tmp: Path, installer: str, python: str, timeout: float) -> tuple[float | None, list[tuple[float, str]]]:
    """(seconds to the demo question, or None; each step's start) of one `./dev run` from nothing."""
    copy = checkout_copy(tmp / "checkout")
    home = tmp / "home"
    home.mkdir()
    npm = shutil.which("npm")
    path = os.pathsep.join(dict.fromkeys([*([str(Path(npm).parent)] if npm else []), "/usr/bin", "/bin"]))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MCPX_", "XDG_", "UV_", "PIP_", "npm_")) and k != "VIRTUAL_ENV"}
    env.update(HOME=str(home), PATH=path, PYTHON=python, MCPX_INSTALLER=installer,
               XDG_CACHE_HOME=str(tmp / "cache"), npm_config_cache=str(tmp / "npm-cache"))
    began = time.monotonic()
    proc = subprocess.Popen([str(copy / "dev"), "run"], cwd=copy, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    seen = b""
    steps: list[tuple[float, str]] = []
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stderr, selectors.EVENT_READ)
            while DEMO_ASKS not in seen:
                left = began + timeout - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None, steps
                chunk = os.read(proc.stderr.fileno(), 65536)
                if not chunk:
                    print(seen.decode(errors="replace")[-2000:], file=sys.stderr)
                    return None, steps
                now = time.monotonic() - began
                seen += chunk
                steps += [(now, m.decode(errors="replace")) for m in STEP.findall(chunk)]
                if b"serving on" in chunk and not any(s == "the daemon is serving" for _, s in steps):
                    steps.append((now, "the daemon is serving"))
        return time.monotonic() - began, steps
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            proc.stderr.close()


def uptime() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="uv only")
    ap.add_argument("--python", default=os.path.realpath(sys.executable), help="the Python ./dev makes its venv with")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    rows: list[tuple[str, float | None]] = []
    for installer in ("uv",) if args.short else ("uv", "pip"):
        with tempfile.TemporaryDirectory(prefix=f"mcpx-bench-devrun-{installer}-") as tmp:
            before = uptime()
            took, steps = one_run(Path(tmp), installer, args.python, args.timeout)
            print(f"\n{installer}: load {before} before, {uptime()} after")
            for at, step in steps:
                print(f"  {at:6.1f} s  {step}")
            print(f"  {took:6.1f} s  the demo question on screen" if took is not None else "  no demo question")
            rows.append((installer, took))
    print("\n| installer | `./dev run` to the demo question (empty caches) | goal |\n|---|---|---|")
    for installer, took in rows:
        met = "—" if took is None else ("met" if took <= GOAL else "MISSED")
        print(f"| {installer} | {'failed' if took is None else f'{took:.1f} s'} | ≤ {GOAL:.0f} s: {met} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
