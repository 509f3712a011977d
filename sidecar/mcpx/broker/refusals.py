"""What can go wrong answering a question; each maps to one HTTP status at the /v1 surface.

    McpxError (mcpx/shared/errors.py)
     ├── BrokerError
     │    ├── InvalidId         400  not an id at all (path-like, wrong prefix)
     │    ├── NotFound          404  no such question
     │    ├── AlreadyAnswered   409  the first answer stands
     │    ├── Gone              410  expired, or abandoned by its asker
     │    ├── InvalidContent    422  the answer does not fit the schema (per field)
     │    ├── Forbidden         403  wrong session, or an agent answering the person's question
     │    │    └── PresenceNeeded    an accept without the person's passkey (docs/presence.md)
     │    ├── StoreUnavailable  503  the shared store (PostgreSQL) cannot be reached: nothing was written
     │    └── InvalidQuestion   400  a question that cannot be opened as given
     └── QuestionEnded              raised to an in-process asker whose question ended without an answer
"""

from __future__ import annotations

from mcpx.shared.errors import McpxError


class BrokerError(McpxError):
    code = "broker_error"
    status = 400

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidId(BrokerError):
    code, status = "invalid_id", 400


class NotFound(BrokerError):
    code, status = "not_found", 404


class AlreadyAnswered(BrokerError):
    code, status = "already_answered", 409


class Gone(BrokerError):
    code, status = "gone", 410


class InvalidContent(BrokerError):
    code, status = "invalid_content", 422

    def __init__(self, message: str, fields: dict[str, str]) -> None:
        super().__init__(message, fields=fields)
        self.fields = fields


class Forbidden(BrokerError):
    code, status = "forbidden", 403


class PresenceNeeded(Forbidden):
    """An accept of a question only a person's passkey accepts, offered without one: a door that knows the
    question's page adds it (`page`), so that whoever reads the refusal knows where to sign."""

    code = "presence_required"


class StoreUnavailable(BrokerError):
    code, status = "store_unavailable", 503


class InvalidQuestion(BrokerError):
    code, status = "invalid_question", 400


class QuestionEnded(McpxError):
    """The question was abandoned (asker gone, policy error) — there is no answer to hand back."""

    def __init__(self, eid: str, state: str, reason: str) -> None:
        super().__init__(f"question {eid} was {state}: {reason}")
        self.eid, self.state, self.reason = eid, state, reason
