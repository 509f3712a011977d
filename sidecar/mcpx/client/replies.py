"""What the daemon's /v1 replies hold, as the CLI and the client library read them: typed dicts, not models.

The daemon's pydantic models (broker/models.py, api/) are the shapes; these are the keys a client reads of them,
typed. They are TypedDicts, which cost nothing as a reply is read: it stays the dict `json.loads` made, and the
request/response commands start without pydantic (issue 39 item 4: importing it alone costs `mcpx call` tens of
milliseconds). Building these classes costs about 2 ms, so a module that only annotates with them imports them
under TYPE_CHECKING.
tests/unit/client/test_replies.py holds each key here to its model's, so that the two cannot drift apart.

What stays `dict[str, Any]` in them is arbitrary JSON a server wrote (a tool's inputSchema, a result's
structuredContent, a question's requestedSchema and answer content), which mcpx passes on as it came.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class ToolHints(TypedDict, total=False):
    """A tool's hints (mcp/protocol.py's ToolAnnotations): those the CLI shows."""

    readOnlyHint: bool
    destructiveHint: bool


class ToolDoc(TypedDict, total=False):
    """One tool as its server listed it (/v1/tools/{server}, passed through): a server may leave out any key."""

    name: str
    title: str
    description: str
    inputSchema: dict[str, Any]  # a JSON Schema, the server's own
    annotations: ToolHints


class ContentBlock(TypedDict, total=False):
    """One item of a result's content: text, or another type the CLI prints as JSON."""

    type: str
    text: str


class ToolResult(TypedDict, total=False):
    """A call's result: the server's CallToolResult (`content`, `structuredContent`, `isError`), or a finished
    call's document whose `error` says why it ended without one."""

    content: list[ContentBlock]
    structuredContent: Any  # the server's own JSON
    isError: bool
    error: Any


class TaskView(TypedDict, total=False):
    """A call as /v1/tasks and /v1/tasks/{id} show it (broker/models.py's TaskDoc, api/call_routes.py's
    ListedTask): every key."""

    id: str
    trace: str
    parent: str
    server: str
    tool: str
    session: str
    sessionSource: str
    state: str
    era: Literal["legacy", "modern"]
    questions: list[str]
    open: list[str]
    created: str
    updated: str
    result: dict[str, Any]  # the server's CallToolResult, once completed
    error: str | None
    progress: dict[str, Any] | None  # the server's last progress report, as it sent it
    survivesRestart: bool


class QuestionDoc(TypedDict, total=False):
    """A question as /v1 shows it (broker/models.py's Elicitation on the wire, with a waiting call's `respondWith`
    and `page`): every key, a script's `Question.document` being one. A key whose value is null is left out."""

    id: str
    trace: str
    parent: str
    upstreamId: str
    created: str
    escalated: bool
    ambiguous: bool
    confirms: dict[str, Any]  # the exact request a confirmation is bound to (broker/models.py's Confirms)
    state: str
    stateReason: str
    mode: Literal["form", "url"]
    server: str
    tool: str
    task: str
    message: str
    url: str
    requestedSchema: dict[str, Any]  # the server's flat form, read through broker/schema.py's FlatSchema
    secretFields: list[str]
    audience: str
    reason: str
    session: str
    sessionSource: str
    expiresAt: str
    secondsLeft: int
    presence: bool
    approvals: dict[str, Any]  # who must approve it, and who has (broker/models.py's Approvals)
    respondWith: str
    page: str


class AnswerDoc(TypedDict, total=False):
    """A question's answer as /v1 shows it (broker/models.py's Answer): every key, a script's `Client.ask` returning
    one. A key whose value is null is left out."""

    id: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any]  # the answer's field values, as the form took them
    reason: str
    by: str
    at: str
    session: str
    pid: int
    user: str
    host: str
    answeredAfterMs: int
    approvers: list[str]
    passkeys: list[str]


class LeaseDoc(TypedDict):
    """A daemon on a shared store (api/schemas.py's DaemonLease)."""

    id: str
    user: str
    host: str
    pid: int
    version: str
    startedAt: str
    heartbeat: str
    alive: bool


class StoreDoc(TypedDict, total=False):
    """The daemon's store (api/schemas.py's StoreStatus)."""

    kind: Literal["sqlite", "postgresql"]
    where: str
    daemon: str
    lease: float
    daemons: list[LeaseDoc]


class NotifyDoc(TypedDict, total=False):
    """One notification target's counts (inbox/notify.py's NotifyStat)."""

    target: str
    sent: int
    failed: int
    lastError: str


class HealthDoc(TypedDict, total=False):
    """The daemon as /v1/health shows it (api/schemas.py's Health): every key."""

    ok: bool
    version: str
    pid: int
    startedAt: str
    socket: str
    listen: str
    config: str
    configError: str
    pending: int
    servers: list[str]
    serverCommands: dict[str, str]
    pluginElicit: str
    inbox: str
    notify: list[NotifyDoc]
    store: StoreDoc
    needsLogin: dict[str, str]


class LoginDoc(TypedDict, total=False):
    """One server's login as /v1/auth lists it (oauth/models.py's LoginView): never a token."""

    server: str
    url: str
    state: Literal["logged-in", "needs-login", "asking", "none"]
    issuer: str
    subject: str
    scopes: list[str]
    expiresAt: float  # the access token's end, seconds since the epoch
    question: str  # the login question open now
    problem: str


class AuditDoc(TypedDict, total=False):
    """One audit record as /v1/audit and the event stream send it (broker/models.py's AuditRecord)."""

    seq: int
    at: str
    kind: str
    elicit: str
    session: str
    trace: str
    task: str
    pid: int
    data: dict[str, Any]  # what happened, in a shape of its own for each kind (broker/models.py's AuditKind)


class CallWaiting(TypedDict):
    """A call that waits for input or still runs (202 from /v1/call and /v1/tasks/{id}/result: api/call_routes.py's
    CallInputRequired)."""

    status: Literal["input-required", "running"]
    task: str
    trace: str
    elicitations: list[QuestionDoc]
    result: str
