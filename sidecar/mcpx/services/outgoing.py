"""What a service call is about to send, as the person is shown it, and the hash an accept is bound to.

The hash covers exactly what goes out (an HTTP request's method, URL, every header with its real value, the body's
bytes; a command's argv, directory and environment), so an accept given for one request can never let a different
one go: mcpx builds the request again just before it sends it, and sends only when its hash is the one accepted.
The text shown never holds a secret: a header whose value came from a `${NAME}` reference or has a secret's name,
an environment variable likewise, and anything in the URL, argv or body that looks like a token, are masked
(mcpx/masking.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from mcpx.masking import MASK, mask_text, secret_name, shown_command

SHOWN_BODY = 4000  # characters of a body the question shows; the hash covers all of it


class Outgoing(BaseModel):
    """One request or command run, ready to go."""

    model_config = ConfigDict(frozen=True)

    server: str
    tool: str
    method: str | None  # the HTTP method, RUN for a command, None for an MCP server's tool
    shown: str  # what the person is shown: the exact request, secrets masked
    digest: str  # sha256 of exactly what is sent, secrets included

    @property
    def short(self) -> str:
        return self.digest[:16]


def digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def pretty_body(body: bytes | None) -> str:
    """A JSON body indented, masked; another body as text (masked), or its size when it is not text."""
    if body is None:
        return ""
    try:
        text = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return f"({len(body)} bytes of binary)"
    text = mask_text(text)
    return text if len(text) <= SHOWN_BODY else text[:SHOWN_BODY] + f"\n… ({len(text) - SHOWN_BODY} more characters)"


def shown_headers(headers: list[tuple[str, str]], secret: set[str]) -> list[str]:
    """Each header as `Name: value`, its value masked when it is secret (from a reference, or by its name)."""
    out = []
    for name, value in headers:
        hidden = name.lower() in secret or secret_name(name)
        out.append(f"{name}: {MASK if hidden else mask_text(value)}")
    return out


def http_outgoing(server: str, tool: str, method: str, url: str, headers: list[tuple[str, str]], secret: set[str],
                  body: bytes | None) -> Outgoing:
    lines = [f"{method} {mask_text(url)}", *shown_headers(headers, secret)]
    if body is not None:
        lines += ["", pretty_body(body)]
    return Outgoing(server=server, tool=tool, method=method, shown="\n".join(lines),
                    digest=digest("http", method, url, headers, body.hex() if body is not None else None))


def command_outgoing(server: str, tool: str, argv: list[str], cwd: str, env: dict[str, str],
                     secret: set[str]) -> Outgoing:
    """A command as it will run: its argv, its directory and the variables its entry sets (those from a reference
    or with a secret's name masked). The hash covers the whole environment the process gets."""
    lines = [f"$ {shown_command(argv)}", f"in {cwd}"]
    lines += [f"{k}={MASK if k in secret or secret_name(k) else mask_text(v)}" for k, v in sorted(env.items())]
    return Outgoing(server=server, tool=tool, method="RUN", shown="\n".join(lines),
                    digest=digest("run", argv, cwd, env))


def tool_outgoing(server: str, tool: str, arguments: dict[str, Any]) -> Outgoing:
    """A call to an MCP server's tool, as forwarded: its name and arguments."""
    shown = json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)
    return Outgoing(server=server, tool=tool, method=None, shown=f"{server}.{tool}\n\n{mask_text(shown)}",
                    digest=digest("tool", server, tool, arguments))
