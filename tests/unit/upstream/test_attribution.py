"""Which call in flight a server's own request belongs to (upstream/attribution.py), without a process or a wire.

The rule: the call whose response stream carried it; else the only call in flight; else held until every
other suspect has had its server's answer. A suspect that ends without one, suspects that all wait on held
requests of their own, or a hold past its limit: refused (UnattributedRequest), naming the calls it may have come from.
"""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from mcpx.upstream.attribution import Attribution, InFlight, UnattributedRequest
from mcpx.upstream.hooks import ServerToCall

NOBODY = cast(ServerToCall, object())


def calls(rule: Attribution, *tools: str) -> list[InFlight]:
    out = [InFlight(NOBODY, tool) for tool in tools]
    for call in out:
        rule.begin(call)
    return out


async def held(rule: Attribution, count: int) -> None:
    """Until `count` requests are held: the point at which a test may end a suspect."""
    for _turn in range(10):  # loop turns, not a pause: an owner() task holds its request in its first step
        if len(rule.held) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{count} requests were never held")


async def test_no_call_in_flight_owns_nothing() -> None:
    assert await Attribution("srv").owner("elicitation/create") is None


async def test_the_only_call_in_flight_owns_it_at_once() -> None:
    rule = Attribution("srv")
    (only,) = calls(rule, "deploy")
    assert await rule.owner("elicitation/create") is only
    assert rule.held == []


async def test_the_call_whose_stream_carried_it_owns_it_among_several() -> None:
    rule = Attribution("srv")
    _, b = calls(rule, "a", "b")
    b.numbered(7)
    assert await rule.owner("elicitation/create", related=7) is b


async def test_with_several_it_is_held_until_the_others_have_their_answers() -> None:
    rule = Attribution("srv")
    a, b, c = calls(rule, "a", "b", "c")
    asking = asyncio.create_task(rule.owner("elicitation/create"))
    await held(rule, 1)
    rule.end(a, answered=True)
    assert not asking.done()
    rule.end(c, answered=True)
    assert await asking is b
    assert rule.held == []


async def test_a_suspect_that_ends_without_its_answer_makes_it_untold() -> None:
    rule = Attribution("srv")
    a, b = calls(rule, "a", "b")
    asking = asyncio.create_task(rule.owner("roots/list"))
    await held(rule, 1)
    rule.end(a, answered=False)  # cancelled or timed out: it may have been the one asking
    with pytest.raises(UnattributedRequest) as told:
        await asking
    assert told.value.suspects == [a, b]
    assert "ended without its server's answer" in told.value.message


async def test_as_many_held_requests_as_suspects_are_all_refused() -> None:
    rule = Attribution("srv")
    calls(rule, "a", "b")
    first = asyncio.create_task(rule.owner("elicitation/create"))
    await held(rule, 1)
    second = asyncio.create_task(rule.owner("elicitation/create"))
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert all(isinstance(r, UnattributedRequest) for r in results), results
    assert "may be waiting for a request like it" in str(results[0])


async def test_a_hold_past_its_limit_is_refused() -> None:
    rule = Attribution("srv", limit=0.01)
    calls(rule, "a", "b")
    with pytest.raises(UnattributedRequest, match=r"did not all finish within 0\.01 s"):
        await rule.owner("elicitation/create")
    assert rule.held == []
