"""The models of what a modern call leaves behind: the requestState mcpx seals for its own client
(surface/request_state.py) and the Resume a restart re-drives from (upstream/resume.py). Both are documents
someone else keeps for mcpx, so their bytes are what they were before they were models."""

from __future__ import annotations

import base64
import json

import pytest

from mcpx.mcp.jsonrpc import RpcError
from mcpx.surface.request_state import RequestStates, Sealed, binding
from mcpx.upstream.resume import Resume


def body(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    loaded: dict[str, object] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return loaded


def test_a_sealed_state_opens_once_for_the_request_it_was_made_for() -> None:
    states = RequestStates(b"k" * 32)
    bound = binding("srv_deploy", {"env": "prod"}, "s1")
    token = states.seal("tsk-0123456789abcdef", 2, {"confirm": "elc-0123456789abcdef", "r": "slot:r"}, bound)
    assert token.startswith("mcpx1.")
    assert list(body(token)) == ["t", "r", "q", "b", "exp", "n"]  # the short names, in the order they always had
    sealed = states.open(token, bound)
    assert isinstance(sealed, Sealed)
    assert (sealed.task, sealed.round, sealed.questions) == (
        "tsk-0123456789abcdef", 2, {"confirm": "elc-0123456789abcdef", "r": "slot:r"})
    with pytest.raises(RpcError, match="already used"):
        states.open(token, bound)


def test_what_mcpx_did_not_seal_for_this_request_is_refused() -> None:
    states = RequestStates(b"k" * 32)
    bound = binding("t", {}, "s")
    token = states.seal("tsk-0123456789abcdef", 1, {}, bound)
    with pytest.raises(RpcError, match="did not issue it"):
        states.open({"not": "ours"}, bound)
    with pytest.raises(RpcError, match="signature does not match"):
        RequestStates(b"x" * 32).open(token, bound)
    with pytest.raises(RpcError, match="another request"):
        states.open(token, binding("t", {"other": 1}, "s"))
    stale = RequestStates(b"k" * 32, ttl=-1).seal("tsk-0123456789abcdef", 1, {}, bound)
    with pytest.raises(RpcError, match="expired"):
        states.open(stale, bound)


def test_resume_is_stored_as_the_document_it_always_was() -> None:
    resume = Resume(round=2, request_state={"opaque": 1}, keys={"confirm": "elc-0123456789abcdef"},
                    static={"roots": {"roots": []}})
    stored = resume.stored()
    assert stored == {"round": 2, "requestState": {"opaque": 1}, "keys": {"confirm": "elc-0123456789abcdef"},
                      "static": {"roots": {"roots": []}}}
    assert list(stored) == ["round", "requestState", "keys", "static"]
    assert Resume.model_validate(stored) == resume
    assert Resume.model_validate({"round": 1, "requestState": None, "keys": {}, "static": {}}).request_state is None
