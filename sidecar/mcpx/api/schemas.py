"""Shapes of the /v1 API beyond the broker's own models (SPEC section 4)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    WithJsonSchema,
)

from mcpx.broker.models import (
    ACTIONS,
    KIND_GROUPS,
    KINDS,
    MAX_SEQ,
    Answer,
    Audience,
    AuditRecord,
    Elicitation,
    Mode,
    Moment,
    State,
    WireModel,
)
from mcpx.broker.store import StoreLease
from mcpx.config.durations import PATTERN as DURATION
from mcpx.inbox.notify import NotifyStat
from mcpx.presentation.rendering import Rendering
from mcpx.shared import ids


def _id_check(prefix: str, noun: str) -> Callable[[str], str]:
    """A path's id refused, when it is none, in words."""
    def check(value: str) -> str:
        if not ids.is_id(value, prefix):
            raise ValueError(f"{value!r} is not a {noun} id (they look like {prefix}- and 16 hex digits)")
        return value
    return check


def _action(value: str) -> str:
    if value not in ACTIONS:
        raise ValueError(f"unknown action {value!r}: use accept, decline or cancel")
    return value


def kind_list(spec: str) -> list[str]:
    return [k.strip(" ") for k in spec.split(",") if k.strip(" ")]


def _kinds(spec: str) -> str:
    for k in kind_list(spec):
        if k not in KIND_GROUPS and k not in KINDS:
            raise ValueError(f"unknown event kind {k!r}: use {', '.join(KIND_GROUPS)} or an exact kind like "
                             "elicit.open")
    return spec


_KIND = "|".join(re.escape(k) for k in (*KIND_GROUPS, *KINDS))
Kinds = Annotated[str, AfterValidator(_kinds), WithJsonSchema({
    "type": "string", "pattern": rf"^ *({_KIND})? *(, *({_KIND})? *)*$",
    "description": f"comma-separated: {', '.join(KIND_GROUPS)} (every kind of that group) or exact kinds"})]
# a path's id, documented by its pattern
QuestionId = Annotated[str, AfterValidator(_id_check("elc", "question")),
                       WithJsonSchema({"type": "string", "pattern": ids.pattern("elc")})]
TaskId = Annotated[str, AfterValidator(_id_check("tsk", "task")),
                   WithJsonSchema({"type": "string", "pattern": ids.pattern("tsk")})]


def _chain_id(value: str) -> str:
    if not any(ids.is_id(value, prefix) for prefix in ("tsk", "cal", "elc")):
        raise ValueError(f"{value!r} is not the id of a call, its trace or a question (tsk-, cal- or elc- and 16 hex "
                         "digits)")
    return value


# a call named by any id of its own: its task, its trace, or a question it raised
ChainId = Annotated[str, AfterValidator(_chain_id), WithJsonSchema(
    {"type": "string", "pattern": f"^(tsk|cal|elc)-{ids.HEX}$"})]


class ChainPath(BaseModel):
    id: ChainId


class QuestionPath(BaseModel):
    id: QuestionId


class AnswerPath(BaseModel):
    id: QuestionId
    action: Annotated[str, AfterValidator(_action), WithJsonSchema({"type": "string", "enum": list(ACTIONS)})]


class TaskPath(BaseModel):
    id: TaskId


class OpenApiDocument(BaseModel):
    model_config = ConfigDict(extra="allow")
    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: str
    message: str
    fields: dict[str, str] | None = Field(default=None, description="per-field problems of an answer")


class ErrorBody(BaseModel):
    error: ErrorDetail


class DaemonLease(WireModel):
    """A daemon's lease on a shared store, and whether its heartbeat is within it (broker/store.py's StoreLease)."""

    id: str = Field(description="the daemon's id on the store (dmn-…)")
    user: str
    host: str
    pid: int
    version: str
    started_at: Moment
    heartbeat: Moment
    alive: bool = Field(description="its heartbeat is within the lease")

    @classmethod
    def of(cls, lease: StoreLease) -> DaemonLease:
        return cls(id=lease.id, user=lease.user, host=lease.host, pid=lease.pid, version=lease.version,
                   started_at=lease.started, heartbeat=lease.heartbeat, alive=lease.alive)


