"""Which fields of a question hold credentials: their values reach the asker and nothing else.

Decided from the schema alone (a field's name, title, description, format and writeOnly), once, when a
question opens; the question keeps the answer as its secret_fields (SPEC section 6).
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import Any

from mcpx.broker.schema import Field, FlatSchema

# single words that name a credential; `tokens`, `max_tokens` and `tokenizer` are not among them
_SECRET_WORDS = {"password", "passwd", "pwd", "passphrase", "passcode", "secret", "token", "apikey", "credential",
                 "credentials"}
_SECRET_PAIRS = {("api", "key"), ("private", "key"), ("secret", "key"), ("access", "key")}
_SECRET_PHRASES = re.compile(
    r"\b(password|passphrase|api[ _-]?key|access[ _-]token|personal access token|private key|secret key"
    r"|client secret|bearer token)\b",
    re.IGNORECASE,
)


def words(name: str) -> list[str]:
    """`apiKey` → [api, key]; `MAX_TOKENS` → [max, tokens]; `private-key` → [private, key]."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


@lru_cache(maxsize=4096)  # field names repeat from question to question; each is split by regexes
def is_credential_name(name: str) -> bool:
    parts = words(name)
    if any(w in _SECRET_WORDS for w in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


def is_secret(field: Field) -> bool:
    """Whether a field's value is a credential: by its format, name, title, description or writeOnly."""
    return (
        field.format == "password"
        or is_credential_name(field.name)
        or (field.title is not None and is_credential_name(field.title))
        or (field.description is not None and _SECRET_PHRASES.search(field.description) is not None)
        or field.write_only
    )


def secret_fields(schema: dict[str, Any] | FlatSchema | None) -> set[str]:
    """Fields whose values are credentials: delivered to the asker, stored and shown only as [redacted]."""
    return {f.name for f in FlatSchema.of(schema).fields if is_secret(f)}
