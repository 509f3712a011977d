"""Watching a question while a terminal asks it, so the prompt stops as soon as the question ends elsewhere.

A question put to a person here can end without them: answered from another door (the inbox, REST, another
terminal), expired, or abandoned (its call ended; the daemon restarted). A prompt that went on asking field after
field for a question that is gone wastes the person's time and then refuses what they typed. So while it asks, a
thread of its own long-polls the question's end (`wait_for_answer`, through the daemon's restarts: the question is
durable) and, once it has ended, makes `fileno()` readable: `read_line` waits on it beside the keyboard and raises
EndedMeanwhile, which says how it ended. The watch keeps the answer it ended with (none when it was abandoned).

The prompt runs outside any event loop (Ctrl-C must reach the read itself), so the watch has its own loop in its own
thread, stopped when the prompt is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import TYPE_CHECKING

from mcpx.client.daemon_client import wait_for_answer
from mcpx.client.transport import ApiError
from mcpx.presentation.text import plain
from mcpx.shared.errors import McpxError
from mcpx.system.paths import StatePaths

if TYPE_CHECKING:
    from mcpx.client.replies import AnswerDoc

STOP_PATIENCE = 5.0  # s: how long leaving the watch waits for its thread (its poll is cancelled at once)


class EndedMeanwhile(McpxError):
    """The question a prompt was asking ended elsewhere; the message says how."""


def how_it_ended(eid: str, answer: AnswerDoc) -> str:
    """A question's end in words, from its answer as stored."""
    if answer.get("by") == "expiry":
        return f"{eid} expired: nobody answered it in time"
    return f"{eid} was answered elsewhere: {plain(answer.get('action', '?'))} by {plain(answer.get('by', '?'))}"


class QuestionWatch:
    """`with Watch(eid) as watch:` — `watch.fileno()` turns readable once the question has ended, `watch.ended()` is
    the EndedMeanwhile that says how, and `watch.answer` what it ended with (an answer from another door, or the
    expiry's cancel; None when it was abandoned). `paths`: the daemon's home (by default this environment's)."""

    def __init__(self, eid: str, paths: StatePaths | None = None) -> None:
        self.eid = eid
        self.paths = paths
        self.how: str | None = None
        self.answer: AnswerDoc | None = None
        self._over = threading.Event()
        self._read_end, self._write_end = os.pipe()
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(self._watch())
        self._thread = threading.Thread(target=self._run, name=f"watch {eid}", daemon=True)

    def __enter__(self) -> QuestionWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        # the loop is closed here, not in its thread: a watch that ended by itself (the prompt's own answer ends the
        # question too) leaves a loop that still takes the cancel, harmlessly
        self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(STOP_PATIENCE)
        if not self._thread.is_alive():
            self._loop.close()
        os.close(self._read_end)
        os.close(self._write_end)

    def fileno(self) -> int:
        return self._read_end

    def ended(self) -> EndedMeanwhile:
        return EndedMeanwhile(self.how or f"{self.eid} ended")

    def wait(self, timeout: float) -> bool:
        """Whether the question has ended, waiting up to `timeout` for the watch to see it (an answer refused as
        too late: the watch's long poll returns a moment later)."""
        return self._over.wait(timeout)

    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # cancelled: the prompt is done, nothing more to watch
            self._loop.run_until_complete(self._task)

    async def _watch(self) -> None:
        try:
            self.answer = await wait_for_answer(self.eid, float("inf"), self.paths)
            self.how = how_it_ended(self.eid, self.answer or {})
        except ApiError as exc:  # 410: abandoned (its reason said); 404: no longer in the store
            self.how = plain(exc)
        self._over.set()
        os.write(self._write_end, b"!")