class StoreStatus(WireModel):
    kind: Literal["sqlite", "postgresql"]
    where: str = Field(description="the SQLite file, or the PostgreSQL url without its password")
    daemon: str | None = Field(default=None, description="a shared store: this daemon's id (dmn-…) on it")
    lease: float | None = Field(default=None, description="a shared store: seconds without a heartbeat before a "
                                "daemon counts as gone")
    daemons: list[DaemonLease] = Field(default=[], description="a shared store: every daemon with a lease row, this "
                                       "one first")


class Health(WireModel):
    ok: bool
    version: str
    pid: int
    started_at: Moment
    socket: str
    listen: str | None = None
    config: str = Field(description="where the config in force came from")
    config_error: str | None = Field(default=None, description="the last reload that failed; the previous config stays")
    pending: int
    servers: list[str] = Field(default=[])  # pydantic copies a default: no instance shares this list
    server_commands: dict[str, str] = Field(default={}, description="each server's command line (stdio) or URL "
                                            "(HTTP), as configured, secret-looking arguments masked")
    plugin_elicit: str | None = Field(default=None, description="the opencode plugin's level from the config "
                                      "(off, notify, ask, auto), if it sets one; MCPX_PLUGIN_ELICIT in opencode's "
                                      "environment wins, and without either the plugin picks by what opencode runs")
    inbox: str | None = Field(default=None, description="the web inbox's address (`mcpx inbox` opens it signed in)")
    notify: list[NotifyStat] = Field(default=[], description="each notification target of elicit.notify: sent and "
                                     "failed since the daemon started")
    store: StoreStatus | None = None
    needs_login: dict[str, str] = Field(default={}, description="HTTP servers whose login is missing or could not be "
                                        "refreshed: why, and what to do (`mcpx auth login SERVER`, docs/auth.md)")


def _flag(value: Any) -> Any:
    # a query string says true or false; pydantic alone would also take yes, on, 1 (and the document says boolean)
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError(f"{value!r} is not true or false")
    return value


Flag = Annotated[bool, BeforeValidator(_flag), WithJsonSchema({"type": "boolean"})]


class RenderQuery(BaseModel):
    """Whether each question comes with its rendering, and the tool names in it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    render: Flag = Field(default=False, description="each question with `render`: the texts, calls and dialog the "
                         "daemon renders for it (the opencode plugin shows them as given)")
    tool_prefix: str = Field(default="", alias="toolPrefix", max_length=64, pattern=r"^[A-Za-z0-9_.-]*$",
                             description="what the client's MCP entry puts before mcpx's tool names in the "
                             "rendered calls (opencode's entry `mcpx`: mcpx_)")


class QuestionRenderQuery(RenderQuery):
    """One question's rendering, for where the opencode plugin shows it."""

    waiting: int = Field(default=1, ge=1, le=100000, description="how many of the person's questions wait where "
                         "its toast is shown, itself among them (the toast's title counts them)")
    shown_at: AwareDatetime | None = Field(default=None, alias="shownAt", description="when the plugin showed it to "
                                           "the person (a toast or a dialog): the texts for the agent say so")
    shown_in: Literal["toast", "dialog"] = Field(default="toast", alias="shownIn", description="what showed it to "
                                                  "them: a toast, or the question's own dialog")


class ListQuery(RenderQuery):
    session: str | None = None
    state: State | Literal["all"] = "pending"
    server: str | None = None
    audience: Audience | None = None
    trace: str | None = None
    task: str | None = None
    limit: int = Field(default=1000, ge=1, le=10000)


class RenderedElicitation(Elicitation):
    render: Rendering | None = Field(default=None, description="with ?render=true")


class ElicitationList(BaseModel):
    elicitations: list[RenderedElicitation]
    count: int


class ElicitationWithAnswer(WireModel):
    elicitation: RenderedElicitation
    answer: Answer | None = None


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=2000)
    replies: list[list[Annotated[str, Field(max_length=20000)]]] | None = Field(
        default=None, max_length=1000, description="instead of content, with accept: what the person picked or "
        "typed in each prompt of the question dialog (render.questions), in order; the daemon makes the content")
    form: dict[str, Annotated[str, Field(max_length=20000)] | list[Annotated[str, Field(max_length=20000)]]] | None \
        = Field(default=None, max_length=1000, description="instead of content, with accept: what the person "
                "entered in the question's own dialog (render.form), per field: the text typed, the tokens of the "
                "choices picked, or true/false; the daemon makes the content")


