"""A terminal program driven as a person drives it: in a tmux of the test's own, at a fixed size, keys in with
send-keys, judged by what capture-pane shows. Every wait is for something on the screen, bounded, and looks again
when the program has drawn something (tmux's control mode says so), not on a timer: a TUI waiting for a model's
turn or a question draws nothing for seconds, and a look is a process (tmux capture-pane, ~5 ms of CPU), which
every 30 ms kept a tenth of a core busy for each test that waited.

`OpencodeTui` is opencode's TUI in such a terminal, in a project set up as for the other end-to-end tests
(tests/opencode/harness.py), with the scripted model deciding its tool calls.
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from conftest import loud_skip
from harness import PATIENCE, child_pids, stop_pid

_names = itertools.count()


def require_tmux() -> str:
    found = shutil.which("tmux")
    if found is None:
        loud_skip("tmux is not installed (./dev test installs it): the TUI tests drive a real terminal")
    return found


class Tmux:
    """One tmux server of its own (its own socket, -L), one window of `width` × `height` running one command."""

    def __init__(self, width: int = 180, height: int = 45) -> None:
        self.tmux = require_tmux()
        self.socket = f"mcpx-test-{os.getpid()}-{next(_names)}"
        self.width, self.height = width, height
        self.started = False
        self.pane_pid: int | None = None
        self.drawn = threading.Event()  # set when the program has written to its terminal since the last look
        self.watcher: subprocess.Popen[bytes] | None = None

    def _run(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        done = subprocess.run([self.tmux, "-L", self.socket, *args], env=env, capture_output=True, text=True,
                              timeout=30)
        if check and done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args[:2])} failed: {done.stderr.strip()}")
        return done.stdout

    def start(self, command: list[str], cwd: Path, env: dict[str, str]) -> Tmux:
        # the server starts with this environment (tmux copies the starting client's into the session's), and the
        # command replaces the shell, so the program is the pane's process and its exit ends the pane
        self._run("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", str(self.width), "-y",
                  str(self.height), "-c", str(cwd), "exec " + shlex.join(command), env={**env, "TMUX": ""})
        self.started = True
        # keep the pane on screen if the program exits, so a test sees what it said last
        self._run("set-option", "-t", "main", "remain-on-exit", "on", check=False)
        self.pane_pid = int(self._run("display-message", "-p", "-t", "main", "#{pane_pid}").strip())
        # a control-mode client: tmux tells it each write of the program's (%output); it has no size of its own,
        # so the window stays width × height
        self.watcher = subprocess.Popen([self.tmux, "-L", self.socket, "-C", "attach", "-t", "main"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        threading.Thread(target=self._watch, args=(self.watcher,), daemon=True).start()
        return self

    def _watch(self, watcher: subprocess.Popen[bytes]) -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            if line.startswith(b"%output "):
                self.drawn.set()
        self.drawn.set()  # the server is gone: nothing more will be said, so no wait waits on it

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "main")

    def type(self, text: str) -> None:
        self._run("send-keys", "-t", "main", "-l", text)

    def keys(self, *names: str) -> None:
        self._run("send-keys", "-t", "main", *names)

    def wait(self, what: str, ready: Callable[[str], bool], timeout: float = PATIENCE,
             interval: float = 0.03) -> tuple[str, float]:
        """The screen once `ready` holds of it, and the wall-clock time it was first seen so; bounded. It looks again
        once the program has drawn since the last look (at most every `interval`, so that a program that animates
        is not looked at more often than that), and at least every second whatever the watcher says."""
        deadline = time.monotonic() + timeout
        while True:
            self.drawn.clear()  # before the look: whatever is drawn after it sets it again
            shown = self.screen()
            if ready(shown):
                return shown, time.time()
            left = deadline - time.monotonic()
            if left < 0:
                raise AssertionError(f"the screen never showed {what} within {timeout:.0f} s; it shows:\n{shown}")
            time.sleep(interval)
            self.drawn.wait(min(1.0, left))

    def wait_text(self, *texts: str, timeout: float = PATIENCE) -> tuple[str, float]:
        return self.wait(" and ".join(repr(t) for t in texts), lambda s: all(t in flat(s) for t in texts), timeout)

    def wait_gone(self, text: str, timeout: float = PATIENCE) -> tuple[str, float]:
        return self.wait(f"{text!r} gone", lambda s: text not in flat(s), timeout)

    def stop(self) -> None:
        """The server killed, and the program with everything it started (an MCP server it runs, `mcpx serve`)
        gone before this returns: one still closing could start a daemon in a home the test is done with."""
        if self.started:
            tree = descendants(self.pane_pid) if self.pane_pid else set()
            self._run("kill-server", check=False)
            for pid in tree:
                stop_pid(pid)
            if self.watcher is not None:  # its server gone, it ends; stopped here if it has not
                if self.watcher.stdin is not None:
                    self.watcher.stdin.close()
                try:
                    self.watcher.wait(10)
                except subprocess.TimeoutExpired:
                    self.watcher.kill()
                    self.watcher.wait(10)
                self.watcher = None
            self.started = False


def flat(screen: str) -> str:
    """The screen's text with each line's edges trimmed and its lines joined by one space: a sentence the dialog
    wrapped reads whole (words split by a wrap come back with one space)."""
    return " ".join(line.strip() for line in screen.splitlines() if line.strip())


def descendants(pid: int) -> set[int]:
    """A process and every live process below it, from /proc."""
    found, frontier = {pid}, [pid]
    while frontier:
        for child in child_pids(frontier.pop()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found
