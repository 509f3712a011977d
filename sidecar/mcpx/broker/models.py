"""The broker's data: questions (`Elicitation`), answers, audit records (SPEC section 3).

These models are also the wire shapes of the /v1 API and appear in openapi.json.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self, TypeGuard, TypeVar, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PrivateAttr, computed_field, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticUndefined

from mcpx.broker.credentials import secret_fields
from mcpx.broker.schema import FlatSchema
from mcpx.shared import wirejson

Mode = Literal["form", "url"]
Audience = Literal["agent", "human", "agent-then-human"]
State = Literal["pending", "answered", "expired", "abandoned"]
Action = Literal["accept", "decline", "cancel"]
SessionSource = Literal["meta", "argument", "header", "env", "fallback"]
AuditKind = Literal[
    "elicit.open",
    "elicit.answered",
    "elicit.expired",
    "elicit.abandoned",
    "elicit.escalated",
    "elicit.resumed",
    "elicit.consent",  # a person's yes or no to opening a url-mode question's page (the web inbox, a dialog)
    "elicit.shown",  # a client put the question in front of the person (the opencode TUI plugin's dialog)
    "elicit.approval",  # an approver's accept or decline through their own link, counted or refused
    "elicit.reminded",  # approvers who have not answered were notified again, or the question escalated to more
    "person.enrolled",  # a person created a passkey through their enrolment link (docs/presence.md)
    "person.revoked",  # a person's passkey was revoked: it signs nothing from then on
    "policy.fired",
    "task.done",
]
ACTIONS: tuple[Action, ...] = ("accept", "decline", "cancel")


def is_action(value: str) -> TypeGuard[Action]:
    return value in ACTIONS
KINDS: tuple[str, ...] = get_args(AuditKind)
KIND_GROUPS = ("elicit", "task", "policy", "person")  # a group names every kind that starts with it
MAX_SEQ = 2**63 - 1  # an audit seq is an SQLite INTEGER: a larger one is no event id at all
REDACTED = "[redacted]"


def rfc3339(moment: datetime) -> str:
    """The one form of a moment mcpx writes anywhere (the API, the store, the audit, messages): RFC 3339 in UTC,
    to the millisecond, e.g. 2026-12-06T14:52:53.912Z: what `moment.astimezone(UTC).isoformat(timespec="milliseconds")`
    writes with its +00:00 as Z (the microseconds cut, not rounded), from the fields themselves. isoformat builds its
    text through C's printf-style formatter, field by field, and a lifecycle wrote four (~13,000 instructions each
    under callgrind, ~4x this); tests/unit/broker/test_made.py holds the two to the same text."""
    if moment.tzinfo is not UTC:  # a naive moment is local time, as astimezone takes it
        moment = moment.astimezone(UTC)
    # %-formatting: half an f-string's time with seven fields of width (a tuple, one formatter call)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (  # noqa: UP031
        moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second, moment.microsecond // 1000)


# the last whole second `rfc3339_epoch` wrote, and its text: the moments written together (a batch of calls' ends)
# share their second, and the loop and the store's thread each swap the whole pair, never half of it
_SECOND: tuple[int, str] = (-1, "")


def rfc3339_epoch(epoch: float) -> str:
    """`rfc3339(datetime.fromtimestamp(epoch, UTC))`, the same text, without a datetime made and converted twice (a
    plain call's end writes three: its row's created and updated, its task.done's at). Its microsecond is
    fromtimestamp's own (the fraction rounded half to even, carried into the second), then cut to the millisecond
    as isoformat cuts it (tests/unit/call/test_call_end.py holds the two to the same text)."""
    global _SECOND
    second = math.floor(epoch)
    micro = round((epoch - second) * 1e6)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    known = _SECOND
    if known[0] != second:
        known = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{known[1]}.{micro // 1000:03d}Z"


# a moment of a model, as rfc3339 writes it (pydantic's own would write 53.912000Z, or 53Z at a whole second)
Moment = Annotated[datetime, PlainSerializer(lambda moment: rfc3339(moment), return_type=str, when_used="json")]


def seconds_left(expires: float, now: float, state: str) -> int:
    """How long a question has left, in whole seconds rounded up; 0 once it has ended.

    The one rule for secondsLeft: a question's document computes it when it is shown, and a
    listing that passes stored documents on without parsing them splices in the same number.
    """
    return max(0, int(expires - now + 0.999)) if state == "pending" else 0


class WireModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class StoredModel(WireModel):
    """A model a store writes as a document: the document its write encoded is kept on the object (`stored`), so that
    a reply showing the same object is that document, not the model encoded again. A copy starts without it."""

    _doc: bytes | None = PrivateAttr(default=None)

    def stored(self, doc: bytes) -> None:
        """`doc` is this object's document as its store wrote it (by alias, without nulls)."""
        _private(self)["_doc"] = doc

    def doc(self) -> bytes | None:
        """The document its store wrote, if one did (`stored`)."""
        doc: bytes | None = _private(self)["_doc"]
        return doc

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's model_copy, and a shallow one (every copy of the broker's) made here in a few steps where pydantic
        took several Python calls: the fields (with `update`, unvalidated as pydantic leaves them), the fields set and
        the private attributes copied. A copy starts without the document (what it was encoded as may no longer be
        what it holds)."""
        if deep:
            copy = super().model_copy(update=update, deep=deep)
            _private(copy)["_doc"] = None
            return copy
        cls = type(self)
        copy = cls.__new__(cls)
        fields = dict(self.__dict__)
        fields_set = set(self.__pydantic_fields_set__)
        if update:
            fields.update(update)
            fields_set.update(update)
        _set(copy, "__dict__", fields)
        _set(copy, "__pydantic_extra__", None)  # extra="forbid": a WireModel has none
        _set(copy, "__pydantic_fields_set__", fields_set)
        _set(copy, "__pydantic_private__", {**_private(self), "_doc": None})
        return copy

    def __eq__(self, other: object) -> bool:
        """Equal as models are, the document kept aside: how an object was encoded is no part of what it holds."""
        if not isinstance(other, StoredModel) or self._doc is other._doc:
            return super().__eq__(other)
        return (type(self) is type(other) and self.__dict__ == other.__dict__
                and _unstored(self) == _unstored(other)
                and (self.__pydantic_extra__ or {}) == (other.__pydantic_extra__ or {}))


def _private(model: BaseModel) -> dict[str, Any]:
    """A model's private attributes, read and written in their own dict: pydantic's __getattr__ and __setattr__ for
    them are several Python calls each, and a question's lifecycle reads and writes its documents a dozen times."""
    private = model.__pydantic_private__
    assert private is not None  # a model with private attributes always has them
    return private


