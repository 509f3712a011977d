"""Configuration: finding, merging, validating and watching it (SPEC section 2).

A config that fails validation raises `ConfigError` naming the file and the
offending field; the daemon keeps the previous config in force when a reload fails.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from mcpx import jsonc
from mcpx.durations import parse_duration
from mcpx.errors import McpxError
from mcpx.masking import shown_command, shown_url

Seconds = Annotated[float, BeforeValidator(parse_duration)]
Audience = Literal["agent", "human", "agent-then-human"]
ElicitMode = Literal["ask", "auto", "decline", "error"]
PluginLevel = Literal["off", "notify", "ask", "auto"]


# However small a server's `timeout`, its start may take this long: a Python server importing the SDK
# needs seconds on a busy 2-core machine, and a call timeout of 2 s is not meant to forbid that.
START_FLOOR = 10.0
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class _Model(BaseModel):
    # the file says idleTimeout, the code idle_timeout; only the file's spelling is accepted
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_alias=True,
                              validate_by_name=False)


class RuleMatch(_Model):
    server: str | None = None
    tool: str | None = None
    field: str | None = None
    mode: Literal["form", "url"] | None = None
    message: str | None = Field(default=None, description="a regular expression searched in the question's message")
    audience: Audience | None = None
    method: str | None = Field(default=None, description="mcpx's confirmation of a request with this HTTP method "
                               "(RUN: a command); its server and tool match the call's too")

    @model_validator(mode="after")
    def _method_known(self) -> RuleMatch:
        if self.method is not None:
            if self.method.upper() not in (*HTTP_METHODS, "RUN"):
                raise ValueError(f"method {self.method!r} is not an HTTP method (known: "
                                 f"{', '.join(HTTP_METHODS)}), nor RUN (a command)")
            self.method = self.method.upper()
        return self

    @model_validator(mode="after")
    def _message_is_regex(self) -> RuleMatch:
        if self.message is not None:
            try:
                re.compile(self.message)
            except re.error as exc:
                raise ValueError(f"match.message is not a valid regular expression: {exc}") from None
        return self

    def is_empty(self) -> bool:
        return not any(v is not None for v in self.model_dump().values())


class RuleWhen(_Model):
    env: str = Field(description="NAME=value: the rule fires only when the daemon's environment has it")

    @model_validator(mode="after")
    def _shape(self) -> RuleWhen:
        if "=" not in self.env or not self.env.split("=", 1)[0]:
            raise ValueError(f"when.env must look like NAME=value, got {self.env!r}")
        return self

    def holds(self, environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
        name, value = self.env.split("=", 1)
        return environ.get(name) == value


class Rule(_Model):
    id: str | None = None
    match: RuleMatch
    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, Any] | None = None
    answer: Any = Field(default=None, description="shorthand: the value for match.field when accepting")
    when: RuleWhen | None = None
    because: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _when_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("when"), str):
            data = {**data, "when": {"env": data["when"]}}
        return data

    @model_validator(mode="after")
    def _complete(self) -> Rule:
        problems: list[str] = []
        if self.match.is_empty():
            problems.append("has an empty match; a rule must name at least one of server, tool, field, mode, "
                            "message or audience (there is no match-everything rule)")
        if not {"action", "answer", "content"} & self.model_fields_set:
            # an unstated accept would accept a yes/no with nothing at all
            problems.append('says nothing about the answer: give "answer" (the value for match.field), "content" '
                            '(the whole answer) or "action" (accept, decline or cancel)')
        if self.answer is not None and self.match.field is None:
            problems.append("'answer' is shorthand for one field's value and needs match.field")
        if problems:
            raise ValueError("; and ".join(problems))
        if self.answer is not None:
            assert self.match.field is not None
            self.content = {**(self.content or {}), self.match.field: self.answer}
        return self


class ServerElicit(_Model):
    ttl: Seconds | None = None


class _Server(_Model):
    timeout: Seconds = Field(default=60.0, description="a call's own timeout; paused while a question waits. "
                             "Also how long the server's start may take (never less than 10 s)")
    idle_timeout: Seconds = Field(default=600.0, gt=0, description="an instance of the server with no call for this "
                                 "long is stopped; the next call starts it again")
    elicit: ServerElicit = ServerElicit()
    enabled: bool = True


def _secret_names(secrets: list[str], env: Mapping[str, str]) -> None:
    """`secrets` are variable names from the keychain (docs/secrets.md), each given one way only."""
    problems = []
    for name in secrets:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
            problems.append(f"{name!r} is not a variable name (letters, digits and '_', not first a digit)")
        elif name in env:
            problems.append(f"{name} is in env too: give it one way, from the keychain (secrets) or env")
    if len(set(secrets)) != len(secrets):
        problems.append("a name is listed twice")
    if problems:
        raise ValueError("secrets: " + "; ".join(problems))


class _McpServer(_Server):
    confirm: list[str] = Field(default=[], description="tools mcpx asks the person about before it forwards a call "
                               "to them, by name or glob (delete_*); beside elicit.confirmDestructive")


class StdioServer(_McpServer):
    command: str
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    secrets: list[str] = Field(default=[], description="variables the server's process gets from the OS keychain "
                               "(docs/secrets.md): a value the keychain lacks is asked of the person, once")

    @model_validator(mode="after")
    def _secret_names(self) -> StdioServer:
        _secret_names(self.secrets, self.env)
        return self

    @property
    def kind(self) -> str:
        return "stdio"

    @property
    def shown(self) -> str:
        """The command line as mcpx shows it anywhere (logs, errors, status): secret-looking arguments masked."""
        return shown_command([self.command, *self.args])


class HttpServer(_McpServer):
    url: str
    headers: dict[str, str] = {}

    @property
    def kind(self) -> str:
        return "http"

    @property
    def shown(self) -> str:
        return shown_url(self.url)

    @model_validator(mode="after")
    def _http_url(self) -> HttpServer:
        if not re.match(r"^https?://", self.url):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        return self


HTTP_METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE", "TRACE")
SAFE_METHODS = ("GET", "HEAD")


def _methods(value: Any, key: str) -> list[str]:
    """["GET", "post"], "all" or ["all"]: the HTTP methods, upper-case, each known."""
    if value == "all" or value == ["all"]:
        return list(HTTP_METHODS)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'{key} is a list of HTTP methods (["GET", "POST"]) or "all"')
    unknown = [v for v in value if v.upper() not in HTTP_METHODS]
    if unknown:
        raise ValueError(f"{key}: {', '.join(map(repr, unknown))} is not an HTTP method (known: "
                         f"{', '.join(HTTP_METHODS)}, or \"all\")")
    return [v.upper() for v in value]


class OperationFilter(_Model):
    include: list[str] = Field(default=[], description="only these operations: operationIds, tool names or tags")
    exclude: list[str] = Field(default=[], description="never these: operationIds, tool names or tags")


class OpenApiServer(_Server):
    """A REST service described by an OpenAPI document: each allowed operation is a tool (docs/services.md)."""

    openapi: str = Field(description="the OpenAPI 3.0 or 3.1 document (JSON or YAML): a path (relative to the "
                         "daemon's directory) or an http(s) URL")
    base_url: str | None = Field(default=None, description="where requests go; by default the document's first "
                                 "server")
    methods: list[str] = Field(default=list(SAFE_METHODS), description='the methods whose operations are tools: '
                               'by default GET and HEAD only (read-only); "all" for every one')
    confirm: list[str] | None = Field(default=None, description="the methods mcpx asks the person about before it "
                                      "sends them, each request shown exactly; by default every allowed method but "
                                      "GET and HEAD")
    operations: OperationFilter = OperationFilter()
    headers: dict[str, str] = Field(default={}, description="sent with every request; ${NAME} is one of secrets, "
                                    "or else the daemon's variable NAME, and such a header is never shown")
    secrets: list[str] = Field(default=[], description="names from the OS keychain a header's ${NAME} may use "
                               "(docs/secrets.md): a value the keychain lacks is asked of the person, once")

    @model_validator(mode="before")
    @classmethod
    def _method_lists(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("methods", "confirm"):
                if key in data and data[key] is not None:
                    data[key] = _methods(data[key], key)
        return data

    @model_validator(mode="after")
    def _shape(self) -> OpenApiServer:
        if self.base_url is not None and not re.match(r"^https?://", self.base_url):
            raise ValueError(f"baseUrl must start with http:// or https://, got {shown_url(self.base_url)!r}")
        _secret_names(self.secrets, {})
        return self

    @property
    def confirmed(self) -> list[str]:
        """The methods asked about before they are sent."""
        if self.confirm is not None:
            return self.confirm
        return [m for m in self.methods if m not in SAFE_METHODS]

    @property
    def kind(self) -> str:
        return "openapi"

    @property
    def shown(self) -> str:
        return f"OpenAPI {shown_url(self.openapi)}"


SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class CommandParameter(_Model):
    type: Literal["string", "integer", "number", "boolean"] = "string"
    description: str | None = None
    enum: list[str | int | float] | None = None


class CommandTool(_Model):
    """One command as a tool: argv's {name} slots are its parameters, each filled as (part of) one argument, never
    through a shell."""

    argv: list[str] = Field(min_length=1, description="the program and its arguments; {name} is a parameter")
    description: str | None = None
    parameters: dict[str, CommandParameter] = Field(default={}, description="the slots' types (string by default)")
    cwd: str | None = None
    env: dict[str, str] = Field(default={}, description="added to the small inherited set; ${NAME} passes the "
                                "daemon's variable NAME")
    timeout: Seconds | None = Field(default=None, gt=0, description="the run's limit; by default the server's")
    read_only: bool = Field(default=False, description="true: runs without asking; otherwise each run is confirmed")

    @property
    def slots(self) -> list[str]:
        return list(dict.fromkeys(m.group(1) for word in self.argv for m in SLOT.finditer(word)))

    @model_validator(mode="after")
    def _slots_declared(self) -> CommandTool:
        if SLOT.search(self.argv[0]):
            raise ValueError(f"argv[0] is the program and cannot be a parameter: {self.argv[0]!r}")
        unused = sorted(set(self.parameters) - set(self.slots))
        if unused:
            raise ValueError(f"parameters {', '.join(map(repr, unused))} appear in no {{slot}} of argv")
        return self


class CommandsServer(_Server):
    """Commands as tools (docs/services.md)."""

    commands: dict[str, CommandTool] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> CommandsServer:
        for name in self.commands:
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", name):
                raise ValueError(f"commands: {name!r} is not a tool name (letters, digits, '_', '-', '.')")
        return self

    @property
    def kind(self) -> str:
        return "commands"

    @property
    def shown(self) -> str:
        return "commands " + ", ".join(sorted(self.commands))


def _server_shape(value: Any) -> str:
    """Which kind an entry is by its telling key (openapi, commands, url; else stdio): errors then speak of the shape
    that was meant."""
    if isinstance(value, dict):
        for key, tag in (("openapi", "OpenApiServer"), ("commands", "CommandsServer"), ("url", "http")):
            if key in value:
                return tag
        return "stdio"
    if isinstance(value, (OpenApiServer, CommandsServer)):
        return type(value).__name__
    return "http" if isinstance(value, HttpServer) else "stdio"


# an MCP server: what the pool of connections starts and talks to
McpServerConfig = Annotated[
    Annotated[StdioServer, Tag("stdio")] | Annotated[HttpServer, Tag("http")], Discriminator(_server_shape)]
# a service mcpx itself speaks to on the tools' behalf (mcpx/services/)
ServiceConfig = OpenApiServer | CommandsServer
# any entry of `servers`, of every kind of upstream (upstream/kind.py)
ServerConfig = Annotated[
    Annotated[StdioServer, Tag("stdio")] | Annotated[HttpServer, Tag("http")]
    | Annotated[OpenApiServer, Tag("OpenApiServer")] | Annotated[CommandsServer, Tag("CommandsServer")],
    Discriminator(_server_shape)]


def _normalise_server(name: str, entry: Any) -> Any:
    """Accept mcpx's own shape, the common `mcpServers` shape and opencode's local/remote entries."""
    if not isinstance(entry, dict):
        return entry
    kind = entry.get("type")
    if kind == "local":
        command = entry.get("command")
        out = {k: v for k, v in entry.items() if k not in ("type", "command", "environment", "timeout")}
        if isinstance(command, list) and command:
            out["command"], out["args"] = command[0], list(command[1:])
        elif command is not None:
            out["command"] = command
        if "environment" in entry:
            out["env"] = entry["environment"]
        if "timeout" in entry:  # opencode counts milliseconds
            out["timeout"] = float(entry["timeout"]) / 1000.0
        return out
    if kind in ("remote", "http", "streamable-http", "streamableHttp", "sse"):
        out = {k: v for k, v in entry.items() if k not in ("type", "timeout")}
        if "timeout" in entry:
            out["timeout"] = float(entry["timeout"]) / 1000.0 if kind == "remote" else entry["timeout"]
        return out
    if kind == "stdio":
        return {k: v for k, v in entry.items() if k != "type"}
    return entry


class NotifyTarget(_Model):
    """Where news of a question goes as it opens (the web inbox's notifications): exactly one of webhook, ntfy and
    desktop, each optionally only for some audiences, one server, one session."""

    webhook: str | None = Field(default=None, description="an http(s) URL: a JSON POST per question")
    ntfy: str | None = Field(default=None, description="an ntfy topic's URL: ntfy's publish format, the link as its "
                             "click action")
    desktop: bool | None = Field(default=None, description="true: this machine's desktop notification")
    secret: str | None = Field(default=None, description="a webhook's signing key, a value or ${NAME} (the daemon's "
                               "environment): each POST carries X-Mcpx-Signature: sha256=<hex HMAC-SHA256 of the body>")
    audience: list[Audience] | None = None
    server: str | None = None
    session: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _audience_list(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("audience"), str):
            return {**data, "audience": [data["audience"]]}
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> NotifyTarget:
        kinds = [k for k in ("webhook", "ntfy") if getattr(self, k) is not None] + (["desktop"] if self.desktop else [])
        if len(kinds) != 1:
            raise ValueError('a notify target is exactly one of {"webhook": URL}, {"ntfy": URL}, {"desktop": true}'
                             + (f" (this one has {', '.join(kinds)})" if kinds else ""))
        url = self.webhook or self.ntfy
        if url is not None and not re.match(r"https?://[^/\s]+", url):
            raise ValueError(f"{kinds[0]}: {shown_url(url)!r} is not an http(s) URL")
        if self.secret is not None:
            if self.webhook is None:
                raise ValueError("secret signs a webhook's POSTs: it goes only with webhook")
            if not self.secret or ("${" in self.secret and not _ENV_REF.fullmatch(self.secret)):
                raise ValueError("secret must be a non-empty value, or ${NAME} for the daemon's variable NAME")
        return self

    def signing_key(self, environ: Mapping[str, str] = os.environ) -> bytes | None:
        """The webhook's signing key as it is now (a `${NAME}` read at each send, so a rotated variable needs only a
        restart of nothing but the daemon); None without a secret. A `${NAME}` that is not set is an error: a POST
        is never sent unsigned when a signature was asked for."""
        if self.secret is None:
            return None
        ref = _ENV_REF.fullmatch(self.secret)
        if ref is None:
            return self.secret.encode()
        value = environ.get(ref.group(1))
        if not value:
            raise ValueError(f"the webhook's secret ${{{ref.group(1)}}} is not set in the daemon's environment")
        return value.encode()

    @property
    def kind(self) -> str:
        return "webhook" if self.webhook else "ntfy" if self.ntfy else "desktop"

    @property
    def shown(self) -> str:
        """The target as logs and `mcpx status` show it: its scheme and host. A path or query is often the secret
        (an ntfy topic, a chat webhook's token), so neither is shown."""
        url = self.webhook or self.ntfy
        if not url:
            return self.kind
        scheme, _, rest = url.partition("://")
        host = rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
        return f"{self.kind} {scheme}://{host}/…"

    def wants(self, audience: str, server: str, session: str) -> bool:
        return ((self.audience is None or audience in self.audience) and self.server in (None, server)
                and self.session in (None, session))


PERSON = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class Person(_Model):
    """Someone who may be asked by name (an approver): where their notifications go, and which user@host they
    are on a team's daemons (so a question their daemon raises never counts their own approval)."""

    notify: list[NotifyTarget] = Field(default=[], description="where this person's notifications go")
    users: list[str] = Field(default=[], description="user@host of this person's daemons on a shared store")

    @model_validator(mode="after")
    def _users_shape(self) -> Person:
        for user in self.users:
            if not re.fullmatch(r"[^@\s]+@[^@\s]+", user):
                raise ValueError(f"users: {user!r} is not user@host")
        return self


class EscalateStep(_Model):
    after: Seconds = Field(description="how long after the question opened")
    to: list[str] = Field(min_length=1, description="people notified then, who become approvers")


class ApprovalRule(_Model):
    """Questions that need named people's approval (docs/approvals.md): `need` distinct accepts of `approvers`."""

    id: str | None = None
    match: RuleMatch
    approvers: list[str] = Field(min_length=1)
    need: int = Field(default=1, ge=1, le=100)
    remind: Seconds | None = Field(default=None, description="approvers who have not answered are notified again "
                                   "this often")
    escalate: list[EscalateStep] = []

    @model_validator(mode="after")
    def _reachable(self) -> ApprovalRule:
        if self.match.is_empty():
            raise ValueError("has an empty match; an approval rule must name at least one of server, tool, field, "
                             "mode, message or audience")
        if self.remind is not None and self.remind <= 0:
            raise ValueError("remind must be more than 0")
        if len(set(self.approvers)) != len(self.approvers):
            raise ValueError("approvers names someone twice")
        everyone = set(self.approvers) | {p for step in self.escalate for p in step.to}
        if self.need > len(everyone):
            raise ValueError(f"need is {self.need}, but only {len(everyone)} people could approve")
        return self


class ElicitSettings(_Model):
    ttl: Seconds = 120.0
    mode: ElicitMode = "ask"
    rules: list[Rule] = []
    confirm_destructive: bool = False
    ask_timeout: Seconds = 45.0
    grace: Seconds = Field(default=2.0, description="how long a tool call waits for an answer before returning early")
    max_rounds: int = Field(default=8, ge=1, le=100, description="input_required rounds before a call gives up")
    notify: list[NotifyTarget] = Field(default=[], description="where news of each question goes as it opens")
    approvals: list[ApprovalRule] = Field(default=[], description="questions that need named people's approval, "
                                          "N of M (docs/approvals.md)")

    @model_validator(mode="after")
    def _rule_ids(self) -> ElicitSettings:
        for index, approval in enumerate(self.approvals):
            if approval.id is None:
                approval.id = f"approval-{index}"
        seen: set[str] = set()
        for index, rule in enumerate(self.rules):
            if rule.id is None:
                rule.id = f"rule-{index}"
            if rule.id in seen:
                raise ValueError(f"rules[{index}]: id {rule.id!r} is used twice")
            seen.add(rule.id)
        return self


class PluginSettings(_Model):
    # unset: the plugin picks by what opencode runs (ask in a TUI or app, notify under `opencode run`)
    elicit: PluginLevel | None = None


class Config(_Model):
    servers: dict[str, ServerConfig] = {}
    elicit: ElicitSettings = ElicitSettings()
    plugin: PluginSettings = PluginSettings()
    people: dict[str, Person] = Field(default={}, description="people asked by name: approvers (docs/approvals.md)")
    store: str | None = Field(default=None, description="postgresql://USER@HOST:PORT/DB: the database a team's "
                              "daemons share (docs/teams.md); unset, the SQLite file in the state directory. "
                              "MCPX_STORE wins. Read at start-up.")
    store_lease: Seconds = Field(default=30.0, gt=0, le=3600, description="a shared store: how long a daemon may "
                                 "miss its heartbeat before the others count it gone")
    schema_: str | None = Field(default=None, alias="$schema")

    @model_validator(mode="after")
    def _store_is_a_url(self) -> Config:
        if self.store is not None and not self.store.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"store must be a postgresql://USER@HOST:PORT/DB url, not {shown_url(self.store)!r} "
                             "(leave it out for the SQLite file in the state directory)")
        return self

    @model_validator(mode="after")
    def _people_known(self) -> Config:
        for name in self.people:
            if not PERSON.fullmatch(name):
                raise ValueError(f"people: {name!r} is not a name mcpx takes (letters, digits, '_' or '-', "
                                 "at most 64, starting with a letter or digit)")
        for index, rule in enumerate(self.elicit.approvals):
            named = [*rule.approvers, *(p for step in rule.escalate for p in step.to)]
            unknown = sorted({p for p in named if p not in self.people})
            if unknown:
                raise ValueError(f"elicit.approvals[{index}] names {', '.join(map(repr, unknown))}, not in people "
                                 f"(known: {', '.join(sorted(self.people)) or 'nobody'})")
        return self

    def person_of(self, user: str, host: str) -> str | None:
        """The person whose `users` names user@host (a team daemon's own), if any."""
        for name, person in self.people.items():
            if f"{user}@{host}" in person.users:
                return name
        return None

    @model_validator(mode="before")
    @classmethod
    def _merge_server_shapes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        servers: dict[str, Any] = {}
        for key in ("mcpServers", "mcp", "servers"):
            block = data.pop(key, None)
            if isinstance(block, dict):
                servers.update(block)
            elif block is not None:
                raise ValueError(f"{key} must be an object mapping server names to entries")
        for name in servers:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
                raise ValueError(
                    f"server name {name!r}: use letters, digits, '_', '-' or '.' (tools are exposed as NAME_TOOL)"
                )
        data["servers"] = {
            name: _normalise_server(name, entry)
            for name, entry in servers.items()
            if not (isinstance(entry, dict) and entry.get("enabled") is False)
        }
        return data

    def ttl_for(self, server: str | None) -> float:
        entry = self.servers.get(server or "")
        if entry is not None and entry.elicit.ttl is not None:
            return entry.elicit.ttl
        return self.elicit.ttl


