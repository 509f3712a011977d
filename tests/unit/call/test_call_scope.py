"""What a call offers the kind of upstream that runs it (upstream/kind.py's `CallScope`, call/run.py's `CallRun`), on a
real broker and SQLite file: mcpx's own question, a confirmation bound to one exact request, what a restart
continues from. A kind that is not MCP (an OpenAPI service, a command) reaches a person only this way."""

from __future__ import annotations

import asyncio

import pytest

from conftest import FixedConfig
from mcpx.broker.broker import Broker
from mcpx.broker.refusals import InvalidContent
from mcpx.call.failures import CallError
from mcpx.call.record import Call
from mcpx.call.request import CallRequest
from mcpx.call.run import CallRun
from mcpx.config.models import Config, StdioServer
from mcpx.upstream.kind import OwnQuestion, digest

PATIENCE = 10.0  # no wait here is for time: each ends with an event, this only bounds it


def running(broker: Broker) -> tuple[Call, CallRun]:
    call = Call("tsk-0123456789abcdef", "cal-0123456789abcdef",
                CallRequest("issues", "create_issue", {"title": "x"}, "s1", "argument"))

    async def save(c: Call) -> None:
        c.keep()
        await broker.save_task(c.stored())

    return call, CallRun(broker, FixedConfig(Config()), call, StdioServer(command="unused"), save)  # type: ignore[arg-type]


async def opened(call: Call) -> str:
    """The question the call waits on, once it is open (its watchers hear it)."""
    assert await call.wait_for(lambda: bool(call.open), PATIENCE)
    assert call.state == "input-required"
    return next(iter(call.open))


async def test_a_kind_asks_confirms_an_exact_request_and_remembers(broker: Broker) -> None:
    call, scope = running(broker)
    exact = {"method": "POST", "url": "https://api.example/issues", "body": {"title": "x"}}

    # a confirmation is the person's, shows the request verbatim, and is bound to its digest
    confirming = asyncio.ensure_future(scope.confirm("create_issue writes to the tracker", exact))
    eid = await opened(call)
    q = call.open[eid]
    assert q.audience == "human" and '"url": "https://api.example/issues"' in q.message
    with pytest.raises(InvalidContent):  # a yes to another request's digest is no yes to this one
        await broker.answer(eid, "accept", {"confirm": True, "digest": digest({**exact, "method": "DELETE"})},
                            by="person:cli")
    await broker.answer(eid, "accept", {"confirm": True, "digest": digest(exact)}, by="person:cli")
    await asyncio.wait_for(confirming, PATIENCE)
    assert not call.open and call.state == "running" and eid in call.questions

    # anything but that yes ends the call, saying who refused
    refusing = asyncio.ensure_future(scope.confirm("create_issue writes to the tracker", exact))
    eid = await opened(call)
    await broker.answer(eid, "decline", by="person:cli", reason="not today")
    with pytest.raises(CallError, match=rf"mcpx asked first \({eid}\) and person:cli said decline \(not today\)"):
        await asyncio.wait_for(refusing, PATIENCE)

    # a question of mcpx's own: the person's answer, as given
    asking = asyncio.ensure_future(scope.ask(OwnQuestion(
        message="which project?", requested_schema={"type": "object", "properties": {"project": {"type": "string"}}})))
    eid = await opened(call)
    await broker.answer(eid, "accept", {"project": "mcpx"}, by="person:cli")
    answer = await asyncio.wait_for(asking, PATIENCE)
    assert answer.action == "accept" and answer.content == {"project": "mcpx"}

    # what a restart continues from is stored with the call at once (a kind keeps credentials out of it); a
    # credential the kind handed its upstream is scrubbed from what the call keeps
    await scope.remember({"job": "42"})
    stored = await broker.task(call.id)
    assert stored is not None and stored.resume == {"job": "42"} and call.remembered == {"job": "42"}
    scope.secret("s3cr3t-token")
    assert call.scrub({"echo": "got s3cr3t-token"}) == {"echo": "got [redacted]"}