def _unstored(model: StoredModel) -> dict[str, Any]:
    return {k: v for k, v in (model.__pydantic_private__ or {}).items() if k != "_doc"}


class Confirms(WireModel):
    """The call mcpx's own confirmation asks about: an approval rule matches it by server, tool and method, and the
    accept is bound to `request`, the hash of exactly what is sent (mcpx/services/outgoing.py)."""

    server: str
    tool: str
    method: str | None = Field(default=None, description="the HTTP method; RUN for a command; none for an MCP tool")
    request: str = Field(description="sha256 of exactly the request or command run the accept lets go")


class EscalationStep(WireModel):
    at: Moment = Field(description="when its people are notified and become approvers")
    to: list[str]
    done: bool = False


class Approvals(WireModel):
    """A question that needs named people's approval: `need` distinct accepts of its approvers, each through their
    own link; any approver's decline declines it (docs/approvals.md). Counted in broker/approvals.py alone."""

    need: int = Field(ge=1)
    by: list[str] = Field(default_factory=list, description="who approved, in order")
    waiting: list[str] = Field(default_factory=list, description="approvers who have not answered")
    refused: list[str] = Field(default_factory=list, description="who tried to approve and may not (the asker)")
    asker: str | None = Field(default=None, description="who asked: their approval never counts")
    remind: float | None = Field(default=None, description="seconds between reminders to those waiting")
    escalate: list[EscalationStep] = Field(default_factory=list)
    remind_at: Moment | None = Field(default=None, description="when the next reminder is due")
    next_at: Moment | None = Field(default=None, description="when the next reminder or escalation is due")
    rule: str | None = Field(default=None, description="the elicit.approvals rule that asked for it, if one did")
    passkeys: dict[str, str] = Field(default_factory=dict, description="with presence: the credential id of the "
                                     "passkey each counted approver signed with")

    @model_validator(mode="before")
    @classmethod
    def _status_on_read(cls, data: Any) -> Any:
        """`status` is computed from the rest when shown; a document read back is never believed on it."""
        if isinstance(data, dict) and "status" in data:
            data = {k: v for k, v in data.items() if k != "status"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> str:
        """Where they stand, in the words every client shows: "1 of 2 approved (alice)"."""
        who = f" ({', '.join(self.by)})" if self.by else ""
        return f"{len(self.by)} of {self.need} approved{who}"


class Elicitation(StoredModel):
    """A question: who asks, what, for whom, until when, and where it stands."""

    id: str = Field(description="elc- + 16 lowercase hex; always mcpx's own")
    trace: str | None = Field(default=None, description="the call (cal-…) that raised it")
    parent: str | None = Field(default=None, description="that call's parent call")
    task: str | None = Field(default=None, description="the tsk-… that carries the call's result")
    session: str
    session_source: SessionSource
    server: str = Field(description="who asks: an upstream server's name, or 'mcpx'")
    tool: str | None = None
    mode: Mode
    message: str = Field(description="the server's words; data, never an instruction")
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    upstream_id: str | None = Field(default=None, description="the upstream's elicitationId, if it gave one")
    audience: Audience
    reason: str = Field(description="why this audience, in words a person can read")
    created: Moment
    expires_at: Moment
    state: State
    state_reason: str | None = Field(default=None, description="why it was abandoned or escalated")
    escalated: bool = False
    ambiguous: bool = Field(default=False, description="the call that raised it could not be told for certain")
    secret_fields: list[str] = Field(default_factory=list, description="credential fields: their values are never "
                                     "stored or shown, only [redacted]")
    approvals: Approvals | None = Field(default=None, description="named people's approvals it needs, and where "
                                        "they stand")
    confirms: Confirms | None = Field(default=None, description="mcpx's own confirmation: the call it is about")
    presence: bool = Field(default=False, description="accepted only with a passkey of a person allowed to answer "
                           "it, signing exactly this question and what is accepted (docs/presence.md)")
    # its requestedSchema as fields, read at most once per object (copies made with model_copy keep it): the answer's
    # check and every renderer read the same question's form
    _form: FlatSchema | None = PrivateAttr(default=None)

    @property
    def form(self) -> FlatSchema:
        """The question's fields (none in url mode), as every reader of its requestedSchema should take them."""
        # its private attributes' own dict, not pydantic's __getattr__ (several times slower): an answer's path
        # reads the form twice
        private = _private(self)
        form: FlatSchema | None = private["_form"]
        if form is None:
            form = private["_form"] = FlatSchema.of(self.requested_schema)
        return form

    def read_as(self, form: FlatSchema | None) -> Elicitation:
        """This question, its form already read (the check at its opening read it)."""
        _private(self)["_form"] = form
        return self

    @model_validator(mode="before")
    @classmethod
    def _computed_on_read(cls, data: Any) -> Any:
        """A document as shown carries secondsLeft; taken back in, it is computed afresh, never believed. One stored
        before questions named their credential fields has them named now: whoever reads secret_fields (to redact an
        answer, to keep a credential from the store) may rely on it."""
        if isinstance(data, dict) and ("secondsLeft" in data or "seconds_left" in data):
            data = {k: v for k, v in data.items() if k not in ("secondsLeft", "seconds_left")}
        if isinstance(data, dict) and "secretFields" not in data and "secret_fields" not in data:
            schema = data.get("requestedSchema", data.get("requested_schema"))
            if schema:
                data = {**data, "secretFields": sorted(secret_fields(schema if isinstance(schema, dict) else None))}
        return data

    # mypy refuses any decorator over @property; pydantic's documentation gives this very ignore
    @computed_field(title="Seconds Left", json_schema_extra={"minimum": 0})  # type: ignore[prop-decorator]
    @property
    def seconds_left(self) -> int:
        return seconds_left(self.expires_at.timestamp(), time.time(), self.state)

    def in_state(self, state: State) -> Elicitation:
        """This question in `state` (answered, expired), and its document as its store is to keep it: the document its
        store wrote with the state's value changed in place, not the question encoded again (every answer's commit
        wrote one, ~9 µs). The state's pair is the last `,"state":"<state>",` in that document: before it, the
        requested schema may hold keys of anyone's choosing, after it only the model's own keys do (stateReason,
        escalated, ambiguous, secretFields, confirms, presence), unless the question has approvals (their passkeys
        are keyed by person's name): that one is encoded again, as is a question no store wrote."""
        moved = self.model_copy(update={"state": state})
        doc = self.doc()
        if doc is not None and self.approvals is None:
            pair = b',"state":"%s",' % self.state.encode()
            at = doc.rfind(pair)
            if at >= 0:
                moved.stored(b'%s,"state":"%s",%s' % (doc[:at], state.encode(), doc[at + len(pair):]))
        return moved

    def json_bytes(self) -> bytes:
        """The question as the API shows it: its stored document (which never holds secondsLeft, the one computed
        field, always written last) with its secondsLeft of now, or encoded now if no store wrote this object."""
        doc = self.doc()
        if doc is None:
            return wirejson.encode_models(self)
        return doc[:-1] + b',"secondsLeft":%d}' % self.seconds_left


AnswererKind = Literal["person", "agent", "script", "policy", "expiry", "upstream"]
_BARE: frozenset[str] = frozenset(("expiry", "upstream"))  # kinds that need no surface: mcpx's own doing
_NAMED: frozenset[str] = frozenset(("person", "agent", "script", "policy"))  # kinds that always say which
# a script's name after `script:` (mcpx.Client(name=…), by default its file's stem): a word a log line can carry
SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class Answerer(BaseModel):
    """Who answered: a kind, and the surface or name after its colon (`person:web`, `agent:mcp`, `script:deploy`,
    `policy:<rule id>`) or nothing (`expiry`, `upstream`). The stored and wire form stays the string (`str()`
    gives it back exactly); code branches on `kind`, never on the string's prefix."""

    model_config = ConfigDict(frozen=True)

    kind: AnswererKind
    detail: str | None = Field(default=None, description="the surface, the rule id or the script's name")

    @staticmethod
    def parse(by: str) -> Answerer:
        """The answerer a `by` string names; ValueError if it names no kind mcpx knows."""
        found = _answerer(by)
        if found is None:
            raise ValueError(f"{by!r} names no answerer: person:…, agent:…, script:…, policy:…, expiry or upstream")
        return found

    @staticmethod
    def kind_of(by: str) -> AnswererKind | None:
        """The kind of answerer `by` names, or None for a string that names none (tests answer as anyone)."""
        found = _answerer(by)
        return None if found is None else found.kind

    def __str__(self) -> str:
        return self.kind if self.detail is None else f"{self.kind}:{self.detail}"

    @staticmethod
    def script(name: str) -> Answerer:
        """A script's answerer (`script:<name>`); ValueError naming the name when it is not one."""
        if not SCRIPT_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a script's name: 1 to 64 letters, digits, '.', '_' or '-', starting "
                             "with a letter or digit")
        return Answerer(kind="script", detail=name)