@dataclass(frozen=True)
class Problem:
    path: str
    field: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.message}" if self.field else f"{self.path}: {self.message}"


class ConfigError(McpxError):
    """A config that does not hold: every problem found, each naming its file and field.

    `path`, `field` and `problem` are the first one's."""

    def __init__(self, path: str, field: str | None, message: str, more: list[Problem] | None = None) -> None:
        self.path, self.field, self.problem = path, field, message
        self.problems = [Problem(path, field, message), *(more or [])]
        if len(self.problems) == 1:
            super().__init__(str(self.problems[0]))
        else:
            super().__init__(f"{len(self.problems)} problems:\n  " + "\n  ".join(map(str, self.problems)))

    @classmethod
    def of(cls, problems: list[Problem]) -> ConfigError:
        first, *rest = problems
        return cls(first.path, first.field, first.message, rest)


DEMO = "demo"


def demo_server() -> dict[str, Any]:
    """The bundled demo server's entry. Its questions wait an hour, not elicit.ttl's two minutes: the person
    answering the first one may still be reading the README."""
    # PYTHONPATH: servers inherit no PYTHONPATH, and mcpx may be run from a checkout rather than installed
    here = str(Path(__file__).resolve().parent.parent)
    return {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"], "env": {"PYTHONPATH": here},
            "elicit": {"ttl": "1h"}}


