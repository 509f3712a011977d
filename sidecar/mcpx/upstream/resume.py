"""What a restart needs to re-drive a modern call: the round it was in when its questions were asked, or the
task the server made of it.

Kept by the call's hooks (`McpCallHooks.resume`), handed to the call as what its kind remembers
(`Call.remember`), and stored with the round's last question, in that question's commit (`StoredTask.resume`, a
plain document in the store); `McpKind._redrive` reads it back after a restart, waits for the answers still due,
and sends the retry the old daemon never got to send.

A call the server made a task (mcp/tasks.py) is stored with the task's id as soon as the handle comes, and
with each question the task asks, in that question's commit, its key beside the question's id (`keys`: every
key of the task's life, so a restart neither asks one again nor loses one). After a restart the task is
followed again (`McpKind._refollow`); no retry is due.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Resume(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    round: int = 1  # the rounds that asked so far, this one included (counted towards elicit.maxRounds)
    request_state: Any = Field(default=None, alias="requestState")  # the server's, echoed byte for byte
    keys: dict[str, str] = Field(default_factory=dict)  # the server's inputRequests key -> the question's id
    static: dict[str, Any] = Field(default_factory=dict)  # responses mcpx gave itself (its own roots)
    task: str | None = None  # the upstream's task id, when the server made the call a task

    def stored(self) -> dict[str, Any]:
        """The document the store keeps: round, requestState, keys, static (and task, for a task)."""
        out = self.model_dump(by_alias=True)
        if self.task is None:
            del out["task"]  # a round's document stays as it was before tasks
        return out
