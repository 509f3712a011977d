"""A real authorization server and a real MCP server behind a login, for the login tests and the benchmark.

`authorization_server(port, resource, ttl)`: oidc-provider from npm (tests/oauth/provider.mjs) on 127.0.0.1:port.
`resource_server(port, issuer)`: FastMCP verifying its JWTs (tests/peers/protected_server.py); issuer "none" serves
the same tools with no login. Each is stopped when its block ends, however it ends. No pytest here: the benchmark
uses them too.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from harness import process_serving

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / "node_modules" / ".bin" / "node"
PROVIDER = ROOT / "tests" / "oauth" / "provider.mjs"
PROTECTED = ROOT / "tests" / "peers" / "protected_server.py"


@contextlib.contextmanager
def authorization_server(port: int, resource: str, access_ttl: int = 3600) -> Iterator[str]:
    """The issuer, http://127.0.0.1:port, once it serves its metadata."""
    with process_serving([str(NODE), str(PROVIDER), str(port), resource, str(access_ttl)], port, "oidc-provider",
                         stdin=subprocess.PIPE, cwd=ROOT) as issuer:
        yield issuer


@contextlib.contextmanager
def resource_server(port: int, issuer: str) -> Iterator[str]:
    """Its MCP address, http://127.0.0.1:port/mcp, once it listens."""
    with process_serving([sys.executable, str(PROTECTED), str(port), issuer], port, "the protected FastMCP server",
                         stdin=subprocess.DEVNULL) as base:
        yield f"{base}/mcp"
