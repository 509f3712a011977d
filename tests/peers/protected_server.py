"""An MCP server behind a login: FastMCP over Streamable HTTP, verifying the JWT access tokens of a real
authorization server (tests/oauth/provider.mjs) against its JWKS, its issuer and this server's own address as the
audience (RFC 8707), and publishing its protected-resource metadata (RFC 9728).

python protected_server.py PORT ISSUER   — serves http://127.0.0.1:PORT/mcp until stopped.
python protected_server.py PORT none     — the same server with no login: every request is served.
"""

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


if __name__ == "__main__":
    app.run(transport="http", host="127.0.0.1", port=port, path="/mcp", show_banner=False)
