"""The config's models: servers, rules, people, approvals, notifications, the elicit and plugin settings (SPEC
section 2)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator
from pydantic.alias_generators import to_camel

from mcpx.config.durations import parse_duration
from mcpx.shared.masking import shown_command, shown_url

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


ROOTS_CALLER: Literal["caller"] = "caller"
Roots = Literal["caller", False] | list[str]
ROOTS_SHAPES = ('"caller" (the calling client\'s working directory, the default), false (none: mcpx does not declare '
                'roots to the server, which keeps its own directories) or a list of absolute directories, '
                'e.g. ["~/notes"]')


def _roots_value(value: Any) -> Any:
    """`roots` as written, or a ValueError naming the three shapes it may take."""
    if value == ROOTS_CALLER or value is False:
        return value
    if isinstance(value, list) and value and all(isinstance(p, str) and p for p in value):
        relative = [p for p in value if not Path(p).expanduser().is_absolute()]
        if relative:
            raise ValueError(f"{', '.join(map(repr, relative))} is not an absolute directory (a fixed root is "
                             "the same for every caller, so it cannot be relative to one)")
        return value
    raise ValueError(f"must be {ROOTS_SHAPES}; got {json.dumps(value)}")


class _Server(_Model):
    roots: Annotated[Roots, BeforeValidator(_roots_value)] = Field(
        default=ROOTS_CALLER, description="what the server is told of roots: \"caller\", false or a fixed list")
    timeout: Seconds = Field(default=60.0, description="a call's own timeout; paused while a question waits. "
                             "Also how long the server's start may take (never less than 10 s)")
    idle_timeout: Seconds = Field(default=600.0, gt=0, description="an instance of the server with no call for this "
                                 "long is stopped; the next call starts it again")
    elicit: ServerElicit = ServerElicit()
    enabled: bool = True
    confirm_presence: bool = Field(default=False, description="mcpx's own confirmation of a call to it (its confirm, "
                                   "elicit.confirmDestructive, a service's confirmed requests) is accepted only with "
                                   "the person's passkey, signing the exact request (docs/presence.md)")


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


class ServerAuth(_Model):
    """How mcpx logs in to an HTTP server (docs/auth.md): its client at the authorization server, when the server
    offers no dynamic registration, and the scopes to ask for beyond what the server's challenge names."""

    client_id: str | None = Field(default=None, description="a client registered at the authorization server for "
                                  "mcpx (its redirect URI: the daemon's http://127.0.0.1:PORT/oauth/callback)")
    client_secret: str | None = Field(default=None, description="the NAME of the client's secret in the OS keychain "
                                      "(`mcpx secrets set SERVER NAME`), never the secret itself",
                                      pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    scopes: list[str] = Field(default=[], description="the scopes to ask for; by default the server's challenge's, "
                              "else all it lists")

    @model_validator(mode="after")
    def _secret_needs_client(self) -> ServerAuth:
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("auth: clientSecret needs clientId (the client the secret is of)")
        return self


class HttpServer(_McpServer):
    url: str
    headers: dict[str, str] = {}
    auth: ServerAuth = ServerAuth()

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
    auth: ServerAuth | None = Field(default=None, description="the service is behind a login mcpx makes for the "
                                    "person (docs/auth.md): each request carries its bearer token; {} to discover "
                                    "everything")

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
        if self.auth is not None and any(k.lower() == "authorization" for k in self.headers):
            raise ValueError("auth and an Authorization header: give one (auth: mcpx's login puts its bearer token "
                             "in that header)")
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
    secrets: list[str] = Field(default=[], description="variables every command's process gets from the OS keychain "
                               "(docs/secrets.md), which a command's env may also use as ${NAME}: a value the "
                               "keychain lacks is asked of the person, once")

    @model_validator(mode="after")
    def _names(self) -> CommandsServer:
        for name in self.commands:
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", name):
                raise ValueError(f"commands: {name!r} is not a tool name (letters, digits, '_', '-', '.')")
        for name, command in self.commands.items():
            if both := sorted(set(self.secrets) & set(command.env)):
                raise ValueError(f"commands.{name}.env: {', '.join(both)} is one of secrets too: give it one way, "
                                 "from the keychain (secrets) or env")
        _secret_names(self.secrets, {})
        return self

    @property
    def kind(self) -> str:
        return "commands"

    @property
    def shown(self) -> str:
        return "commands " + ", ".join(sorted(self.commands))


def secret_names(entry: ServerConfig | None) -> list[str]:
    """The names a server gets from the keychain: a stdio server's and a commands entry's `secrets` (their processes'
    variables) and a REST service's (its headers' ${NAME}s); an MCP server over HTTP has none. The one
    rule of which secrets a server has: the daemon reads and asks for these, doctor and `mcpx secrets` list them."""
    return list(entry.secrets) if isinstance(entry, (StdioServer, OpenApiServer, CommandsServer)) else []


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
    presence: bool = Field(default=False, description="each approver signs with their own passkey "
                           "(docs/presence.md)")

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


class PresenceRule(_Model):
    """Questions accepted only with a person's passkey (docs/presence.md), matched as `elicit.rules` are."""

    match: RuleMatch


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
    presence: list[PresenceRule] = Field(default=[], description="questions accepted only with a person's passkey "
                                         "(docs/presence.md)")

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


def data_servers(data: dict[str, Any]) -> dict[str, Any]:
    """The servers of a config file as written, under any of the keys hosts use for them."""
    merged: dict[str, Any] = {}
    for key in ("mcpServers", "mcp", "servers"):
        if isinstance(data.get(key), dict):
            merged.update(data[key])
    return merged