@functools.lru_cache(maxsize=256)  # a daemon sees a handful of answerers, each on every answer it takes
def _answerer(by: str) -> Answerer | None:
    head, colon, detail = by.partition(":")
    if (colon and head in _NAMED) or head in _BARE:
        return Answerer(kind=cast(AnswererKind, head), detail=detail if colon else None)
    return None


class Answer(StoredModel):
    id: str
    action: Action
    content: dict[str, Any] | None = None
    by: str = Field(description="person:cli, person:opencode, person:rest, agent:mcp, script:<name>, policy:<rule>, "
                                "expiry, upstream")
    at: Moment
    session: str | None = None
    pid: int | None = None
    user: str | None = Field(default=None, description="a shared store: the user of the daemon the answer came through")
    host: str | None = Field(default=None, description="a shared store: that daemon's host")
    answered_after_ms: int
    reason: str | None = None
    approvers: list[str] | None = Field(default=None, description="a question that needed approvals: every "
                                        "approver who counted")
    passkeys: list[str] | None = Field(default=None, description="a question that needed presence: the credential "
                                       "id of each passkey that signed it, in the order of who counted")

    def json_bytes(self) -> bytes:
        """The answer as the API shows it: the document its store wrote, or encoded now if none wrote this object."""
        doc = self.doc()
        return doc if doc is not None else wirejson.encode_models(self)


