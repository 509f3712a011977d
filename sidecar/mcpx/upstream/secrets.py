"""A server's `secrets`: read from the OS keychain as its process starts, asked of the person when missing.

The question is mcpx's own (server `mcpx`, audience human), one password field per missing name, so the broker
stores its answer redacted (broker/credentials.py): the values reach this module, which is the question's asker,
go into the keychain, and nowhere else — not the config, the store, a log, the audit or an event. One question per
server at a time: every call (and every listing) that needs the server while it is open waits on that one.

A call waits on it as on any question its server asks (its task shows it open, so `mcpx call` exits 75 with it,
the host's toast and dialog and the inbox show it). A listing of the server's tools does not wait for a person:
it opens the question, or finds it open, and fails at once naming it; once answered, the server's tools are
listed again (the pool's on_tools_changed), so a host that listed nothing learns of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from mcpx.broker.broker import Broker, Handle
from mcpx.broker.models import Answer, Elicitation, OpenRequest, StoredTask
from mcpx.broker.refusals import QuestionEnded
from mcpx.broker.store import QuestionFilter
from mcpx.config.models import ServerConfig, secret_names
from mcpx.config.source import ConfigSource
from mcpx.shared.upstream_errors import UpstreamError
from mcpx.system import keychain

log = logging.getLogger("mcpx.upstream")

MARK = "mcpx-secrets:"  # + the server: the upstreamId of mcpx's question for a server's secrets


class MissingSecrets(UpstreamError):
    """The keychain lacks a value a server's process needs (or there is no keychain): it is not started."""


async def read(server: str, entry: ServerConfig) -> dict[str, str]:
    """The server's secrets from the keychain, as its process starts; MissingSecrets when one is not there."""
    wanted = secret_names(entry)
    if not wanted:
        return {}
    try:
        found = await asyncio.to_thread(keychain.values, server, wanted)
    except keychain.NoKeychain as exc:
        raise MissingSecrets(f"server {server!r} was not started: {exc}; {keychain.instead(server, wanted)}") from None
    except keychain.KeychainError as exc:
        raise MissingSecrets(f"server {server!r} was not started: {exc}") from None
    if lacking := [n for n in wanted if n not in found]:
        raise MissingSecrets(f"server {server!r} was not started: the keychain has no {', '.join(lacking)} for it "
                             f"yet (a call to it asks for {'it' if len(lacking) == 1 else 'them'}, or run "
                             f"`mcpx secrets set {server} {lacking[0]}`)")
    return found


def question(server: str, lacking: list[str]) -> tuple[str, dict[str, object]]:
    """mcpx's question for a server's missing secrets: its message and its schema, one password field each."""
    fields = {name: {"type": "string", "format": "password", "minLength": 1, "title": name,
                     "description": f"kept in the OS keychain for server {server}, never in a file"}
              for name in lacking}
    message = (f"Server {server} needs {', '.join(lacking)} to start. "
               f"{'It goes' if len(lacking) == 1 else 'They go'} into the OS keychain (not the config, not a log) "
               "and is read from there from now on.")
    return message, {"type": "object", "properties": fields, "required": lacking}


