"""client/replies.py's typed dicts name only keys the daemon's models send: a reply's shape is the model's, and the
CLI's view of it cannot drift from it unseen (a renamed field fails here, not as a silent `None` in a terminal)."""

from __future__ import annotations

from typing import Any, get_type_hints

import mcp.types
import pytest
from pydantic import BaseModel

from mcpx.api.call_routes import CallInputRequired, ListedTask, WaitingQuestion
from mcpx.broker.models import Answer, AuditRecord
from mcpx.client import replies
from mcpx.mcp.protocol import ToolAnnotations
from mcpx.oauth.models import LoginView


def wire_keys(model: type[BaseModel]) -> set[str]:
    """The keys a model's document carries, by alias, as the daemon writes it."""
    return set(model.model_json_schema(by_alias=True, mode="serialization")["properties"])


@pytest.mark.parametrize(("view", "keys"), [
    (replies.TaskView, wire_keys(ListedTask)),
    (replies.QuestionDoc, wire_keys(WaitingQuestion)),
    (replies.CallWaiting, wire_keys(CallInputRequired)),
    (replies.ToolHints, wire_keys(ToolAnnotations)),
    (replies.LoginDoc, wire_keys(LoginView)),
    # what MCP says of a tool and a result, as the SDK models them: the daemon passes a server's own on
    (replies.ToolDoc, wire_keys(mcp.types.Tool)),
    (replies.ContentBlock, wire_keys(mcp.types.TextContent)),
    # a finished call's document stands in for a result with its `error` (TaskDoc's)
    (replies.ToolResult, wire_keys(mcp.types.CallToolResult) | {"error"}),
])
def test_each_key_is_one_the_daemon_sends(view: Any, keys: set[str]) -> None:
    named = set(get_type_hints(view))
    assert named, view
    assert named <= keys, f"{view.__name__} names keys its model does not send: {sorted(named - keys)}"


def test_a_question_names_every_key() -> None:
    """A script's `Question.document` is typed by QuestionDoc: it names every key a question is sent with."""
    assert set(get_type_hints(replies.QuestionDoc)) == wire_keys(WaitingQuestion)


def test_a_wrong_key_is_caught() -> None:
    """The check above can fail: a key the model lacks is named."""
    class Stale(replies.TaskView, total=False):
        sessionId: str  # the model's is `session`

    assert not set(get_type_hints(Stale)) <= wire_keys(ListedTask)


def test_the_documents_a_script_or_status_is_handed_name_every_key() -> None:
    """`mcpx status` and `mcpx doctor` read /v1/health as HealthDoc, its store and its daemons as theirs; a script's
    `Client.ask` returns an AnswerDoc."""
    from mcpx.api.schemas import DaemonLease, Health, StoreStatus
    from mcpx.inbox.notify import NotifyStat

    for view, model in ((replies.HealthDoc, Health), (replies.AnswerDoc, Answer), (replies.AuditDoc, AuditRecord),
                        (replies.TaskView, ListedTask), (replies.StoreDoc, StoreStatus),
                        (replies.LeaseDoc, DaemonLease), (replies.NotifyDoc, NotifyStat)):
        assert set(get_type_hints(view)) == wire_keys(model), view.__name__