# what `made` writes as pydantic's own constructor would: object's, past the model's __setattr__
_set = object.__setattr__
M = TypeVar("M", bound=BaseModel)


@functools.cache
def _made_plan(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...],
                                              frozenset[str], dict[str, Any] | None]:
    """What `made` starts from: every field in the model's order (its __dict__'s order is the order pydantic encodes
    in) with its default; the fields made afresh for each model as pydantic makes them (a default_factory, a copy of
    a mutable default); the required fields; and the private attributes' defaults."""
    template: dict[str, Any] = {}
    fresh: list[tuple[str, Callable[[], Any]]] = []
    required: set[str] = set()
    for name, info in cls.model_fields.items():
        template[name] = info.default
        if info.default_factory is not None:
            fresh.append((name, cast(Callable[[], Any], info.default_factory)))
        elif isinstance(info.default, (dict, list, set)):
            fresh.append((name, functools.partial(copy.deepcopy, info.default)))
        elif info.default is PydanticUndefined:
            required.add(name)
    private = {name: attr.get_default() for name, attr in cls.__private_attributes__.items()} or None
    return template, tuple(fresh), frozenset(required), private


def made(cls: type[M], values: dict[str, Any]) -> M:
    """`cls(**values)` for values the daemon made itself, already of the fields' types (a datetime, a literal it
    chose, a dict a boundary's model validated): the same fields, fields set and private attributes' defaults,
    without pydantic's validation and its private attributes' set-up, which are most of a model's making (issue 39:
    a question's lifecycle made five such models; tests/unit/broker/test_made.py holds each to the validating
    constructor's). `values` by field name, every required field among them; it becomes the model's own."""
    template, fresh, required, private = _made_plan(cls)
    fields = template.copy()
    fields.update(values)  # a field keeps its place in the model's order
    if len(fields) != len(template):
        raise TypeError(f"{cls.__name__}: {', '.join(sorted(values.keys() - template.keys()))} is not a field")
    if not required <= values.keys():
        raise TypeError(f"{cls.__name__}: {', '.join(sorted(required - values.keys()))} is required")
    for name, factory in fresh:
        if name not in values:
            fields[name] = factory()
    model = cls.__new__(cls)
    _set(model, "__dict__", fields)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None if private is None else private.copy())
    return model