class SecretAsker:
    """The one question at a time per server for its missing secrets, and the keychain writes its answer makes."""

    def __init__(self, broker: Broker, settings: ConfigSource, tools_changed: Callable[[str], Awaitable[None]]) -> None:
        self.broker = broker
        self.settings = settings
        self._tools_changed = tools_changed
        self._asking: dict[str, tuple[Handle, asyncio.Task[None]]] = {}  # server → its open question, its keeper
        self._opening: dict[str, asyncio.Lock] = {}
        # server → the names the keychain was seen to hold: a call does not ask the keychain again (a D-Bus round
        # trip) for what it held, until `forget` (mcpx secrets set and forget tell the daemon). A server's process
        # reads the values themselves as it starts, once per start (read above)
        self._held: dict[str, frozenset[str]] = {}

    def forget(self, server: str) -> None:
        """The keychain's values for `server` changed: what was known of them is not trusted any more."""
        self._held.pop(server, None)

    async def lacking(self, server: str, entry: ServerConfig) -> list[str]:
        """The server's secrets the keychain has no value for; MissingSecrets when there is no keychain."""
        wanted = secret_names(entry)
        if not wanted or self._held.get(server, frozenset()).issuperset(wanted):
            return []
        try:
            lacking = await asyncio.to_thread(keychain.missing, server, wanted)
        except keychain.NoKeychain as exc:
            raise MissingSecrets(f"server {server!r} needs {', '.join(wanted)} and mcpx cannot ask for "
                                 f"{'it' if len(wanted) == 1 else 'them'}: {exc}; "
                                 f"{keychain.instead(server, wanted)}") from None
        except keychain.KeychainError as exc:
            raise MissingSecrets(f"server {server!r} could not read its secrets: {exc}") from None
        self._held[server] = frozenset(wanted).difference(lacking)
        return lacking

    async def asking(self, server: str, entry: ServerConfig, request: OpenRequest,
                     stored_with: Callable[[Elicitation, bool], StoredTask] | None = None) -> Handle | None:
        """The open question for the server's missing secrets: the one open already, or a new one opened with
        `request`'s session and call; None when none is missing."""
        async with self._opening.setdefault(server, asyncio.Lock()):  # two askers at once open one question
            found = self._asking.get(server)
            if found is not None:
                return found[0]
            lacking = await self.lacking(server, entry)
            if not lacking:
                return None
            message, schema = question(server, lacking)
            handle = await self.broker.open(request.model_copy(update={
                "server": "mcpx", "tool": server, "message": message, "requested_schema": schema, "mode": "form",
                "upstream_id": MARK + server, "audience": "human",
                "ttl": self.settings.config.elicit.ask_timeout}), stored_with)
            keeper = asyncio.create_task(self._keep(server, lacking, handle), name=f"mcpx-secrets-{server}")
            self._asking[server] = (handle, keeper)
            keeper.add_done_callback(lambda _t: self._asking.pop(server, None))
            return handle

    async def _keep(self, server: str, lacking: list[str], handle: Handle) -> None:
        """Wait for the answer and put its values in the keychain; a listing that failed meanwhile lists again."""
        try:
            answer = await handle.answer()
        except QuestionEnded:
            return
        if answer.action != "accept" or not answer.content:
            return
        try:
            for name in lacking:
                value = answer.content.get(name)
                if isinstance(value, str) and value:
                    await asyncio.to_thread(keychain.put, server, name, value)
        except (keychain.NoKeychain, keychain.KeychainError) as exc:
            log.warning("server %s: its secrets from %s were not kept: %s", server, handle.id, exc)
            return
        log.info("server %s: %s kept in the keychain (answered in %s)", server, ", ".join(lacking), handle.id)
        await self._tools_changed(server)

    async def settled(self, server: str, handle: Handle) -> Answer:
        """Wait until the question is answered and its values are in the keychain; the answer (QuestionEnded when
        it ended unanswered)."""
        answer = await handle.answer()
        found = self._asking.get(server)
        if found is not None and found[0] is handle:
            await asyncio.shield(found[1])
        return answer

    async def abandon_orphans(self) -> None:
        """At start: a question for secrets left open by the daemon before this one has no asker any more (an
        answer would be stored redacted and reach no keychain), so it ends; the server's next start asks again.
        Not on a store a team shares, where an open one may be a live daemon's."""
        for q in await self.broker.questions(QuestionFilter(state="pending", server="mcpx")):
            if (q.upstream_id or "").startswith(MARK):
                await self.broker.abandon(q.id, "the mcpx daemon that asked restarted; the server's next start "
                                                "asks again")

    async def close(self) -> None:
        keepers = [keeper for _h, keeper in self._asking.values()]
        for keeper in keepers:
            keeper.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
