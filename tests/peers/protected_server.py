"""An MCP server behind a login: FastMCP over Streamable HTTP, verifying the JWT access tokens of a real
authorization server (tests/oauth/provider.mjs) against its JWKS, its issuer and this server's own address as the
audience (RFC 8707), and publishing its protected-resource metadata (RFC 9728).

python protected_server.py PORT ISSUER   — serves http://127.0.0.1:PORT/mcp until stopped.
python protected_server.py PORT none     — the same server with no login: every request is served.

`write_note` wants the wider scope notes:write: a call of it with a token without that scope is answered as the MCP
spec has a server ask for a step-up, 403 with WWW-Authenticate error="insufficient_scope" and the scopes it needs
(a request-level check FastMCP leaves to the server, as the SDK's own examples do).
"""

import json
import sys

from fastmcp import FastMCP
from fastmcp.server.auth import RemoteAuthProvider
from fastmcp.server.auth.providers.jwt import JWTVerifier
from fastmcp.server.dependencies import get_access_token

port, issuer = int(sys.argv[1]), sys.argv[2]
base = f"http://127.0.0.1:{port}"
auth = None
if issuer != "none":
    verifier = JWTVerifier(jwks_uri=f"{issuer}/jwks", issuer=issuer, audience=f"{base}/mcp", algorithm="RS256",
                           required_scopes=["notes:read"])
    auth = RemoteAuthProvider(token_verifier=verifier, authorization_servers=[issuer], base_url=base,
                              scopes_supported=["notes:read", "notes:write"], resource_name="notes")
app = FastMCP("notes", auth=auth)


@app.tool
def whoami() -> str:
    """Who the token says is calling, and with which scopes."""
    token = get_access_token()
    if token is None:
        return "nobody"
    return f"{token.claims.get('sub')} with {' '.join(sorted(token.scopes))}"


@app.tool
def add(a: int, b: int) -> int:
    return a + b


@app.tool
def write_note(text: str) -> str:
    token = get_access_token()
    who = token.claims.get("sub") if token else "nobody"
    return f"noted {text!r} for {who} with {' '.join(sorted(token.scopes)) if token else 'no scope'}"


class StepUp:
    """403 insufficient_scope for a call of write_note whose token lacks notes:write (RFC 6750 §3.1)."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.inner(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            msg = json.loads(body)
        except ValueError:
            msg = None
        user = scope.get("user")
        scopes = set(getattr(getattr(user, "access_token", None), "scopes", None) or [])
        if (isinstance(msg, dict) and msg.get("method") == "tools/call"
                and (msg.get("params") or {}).get("name") == "write_note" and "notes:write" not in scopes):
            challenge = (f'Bearer error="insufficient_scope", scope="notes:read notes:write", '
                         f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"')
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"www-authenticate", challenge.encode()), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return None
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.inner(scope, replay, send)


if __name__ == "__main__":
    from starlette.middleware import Middleware

    app.run(transport="http", host="127.0.0.1", port=port, path="/mcp", show_banner=False,
            middleware=[Middleware(StepUp)] if auth else None)
