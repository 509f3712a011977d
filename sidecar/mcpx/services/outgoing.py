"""What a service call is about to send, as the exact document a confirmation is bound to (upstream/kind.py's
`CallScope.confirm`: the person is shown it verbatim, and the accept carries its digest).

An HTTP request is its method, full URL with the query as sent, every header and the body (JSON as its value, a form
or text as the exact string sent); a command run is its argv,
its directory and the variables its entry sets. A header or variable whose value comes from a `${NAME}` reference
(the daemon's environment), or whose name says it holds a secret, stands as `[redacted]`: the document never holds
a credential, and the kind sends exactly the rest of it.
"""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict  # pydantic validates a TypedDict field only of this one before Python 3.12

from mcpx.shared.masking import MASK, secret_name


class HttpExact(TypedDict):
    """An HTTP request as the person confirms it. A TypedDict: it is the JSON that is shown and digested."""

    method: str
    url: str  # the query as sent
    headers: dict[str, str]  # every header, a credential's value masked
    body: NotRequired[Any]  # a JSON body's value, or the exact string of a form or a text; none without a body


class CommandExact(TypedDict):
    """A command run as the person confirms it."""

    argv: list[str]
    cwd: str
    env: NotRequired[dict[str, str]]  # the variables its entry sets, a credential's masked; none when it sets none


def _hidden(name: str, secret: set[str]) -> bool:
    return name.lower() in {s.lower() for s in secret} or secret_name(name)


def http_exact(method: str, url: str, headers: list[tuple[str, str]], secret: set[str], body: Any) -> HttpExact:
    """`secret`: the names of the headers whose values are credentials; `body`: a JSON body's value (its bytes are
    its one compact serialization), a form's or a text's string exactly as sent, or None."""
    doc: HttpExact = {"method": method, "url": url,
                      "headers": {k: MASK if _hidden(k, secret) else v for k, v in headers}}
    if body is not None:
        doc["body"] = body
    return doc


def command_exact(argv: list[str], cwd: str, env: dict[str, str], secret: set[str]) -> CommandExact:
    """`env`: the variables the command's entry sets (not the inherited PATH & co.); `secret`: those from a
    reference."""
    doc: CommandExact = {"argv": argv, "cwd": cwd}
    if env:
        doc["env"] = {k: MASK if _hidden(k, secret) else v for k, v in sorted(env.items())}
    return doc
