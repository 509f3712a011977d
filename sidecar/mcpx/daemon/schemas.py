"""Shapes of the /v1 API beyond the broker's own models (SPEC section 4)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcpx.broker.models import Answer, Audience, AuditRecord, Elicitation, Mode, State, WireModel


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: str
    message: str
    fields: dict[str, str] | None = Field(default=None, description="per-field problems of an answer")


class ErrorBody(BaseModel):
    error: ErrorDetail


class Health(WireModel):
    ok: bool
    version: str
    pid: int
    started_at: datetime
    socket: str
    listen: str | None = None
    config: str = Field(description="where the config in force came from")
    config_error: str | None = Field(default=None, description="the last reload that failed; the previous config stays")
    pending: int
    servers: list[str] = []
    server_commands: dict[str, str] = Field(default={}, description="each server's command line (stdio) or URL "
                                            "(HTTP), as configured, secret-looking arguments masked")
    plugin_elicit: str = Field(default="notify", description="the opencode plugin's level from the config "
                               "(off, notify, ask, auto); MCPX_PLUGIN_ELICIT in opencode's environment wins")


class ListQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session: str | None = None
    state: State | Literal["all"] = "pending"
    server: str | None = None
    audience: Audience | None = None
    trace: str | None = None
    task: str | None = None
    limit: int = Field(default=1000, ge=1, le=10000)


class ElicitationList(BaseModel):
    elicitations: list[Elicitation]
    count: int


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=2000)


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
    ttl: float | str | None = Field(default=None, description="seconds, or a duration like '10m'")
    audience: Audience | None = None
    server: str | None = Field(default=None, description="who is asking; defaults to 'mcpx'")
    tool: str | None = None


class Opened(BaseModel):
    elicitation: Elicitation


class WaitQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout: float = Field(default=30.0, ge=0, le=3600)


class EventsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kinds: str | None = Field(default=None, description="comma-separated: elicit, task, policy, or exact kinds")
    session: str | None = None
    last_event_id: int | None = Field(default=None, alias="lastEventId", description="same as the Last-Event-ID header")


class AuditQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    elicit: str | None = None
    session: str | None = None
    trace: str | None = None
    task: str | None = None
    kinds: str | None = None
    after: int = Field(default=0, ge=0)
    limit: int = Field(default=1000, ge=1, le=10000)


class AuditList(BaseModel):
    records: list[AuditRecord]


class AnswerResult(BaseModel):
    elicitation: Elicitation
    answer: Answer | None
    escalated: bool = False