def embedded_default() -> dict[str, Any]:
    """What mcpx runs with when no config file exists: SQLite state and the bundled demo server."""
    return {"servers": {DEMO: demo_server()}}


USER_CONFIG = Path("~/.config/mcpx/config.json")
PROJECT_CONFIG = Path(".mcpx/config.json")


def _user_config() -> Path:
    return Path(os.environ.get("MCPX_USER_CONFIG", str(USER_CONFIG))).expanduser()


def config_places(cwd: Path) -> list[Path]:
    """Every file that is a source of the config, or would be one if it were created: where to watch."""
    if explicit := os.environ.get("MCPX_CONFIG"):
        return [Path(explicit).expanduser()]
    return [_user_config(), *(directory / PROJECT_CONFIG for directory in [cwd, *cwd.parents])]


def config_sources(cwd: Path) -> list[Path]:
    """The files that make up the config, lowest precedence first."""
    if explicit := os.environ.get("MCPX_CONFIG"):
        return [Path(explicit).expanduser()]
    sources: list[Path] = []
    user = _user_config()
    if user.is_file():
        sources.append(user)
    for directory in [cwd, *cwd.parents]:
        candidate = directory / PROJECT_CONFIG
        if candidate.is_file():
            if candidate.resolve() != user.resolve():
                sources.append(candidate)
            break
    return sources


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _field_of(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("StdioServer", "HttpServer", "OpenApiServer", "CommandsServer", "RuleWhen", "stdio", "http"):
            continue  # pydantic names the union arm; people name fields
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


EMPTY = ('the file is empty (or only comments): write a JSON object, e.g. {"servers": {"NAME": {"command": "CMD", '
         '"args": ["ARG"]}}} ({} is a config with no servers), or remove the file')


def read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), None, "file not found") from None
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror}") from None
    try:
        data = jsonc.loads(text)
    except (ValueError, json.JSONDecodeError) as exc:
        if isinstance(exc, json.JSONDecodeError) and not exc.doc.strip():  # exc.doc: the text less its comments
            raise ConfigError(str(path), None, EMPTY) from None
        raise ConfigError(str(path), None, f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), None, "the top level must be a JSON object")
    return data