# an audit record's document's fields after `at` (`AuditRecord.of`), in the model's order; each alias is its name
_RECORD_DOC = ("kind", "elicit", "session", "trace", "task", "pid", "data")


class AuditRecord(WireModel):
    seq: int = Field(description="monotonic; the SSE event id")
    at: Moment
    kind: AuditKind
    elicit: str | None = None
    session: str | None = None
    trace: str | None = None
    task: str | None = None
    pid: int | None = None
    data: dict[str, Any] = {}
    # its JSON, once encoded: every event stream sends the same bytes (a copy starts without them)
    _json: bytes | None = PrivateAttr(default=None)

    def json_bytes(self) -> bytes:
        """The record as the API shows it (by alias, without nulls), encoded once."""
        private = _private(self)
        json: bytes | None = private["_json"]
        if json is None:
            json = private["_json"] = wirejson.encode_models(self)
        return json

    @classmethod
    def of(cls, at: datetime, when: str, fields: dict[str, Any]) -> tuple[AuditRecord, str]:
        """A record of the daemon's own values, `AuditRecord(seq=0, at=at, **fields)` as `made` makes it, and its
        document as `documents.audit_doc` encodes it, byte for byte (the same fields in the model's order, by alias,
        without nulls), from a dict of its values rather than the model encoded. `when`: `at` as rfc3339 writes it
        (`rfc3339_epoch`: many records share it, a batch of calls' ends). Every record the broker writes is made
        here: each plain call's end (on the store's thread), two in each question's lifecycle, where the validating
        constructor and the model's encoder were ~17 µs a record (docs/bench.md; tests/unit/call/test_call_end.py
        holds the two to the same fields, fields set and text)."""
        record = made(cls, {"seq": 0, "at": at, **fields})
        values = record.__dict__
        doc: dict[str, Any] = {"at": when}
        for name in _RECORD_DOC:
            if (value := values[name]) is not None:
                doc[name] = value
        return record, wirejson.encode_models(doc).decode()

    def numbered(self, seq: int, doc: str) -> AuditRecord:
        """This record, numbered in place, as the log holds it at `seq` (it was built for that row: a copy would cost
        every record its own); `doc`: its document as stored (`documents.audit_doc`, all but the seq, which is the
        first field), so its JSON is that document with the seq put in front, not encoded again."""
        # written into the model's own dicts: pydantic's __setattr__ (a field's handler, the private attributes'
        # look-up) is four Python calls each, for an int and the bytes it already holds (every record written, on
        # the store's thread: a plain call's task.done). `seq` was given when the record was made (fields_set)
        self.__dict__["seq"] = seq
        _private(self)["_json"] = b'{"seq":%d,%s' % (seq, doc[1:].encode())
        return self

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> AuditRecord:
        copy = super().model_copy(update=update, deep=deep)
        _private(copy)["_json"] = None  # what it was encoded as may no longer be what it holds
        return copy


