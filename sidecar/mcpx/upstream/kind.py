"""Kinds of upstream: what the gateway needs of a way to reach tools (an MCP server, an OpenAPI service, a command
runner), and what a call offers the kind that runs it. The gateway, the call, the broker and every door use
these names and nothing of a kind's own; a new kind plugs in here without touching any of them.

How a kind plugs in
-------------------
1. **Its config entry.** A server in the config is one entry of `config.ServerConfig`, a union told apart by its
   shape (`config._server_shape`: `url` is an HTTP MCP server, `command` a stdio one). A new kind adds its pydantic
   model to that union with its own tag and shape rule (a key no other shape has). The kind names the models it
   serves in `entries`; `Kinds.of(entry)` picks, for an entry, the first kind whose `entries` holds its class.
   Everything an entry has in common (`timeout`, `secrets`, `idleTimeout`, ...) is the config's `_Server`;
   the secrets an entry names are in the keychain before the gateway asks the kind for anything
   (`upstream/secrets.py`), so a kind reads them (`secrets.values`) and never asks for them itself.
2. **Its construction.** A kind is built once per daemon with an `UpstreamHost` (below: the config's entries of
   its kind, and how to say a server's tools changed), which is the gateway: so the gateway is handed a
   `KindFactory` per kind, which it calls with itself (`Gateway(broker, config, kinds=[lambda host: MyKind(...,
   host)])`, where the daemon builds its parts: `daemon/server.py`). It keeps
   whatever it needs per server (processes, HTTP clients, parsed documents) and ends all of it in `stop`.
   Import everything a kind needs from this module (`CallError`, `CallRequest`, ...): these names stay put
   while the modules behind them move.
3. **Listing tools.** `tools(server)` returns the server's tools as MCP `Tool` objects (`name`, `description`,
   `inputSchema`, and `annotations` when known: `readOnlyHint`/`destructiveHint` decide whether mcpx's own
   `elicit.confirmDestructive` confirmation runs before a call). The gateway caches them per server until the
   kind calls `UpstreamHost.tools_changed(server)` or the config changes; a kind need not cache.
4. **Running a call.** `call(scope)` runs one call to its end and returns an MCP `CallToolResult` (`content`,
   optionally `structuredContent`, `isError`). The scope (`CallScope`) is the call's context: the request
   (`scope.request`: server, tool, arguments, the caller's session and directory), its deadline, and the only
   ways a kind may reach a person or the store:
   - `await scope.ask(OwnQuestion(...))`: a question of mcpx's own, in the call. The call shows as
     `input-required` with the question open (every door sees it: the host, the CLI, REST, the inbox, a phone
     link), the call's deadline stands still, and the coroutine returns the person's `Answer` once given
     (accept with its content, decline, cancel, or cancel by expiry after `ttl`). It raises `CallError` (the call
     ends, naming the question) when the question ends with no answer allowed (policy `error`, the call ending).
   - `await scope.confirm(summary, exact)`: a confirmation bound to one exact request. `exact` is what the kind
     is about to send, as a JSON document (an HTTP method, URL, headers without credentials, body; a command's
     argv): the person is shown it verbatim, and the question carries its digest (`digest(exact)`). It returns
     only on an explicit yes to that document; anything else raises `CallError` saying who refused and how. The
     kind must then send exactly `exact`: a changed request needs a new confirmation, one per write.
   - `scope.progress(progress, total, message)`: a report for whoever follows the call (relayed to an MCP client
     that asked for progress; kept on the call for `mcpx call` and `GET /v1/tasks/ID`).
   - `scope.secret(value)`: a credential the kind handed its upstream. It is never stored, and is scrubbed from
     the call's result and error wherever they are kept or shown.
   - `await scope.remember(state)`: a JSON document the kind can continue the call from after the daemon
     restarts (an upstream job's id, a retry that was due). It is stored with the call at once; after a restart
     the gateway calls `follow(scope, state)` with the last one remembered, in place of `call`. A kind that
     remembers nothing has its calls fail at a restart with the reason said (nothing can continue them).
   A kind says why a call failed by raising `CallError` with words a person understands (naming the server, the
   tool and what to do); `CallTimeout` when its upstream let the deadline pass. Any other exception is reported
   as mcpx failing the call, with its type.
5. **Cancelling and stopping.** A call is cancelled by cancelling the coroutine running `call` (or `follow`):
   the kind stops its upstream's work where it can (an HTTP request closed, a process signalled) and lets the
   `CancelledError` through. `stop()` ends everything the kind started (called once, as the daemon stops; nothing
   a kind starts may outlive the daemon). `reconfigure()` follows a config reload: instances of entries that
   changed or went are stopped.

The MCP kind (`upstream/mcp_kind.py`) is the one built in: its servers ask their own questions too
(`elicitation/create`, `input_required` rounds, tasks), which it carries to the broker through the concrete call
scope it is handed (the same object, with the MCP-only parts a generic kind does not need).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from mcpx.broker.models import Answer, Moment, WireModel
from mcpx.call.deadline import CallTimeout, PausableDeadline
from mcpx.call.failures import CallError
from mcpx.call.questions import OwnQuestion, digest
from mcpx.call.request import CallRequest
from mcpx.config.models import ServerConfig
from mcpx.mcp.http_client import Authorizer
from mcpx.mcp.protocol import Era
from mcpx.oauth.models import Protected

__all__ = [
    "Authorizer",
    "CallError",
    "CallRequest",
    "CallScope",
    "CallTimeout",
    "InstanceInfo",
    "KindFactory",
    "Kinds",
    "LoginKind",
    "OwnQuestion",
    "PausableDeadline",
    "Protected",
    "Tool",
    "ToolResult",
    "UpstreamHost",
    "UpstreamKind",
    "digest",
]

Tool = dict[str, Any]  # an MCP Tool, as the MCP surface serves it: name, description, inputSchema, annotations
ToolResult = dict[str, Any]  # an MCP CallToolResult: content, structuredContent, isError


class InstanceInfo(WireModel):
    """One running instance of an upstream server, as `mcpx status` shows it."""

    server: str
    pid: int | None = Field(default=None, description="its process (stdio servers)")
    era: Era | None = None
    shared: bool = Field(description="every session uses it (modern era, or a server whose roots are not its "
                         "caller's); else it is one session's own, or (with no session) one that lists the server's "
                         "tools")
    sessions: list[str] = Field(description="the session it belongs to; for a shared one, the sessions calling now")
    calls: int = Field(description="calls on it now")
    idle_seconds: float | None = Field(default=None, description="since its last call ended; absent while busy")
    stops_in: float | None = Field(default=None, description="seconds until it is stopped for being idle")
    spare: bool = Field(default=False, description="an idle instance beside another of its session's (or one that "
                        "only listed tools): it stops after 30 s rather than its server's idleTimeout")
    rss_kib: int | None = Field(default=None, alias="rssKiB",
                                description="resident memory of its process and the processes it started")
    processes: int | None = None
    started_at: Moment


class CallScope(Protocol):
    """What a running call offers the kind that runs it (see the module's docstring, 4)."""

    @property
    def id(self) -> str:
        """The call's id (`tsk-…`): the same at every door and after a restart."""
        ...

    @property
    def request(self) -> CallRequest:
        """What was called, by whom, from where."""
        ...

    @property
    def entry(self) -> ServerConfig:
        """The server's config entry, of one of the kind's `entries`."""
        ...

    @property
    def deadline(self) -> PausableDeadline:
        """The call's deadline (the entry's `timeout`): `await scope.deadline.run(work, what)` bounds the kind's
        work; it stands still while the call waits on a person."""
        ...

    async def ask(self, question: OwnQuestion) -> Answer:
        """Ask the person; the call waits (input-required) until they answer. CallError if no answer may come."""
        ...

    async def confirm(self, summary: str, exact: Mapping[str, Any]) -> None:
        """Returns once the person confirmed exactly `exact`; CallError (who refused, how) otherwise."""
        ...

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress to whoever follows the call."""
        ...

    def secret(self, value: str) -> None:
        """A credential handed to the upstream: never stored, scrubbed from what the call keeps and shows."""
        ...

    async def remember(self, state: Mapping[str, Any]) -> None:
        """What `follow` continues the call from after a restart; stored with the call before this returns."""
        ...


class UpstreamHost(Protocol):
    """What the daemon gives a kind when it builds it."""

    def entries(self) -> Mapping[str, ServerConfig]:
        """The config's servers, read at each use (a reload replaces them whole); a kind looks at its own."""
        ...

    async def tools_changed(self, server: str) -> None:
        """The server's tools changed: the gateway lists them again and tells the MCP clients."""
        ...

    def authorizer(self, server: str, protected: Protected) -> Authorizer:
        """The server's login (oauth/), as the wire knows one: the Authorization header for a request, and what a
        401 means. When it raises `CallError` because the login is missing, the gateway asks the person to log in
        (one url-mode question per server) and runs the call again once they have."""
        ...


@runtime_checkable
class LoginKind(Protocol):
    """A kind some of whose servers are behind a login (services/kinds.py's OpenAPI services with `auth`)."""

    async def protected(self, server: str) -> Protected | None:
        """What the server's login is for, or None when it has none; UpstreamError when that cannot be said (its
        document cannot be read)."""
        ...


class UpstreamKind(Protocol):
    """One kind of upstream, for every server of its kind (see the module's docstring)."""

    name: str  # in one word, as `mcpx status` and the logs say it: "mcp", "openapi", "command"
    entries: tuple[type[BaseModel], ...]  # the config models whose servers it serves

    def start(self) -> None:
        """The daemon is starting (a loop runs): start what runs in the background (an idle reaper)."""
        ...

    async def tools(self, server: str) -> list[Tool]:
        """The server's tools, listed now."""
        ...

    async def call(self, scope: CallScope) -> ToolResult:
        """Run the call to its result."""
        ...

    async def follow(self, scope: CallScope, state: Mapping[str, Any]) -> ToolResult:
        """Continue, after a restart, a call a daemon before this one left with `state` remembered."""
        ...

    async def instances(self) -> list[InstanceInfo]:
        """What runs now on the kind's behalf, for `mcpx status` (a kind that runs nothing between calls: [])."""
        ...

    async def reconfigure(self) -> None:
        """The config was reloaded: stop what belongs to entries that changed or went."""
        ...

    async def stop(self) -> None:
        """End everything the kind started; called once, as the daemon stops."""
        ...


KindFactory = Callable[[UpstreamHost], UpstreamKind]  # how the gateway builds a kind, handing it itself


class Kinds:
    """The daemon's kinds, and which one serves an entry."""

    def __init__(self, kinds: Sequence[UpstreamKind]) -> None:
        self.all = tuple(kinds)

    def of(self, entry: ServerConfig) -> UpstreamKind:
        for kind in self.all:
            if isinstance(entry, kind.entries):
                return kind
        raise LookupError(f"no kind of upstream serves a {type(entry).__name__} entry (kinds: "
                          f"{', '.join(k.name for k in self.all)})")

    async def each(self, what: Callable[[UpstreamKind], Awaitable[Any]]) -> list[Any]:
        """`what` of every kind in turn (stopping, reconfiguring)."""
        return [await what(kind) for kind in self.all]
