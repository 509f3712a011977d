"""What mcpx asks a person in its own name during a call, as a kind of upstream says it (upstream/kind.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class OwnQuestion(BaseModel):
    """A question a kind asks the person in mcpx's own name, during a call (`CallScope.ask`)."""

    model_config = ConfigDict(frozen=True)

    message: str = Field(description="what the person is asked, in a sentence")
    requested_schema: dict[str, Any] = Field(description="a flat form's JSON Schema, as MCP's requestedSchema: an "
                                             "object of primitive properties (string, number, boolean, enum)")
    about: str | None = Field(default=None, description="what it is about, shown as its tool (default: the call's "
                              "server.tool)")
    url: str | None = Field(default=None, description="a URL-mode question (a login page, a consent screen): the "
                            "person is sent there, and answers accept once done there; requested_schema is then {}")
    audience: Literal["human", "agent-then-human"] = Field(
        default="human", description="`human`: never answerable by an agent; `agent-then-human`: the calling agent "
        "may answer, and the person when it does not")
    ttl: float | None = Field(default=None, description="seconds until it expires (as a cancel); default: the "
                              "config's elicit.askTimeout")


def digest(exact: Mapping[str, Any]) -> str:
    """The digest that binds a confirmation to one exact request: sha256 of its canonical JSON."""
    canonical = json.dumps(exact, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