TaskState = Literal["running", "input-required", "completed", "failed", "cancelled"]


class TaskDoc(WireModel):
    """A call as a task: what /v1/tasks/{id} and mcpx's own task tools show."""

    id: str
    trace: str
    parent: str | None = None
    server: str
    tool: str
    session: str
    session_source: SessionSource
    state: TaskState
    era: Literal["legacy", "modern"] | None = None
    questions: list[str] = Field(description="every question the call raised")
    open: list[str] = Field(description="those still waiting for an answer")
    created: Moment
    updated: Moment
    result: dict[str, Any] | None = Field(default=None, description="the server's CallToolResult, once completed")
    error: str | None = Field(default=None, description="why it failed or was cancelled")
    progress: dict[str, Any] | None = Field(default=None, description="the server's last progress report on a call in "
                                            "flight (progress, total, message), as it sent it")


class TransparentCall(WireModel):
    """A call through /mcp/{server}: the era and capabilities the client itself declared."""

    era: Literal["legacy", "modern"] | None = None
    client_caps: dict[str, Any] | None = None


class StoredTask(TaskDoc):
    """What the tasks table keeps of a call: its document, and what a restarted daemon needs to re-drive it."""

    arguments: dict[str, Any] = Field(default_factory=dict)
    cwd: str | None = None
    surface: str = "rest"
    policy_mode: Literal["ask", "auto", "decline", "error"] | None = None
    transparent: TransparentCall | None = None
    resume: dict[str, Any] | None = Field(default=None, description="a modern call's round in flight: its retry")

    def shown(self) -> TaskDoc:
        """The task's document, without what only a restart needs."""
        return TaskDoc.model_validate({name: getattr(self, name) for name in TaskDoc.model_fields})


class ApprovalRequest(WireModel):
    """What an asker (or an elicit.approvals rule) asks of approvals; durations in seconds."""

    approvers: list[str] = Field(min_length=1)
    need: int = Field(default=1, ge=1, le=100)
    remind: float | None = Field(default=None, gt=0)
    escalate: list[tuple[float, list[str]]] = Field(default_factory=list, description="(after, to) steps")
    asker: str | None = None
    rule: str | None = None
    presence: bool = Field(default=False, description="each approver signs with their own passkey")


class OpenRequest(WireModel):
    """What an asker supplies to open a question; the broker fills the rest."""

    session: str
    session_source: SessionSource
    server: str
    tool: str | None = None
    mode: Mode = "form"
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    upstream_id: str | None = None
    trace: str | None = None
    parent: str | None = None
    task: str | None = None
    ttl: float | None = Field(default=None, gt=0, le=7 * 86400)
    audience: Audience | None = Field(default=None, description="a floor: routing may only make it more human")
    meta: dict[str, Any] | None = Field(default=None, description="the asker's _meta, for routing hints")
    approvals: ApprovalRequest | None = Field(default=None, description="named people's approvals it needs")
    confirms: Confirms | None = Field(default=None, description="mcpx's own confirmation: the call it is about")
    asker: str | None = Field(default=None, description="who asks, as a person of the config (MCPX_PERSON): their "
                              "approval never counts")
    presence: bool = Field(default=False, description="accepted only with a person's passkey (docs/presence.md)")
    pid: int | None = None
    ambiguous: bool = False
    policy_mode: Literal["ask", "auto", "decline", "error"] | None = Field(
        default=None, description="this call's own elicit mode (mcpx call --elicit), over elicit.mode")


class Passkey(WireModel):
    """A person's passkey, as the store keeps it: its public key and the last sign count it showed."""

    id: str = Field(description="the credential id, base64url")
    person: str
    public_key: str = Field(description="the COSE public key, base64url")
    sign_count: int = 0
    created: datetime
    last_used: datetime | None = None