class PassedBody(BaseModel):
    """POST /v1/elicit/passed: what a host was passed of a question and handed on without its id (Claude Code's
    Elicitation hook: the message, mode and schema or url of one of the session's questions)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    session: str = Field(min_length=1, max_length=200, description="the question's session (a Claude Code session "
                         "is claude-<its session id>)")
    message: str = Field(max_length=20000, description="the message as the host was passed it: 'SERVER (via mcpx) "
                         "asks: ...'")
    mode: Literal["form", "url"] = "form"
    requested_schema: dict[str, Any] | None = Field(default=None, alias="requestedSchema")
    url: str | None = Field(default=None, max_length=8192)


class ShownBody(BaseModel):
    """POST /v1/elicit/{id}/shown: a client says it has put the question in front of the person."""

    model_config = ConfigDict(extra="forbid")
    where: str = Field(min_length=1, max_length=100, description="where it was shown: opencode, say")
    how: Literal["dialog", "toast"] = Field(description="the question's own dialog, or a notification")


class ConsentBody(BaseModel):
    """POST /v1/elicit/{id}/consent: the person's yes or no to opening a url-mode question's page."""

    model_config = ConfigDict(extra="forbid")
    open: StrictBool = Field(description="true: they chose to open it; false: they chose not to")


class EscalateBody(WireModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    after: Annotated[float | str, WithJsonSchema({"anyOf": [
        {"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": DURATION}]})] = Field(
        description="how long after the question opened: seconds, or a duration like '30m'")
    to: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(min_length=1, max_length=100,
                                                                         description="people notified then, who "
                                                                         "become approvers")


class AskBody(WireModel):
    """POST /v1/elicit: the params of elicitation/create, plus who owns it and how long it lives."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    message: str = Field(min_length=1, max_length=20000)
    mode: Mode | None = None
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")
    session: str | None = Field(default=None, min_length=1, max_length=200)
    ttl: Annotated[float | str | None, WithJsonSchema({"anyOf": [
        {"type": "number", "exclusiveMinimum": 0, "maximum": 7 * 86400}, {"type": "string", "pattern": DURATION},
        {"type": "null"}]})] = Field(default=None, description="seconds, or a duration like '10m'; more than 0, "
                                                               "at most 7 days")
    audience: Audience | None = None
    server: str | None = Field(default=None, description="who is asking; defaults to 'mcpx'")
    tool: str | None = None
    approvers: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = Field(
        default=None, min_length=1, max_length=100, description="people of the config whose approval it needs, each "
        "through their own link (docs/approvals.md)")
    need: int | None = Field(default=None, ge=1, le=100, description="how many distinct approvals accept it "
                             "(default 1)")
    remind: Annotated[float | str | None, WithJsonSchema({"anyOf": [
        {"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": DURATION},
        {"type": "null"}]})] = Field(default=None, description="approvers who have not answered are notified again "
                                                               "this often: seconds, or a duration like '10m'")
    escalate: list[EscalateBody] | None = Field(default=None, max_length=20, description="steps: after each one's "
                                                "`after`, its `to` people are notified and become approvers")
    from_: str | None = Field(default=None, alias="from", min_length=1, max_length=64,
                              description="who asks (MCPX_PERSON): their own approval never counts")
    presence: bool = Field(default=False, description="accepted only with a person's passkey (docs/presence.md)")


class Opened(BaseModel):
    elicitation: Elicitation


class WaitQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout: float = Field(default=30.0, ge=0, le=3600)


class EventsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kinds: Kinds | None = None
    session: str | None = None
    last_event_id: int | None = Field(default=None, alias="lastEventId", ge=0, le=MAX_SEQ,
                                      description="same as the Last-Event-ID header")


class EventsHeaders(BaseModel):
    last_event_id: int | None = Field(default=None, alias="Last-Event-ID", ge=0, le=MAX_SEQ,
                                      description="the id of the last event seen: the stream replays what followed")


class AuditQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    elicit: str | None = None
    session: str | None = None
    trace: str | None = None
    task: str | None = None
    kinds: Kinds | None = None
    after: int = Field(default=0, ge=0, le=MAX_SEQ, description="only records after this seq")
    limit: int = Field(default=1000, ge=1, le=10000)


class AuditList(BaseModel):
    records: list[AuditRecord]


class AnswerResult(BaseModel):
    elicitation: Elicitation
    answer: Answer | None
    escalated: bool = False
