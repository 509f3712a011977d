"""Identifiers mcpx mints: `elc-` questions, `cal-` calls, `tsk-` tasks — 16 lowercase hex each."""

import re
import secrets

_ID = re.compile(r"^(elc|cal|tsk)-[0-9a-f]{16}$")


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


def is_id(value: str, prefix: str) -> bool:
    match = _ID.match(value)
    return match is not None and match.group(1) == prefix