def validate(data: dict[str, Any], origin: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError.of(_problems(exc, data, origin)) from None


NO_SHAPE = ("needs one of 'command' (an MCP server over stdio), 'url' (over HTTP), 'openapi' (a REST service) or "
            "'commands' (commands as tools)")
SHAPE_KEYS = ("command", "url", "openapi", "commands")


def _problems(exc: ValidationError, data: dict[str, Any], origin: str) -> list[Problem]:
    """Every problem pydantic found, in the words of the config's own fields, each once."""
    out: list[Problem] = []
    misspelt: set[str] = set()  # servers whose missing command or url is a key spelt wrong, said so already
    for err in exc.errors():
        message = err["msg"].removeprefix("Value error, ")
        loc = err["loc"]
        fld = _field_of(loc)
        shapeless = None
        if loc[:1] == ("servers",) and len(loc) > 1 and err["type"] in ("missing", "extra_forbidden"):
            name = str(loc[1])  # a server's name may hold a '.'
            entry = data_servers(data).get(name)
            if isinstance(entry, dict) and not any(k in entry for k in SHAPE_KEYS):
                shapeless = name
        if err["type"] == "extra_forbidden":
            # the keys of the object the key is in: of either shape, for a server that is neither yet
            shapes = ("stdio", "http", "OpenApiServer", "CommandsServer")
            known = [k for shape in shapes for k in _keys_at(("servers", "", shape))] if shapeless \
                else _keys_at(loc[:-1])
            message, guess = unknown_key(str(loc[-1]), known)
            if shapeless and guess in SHAPE_KEYS:
                misspelt.add(shapeless)
        elif shapeless:
            # say which shapes exist, rather than each field one of them lacks
            fld, message = f"servers.{shapeless}", NO_SHAPE
        problem = Problem(origin, fld or None, message)
        if problem not in out:
            out.append(problem)
    return [p for p in out if not (p.message == NO_SHAPE and p.field in {f"servers.{n}" for n in misspelt})]


def unknown_key(key: str, known: list[str]) -> tuple[str, str | None]:
    """What to say of a key no field has, and the known key it is most likely a misspelling of (or None)."""
    by_lower = {k.lower(): k for k in sorted(set(known))}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {by_lower[close[0]]!r}?", by_lower[close[0]]
    return "unknown key" + (" (the keys here: " + ", ".join(by_lower.values()) + ")" if known else ""), None


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys, as the file spells them, of the object at `loc` (a pydantic error's place in the config)."""
    shape: Any = Config
    for item in loc:
        shape = _inside(shape, item)
    if not (isinstance(shape, type) and issubclass(shape, BaseModel)):
        return []
    keys = [info.alias or name for name, info in shape.model_fields.items()]
    return [*keys, "mcpServers", "mcp"] if shape is Config else keys  # Config's other names for servers


def _inside(shape: Any, item: int | str) -> Any:
    """The type of what is at `item` in a value of type `shape`; None when that cannot be told."""
    while get_origin(shape) is Annotated:
        shape = get_args(shape)[0]
    if get_origin(shape) in (Union, UnionType):
        arms = [arm for arm in get_args(shape) if arm is not type(None)]
        for arm in arms:  # a tagged union names its arm in the error's place
            tags = [m.tag for m in getattr(arm, "__metadata__", ()) if isinstance(m, Tag)]
            inner = get_args(arm)[0] if get_origin(arm) is Annotated else arm
            if item in tags or item == getattr(inner, "__name__", None):
                return inner
        if len(arms) != 1:
            return None
        return _inside(arms[0], item)  # X | None: the place is X's
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        for name, info in shape.model_fields.items():
            if item in (info.alias, name):
                return info.annotation
        return None
    if get_origin(shape) is list and isinstance(item, int):
        return get_args(shape)[0]
    if get_origin(shape) is dict:
        return get_args(shape)[1]
    return None


def data_servers(data: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for key in ("mcpServers", "mcp", "servers"):
        if isinstance(data.get(key), dict):
            merged.update(data[key])
    return merged


def config_warnings(config: Config, origin: str) -> list[Problem]:
    """What holds but does not do all it says: `mcpx config check` tells it, the daemon logs it once."""
    out: list[Problem] = []
    for name, entry in config.servers.items():
        if entry.timeout < START_FLOOR:
            out.append(Problem(origin, f"servers.{name}.timeout", f"{entry.timeout:g}s is under the {START_FLOOR:g}s "
                               f"minimum for a start: its calls time out after {entry.timeout:g}s, but its start "
                               f"(process and handshake) may take {START_FLOOR:g}s"))
    for index, rule in enumerate(config.elicit.approvals):
        if rule.match.mode != "url" and rule.match.method is None:  # a method: only mcpx's yes/no confirmations
            out.append(Problem(origin, f"elicit.approvals[{index}]", "approvals apply to yes/no confirmations (a "
                               "form with no fields or one yes/no) and url consent: a form question with other "
                               "fields that this rule matches keeps the one-answer rule"))
    return out


@dataclass
class LoadedConfig:
    config: Config
    sources: list[Path]
    cwd: Path
    raw: dict[str, Any] = field(default_factory=dict)
    stamps: list[tuple[int, int, int] | None] = field(default_factory=list)  # the files as they were when read
    fallbacks: dict[str, str] = field(default_factory=dict, repr=False)

    def fallback_session(self, cwd: str | Path | None = None) -> str:
        """Which config, which working directory: the session of a caller that names none.

        Built from the config's file paths (not its content), so editing the config does not
        orphan the questions already asked.
        """
        key = str(cwd or self.cwd)
        if key not in self.fallbacks:
            ident = json.dumps([[str(p) for p in self.sources], key])
            self.fallbacks[key] = "fb-" + hashlib.sha256(ident.encode()).hexdigest()[:16]
        return self.fallbacks[key]

    @property
    def origin(self) -> str:
        return " + ".join(str(p) for p in self.sources) if self.sources else "(embedded default)"

    @property
    def directory(self) -> Path:
        """Where a relative path in an entry is read from: the config file's directory (the nearest file's when
        several make the config; the working directory for the embedded default)."""
        return self.sources[-1].parent if self.sources else self.cwd


def load_config(cwd: Path | None = None) -> LoadedConfig:
    cwd = (cwd or Path.cwd()).resolve()
    sources = config_sources(cwd)
    if os.environ.get("MCPX_CONFIG") and not sources[0].exists():
        raise ConfigError(str(sources[0]), None, "file not found (named by MCPX_CONFIG)")
    if not sources:
        raw = embedded_default()
        return LoadedConfig(validate(raw, "(embedded default)"), [], cwd, raw)
    stamps = _stamps(sources)
    merged: dict[str, Any] = {}
    problems: list[Problem] = []
    for path in sources:
        # each file alone first, so a problem names the file it is in; every file's problems are told
        try:
            data = read_file(path)
            validate(data, str(path))
        except ConfigError as exc:
            problems += exc.problems
            continue
        normalised = dict(data)
        servers = data_servers(data)
        for key in ("mcpServers", "mcp"):
            normalised.pop(key, None)
        if servers:
            normalised["servers"] = servers
        merged = _deep_merge(merged, normalised)
    if problems:
        raise ConfigError.of(problems)
    config = validate(merged, " + ".join(map(str, sources)))
    return LoadedConfig(config, sources, cwd, merged, stamps)


def _stamps(paths: list[Path]) -> list[tuple[int, int, int] | None]:
    out: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = path.stat()
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return out


def _watch_points(places: list[Path]) -> tuple[list[str], set[str]]:
    """The directories to watch (each place's nearest existing one, not recursively) and the paths in them that
    matter: the places themselves, and the missing directories on the way to them."""
    directories: set[str] = set()
    names = {str(p) for p in places}
    for place in places:
        directory = place.parent
        while not directory.is_dir() and directory != directory.parent:
            names.add(str(directory))
            directory = directory.parent
        directories.add(str(directory))
    return sorted(directories), names


async def watch_config(loaded: LoadedConfig, recheck: float = 2.0) -> AsyncIterator[LoadedConfig | ConfigError]:
    """Yield a freshly loaded config (or the error loading it) each time a source changes, or a config file
    appears where one may be (config_places): a daemon started on the embedded default takes up a
    ~/.config/mcpx/config.json written later, and goes back to the default when it goes.

    watchfiles wakes us at once; a stat check every `recheck` seconds backs it up, because inotify
    can miss a change made while the watch is being set up, or on filesystems that do not report
    (and a place whose directory does not exist yet is watched from the nearest one that does).
    """
    import asyncio

    import watchfiles

    places = config_places(loaded.cwd)
    # the sources as they were loaded; the other places as they are now (absent, or shadowed by a nearer file)
    at_load = dict(zip(map(str, loaded.sources), loaded.stamps, strict=False))
    stamps = [at_load.get(str(p), now) for p, now in zip(places, _stamps(places), strict=True)]
    nudged: asyncio.Queue[None] = asyncio.Queue()

    async def notify(directories: list[str], names: set[str]) -> None:
        async for _changes in watchfiles.awatch(*directories, debounce=200, step=50, recursive=False,
                                                watch_filter=lambda _c, path: path in names):
            nudged.put_nowait(None)

    points = _watch_points(places)
    listener = asyncio.create_task(notify(*points))
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(nudged.get(), recheck)
            if (now_points := _watch_points(places)) != points:  # a directory on the way to a place appeared
                listener.cancel()
                points = now_points
                listener = asyncio.create_task(notify(*points))
            now = _stamps(places)
            if now == stamps:
                continue
            stamps = now  # taken before the load: a change during it is seen at the next check
            try:
                yield load_config(loaded.cwd)
            except ConfigError as exc:
                yield exc
    finally:
        listener.cancel()
